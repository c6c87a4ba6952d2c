//! The loop around [`Sweeper::sweep_once`].

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::{SweepOutcome, Sweeper};
use crate::stop::StopSignal;
use crate::wake::Wake;

/// Which steps a lane runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    /// [`Sweeper::sweep_once`]; lane 0 of them polls.
    General(usize),
    /// [`Sweeper::sweep_transactional`]: only with a channel sent by a real provider.
    Transactional,
}

/// Runs `sweep_once` on `WORKER_CONCURRENCY` lanes (at most one fewer than the pool's
/// connections) until `stop` fires, and returns the sum of what they did. Lanes overlap
/// the round trips of several batches; the deliveries in flight are bounded by the
/// sweeper's gate, and a lane claims only when one could start. A lane that found work
/// goes on at once; an idle lane waits. Each wake-up from the database, and each full
/// batch (more work is likely waiting), wakes one idle lane, not all of them: fifty lanes
/// woken by every new notification would queue fifty claims on the same rows for one
/// notification. When a channel is paced, one of the lanes claims only its transactional
/// work and is woken by every wake-up: the others may all be busy with a campaign's
/// batches. Lane 0 and the transactional lane also poll every poll interval.
pub async fn run(sweeper: Arc<Sweeper>, mut wake: Wake, stop: StopSignal) -> SweepOutcome {
    let ready = Arc::new(Notify::new());
    let urgent = Arc::new(Notify::new());
    let forwarder = {
        let (ready, urgent, stop) = (ready.clone(), urgent.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = wake.notified() => {
                        ready.notify_one();
                        urgent.notify_one();
                    }
                    () = stop.stopped() => break,
                }
            }
        })
    };
    // A lane needs a connection for its claim and its record, so more lanes than the pool
    // holds (one kept for maintenance and the webhook drainer) would only queue for one.
    let lanes = sweeper
        .config()
        .concurrency
        .min(sweeper.pool_size().saturating_sub(1))
        .max(1);
    let mut kinds: Vec<Lane> = Vec::with_capacity(lanes);
    if sweeper.paces_a_channel() && lanes > 1 {
        kinds.push(Lane::Transactional);
    }
    kinds.extend((0..lanes - kinds.len()).map(Lane::General));
    let mut tasks = tokio::task::JoinSet::new();
    for lane in kinds {
        let sweeper = sweeper.clone();
        let stop = stop.clone();
        let wakes = match lane {
            Lane::General(_) => ready.clone(),
            Lane::Transactional => urgent.clone(),
        };
        tasks.spawn(async move {
            let mut total = SweepOutcome::default();
            let mut failures = 0u32;
            while !stop.is_stopped() {
                sweeper.wait_for_capacity(&stop).await;
                if stop.is_stopped() {
                    break;
                }
                let step = match lane {
                    Lane::General(_) => sweeper.sweep_once(&stop).await,
                    Lane::Transactional => sweeper.sweep_transactional(&stop).await,
                };
                let idle = match step {
                    Ok(outcome) => {
                        failures = 0;
                        total += outcome;
                        if outcome.full {
                            wakes.notify_one();
                        }
                        outcome.claimed == 0
                    }
                    Err(error) => {
                        failures = failures.saturating_add(1);
                        total.failed_steps += 1;
                        tracing::error!(error = %crate::telemetry::describe(&error), ?lane, "sweep step failed");
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
                let polls = matches!(lane, Lane::General(0) | Lane::Transactional);
                let poll_timer = async {
                    if polls || failures > 0 {
                        tokio::time::sleep(poll).await
                    } else {
                        std::future::pending().await
                    }
                };
                tokio::select! {
                    () = wakes.notified() => {}
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
    forwarder.abort();
    total
}
