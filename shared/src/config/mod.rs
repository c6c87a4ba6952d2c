//! Configuration from the environment: every variable is parsed and checked at start-up,
//! and every problem is reported at once so an operator fixes them in one pass.

mod audience;
mod env;
mod providers;

pub use audience::{AudienceConfig, DEVELOPMENT_SECRET};
mod sections;

pub use providers::{ChannelRate, CircuitConfig, ProviderChoice, ProvidersConfig};

pub use sections::{
    AppRole, DatabaseSecretConfig, DatabaseTimeouts, MockProviderConfig, RateLimitConfig,
    RetentionConfig, RetryPolicy, SchedulerConfig, WebhookConfig, WorkerConfig,
};

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use env::Env;

/// Claiming lanes per sweeper process unless `WORKER_LANES` says otherwise. Each lane has
/// one batch between its claim and its record; past a few, more lanes only queue more
/// statements at the database, and every batch (with the HIGH notification in it) waits
/// behind them (B5 in docs/BENCHMARKS.md).
const DEFAULT_LANES: u64 = 4;

#[derive(Clone)]
pub struct Config {
    /// `None` means "no URL given": the local runner starts its own PostgreSQL.
    pub database_url: Option<String>,
    /// Deployed: the database named by parts, its login in Secrets Manager (instead of a URL).
    pub database_secret: Option<DatabaseSecretConfig>,
    pub database_pool_max: usize,
    pub database_timeouts: DatabaseTimeouts,
    pub app_role: AppRole,
    /// Deployed API: serve without keys when none exist (`ALLOW_ANONYMOUS=true`).
    pub allow_anonymous: bool,
    pub port: u16,
    pub worker: WorkerConfig,
    pub retry: RetryPolicy,
    pub rate_limit: RateLimitConfig,
    pub mock: MockProviderConfig,
    pub webhook: WebhookConfig,
    pub scheduler: SchedulerConfig,
    pub providers: ProvidersConfig,
    pub audience: AudienceConfig,
    pub retention: RetentionConfig,
    /// `SMS_MAX_SEGMENTS` (1–10, default 3): an SMS template whose sample rendering needs
    /// more segments in any locale is refused at publish.
    pub sms_max_segments: u32,
}

/// Neither the database URL (it may carry a password) nor the webhook secret is shown.
impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("database_url", &self.database_url.as_ref().map(|_| "***"))
            .field("database_secret", &self.database_secret)
            .field("database_pool_max", &self.database_pool_max)
            .field("database_timeouts", &self.database_timeouts)
            .field("app_role", &self.app_role)
            .field("allow_anonymous", &self.allow_anonymous)
            .field("port", &self.port)
            .field("worker", &self.worker)
            .field("retry", &self.retry)
            .field("rate_limit", &self.rate_limit)
            .field("mock", &self.mock)
            .field("webhook", &self.webhook)
            .field("scheduler", &self.scheduler)
            .field("providers", &self.providers)
            .field("audience", &self.audience)
            .field("retention", &self.retention)
            .field("sms_max_segments", &self.sms_max_segments)
            .finish()
    }
}

/// `WEBHOOK_SECRET` as an HMAC key: the Standard Webhooks form `whsec_<base64>`, decoded.
/// Any other form is refused: receivers' Standard Webhooks libraries decode the same way,
/// so a raw string would sign with a key no receiver derives.
fn signing_key(secret: &str) -> Result<Vec<u8>, &'static str> {
    let Some(encoded) = secret.strip_prefix("whsec_") else {
        return Err(
            "WEBHOOK_SECRET must be a Standard Webhooks secret: whsec_ followed by \
                    base64 (e.g. whsec_$(openssl rand -base64 32))",
        );
    };
    let key = STANDARD
        .decode(encoded)
        .map_err(|_| "WEBHOOK_SECRET starts with whsec_ but the rest is not valid base64")?;
    if key.is_empty() {
        return Err("WEBHOOK_SECRET is empty after its whsec_ prefix");
    }
    Ok(key)
}

