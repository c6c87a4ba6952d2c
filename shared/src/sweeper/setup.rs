//! Making a sweeper: from the configuration every process reads, or piece by piece.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::Pool;

use super::budget::ClaimBudget;
use super::{ClaimPacing, RECOVERY_INTERVAL, Sweeper};
use crate::backoff::{Random, ThreadRandom};
use crate::channel;
use crate::config::{
    AudienceConfig, CircuitConfig, Config, RateLimitConfig, RetentionConfig, RetryPolicy,
    WorkerConfig,
};
use crate::content::VersionCache;
use crate::provider::channels::ChannelProviders;
use crate::provider::simulated::SimulatedProvider;
use crate::provider::{Places, Provider};
use crate::retention;

impl Sweeper {
    /// The sweeper every process runs: the configured providers, retry policy, rate
    /// limit and circuit breaker.
    pub fn from_config(pool: &Pool, config: &Config, providers: ChannelProviders) -> Self {
        Sweeper::new(
            pool.clone(),
            Arc::new(providers),
            Arc::new(ThreadRandom),
            config.worker.clone(),
            config.retry,
        )
        .with_rate_limit(config.rate_limit)
        .with_circuit(config.providers.circuit)
        .with_audience(config.audience.clone())
        .with_retention(config.retention)
        .with_pacing(ClaimPacing::new(
            &config.providers.rates,
            config.worker.batch_size,
        ))
    }

    /// The configured providers, with each paced channel's rate written to its token
    /// buckets (a database that cannot be reached now leaves the buckets as they were; the
    /// claim still works from them).
    pub async fn start(pool: &Pool, config: &Config) -> Self {
        let providers = ChannelProviders::from_config(pool, config).await;
        let configured = match pool.get().await {
            Ok(db) => channel::configure_channels(&db, &config.providers.rates, |channel| {
                providers.is_real_for(channel)
            })
            .await
            .map_err(anyhow::Error::from),
            Err(error) => Err(error.into()),
        };
        if let Err(error) = configured {
            tracing::warn!(error = %crate::telemetry::describe(&error), "could not write the channels' rates and health; the last ones written stay in force");
        }
        // Retention deletes a notification's reservation with it: inside the window, the
        // limit would stop counting it.
        if config.retention.notifications < config.rate_limit.window {
            tracing::warn!(
                retention_seconds = config.retention.notifications.as_secs(),
                rate_limit_window_seconds = config.rate_limit.window.as_secs(),
                "RETENTION_SECONDS is shorter than RATE_LIMIT_WINDOW_SECONDS: a recipient can get more than the limit in one window"
            );
        }
        Self::from_config(pool, config, providers)
    }

    /// Every channel on the simulated provider.
    pub fn simulated(pool: &Pool, config: &Config) -> Self {
        let simulated = SimulatedProvider::new(pool.clone(), config.mock, Arc::new(ThreadRandom));
        Self::from_config(pool, config, ChannelProviders::simulated(simulated))
    }

    pub fn new(
        pool: Pool,
        provider: Arc<dyn Provider>,
        random: Arc<dyn Random>,
        config: WorkerConfig,
        retry: RetryPolicy,
    ) -> Self {
        Sweeper {
            pool,
            provider,
            random,
            // Written into every claim and attempt row, so kept short: the process id and
            // 32 random bits tell the sweepers of one deployment apart.
            worker_id: format!(
                "sweeper-{}-{:08x}",
                std::process::id(),
                uuid::Uuid::new_v4().as_u128() as u32
            ),
            places: Places::new(config.concurrency),
            budget: ClaimBudget::default(),
            config,
            retry,
            rate_limit: None,
            circuit: CircuitConfig {
                failure_ratio: 0.5,
                min_calls: 20,
                window: Duration::from_secs(30),
                open_for: Duration::from_secs(30),
            },
            audience: AudienceConfig::development(),
            retention: RetentionConfig::default(),
            recovery_interval: RECOVERY_INTERVAL,
            last_recovery: Mutex::new(None),
            last_prune: Mutex::new(None),
            last_expiry: Mutex::new(None),
            prepared_at: Mutex::default(),
            retention_pacer: retention::Pacer::default(),
            templates: VersionCache::default(),
            last_finish: Mutex::new(None),
            pacing: ClaimPacing::none(),
        }
    }

    /// Holds every recipient to the rolling-window limit (production always sets it).
    pub fn with_rate_limit(mut self, limit: RateLimitConfig) -> Self {
        self.rate_limit = Some(limit);
        self
    }

    /// The thresholds of the channels' circuit breakers.
    pub fn with_circuit(mut self, circuit: CircuitConfig) -> Self {
        self.circuit = circuit;
        self
    }

    /// The key of address hashes and unsubscribe links, and where the links point.
    pub fn with_audience(mut self, audience: AudienceConfig) -> Self {
        self.audience = audience;
        self
    }

    /// How long finished work is kept before the retention step deletes it.
    pub fn with_retention(mut self, retention: RetentionConfig) -> Self {
        self.retention = retention;
        self
    }

    /// How often this process claims each channel paced by token buckets.
    pub fn with_pacing(mut self, pacing: ClaimPacing) -> Self {
        self.pacing = pacing;
        self
    }

    /// Looks for expired claims on every step instead of once per interval (tests).
    pub fn recover_on_every_step(mut self) -> Self {
        self.recovery_interval = Duration::ZERO;
        self
    }

    pub fn config(&self) -> &WorkerConfig {
        &self.config
    }

    /// The most connections this sweeper's pool opens.
    pub fn pool_size(&self) -> usize {
        self.pool.status().max_size
    }
}
