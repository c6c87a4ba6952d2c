//! What the scheduled Lambda functions do, as plain async functions on plain types, so
//! they are tested without Lambda. Each `main` in `functions/` builds a [`Worker`] once
//! per cold start and calls one of these per invocation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use deadpool_postgres::Pool;

use crate::backoff::ThreadRandom;
use crate::config::Config;
use crate::provider::simulated::SimulatedProvider;
use crate::stop::StopSignal;
use crate::sweeper::{self, SweepOutcome, Sweeper};
use crate::wake::{self, Wake};
use crate::{db, queue};

/// Time kept free at the end of an invocation to record results and return.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(2);

/// Everything a scheduled function needs, built once per container.
pub struct Worker {
    pub config: Config,
    pub pool: Pool,
    pub sweeper: Arc<Sweeper>,
    wake: Wake,
}

impl Worker {
    /// Reads configuration, builds the pool (connections open lazily) and starts the
    /// wake-up listener. Deployed functions need `DATABASE_URL`.
    pub fn from_config(config: Config) -> anyhow::Result<Self> {
        let url = config
            .database_url
            .clone()
            .context("DATABASE_URL is required for the deployed functions")?;
        let pool = db::create_pool(&url, config.database_pool_max)?;
        let provider = SimulatedProvider::new(pool.clone(), config.mock, Arc::new(ThreadRandom));
        let sweeper = Arc::new(
            Sweeper::new(
                pool.clone(),
                Arc::new(provider),
                Arc::new(ThreadRandom),
                config.worker.clone(),
                config.retry,
            )
            .with_rate_limit(config.rate_limit),
        );
        // The listener lives for the container; it reconnects after a freeze by itself.
        let wake = wake::listen(url, queue::WAKE_CHANNEL, StopSignal::never());
        Ok(Worker {
            config,
            pool,
            sweeper,
            wake,
        })
    }

    /// When work must stop so that a provider call started just before still finishes and
    /// is recorded before `deadline`.
    pub fn stop_at(&self, deadline: Instant) -> Instant {
        let reserve = self.config.worker.provider_timeout + DEADLINE_MARGIN;
        deadline.checked_sub(reserve).unwrap_or_else(Instant::now)
    }

    /// One `sweeper` invocation: sweep until the deadline nears, then report.
    pub async fn sweep_until(&self, deadline: Instant) -> SweepOutcome {
        let stop = StopSignal::never().with_deadline(self.stop_at(deadline));
        sweeper::run(self.sweeper.clone(), self.wake.clone(), stop).await
    }
}
