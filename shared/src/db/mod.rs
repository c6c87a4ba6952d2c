//! Connections to PostgreSQL: the pool, TLS and migrations.

mod database;
mod pipelined;

use std::str::FromStr;
use std::sync::OnceLock;

use anyhow::Context;
use deadpool_postgres::Pool;
use native_tls::TlsConnector;
use postgres_native_tls::MakeTlsConnector;
use tokio::task::JoinHandle;

use crate::config::DatabaseTimeouts;

pub use database::Database;
pub use pipelined::PipelinedTransaction;

pub use deadpool_postgres::{Object as PooledClient, Pool as DbPool};

mod embedded_migrations {
    refinery::embed_migrations!("../migrations");
}

/// Advisory lock key that serialises migrations across processes ("notifymg" in ASCII).
pub const MIGRATION_LOCK_KEY: i64 = 0x6e6f_7469_6679_6d67;

/// How certificates are checked when TLS is requested, following libpq's `sslmode` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TlsVerification {
    /// `disable`, `prefer`, `require`: encrypt when asked, do not verify (libpq semantics).
    None,
    /// `verify-ca`: the chain must lead to a trusted root; the host name is not checked.
    Chain,
    /// `verify-full`: chain and host name.
    Full,
}

/// Parses a connection URL. `sslmode=verify-ca|verify-full` are understood here and passed to
/// tokio-postgres as `require` with the matching certificate checks.
fn parse_url(url: &str) -> anyhow::Result<(tokio_postgres::Config, TlsVerification)> {
    let (rewritten, verification) = if url.contains("sslmode=verify-full") {
        (
            url.replace("sslmode=verify-full", "sslmode=require"),
            TlsVerification::Full,
        )
    } else if url.contains("sslmode=verify-ca") {
        (
            url.replace("sslmode=verify-ca", "sslmode=require"),
            TlsVerification::Chain,
        )
    } else {
        (url.to_string(), TlsVerification::None)
    };
    let config = tokio_postgres::Config::from_str(&rewritten)
        .context("DATABASE_URL is not a valid PostgreSQL connection URL")?;
    Ok((config, verification))
}

/// One connector per verification mode and process: building one reads the system's
/// certificate bundle, which is most of a cold start when done for every connection.
fn tls_connector(verification: TlsVerification) -> anyhow::Result<MakeTlsConnector> {
    static CONNECTORS: [OnceLock<MakeTlsConnector>; 3] =
        [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let slot = &CONNECTORS[verification as usize];
    if let Some(connector) = slot.get() {
        return Ok(connector.clone());
    }
    let mut builder = TlsConnector::builder();
    match verification {
        TlsVerification::None => {
            // Nothing is verified, so no trusted roots need loading.
            builder
                .danger_accept_invalid_certs(true)
                .danger_accept_invalid_hostnames(true)
                .disable_built_in_roots(true);
        }
        TlsVerification::Chain => {
            builder.danger_accept_invalid_hostnames(true);
        }
        TlsVerification::Full => {}
    }
    let connector = MakeTlsConnector::new(builder.build().context("cannot initialise TLS")?);
    Ok(slot.get_or_init(|| connector).clone())
}

/// Builds a connection pool with the default timeouts. No connection is opened until one
/// is needed.
pub fn create_pool(url: &str, max_size: usize) -> anyhow::Result<Pool> {
    create_pool_with(url, max_size, &DatabaseTimeouts::default())
}

/// Builds a connection pool whose connections and statements give up after `timeouts`.
pub fn create_pool_with(
    url: &str,
    max_size: usize,
    timeouts: &DatabaseTimeouts,
) -> anyhow::Result<Pool> {
    Database::from_url(url)?.pool(max_size, timeouts)
}

/// The messages of a connection whose caller polls it itself (LISTEN needs that): polling
/// the stream drives the connection, with or without TLS.
pub type MessageStream = std::pin::Pin<
    Box<
        dyn futures::Stream<Item = Result<tokio_postgres::AsyncMessage, tokio_postgres::Error>>
            + Send,
    >,
>;

fn message_stream<T>(
    mut connection: tokio_postgres::Connection<tokio_postgres::Socket, T>,
) -> MessageStream
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    Box::pin(futures::stream::poll_fn(move |cx| {
        connection.poll_message(cx)
    }))
}

