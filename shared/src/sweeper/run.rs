//! The loop around [`Sweeper::sweep_once`].

use std::sync::Arc;
use std::time::Duration;

use super::{SweepOutcome, Sweeper};
use crate::stop::StopSignal;
use crate::wake::Wake;

/// Runs `sweep_once` on `concurrency` lanes until `stop` fires, and returns the sum of
/// what they did. Lanes overlap the round trips of several batches; the deliveries in
/// flight are bounded by the sweeper's gate, and a lane claims only when one could start. Lane 0 polls every poll interval; every lane wakes on `wake` and when
/// another lane found a full batch (more work is likely waiting).
pub async fn run(sweeper: Arc<Sweeper>, wake: Wake, stop: StopSignal) -> SweepOutcome {
    let (more_work, _) = tokio::sync::watch::channel(0u64);
    let more_work = Arc::new(more_work);
    let lanes = sweeper.config().concurrency.max(1);
    let mut tasks = tokio::task::JoinSet::new();
    for lane in 0..lanes {
        let sweeper = sweeper.clone();
        let mut wake = wake.clone();
        let stop = stop.clone();
        let more_work = more_work.clone();
        let mut more_work_seen = more_work.subscribe();
        tasks.spawn(async move {
            let mut total = SweepOutcome::default();
            let mut failures = 0u32;
            while !stop.is_stopped() {
                sweeper.wait_for_capacity(&stop).await;
                if stop.is_stopped() {
                    break;
                }
                let idle = match sweeper.sweep_once(&stop).await {
                    Ok(outcome) => {
                        failures = 0;
                        total += outcome;
                        if outcome.full {
                            more_work.send_modify(|n| *n += 1);
                        }
                        outcome.claimed == 0
                    }
                    Err(error) => {
                        failures = failures.saturating_add(1);
                        total.failed_steps += 1;
                        tracing::error!(error = %crate::telemetry::describe(&error), lane, "sweep step failed");
                        true
                    }
                };
                if !idle {
                    continue;
                }
                let poll = if failures > 0 {
                    // Back off while the database is unreachable.
                    (sweeper.config().poll_interval * failures.min(5)).min(Duration::from_secs(5))
                } else {
                    sweeper.config().poll_interval
                };
                let poll_timer = async {
                    if lane == 0 || failures > 0 {
                        tokio::time::sleep(poll).await
                    } else {
                        std::future::pending().await
                    }
                };
                tokio::select! {
                    () = wake.notified() => {}
                    _ = more_work_seen.changed() => {}
                    () = poll_timer => {}
                    () = stop.stopped() => {}
                }
            }
            total
        });
    }
    let mut total = SweepOutcome::default();
    while let Some(result) = tasks.join_next().await {
        if let Ok(lane_total) = result {
            total += lane_total;
        }
    }
    total
}
