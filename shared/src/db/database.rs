//! Where the database is and who the process is on it: a URL (local runs, tests) or a host,
//! port and name from configuration with the login from a Secrets Manager secret. The
//! secret is read at cold start and read again when the server refuses the password, so a
//! rotation reaches a running container without a deploy.

use std::future::Future;
use std::sync::{Arc, RwLock};

use anyhow::Context;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures::future::BoxFuture;
use postgres_native_tls::MakeTlsConnector;
use tokio_postgres::config::SslMode;
use tokio_postgres::error::SqlState;

use super::{TlsVerification, parse_url, spawn_connection, tls_connector};
use crate::config::{DatabaseSecretConfig, DatabaseTimeouts};
use crate::secrets::{DatabaseLogin, Secrets};

/// Connection settings shared by a pool, the wake-up listener and migrations; cheap to clone.
#[derive(Clone)]
pub struct Database {
    inner: Arc<Inner>,
}

struct Inner {
    /// Everything but the login when it comes from a secret.
    base: tokio_postgres::Config,
    verification: TlsVerification,
    secret: Option<SecretLogin>,
}

/// The login read from a secret, and how to read it again.
struct SecretLogin {
    secrets: Secrets,
    arn: String,
    current: RwLock<Current>,
    /// Concurrent refusals wait for one fetch instead of each making their own.
    refresh: tokio::sync::Mutex<()>,
}

#[derive(Clone)]
struct Current {
    user: String,
    password: String,
    /// Bumped by every fetch: a caller refused with an older login only retries.
    generation: u64,
}

impl Database {
    /// Settings from a `postgres://` URL (the login, if any, is in the URL).
    pub fn from_url(url: &str) -> anyhow::Result<Self> {
        let (base, verification) = parse_url(url)?;
        Ok(Database {
            inner: Arc::new(Inner {
                base,
                verification,
                secret: None,
            }),
        })
    }

    /// Settings from parts, the login from the secret (read now).
    pub async fn from_secret(
        settings: &DatabaseSecretConfig,
        secrets: Secrets,
    ) -> anyhow::Result<Self> {
        let login = secrets.fetch_login(&settings.arn).await?;
        let mut base = tokio_postgres::Config::new();
        let host = settings
            .host
            .clone()
            .or_else(|| login.host.clone())
            .with_context(|| {
                format!(
                    "DATABASE_HOST is not set and the secret {} names no host",
                    settings.arn
                )
            })?;
        base.host(&host)
            .port(settings.port.or(login.port).unwrap_or(5432))
            .dbname(
                settings
                    .name
                    .as_deref()
                    .or(login.dbname.as_deref())
                    .unwrap_or("postgres"),
            );
        let verification = match settings.ssl_mode.as_str() {
            "disable" => {
                base.ssl_mode(SslMode::Disable);
                TlsVerification::None
            }
            "prefer" => {
                base.ssl_mode(SslMode::Prefer);
                TlsVerification::None
            }
            "require" => {
                base.ssl_mode(SslMode::Require);
                TlsVerification::None
            }
            "verify-ca" => {
                base.ssl_mode(SslMode::Require);
                TlsVerification::Chain
            }
            _ => {
                base.ssl_mode(SslMode::Require);
                TlsVerification::Full
            }
        };
        Ok(Database {
            inner: Arc::new(Inner {
                base,
                verification,
                secret: Some(SecretLogin {
                    secrets,
                    arn: settings.arn.clone(),
                    current: RwLock::new(Current::first(login)),
                    refresh: tokio::sync::Mutex::new(()),
                }),
            }),
        })
    }

    /// The settings without the login (tests and logs).
    pub fn base_config(&self) -> &tokio_postgres::Config {
        &self.inner.base
    }

    /// How many times the secret has been read (1 after the cold start; 0 for a URL).
    pub fn login_reads(&self) -> u64 {
        self.inner
            .secret
            .as_ref()
            .map_or(0, |secret| secret.current().generation)
    }

