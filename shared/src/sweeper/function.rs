//! The `sweeper` function: its state, built once per container, and one invocation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;

use super::{SweepOutcome, Sweeper, run};
use crate::cold_start::ColdStart;
use crate::config::CircuitConfig;
use crate::stop::StopSignal;
use crate::wake::{self, Wake};
use crate::{deadline, metrics, queue};

pub struct SweeperFunction {
    pool: Pool,
    sweeper: Arc<Sweeper>,
    wake: Wake,
    provider_timeout: Duration,
    circuit: CircuitConfig,
}

impl SweeperFunction {
    /// Builds the pool (connections open lazily), the sweeper and the wake-up listener,
    /// which lives for the container and reconnects after a freeze by itself.
    pub async fn new(start: &ColdStart) -> anyhow::Result<Self> {
        let config = &start.config;
        let pool = start.pool()?;
        let sweeper = Arc::new(Sweeper::start(&pool, config).await);
        let wake = wake::listen(
            start.database.clone(),
            queue::WAKE_CHANNEL,
            StopSignal::never(),
        );
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
        self.invoke_reporting(deadline).await.0
    }

    /// As [`SweeperFunction::invoke`], also handing back the metrics line it wrote.
    pub async fn invoke_reporting(&self, deadline: Instant) -> (SweepOutcome, String) {
        let stop =
            StopSignal::never().with_deadline(deadline::reserve(deadline, self.provider_timeout));
        let outcome = run(self.sweeper.clone(), self.wake.clone(), stop).await;
        let line = metrics::emf::emit_sweeper(&outcome, &self.pool, &self.circuit).await;
        (outcome, line)
    }
}
