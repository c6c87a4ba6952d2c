//! The scenarios, which drive real `notify-local` processes: the context they share, the
//! helpers that start and stop processes, and the order one run takes them in. Each
//! family has its own module: intake (B1/B3), drain (B2/B6/B7), latency (B4/B5), floor
//! (B8), campaign (B9, a campaign paced beside transactional traffic), real (B11, the
//! drain through SES), metrics (M1, with `seed` the SQL that
//! fills its database) and soak (B10, ten rounds under retention); `queries` holds the SQL that releases, watches and measures the
//! queue.

pub mod campaign;
pub mod drain;
pub mod floor;
pub mod intake;
pub mod latency;
pub mod metrics;
mod queries;
pub mod real;
pub mod seed;
pub mod soak;

use std::time::Duration;

use crate::args::Options;
use crate::procs::{Launcher, Process, Role};
use crate::report::RunResult;
use crate::server::{FreshDb, Server};

const STOP_GRACE: Duration = Duration::from_secs(10);
/// A worker is left alone this long after it is ready before it is measured or fed.
const SETTLE: Duration = Duration::from_secs(1);

pub struct Ctx {
    pub server: Server,
    pub launcher: Launcher,
    pub options: Options,
    pub http: reqwest::Client,
    pub postmaster: Option<u32>,
}

impl Ctx {
    /// Starts `n` worker processes, then leaves them alone for [`SETTLE`].
    async fn workers(&self, n: usize, db: &FreshDb, tag: &str) -> anyhow::Result<Vec<Process>> {
        self.workers_with(n, db, tag, &[]).await
    }

    /// [`Ctx::workers`] with the scenario's own environment.
    async fn workers_with(
        &self,
        n: usize,
        db: &FreshDb,
        tag: &str,
        env: &[(String, String)],
    ) -> anyhow::Result<Vec<Process>> {
        let mut workers = Vec::with_capacity(n);
        for _ in 0..n {
            workers.push(
                self.launcher
                    .start_with(Role::Worker, &db.url, tag, env)
                    .await?,
            );
        }
        tokio::time::sleep(SETTLE).await;
        Ok(workers)
    }

    /// How long draining `n` notifications may take before the scenario gives up.
    fn drain_timeout(&self, n: u64) -> Duration {
        Duration::from_secs((n / 300).max(60))
    }
}

async fn stop_all(processes: Vec<Process>) {
    futures::future::join_all(processes.into_iter().map(|p| p.stop(STOP_GRACE))).await;
}

fn short_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

/// Every scenario selected, once.
pub async fn one_run(ctx: &Ctx, run: u32) -> anyhow::Result<RunResult> {
    let o = &ctx.options;
    let mut result = RunResult {
        run,
        ..RunResult::default()
    };
    // B6 and B7 read the one-worker drain; B1 is the load before it.
    let worker_counts: Vec<usize> = if o.selected("B2") {
        o.workers.clone()
    } else if o.selected("B1") || o.selected("B6") || o.selected("B7") {
        vec![o.workers.first().copied().unwrap_or(1)]
    } else {
        Vec::new()
    };
    // The one-worker drain and the SQL floor run back to back, so that the ratio between
    // them sees the same neighbours on this shared machine.
    let mut worker_counts = worker_counts.into_iter();
    if let Some(workers) = worker_counts.next() {
        result
            .drains
            .push(drain::drain_pass(ctx, run, workers).await?);
    }
    if o.selected("B8") {
        for variant in floor::VARIANTS {
            result.floors.push(floor::floor(ctx, run, variant).await?);
        }
    }
    if o.selected("B9") {
        result.campaign = Some(campaign::campaign_isolation(ctx, run).await?);
    }
    // B11 is read beside them, so it follows at once.
    if o.selected("B11") {
        result.real_provider = Some(real::real_drain(ctx, run).await?);
    }
    for workers in worker_counts {
        result
            .drains
            .push(drain::drain_pass(ctx, run, workers).await?);
    }
    if o.selected("B3") {
        result.single = Some(intake::single_intake(ctx, run).await?);
    }
    if o.selected("B4") {
        result.idle = Some(latency::idle_latency(ctx, run).await?);
    }
    if o.selected("B5") {
        result.isolation = Some(latency::isolation(ctx, run).await?);
    }
    if o.selected("B6") {
        result.start = Some(drain::start_times(ctx, run).await?);
    }
    if o.selected("M1") {
        result.metrics = Some(metrics::metrics_scale(ctx, run).await?);
    }
    if o.selected("B10") {
        result.soak = Some(soak::soak(ctx, run).await?);
    }
    Ok(result)
}