    /// Runs `connect` with `config` plus the current login. When the server refuses the
    /// login, the secret is read once more and `connect` tried once more: a rotated password
    /// costs one failed attempt, a wrong one two attempts and one read per connection.
    async fn with_login<T, F, Fut>(
        &self,
        mut config: tokio_postgres::Config,
        connect: F,
    ) -> Result<T, tokio_postgres::Error>
    where
        F: Fn(tokio_postgres::Config) -> Fut,
        Fut: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let Some(secret) = &self.inner.secret else {
            return connect(config).await;
        };
        let seen = secret.current().apply(&mut config);
        match connect(config.clone()).await {
            Err(error) if login_refused(&error) => {
                if !secret.refresh(seen).await {
                    return Err(error);
                }
                secret.current().apply(&mut config);
                connect(config).await
            }
            other => other,
        }
    }

    /// The connector of a connection that asks for TLS; `None` with `sslmode=disable`.
    /// Built only then: building one reads the system's certificate bundle (twice, in
    /// native-tls), most of a process's start-up when TLS is off.
    fn tls(&self) -> anyhow::Result<Option<MakeTlsConnector>> {
        if self.inner.base.get_ssl_mode() == SslMode::Disable {
            Ok(None)
        } else {
            tls_connector(self.inner.verification).map(Some)
        }
    }

    /// Opens one connection outside the pool (migrations, administration). The connection
    /// task is spawned on the current runtime and ends when the client is dropped.
    pub async fn connect(&self) -> anyhow::Result<tokio_postgres::Client> {
        let tls = self.tls()?;
        let client = self
            .with_login(self.inner.base.clone(), |config| {
                let tls = tls.clone();
                async move {
                    if let Some(tls) = tls {
                        let (client, connection) = config.connect(tls).await?;
                        spawn_connection(connection);
                        Ok(client)
                    } else {
                        let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
                        spawn_connection(connection);
                        Ok(client)
                    }
                }
            })
            .await
            .context("cannot connect to PostgreSQL")?;
        Ok(client)
    }

    /// Opens one connection outside the pool and hands back the client and the stream of
    /// its messages, which the caller polls (LISTEN needs them).
    pub async fn connect_raw(
        &self,
    ) -> anyhow::Result<(tokio_postgres::Client, super::MessageStream)> {
        let tls = self.tls()?;
        self.with_login(self.inner.base.clone(), |config| {
            let tls = tls.clone();
            async move {
                Ok(if let Some(tls) = tls {
                    let (client, connection) = config.connect(tls).await?;
                    (client, super::message_stream(connection))
                } else {
                    let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
                    (client, super::message_stream(connection))
                })
            }
        })
        .await
        .context("cannot connect to PostgreSQL")
    }

    /// A pool whose connections and statements give up after `timeouts`. No connection is
    /// opened until one is needed; each new one takes the current login.
    pub fn pool(&self, max_size: usize, timeouts: &DatabaseTimeouts) -> anyhow::Result<Pool> {
        let mut pg_config = self.inner.base.clone();
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
        // `sslmode=disable` skips TLS entirely, and with it OpenSSL's start-up cost.
        let tls = self.tls()?;
        let manager = Manager::from_connect(
            pg_config,
            PoolConnect {
                database: self.clone(),
                tls,
            },
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        Pool::builder(manager)
            .max_size(max_size)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(timeouts.pool_wait))
            .create_timeout(Some(timeouts.connect))
            .recycle_timeout(Some(timeouts.connect))
            .build()
            .context("cannot build the connection pool")
    }
}

/// The server said no to the login (wrong password, unknown or disabled role).
fn login_refused(error: &tokio_postgres::Error) -> bool {
    error.code().is_some_and(|code| {
        *code == SqlState::INVALID_PASSWORD
            || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
    })
}

impl Current {
    fn first(login: DatabaseLogin) -> Self {
        Current {
            user: login.username,
            password: login.password,
            generation: 1,
        }
    }

    /// Puts this login into `config`; returns its generation.
    fn apply(&self, config: &mut tokio_postgres::Config) -> u64 {
        config.user(&self.user).password(&self.password);
        self.generation
    }
}

impl SecretLogin {
    fn current(&self) -> Current {
        match self.current.read() {
            Ok(current) => current.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Reads the secret again unless someone did since `seen`; true when there is a newer
    /// login to try.
    async fn refresh(&self, seen: u64) -> bool {
        let _one_at_a_time = self.refresh.lock().await;
        if self.current().generation != seen {
            return true;
        }
        match self.secrets.fetch_login(&self.arn).await {
            Ok(login) => {
                let mut current = match self.current.write() {
                    Ok(current) => current,
                    Err(poisoned) => poisoned.into_inner(),
                };
                let generation = current.generation + 1;
                *current = Current {
                    generation,
                    ..Current::first(login)
                };
                tracing::info!(
                    secret = %self.arn,
                    "the database refused the login; read its secret again"
                );
                true
            }
            Err(error) => {
                tracing::warn!(
                    error = %crate::telemetry::describe(&error),
                    "the database refused the login and its secret could not be read again"
                );
                false
            }
        }
    }
}

/// How the pool opens a connection: with the current login, reading the secret again once
/// when the server refuses it.
struct PoolConnect {
    database: Database,
    /// `None` with `sslmode=disable`.
    tls: Option<MakeTlsConnector>,
}

impl deadpool_postgres::Connect for PoolConnect {
    fn connect(
        &self,
        pg_config: &tokio_postgres::Config,
    ) -> BoxFuture<
        '_,
        Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), tokio_postgres::Error>,
    > {
        let pg_config = pg_config.clone();
        Box::pin(async move {
            self.database
                .with_login(pg_config, |config| async move {
                    match &self.tls {
                        None => {
                            let (client, connection) =
                                config.connect(tokio_postgres::NoTls).await?;
                            Ok((client, spawn_connection(connection)))
                        }
                        Some(tls) => {
                            let (client, connection) = config.connect(tls.clone()).await?;
                            Ok((client, spawn_connection(connection)))
                        }
                    }
                })
                .await
        })
    }
}
