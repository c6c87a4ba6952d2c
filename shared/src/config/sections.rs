//! The parts of the configuration, as plain values: each feature builds its own types
//! from them.

use std::fmt;
use std::time::Duration;

/// Which parts of the local runner run in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppRole {
    /// HTTP API, sweeper and webhook drainer.
    All,
    /// HTTP API only.
    Api,
    /// Sweeper and drainer; HTTP answers only `/health` and `/metrics`.
    Worker,
}

impl AppRole {
    pub fn serves_api(self) -> bool {
        matches!(self, AppRole::All | AppRole::Api)
    }
    pub fn runs_workers(self) -> bool {
        matches!(self, AppRole::All | AppRole::Worker)
    }
}

/// How long database work may wait before it fails instead of hanging: a stalled server
/// or a drained pool turns into an error (HTTP 503), never into a request that waits
/// forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatabaseTimeouts {
    /// Opening a connection (TCP, TLS, authentication).
    pub connect: Duration,
    /// Waiting for a pooled connection.
    pub pool_wait: Duration,
    /// One statement (`statement_timeout`).
    pub statement: Duration,
    /// Waiting for a row or table lock (`lock_timeout`).
    pub lock: Duration,
    /// A transaction left open with nothing running (`idle_in_transaction_session_timeout`).
    pub idle_in_transaction: Duration,
}

impl Default for DatabaseTimeouts {
    fn default() -> Self {
        DatabaseTimeouts {
            connect: Duration::from_secs(5),
            pool_wait: Duration::from_secs(5),
            statement: Duration::from_secs(30),
            lock: Duration::from_secs(10),
            idle_in_transaction: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Notifications claimed per claim statement.
    pub batch_size: i64,
    /// Deliveries in flight per sweeper process.
    pub concurrency: usize,
    /// Most claiming lanes per sweeper process (batches claimed, fenced and recorded at
    /// once); never more than `concurrency`, nor than the pool has connections to spare.
    pub lanes: usize,
    pub poll_interval: Duration,
    pub visibility_timeout: Duration,
    pub provider_timeout: Duration,
}

/// Retry schedule: `max_retries + 1` attempts with equal-jitter exponential backoff.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub base_delay_ms: u64,
    pub max_delay_ms: u64,
}

impl RetryPolicy {
    pub fn max_attempts(&self) -> i32 {
        i32::try_from(self.max_retries.saturating_add(1)).unwrap_or(i32::MAX)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct RateLimitConfig {
    pub max_notifications: i64,
    pub window: Duration,
}

#[derive(Debug, Clone, Copy)]
pub struct MockProviderConfig {
    pub failure_rate: f64,
    pub latency: Duration,
}

#[derive(Clone)]
pub struct WebhookConfig {
    pub url: Option<String>,
    /// The HMAC key of `WEBHOOK_SECRET`: `whsec_<base64>` decoded, or the raw bytes of a
    /// secret without that prefix. `None`: webhooks go unsigned.
    pub signing_key: Option<Vec<u8>>,
    pub timeout: Duration,
    pub max_attempts: i32,
    /// `ALLOW_HTTP_WEBHOOKS`: `None` when unset (deployed: https only; the local runner
    /// allows http).
    pub allow_http: Option<bool>,
    /// `ALLOW_PRIVATE_WEBHOOKS`: endpoints may point at loopback and private networks.
    pub allow_private: bool,
}

impl WebhookConfig {
    /// The SSRF rules of registered endpoints.
    pub fn destinations(&self) -> crate::webhook::destination::DestinationPolicy {
        crate::webhook::destination::DestinationPolicy {
            allow_http: self.allow_http.unwrap_or(false),
            allow_private: self.allow_private,
        }
    }
}

/// Where `dlq-redrive` creates its one-time schedules, and the role they invoke it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerConfig {
    pub group: String,
    pub role_arn: Option<String>,
}

impl fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookConfig")
            .field("url", &self.url)
            .field("signing_key", &self.signing_key.as_ref().map(|_| "***"))
            .field("timeout", &self.timeout)
            .field("max_attempts", &self.max_attempts)
            .field("allow_http", &self.allow_http)
            .field("allow_private", &self.allow_private)
            .finish()
    }
}

/// How long finished work is kept before the retention step deletes it. The idempotency
/// window is the same as `notifications`: a key is remembered while its notification exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionConfig {
    /// SENT, FAILED, CANCELLED, SUPPRESSED and EXPIRED notifications, counted from their
    /// final transition (`RETENTION_SECONDS`, 30 days).
    pub notifications: Duration,
    /// DEAD_LETTERED notifications, kept longer so they can be redriven
    /// (`DLQ_RETENTION_SECONDS`, 90 days).
    pub dead_letters: Duration,
    /// Delivered and given-up webhook events (`WEBHOOK_RETENTION_SECONDS`, 7 days).
    pub webhook_events: Duration,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        const DAY: u64 = 86_400;
        RetentionConfig {
            notifications: Duration::from_secs(30 * DAY),
            dead_letters: Duration::from_secs(90 * DAY),
            webhook_events: Duration::from_secs(7 * DAY),
        }
    }
}

/// The deployed database: host, port and name from the environment, the login from a
/// Secrets Manager secret (`DATABASE_SECRET_ARN`), so a rotated password needs no deploy
/// and no character of it has to survive a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseSecretConfig {
    /// `DATABASE_SECRET_ARN`: `{"username", "password"}`, optionally `host`, `port`, `dbname`.
    pub arn: String,
    /// `DATABASE_HOST` (the RDS Proxy endpoint); the secret's `host` when unset.
    pub host: Option<String>,
    /// `DATABASE_PORT`; the secret's `port`, then 5432, when unset.
    pub port: Option<u16>,
    /// `DATABASE_NAME`; the secret's `dbname`, then `postgres`, when unset.
    pub name: Option<String>,
    /// `DATABASE_SSLMODE`: disable, prefer, require, verify-ca or verify-full (default).
    pub ssl_mode: String,
}
