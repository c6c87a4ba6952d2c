//! The `sweeper` function: its state, built once per container, and one invocation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use deadpool_postgres::Pool;

use super::{SweepOutcome, Sweeper, run};
use crate::config::{CircuitConfig, Config};
use crate::stop::StopSignal;
use crate::wake::{self, Wake};
use crate::{db, deadline, metrics, queue};

pub struct SweeperFunction {
    pool: Pool,
    sweeper: Arc<Sweeper>,
    wake: Wake,
    provider_timeout: Duration,
    circuit: CircuitConfig,
}

impl SweeperFunction {
    /// Builds the pool (connections open lazily), the sweeper and the wake-up listener,
    /// which lives for the container and reconnects after a freeze by itself. Needs
    /// `DATABASE_URL`.
    pub async fn from_config(config: &Config) -> anyhow::Result<Self> {
        let url = config
            .database_url
            .clone()
            .context("DATABASE_URL is required for the deployed functions")?;
        let pool = db::pool_from_config(config)?;
        let sweeper = Arc::new(Sweeper::start(&pool, config).await);
        let wake = wake::listen(url, queue::WAKE_CHANNEL, StopSignal::never());
        Ok(SweeperFunction {
            pool,
            sweeper,
            wake,
            provider_timeout: config.worker.provider_timeout,
            circuit: config.providers.circuit,
        })
    }

    /// Sweeps until the deadline nears (leaving room for a provider call started just
    /// before to finish and be recorded), then writes its metrics line and reports.
    pub async fn invoke(&self, deadline: Instant) -> SweepOutcome {
        let stop =
            StopSignal::never().with_deadline(deadline::reserve(deadline, self.provider_timeout));
        let outcome = run(self.sweeper.clone(), self.wake.clone(), stop).await;
        metrics::emf::emit_sweeper(&outcome, &self.pool, &self.circuit).await;
        outcome
    }
}
