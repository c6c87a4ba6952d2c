//! Connections to PostgreSQL: the pool, TLS and migrations.

use std::str::FromStr;
use std::sync::OnceLock;

use anyhow::Context;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use native_tls::TlsConnector;
use postgres_native_tls::MakeTlsConnector;
use tokio_postgres::config::SslMode;

use crate::config::{Config, DatabaseTimeouts};

pub use deadpool_postgres::{Object as PooledClient, Pool as DbPool};

mod embedded_migrations {
    refinery::embed_migrations!("../migrations");
}

/// Advisory lock key that serialises migrations across processes ("notifymg" in ASCII).
const MIGRATION_LOCK_KEY: i64 = 0x6e6f_7469_6679_6d67;

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

/// The pool a deployed function or the local runner uses: `DATABASE_URL`, its size and
/// timeouts from configuration.
pub fn pool_from_config(config: &Config) -> anyhow::Result<Pool> {
    let url = config
        .database_url
        .as_deref()
        .context("DATABASE_URL is required for the deployed functions")?;
    create_pool_with(url, config.database_pool_max, &config.database_timeouts)
}

/// Builds a connection pool whose connections and statements give up after `timeouts`.
pub fn create_pool_with(
    url: &str,
    max_size: usize,
    timeouts: &DatabaseTimeouts,
) -> anyhow::Result<Pool> {
    let (mut pg_config, verification) = parse_url(url)?;
    if pg_config.get_application_name().is_none() {
        pg_config.application_name("notify-queue");
    }
    pg_config.connect_timeout(timeouts.connect);
    // Session settings sent in the start-up message: no extra round trip per connection.
    let mut options = pg_config.get_options().unwrap_or_default().to_string();
    for (name, value) in [
        ("statement_timeout", timeouts.statement),
        ("lock_timeout", timeouts.lock),
        (
            "idle_in_transaction_session_timeout",
            timeouts.idle_in_transaction,
        ),
    ] {
        options.push_str(&format!(" -c {name}={}", value.as_millis()));
    }
    pg_config.options(options.trim());
    let config = ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    };
    // `sslmode=disable` skips TLS entirely, and with it OpenSSL's start-up cost.
    let manager = if pg_config.get_ssl_mode() == SslMode::Disable {
        Manager::from_config(pg_config, tokio_postgres::NoTls, config)
    } else {
        Manager::from_config(pg_config, tls_connector(verification)?, config)
    };
    Pool::builder(manager)
        .max_size(max_size)
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .wait_timeout(Some(timeouts.pool_wait))
        .create_timeout(Some(timeouts.connect))
        .recycle_timeout(Some(timeouts.connect))
        .build()
        .context("cannot build the connection pool")
}

/// A connection whose messages the caller polls itself (LISTEN needs that).
pub type RawConnection = tokio_postgres::Connection<
    tokio_postgres::Socket,
    postgres_native_tls::TlsStream<tokio_postgres::Socket>,
>;

/// Opens one connection outside the pool and hands back both halves.
pub async fn connect_raw(url: &str) -> anyhow::Result<(tokio_postgres::Client, RawConnection)> {
    let (pg_config, verification) = parse_url(url)?;
    pg_config
        .connect(tls_connector(verification)?)
        .await
        .context("cannot connect to PostgreSQL")
}

/// Opens one connection outside the pool (migrations, administration). The connection
/// task is spawned on the current runtime and ends when the client is dropped.
pub async fn connect(url: &str) -> anyhow::Result<tokio_postgres::Client> {
    let (pg_config, verification) = parse_url(url)?;
    if pg_config.get_ssl_mode() == SslMode::Disable {
        let (client, connection) = pg_config
            .connect(tokio_postgres::NoTls)
            .await
            .context("cannot connect to PostgreSQL")?;
        spawn_connection(connection);
        return Ok(client);
    }
    let (client, connection) = pg_config
        .connect(tls_connector(verification)?)
        .await
        .context("cannot connect to PostgreSQL")?;
    spawn_connection(connection);
    Ok(client)
}

fn spawn_connection<S, T>(connection: tokio_postgres::Connection<S, T>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "database connection closed");
        }
    });
}

/// Applies pending migrations. Several processes may start at once: an advisory lock lets
/// exactly one of them migrate while the others wait, then find nothing left to do.
pub async fn migrate(url: &str) -> anyhow::Result<()> {
    run_migrations(url, refinery::Target::Latest).await
}

/// Applies migrations up to and including `version` only: the upgrade tests build a
/// database as an older release left it, then migrate it to the latest.
pub async fn migrate_up_to(url: &str, version: i32) -> anyhow::Result<()> {
    run_migrations(url, refinery::Target::Version(version)).await
}

async fn run_migrations(url: &str, target: refinery::Target) -> anyhow::Result<()> {
    let mut client = connect(url).await?;
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
    Ok(())
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
