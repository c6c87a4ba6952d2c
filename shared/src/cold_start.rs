//! What a deployed function does before its first invocation: read the environment, fetch
//! the secrets it names by ARN from Secrets Manager, refuse settings only fit for a laptop,
//! and prepare the database settings (the login read from its secret, kept for the
//! container and read again when the database refuses it).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use anyhow::{Context, bail};

use crate::config::Config;
use crate::db::{Database, DbPool};
use crate::secrets::Secrets;

/// Secrets that may be given by ARN: the ARN variable, and the variable its value fills.
/// `UNSUBSCRIBE_SECRET` keys the suppression list for the life of the database and the
/// webhook secret changes with a planned overlap (docs/SECURITY.md): both are read once per
/// container. Only the database login is read again on refusal.
const SECRET_VARIABLES: [(&str, &str); 2] = [
    ("UNSUBSCRIBE_SECRET_ARN", "UNSUBSCRIBE_SECRET"),
    ("WEBHOOK_SECRET_ARN", "WEBHOOK_SECRET"),
];

/// The work [`ColdStart::shutdown_hook`] hands lambda_runtime.
pub type ShutdownFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What a function refuses to start without.
#[derive(Debug, Clone, Copy, Default)]
pub struct Needs {
    /// A real `UNSUBSCRIBE_SECRET`: the development default would let anyone who reads the
    /// source forge unsubscribe links and reverse the suppression list's hashes.
    pub unsubscribe_secret: bool,
}

/// A deployed function's configuration and database, read once per container.
pub struct ColdStart {
    pub config: Config,
    pub database: Database,
    /// Every pool handed out, closed by [`ColdStart::shutdown_hook`].
    pools: Arc<Mutex<Vec<DbPool>>>,
}

impl ColdStart {
    /// From the process environment. A Secrets Manager client is made only when an ARN
    /// variable asks for one, so a local run needs neither credentials nor network.
    pub async fn load(needs: Needs) -> anyhow::Result<Self> {
        let vars: HashMap<String, String> = std::env::vars().collect();
        let secrets = if wants_secrets(&vars) {
            Some(Secrets::from_env().await)
        } else {
            None
        };
        Self::from_vars(vars, secrets, needs).await
    }

    /// From an explicit environment and Secrets Manager client (tests use this).
    pub async fn from_vars(
        mut vars: HashMap<String, String>,
        secrets: Option<Secrets>,
        needs: Needs,
    ) -> anyhow::Result<Self> {
        for (arn_variable, value_variable) in SECRET_VARIABLES {
            let Some(arn) = non_empty(&vars, arn_variable) else {
                continue;
            };
            if non_empty(&vars, value_variable).is_some() {
                bail!("set {value_variable} or {arn_variable}, not both");
            }
            let secrets = secrets
                .as_ref()
                .with_context(|| format!("{arn_variable} is set but no Secrets Manager client"))?;
            let value = secrets
                .fetch(&arn)
                .await
                .with_context(|| format!("cannot read {value_variable} ({arn_variable})"))?;
            vars.insert(value_variable.to_string(), value.trim().to_string());
        }
        let config = Config::from_vars(vars)?;
        if needs.unsubscribe_secret && config.audience.development_secret {
            bail!(
                "UNSUBSCRIBE_SECRET (or UNSUBSCRIBE_SECRET_ARN) is required: the development \
                 default would let anyone forge unsubscribe links"
            );
        }
        let database = match (&config.database_secret, &config.database_url) {
            (Some(settings), _) => {
                let secrets = secrets
                    .context("DATABASE_SECRET_ARN is set but there is no Secrets Manager client")?;
                Database::from_secret(settings, secrets)
                    .await
                    .context("cannot read the database login (DATABASE_SECRET_ARN)")?
            }
            (None, Some(url)) => Database::from_url(url)?,
            (None, None) => bail!(
                "the deployed functions need DATABASE_SECRET_ARN (with DATABASE_HOST) or \
                 DATABASE_URL"
            ),
        };
        Ok(ColdStart {
            config,
            database,
            pools: Arc::default(),
        })
    }

    /// The pool of this container: its size and timeouts from configuration.
    pub fn pool(&self) -> anyhow::Result<DbPool> {
        let pool = self.database.pool(
            self.config.database_pool_max,
            &self.config.database_timeouts,
        )?;
        if let Ok(mut pools) = self.pools.lock() {
            pools.push(pool.clone());
        }
        Ok(pool)
    }

    /// What to run when Lambda shuts the container down (SIGTERM, lambda_runtime's
    /// graceful shutdown): close the pools, so the server or RDS Proxy frees their
    /// connections now instead of after its idle timeout.
    pub fn shutdown_hook(&self) -> impl FnOnce() -> ShutdownFuture + Send + 'static {
        let pools = self.pools.clone();
        move || {
            Box::pin(async move {
                let pools = match pools.lock() {
                    Ok(mut pools) => std::mem::take(&mut *pools),
                    Err(_) => Vec::new(),
                };
                for pool in &pools {
                    pool.close();
                }
                tracing::info!(
                    pools = pools.len(),
                    "shutting down: database connections closed"
                );
            })
        }
    }
}

fn non_empty(vars: &HashMap<String, String>, name: &str) -> Option<String> {
    vars.get(name)
        .map(|value| value.trim().to_string())
        .filter(|value| !value.is_empty())
}

/// True when any variable names a secret by ARN.
fn wants_secrets(vars: &HashMap<String, String>) -> bool {
    non_empty(vars, "DATABASE_SECRET_ARN").is_some()
        || SECRET_VARIABLES
            .iter()
            .any(|(arn_variable, _)| non_empty(vars, arn_variable).is_some())
}