/// `DATABASE_SECRET_ARN` and the parts that go with it.
fn database_secret(env: &mut Env) -> Option<DatabaseSecretConfig> {
    let arn = env.string("DATABASE_SECRET_ARN")?;
    if !arn.starts_with("arn:") {
        env.problems.push(format!(
            "DATABASE_SECRET_ARN must be a Secrets Manager ARN (got {arn:?})"
        ));
    }
    let port = env
        .string("DATABASE_PORT")
        .map(|_| env.number("DATABASE_PORT", 5432, 1, 65535) as u16);
    let ssl_mode = env
        .string("DATABASE_SSLMODE")
        .unwrap_or_else(|| "verify-full".to_string());
    if !["disable", "prefer", "require", "verify-ca", "verify-full"].contains(&ssl_mode.as_str()) {
        env.problems.push(format!(
            "DATABASE_SSLMODE must be one of disable, prefer, require, verify-ca, verify-full \
             (got {ssl_mode:?})"
        ));
    }
    Some(DatabaseSecretConfig {
        arn,
        host: env.string("DATABASE_HOST"),
        port,
        name: env.string("DATABASE_NAME"),
        ssl_mode,
    })
}

/// Every problem found in the environment, reported together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub problems: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "invalid configuration ({} problem(s)):",
            self.problems.len()
        )?;
        for problem in &self.problems {
            writeln!(f, "  - {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(std::env::vars().collect())
    }

    /// Reads configuration from an explicit map (tests use this; the process uses `from_env`).
    pub fn from_vars(vars: HashMap<String, String>) -> Result<Self, ConfigError> {
        let mut env = Env::new(vars);

        let database_url = env.string("DATABASE_URL");
        let database_secret = database_secret(&mut env);
        if database_url.is_some() && database_secret.is_some() {
            env.problems.push(
                "set DATABASE_URL (local runs) or DATABASE_SECRET_ARN (deployed), not both"
                    .to_string(),
            );
        }
        let database_pool_max = env.number("DATABASE_POOL_MAX", 10u64, 1, 1000) as usize;
        let defaults = DatabaseTimeouts::default();
        let mut timeout = |name: &str, default: Duration| {
            let default_ms = u64::try_from(default.as_millis()).unwrap_or(u64::MAX);
            Duration::from_millis(env.number(name, default_ms, 1, 86_400_000))
        };
        let database_timeouts = DatabaseTimeouts {
            connect: timeout("DATABASE_CONNECT_TIMEOUT_MS", defaults.connect),
            pool_wait: timeout("DATABASE_POOL_TIMEOUT_MS", defaults.pool_wait),
            statement: timeout("DATABASE_STATEMENT_TIMEOUT_MS", defaults.statement),
            lock: timeout("DATABASE_LOCK_TIMEOUT_MS", defaults.lock),
            idle_in_transaction: timeout(
                "DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS",
                defaults.idle_in_transaction,
            ),
        };
        let app_role = match env.string("APP_ROLE").as_deref() {
            None | Some("all") => AppRole::All,
            Some("api") => AppRole::Api,
            Some("worker") => AppRole::Worker,
            Some(other) => {
                env.problems.push(format!(
                    "APP_ROLE must be one of all, api, worker (got {other:?})"
                ));
                AppRole::All
            }
        };
        let port = env.number("PORT", 3000u64, 0, 65535) as u16;
        let allow_anonymous = match env.string("ALLOW_ANONYMOUS").as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                env.problems.push(format!(
                    "ALLOW_ANONYMOUS must be true or false (got {other:?})"
                ));
                false
            }
        };

        let sms_max_segments = env.number("SMS_MAX_SEGMENTS", 3u64, 1, 10) as u32;
        let batch_size = env.number("WORKER_BATCH_SIZE", 100u64, 1, 10_000) as i64;
        let concurrency = env.number("WORKER_CONCURRENCY", 10u64, 1, 1000) as usize;
        let lanes = env.number("WORKER_LANES", DEFAULT_LANES, 1, 1000) as usize;
        let poll_interval_ms = env.number("WORKER_POLL_INTERVAL_MS", 1000u64, 1, 3_600_000);
        let visibility_s = env.number("JOB_VISIBILITY_TIMEOUT_SECONDS", 300u64, 1, 86_400);
        let provider_timeout_ms = env.number("PROVIDER_TIMEOUT_MS", 10_000u64, 1, 86_400_000);
        let max_retries = env.number("MAX_RETRIES", 5u64, 0, 100) as u32;
        let base_delay_ms = env.number("BASE_RETRY_DELAY_MS", 1000u64, 1, 86_400_000);
        let max_delay_ms = env.number("MAX_RETRY_DELAY_MS", 60_000u64, 1, 86_400_000);
        let rate_max = env.number("RATE_LIMIT_MAX_NOTIFICATIONS", 10u64, 1, 1_000_000) as i64;
        let rate_window_s = env.number("RATE_LIMIT_WINDOW_SECONDS", 3600u64, 1, 31_536_000);
        let failure_rate = env.fraction("MOCK_FAILURE_RATE", 0.2);
        let latency_ms = env.number("MOCK_LATENCY_MS", 50u64, 0, 600_000);
        let webhook_url = env.string("WEBHOOK_URL");
        let webhook_secret = env.string("WEBHOOK_SECRET");
        let webhook_timeout_ms = env.number("WEBHOOK_TIMEOUT_MS", 5000u64, 1, 600_000);
        let webhook_max_attempts = env.number("WEBHOOK_MAX_ATTEMPTS", 10u64, 1, 100) as i32;
        let webhook_allow_http = env.flag("ALLOW_HTTP_WEBHOOKS");
        let webhook_allow_private = env.flag("ALLOW_PRIVATE_WEBHOOKS").unwrap_or(false);
        let scheduler_group = env
            .string("SCHEDULER_GROUP_NAME")
            .unwrap_or_else(|| "notify-queue".into());
        let scheduler_role_arn = env.string("SCHEDULER_ROLE_ARN");

        // From one second (the soak benchmark, B10, ages work out in a compressed clock) to
        // ten years. Only finished work is ever deleted, so even one second never touches
        // what is being sent; it does shorten the idempotency window to the same second.
        let retention_defaults = RetentionConfig::default();
        let mut retention_window = |name: &str, default: Duration| {
            Duration::from_secs(env.number(name, default.as_secs(), 1, 315_360_000))
        };
        let retention = RetentionConfig {
            notifications: retention_window("RETENTION_SECONDS", retention_defaults.notifications),
            dead_letters: retention_window(
                "DLQ_RETENTION_SECONDS",
                retention_defaults.dead_letters,
            ),
            webhook_events: retention_window(
                "WEBHOOK_RETENTION_SECONDS",
                retention_defaults.webhook_events,
            ),
        };

        let providers = providers::read(&mut env);
        let audience = audience::read(&mut env, port);

        // A batch's leases are renewed in the gap, before a call could outlast them.
        if provider_timeout_ms.saturating_add(1000) > visibility_s.saturating_mul(1000) {
            env.problems.push(format!(
                "PROVIDER_TIMEOUT_MS ({provider_timeout_ms}) must be at least 1 s below \
                 JOB_VISIBILITY_TIMEOUT_SECONDS ({visibility_s}s), or a live claim could expire mid-call"
            ));
        }
        if base_delay_ms > max_delay_ms {
            env.problems.push(format!(
                "BASE_RETRY_DELAY_MS ({base_delay_ms}) must not exceed MAX_RETRY_DELAY_MS ({max_delay_ms})"
            ));
        }
        if let Some(url) = &webhook_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            env.problems.push(format!(
                "WEBHOOK_URL must be an http:// or https:// URL (got {url:?})"
            ));
        }
        let signing_key = match webhook_secret.as_deref().map(signing_key) {
            None => None,
            Some(Ok(key)) => Some(key),
            Some(Err(problem)) => {
                env.problems.push(problem.to_string());
                None
            }
        };
        if let Some(url) = &database_url
            && !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
        {
            env.problems
                .push("DATABASE_URL must be a postgres:// or postgresql:// URL".to_string());
        }

        if !env.problems.is_empty() {
            return Err(ConfigError {
                problems: env.problems,
            });
        }
        Ok(Config {
            sms_max_segments,
            database_url,
            database_secret,
            database_pool_max,
            database_timeouts,
            app_role,
            allow_anonymous,
            port,
            worker: WorkerConfig {
                batch_size,
                concurrency,
                lanes,
                poll_interval: Duration::from_millis(poll_interval_ms),
                visibility_timeout: Duration::from_secs(visibility_s),
                provider_timeout: Duration::from_millis(provider_timeout_ms),
            },
            retry: RetryPolicy {
                max_retries,
                base_delay_ms,
                max_delay_ms,
            },
            rate_limit: RateLimitConfig {
                max_notifications: rate_max,
                window: Duration::from_secs(rate_window_s),
            },
            mock: MockProviderConfig {
                failure_rate,
                latency: Duration::from_millis(latency_ms),
            },
            webhook: WebhookConfig {
                url: webhook_url,
                signing_key,
                timeout: Duration::from_millis(webhook_timeout_ms),
                max_attempts: webhook_max_attempts,
                allow_http: webhook_allow_http,
                allow_private: webhook_allow_private,
            },
            scheduler: SchedulerConfig {
                group: scheduler_group,
                role_arn: scheduler_role_arn,
            },
            providers,
            audience,
            retention,
        })
    }
}

#[cfg(test)]
mod tests;