/// Opens one connection outside the pool and hands back the client and its messages.
pub async fn connect_raw(url: &str) -> anyhow::Result<(tokio_postgres::Client, MessageStream)> {
    Database::from_url(url)?.connect_raw().await
}

/// Opens one connection outside the pool (migrations, administration). The connection
/// task is spawned on the current runtime and ends when the client is dropped.
pub async fn connect(url: &str) -> anyhow::Result<tokio_postgres::Client> {
    Database::from_url(url)?.connect().await
}

fn spawn_connection<S, T>(connection: tokio_postgres::Connection<S, T>) -> JoinHandle<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "database connection closed");
        }
    })
}

/// Applies pending migrations to the database at `url` (see [`migrate_database`]).
pub async fn migrate(url: &str) -> anyhow::Result<()> {
    migrate_database(&Database::from_url(url)?).await?;
    Ok(())
}

/// Applies pending migrations unless the database already holds exactly the embedded ones
/// (same versions, same checksums). That check is one read of the history on a connection
/// of `pool`, which the pool keeps for what follows; a full run opens a connection of its
/// own and takes the migration lock. Every start but the first after an upgrade finds the
/// schema current, so a process starts a connection and a lock sooner. Anything else (no
/// history yet, a migration missing, a checksum that differs) goes through the full run,
/// which applies what is missing or refuses what diverges.
pub async fn migrate_unless_current(pool: &DbPool, url: &str) -> anyhow::Result<()> {
    if schema_is_current(pool).await {
        return Ok(());
    }
    migrate(url).await
}

async fn schema_is_current(pool: &DbPool) -> bool {
    let Ok(mut client) = pool.get().await else {
        return false;
    };
    let runner = embedded_migrations::migrations::runner();
    // Fails (and says "not current") while the history table does not exist.
    let Ok(mut applied) = runner.get_applied_migrations_async(&mut **client).await else {
        return false;
    };
    let mut embedded = runner.get_migrations().clone();
    applied.sort();
    embedded.sort();
    // Migration's equality is its version, name and checksum.
    applied == embedded
}

/// Applies pending migrations. Several processes may start at once: an advisory lock lets
/// exactly one of them migrate while the others wait, then find nothing left to do.
/// Returns the versions applied.
pub async fn migrate_database(database: &Database) -> anyhow::Result<Vec<i32>> {
    run_migrations(database, refinery::Target::Latest).await
}

/// Applies migrations up to and including `version` only: the upgrade tests build a
/// database as an older release left it, then migrate it to the latest.
pub async fn migrate_up_to(url: &str, version: i32) -> anyhow::Result<()> {
    run_migrations(
        &Database::from_url(url)?,
        refinery::Target::Version(version),
    )
    .await?;
    Ok(())
}

async fn run_migrations(database: &Database, target: refinery::Target) -> anyhow::Result<Vec<i32>> {
    let mut client = database.connect().await?;
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK_KEY])
        .await
        .context("cannot take the migration lock")?;
    let result = embedded_migrations::migrations::runner()
        .set_target(target)
        .run_async(&mut client)
        .await
        .context("migration failed");
    // Unlock even when a migration failed; the connection closing would release it too.
    let _ = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK_KEY])
        .await;
    let report = result?;
    for migration in report.applied_migrations() {
        tracing::info!(
            version = migration.version(),
            name = migration.name(),
            "migration applied"
        );
    }
    Ok(report
        .applied_migrations()
        .iter()
        .map(|migration| migration.version())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_modes_are_rewritten_to_require() {
        let (config, verification) =
            parse_url("postgres://u@h/db?sslmode=verify-full").expect("valid url");
        assert_eq!(verification, TlsVerification::Full);
        assert_eq!(
            config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Require
        );
        let (_, verification) = parse_url("postgres://u@h/db?sslmode=require").expect("valid url");
        assert_eq!(verification, TlsVerification::None);
    }

    #[test]
    fn a_malformed_url_is_an_error_not_a_panic() {
        assert!(parse_url("postgres://u@h:notaport/db").is_err());
    }
}
