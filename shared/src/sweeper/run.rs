//! The loop around [`Sweeper::sweep_once`].

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::maintain::EXPANSION_IDLE_INTERVAL;
use super::{SweepOutcome, Sweeper};
use crate::provider::BulkTickets;
use crate::stop::StopSignal;
use crate::wake::Wake;

/// How often housekeeping is looked at beside the lanes; each of its parts runs at its
/// own interval (see `maintain`), whoever calls it first.
const HOUSEKEEPING_TICK: Duration = Duration::from_millis(250);

/// Runs `sweep_once` on `WORKER_LANES` lanes (at most `WORKER_CONCURRENCY`, and one fewer
/// than the pool's connections), and campaign expansion and housekeeping beside them, until `stop` fires; returns the sum
/// of what the lanes did. Lanes overlap the round trips of several batches; the deliveries in
/// flight are bounded by the sweeper's gate, and a lane claims only when one could start.
/// A lane that found work goes on at once; an idle lane waits, and every lane but lane 0
/// starts idle. Lane 0 polls every poll interval. Each wake-up from the database, and each full batch (more work is likely
/// waiting), wakes one idle lane, not all of them: fifty lanes woken by every new
/// notification would queue fifty claims on the same rows for one notification. A lane
/// claims bulk work only for the bulk places free (see [`Sweeper::sweep_holding`]); one
/// that found none waits, besides, for a share of them to free up.
pub async fn run(sweeper: Arc<Sweeper>, mut wake: Wake, stop: StopSignal) -> SweepOutcome {
    let ready = Arc::new(Notify::new());
    let forwarder = {
        let (ready, stop) = (ready.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = wake.notified() => ready.notify_one(),
                    () = stop.stopped() => break,
                }
            }
        })
    };
    // Campaign expansion runs beside the lanes, on the connection kept for maintenance:
    // lanes busy delivering a campaign must not hold up the rest of its audience.
    let expander = {
        let (sweeper, stop) = (sweeper.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.is_stopped() {
                if sweeper.expand_campaigns(&stop).await == 0 {
                    tokio::select! {
                        () = tokio::time::sleep(EXPANSION_IDLE_INTERVAL) => {}
                        () = stop.stopped() => {}
                    }
                }
            }
        })
    };
    // Housekeeping runs at the start of every step, and beside the lanes as well: lanes
    // all busy with long batches would leave a dead process's expired claims (and the
    // expiry and retention) waiting until one of them ended.
    let housekeeper = {
        let (sweeper, stop) = (sweeper.clone(), stop.clone());
        tokio::spawn(async move {
            let mut total = SweepOutcome::default();
            while !stop.is_stopped() {
                tokio::select! {
                    () = tokio::time::sleep(HOUSEKEEPING_TICK) => {}
                    () = stop.stopped() => break,
                }
                match sweeper.maintain().await {
                    Ok(outcome) => total += outcome,
                    Err(error) => {
                        tracing::warn!(error = %crate::telemetry::describe(&error), "housekeeping failed");
                    }
                }
            }
            total
        })
    };
    // A lane needs a connection for its claim and its record (and a long batch one more
    // now and then, for its renewals and parts), so more lanes than the pool holds (one
    // kept for maintenance and the webhook drainer) would only queue for one.
    let config = sweeper.config();
    let lanes = config
        .lanes
        .min(config.concurrency)
        .min(sweeper.pool_size().saturating_sub(1))
        .max(1);
    let mut tasks = tokio::task::JoinSet::new();
    for lane in 0..lanes {
        let sweeper = sweeper.clone();
        let stop = stop.clone();
        let ready = ready.clone();
        tasks.spawn(async move {
            let mut total = SweepOutcome::default();
            let mut failures = 0u32;
            // Bulk places taken while idle, for the next claim.
            let mut tickets = BulkTickets::default();
            // Lanes start idle but the first: ten lanes claiming at once from a process
            // just started opened ten connections together, which doubled its time to
            // ready; a backlog still gets every lane within a claim each, since each
            // full batch wakes one more.
            if lane > 0 {
                tokio::select! {
                    () = ready.notified() => {}
                    () = stop.stopped() => {}
                }
            }
            while !stop.is_stopped() {
                sweeper.wait_for_capacity(&stop).await;
                if stop.is_stopped() {
                    break;
                }
                let step = sweeper.sweep_holding(&stop, std::mem::take(&mut tickets));
                let (idle, bulk_capped) = match step.await {
                    Ok(outcome) => {
                        failures = 0;
                        total += outcome;
                        if outcome.full {
                            ready.notify_one();
                        }
                        (outcome.claimed == 0, outcome.bulk_capped)
                    }
                    Err(error) => {
                        failures = failures.saturating_add(1);
                        total.failed_steps += 1;
                        tracing::error!(error = %crate::telemetry::describe(&error), lane, "sweep step failed");
                        (true, false)
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
                // A lane refused a paced channel's turn: one idle lane claims at the next.
                let paced_turn = async {
                    match sweeper.paced_retry() {
                        Some(at) => tokio::time::sleep_until(at.into()).await,
                        None => std::future::pending().await,
                    }
                };
                let poll_timer = async {
                    if lane == 0 || failures > 0 {
                        tokio::time::sleep(poll).await
                    } else {
                        std::future::pending().await
                    }
                };
                // A lane that found no bulk place free also waits for its share of them.
                let bulk_places = async {
                    if bulk_capped {
                        sweeper.wait_for_bulk_places().await
                    } else {
                        std::future::pending().await
                    }
                };
                tokio::select! {
                    taken = bulk_places => tickets = taken,
                    () = ready.notified() => {}
                    () = poll_timer => {}
                    () = paced_turn => {}
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
    if let Ok(housekept) = housekeeper.await {
        total += housekept;
    }
    forwarder.abort();
    // A chunk being expanded finishes (or, cut short, rolls back and is done again).
    let _ = expander.await;
    total
}
