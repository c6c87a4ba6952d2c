//! The sweeper: one step function, [`Sweeper::sweep_once`], that recovers expired claims,
//! claims a batch, fences it, delivers it and records every result in one statement.
//! [`run`] is the loop around it that the `sweeper` Lambda and `notify-local` share.

use std::ops::AddAssign;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use serde::Serialize;

use crate::backoff::{Random, retry_delay};
use crate::config::{RateLimitConfig, RetryPolicy, WorkerConfig};
use crate::provider::{Delivery, Provider, ProviderOutcome};
use crate::queue::{self, Claimed, Disposition};
use crate::ratelimit;
use crate::stop::StopSignal;
use crate::wake::Wake;

/// How often expired claims are looked for.
pub const RECOVERY_INTERVAL: Duration = Duration::from_secs(1);
/// Expired claims returned per recovery statement.
const RECOVERY_BATCH: i64 = 1000;

/// What one step (or a whole run) did. Serialised as the `sweeper` Lambda's summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepOutcome {
    pub claimed: u64,
    pub sent: u64,
    pub failed: u64,
    pub retried: u64,
    pub dead_lettered: u64,
    /// Refused by the per-recipient rate limit; due again when a slot frees.
    pub deferred: u64,
    /// Expired claims returned to the queue (or dead-lettered after reconciliation).
    pub recovered: u64,
    /// Claimed but handed back untried (shutdown, deadline, error before sending).
    pub released: u64,
    /// Claims found taken over by another worker at the start fence.
    pub lost: u64,
}

impl AddAssign for SweepOutcome {
    fn add_assign(&mut self, other: Self) {
        self.claimed += other.claimed;
        self.sent += other.sent;
        self.failed += other.failed;
        self.retried += other.retried;
        self.dead_lettered += other.dead_lettered;
        self.deferred += other.deferred;
        self.recovered += other.recovered;
        self.released += other.released;
        self.lost += other.lost;
    }
}

pub struct Sweeper {
    pool: Pool,
    provider: Arc<dyn Provider>,
    random: Arc<dyn Random>,
    worker_id: String,
    config: WorkerConfig,
    retry: RetryPolicy,
    rate_limit: Option<RateLimitConfig>,
    recovery_interval: Duration,
    last_recovery: Mutex<Option<Instant>>,
    last_prune: Mutex<Option<Instant>>,
}

/// Lease a claim must still have at the start fence beyond the provider time limit.
const FENCE_MARGIN: Duration = Duration::from_secs(5);

/// How often reservations of recipients no batch has seen lately are swept away.
const PRUNE_INTERVAL: Duration = Duration::from_secs(60);

impl Sweeper {
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
            worker_id: format!(
                "sweeper-{}-{}",
                std::process::id(),
                uuid::Uuid::new_v4().simple()
            ),
            config,
            retry,
            rate_limit: None,
            recovery_interval: RECOVERY_INTERVAL,
            last_recovery: Mutex::new(None),
            last_prune: Mutex::new(None),
        }
    }

    /// Holds every recipient to the rolling-window limit (production always sets it).
    pub fn with_rate_limit(mut self, limit: RateLimitConfig) -> Self {
        self.rate_limit = Some(limit);
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

    /// One step: maybe recover, claim up to a batch, deliver, record.
    pub async fn sweep_once(&self, stop: &StopSignal) -> anyhow::Result<SweepOutcome> {
        let mut outcome = SweepOutcome::default();
        if let Some(limit) = &self.rate_limit
            && due(&self.last_prune, PRUNE_INTERVAL)
        {
            let db = self.pool.get().await?;
            ratelimit::prune_expired(&db, limit.window).await?;
        }
        if due(&self.last_recovery, self.recovery_interval) {
            let db = self.pool.get().await?;
            let recovered =
                queue::recover_expired(&db, self.config.visibility_timeout, RECOVERY_BATCH).await?;
            outcome.recovered = recovered.requeued + recovered.dead_lettered;
            outcome.dead_lettered += recovered.dead_lettered;
            if outcome.recovered > 0 {
                tracing::warn!(
                    requeued = recovered.requeued,
                    dead_lettered = recovered.dead_lettered,
                    "recovered expired claims"
                );
            }
        }
        if stop.is_stopped() {
            return Ok(outcome);
        }

        let claimed = {
            let db = self.pool.get().await?;
            queue::claim(
                &db,
                &self.worker_id,
                self.config.batch_size,
                self.config.visibility_timeout,
            )
            .await?
        };
        outcome.claimed = claimed.len() as u64;
        if claimed.is_empty() {
            return Ok(outcome);
        }

        // From here until the provider is called, any way out hands the work back untried.
        if stop.is_stopped() {
            outcome.released = self.release_all(&claimed).await;
            return Ok(outcome);
        }
        let (held, deferred) = match self.fence_and_admit(&claimed).await {
            Ok(admitted) => admitted,
            Err(error) => {
                // The step fails; what was handed back is visible in the log line.
                let released = self.release_all(&claimed).await;
                tracing::warn!(released, "start fence failed; claims released");
                return Err(error);
            }
        };
        outcome.deferred = deferred;
        outcome.lost = (claimed.len() - held.len()) as u64 - deferred;
        if held.is_empty() {
            return Ok(outcome);
        }

        let outcomes = self.deliver(&held).await;
        let results: Vec<(&Claimed, Disposition)> = held
            .iter()
            .zip(outcomes)
            .map(|(claim, provider_outcome)| (*claim, self.dispose(claim, provider_outcome)))
            .collect();
        for (claim, disposition) in &results {
            match disposition {
                Disposition::Sent => outcome.sent += 1,
                Disposition::Failed { .. } => outcome.failed += 1,
                Disposition::Retry { .. } => outcome.retried += 1,
                Disposition::DeadLettered { .. } => outcome.dead_lettered += 1,
            }
            log_result(claim, disposition);
        }
        // After the provider was called nothing is refunded: if recording fails, the lease
        // expires and recovery resends with the same key.
        let db = self.pool.get().await?;
        queue::record(&db, &results).await?;
        Ok(outcome)
    }

    /// In one short transaction: renew the lease of every claim still held (the start
    /// fence), then admit them against the rate limit; refused ones go back to PENDING,
    /// due when a slot frees, attempt refunded. Returns what may be sent and how many
    /// were deferred. No lock outlives the transaction.
    async fn fence_and_admit<'a>(
        &self,
        claimed: &'a [Claimed],
    ) -> anyhow::Result<(Vec<&'a Claimed>, u64)> {
        let mut db = self.pool.get().await?;
        let tx = db.transaction().await?;
        let all: Vec<&Claimed> = claimed.iter().collect();
        let recipients: Vec<&str> = all.iter().map(|c| c.recipient.as_str()).collect();
        // The lease must outlast the provider call that follows.
        let needed = self.config.provider_timeout + FENCE_MARGIN;
        // Sent together, answered in one round trip: the two statements are independent.
        let (locked, still_held) = tokio::join!(
            async {
                match self.rate_limit {
                    Some(_) => ratelimit::lock_recipients(&tx, &recipients).await,
                    None => Ok(()),
                }
            },
            queue::start_fence(&tx, &all, needed, self.config.visibility_timeout),
        );
        locked?;
        let still_held = still_held?;
        let held: Vec<&Claimed> = all
            .into_iter()
            .filter(|c| still_held.contains(&c.id))
            .collect();
        let Some(limit) = &self.rate_limit else {
            tx.commit().await?;
            return Ok((held, 0));
        };
        let admission = ratelimit::admit(&tx, limit, &held).await?;
        let deferred: Vec<(&Claimed, Option<chrono::DateTime<chrono::Utc>>)> = admission
            .deferred
            .iter()
            .map(|(c, at)| (*c, Some(*at)))
            .collect();
        queue::release(&tx, &deferred).await?;
        tx.commit().await?;
        for (claim, at) in &admission.deferred {
            tracing::info!(notification_id = %claim.id, due_at = %at, "rate limited; deferred");
        }
        Ok((admission.admitted, deferred.len() as u64))
    }

    /// Calls the provider once for the batch, under the provider time limit.
    async fn deliver(&self, held: &[&Claimed]) -> Vec<ProviderOutcome> {
        let batch: Vec<Delivery<'_>> = held
            .iter()
            .map(|c| Delivery {
                key: c.id,
                channel: c.channel,
                recipient: &c.recipient,
                payload: &c.payload,
            })
            .collect();
        let limit = self.config.provider_timeout;
        match tokio::time::timeout(limit, self.provider.send(&batch)).await {
            Ok(outcomes) if outcomes.len() == batch.len() => outcomes,
            Ok(outcomes) => {
                let error = format!(
                    "Provider answered {} results for {} deliveries",
                    outcomes.len(),
                    batch.len()
                );
                batch
                    .iter()
                    .map(|_| ProviderOutcome::Temporary(error.clone()))
                    .collect()
            }
            Err(_) => {
                let error = format!("Provider timed out after {}ms", limit.as_millis());
                batch
                    .iter()
                    .map(|_| ProviderOutcome::Temporary(error.clone()))
                    .collect()
            }
        }
    }

    /// Decides what happens next from the provider's answer and the attempts left.
    fn dispose(&self, claim: &Claimed, outcome: ProviderOutcome) -> Disposition {
        match outcome {
            ProviderOutcome::Delivered { .. } => Disposition::Sent,
            ProviderOutcome::Permanent(error) => Disposition::Failed { error },
            ProviderOutcome::Temporary(error) if claim.is_last_attempt() => {
                Disposition::DeadLettered { error }
            }
            ProviderOutcome::Temporary(error) => {
                let attempt = u32::try_from(claim.attempt_count).unwrap_or(1);
                let delay = retry_delay(&self.retry, attempt, self.random.unit());
                Disposition::Retry { error, delay }
            }
        }
    }

    /// Best effort: what cannot be released now is recovered when its lease expires.
    async fn release_all(&self, claimed: &[Claimed]) -> u64 {
        let batch: Vec<(&Claimed, _)> = claimed.iter().map(|c| (c, None)).collect();
        let released = match self.pool.get().await {
            Ok(db) => queue::release(&db, &batch)
                .await
                .map_err(anyhow::Error::from),
            Err(error) => Err(error.into()),
        };
        match released {
            Ok(count) => count,
            Err(error) => {
                tracing::warn!(error = %crate::telemetry::describe(&error), count = claimed.len(), "could not release claims; their lease will expire");
                0
            }
        }
    }
}

/// True (and remembered) when `interval` has passed since the last time this said true.
fn due(last: &Mutex<Option<Instant>>, interval: Duration) -> bool {
    let Ok(mut last) = last.lock() else {
        return true;
    };
    let now = Instant::now();
    match *last {
        Some(at) if now.duration_since(at) < interval => false,
        _ => {
            *last = Some(now);
            true
        }
    }
}

fn log_result(claim: &Claimed, disposition: &Disposition) {
    match disposition {
        Disposition::Sent => {
            tracing::debug!(notification_id = %claim.id, attempt = claim.attempt_count, "sent")
        }
        Disposition::Retry { delay, .. } => tracing::info!(
            notification_id = %claim.id, attempt = claim.attempt_count,
            retry_in_ms = delay.as_millis() as u64, "temporary failure; will retry"
        ),
        Disposition::Failed { .. } => tracing::warn!(
            notification_id = %claim.id, attempt = claim.attempt_count, "permanent failure"
        ),
        Disposition::DeadLettered { .. } => tracing::warn!(
            notification_id = %claim.id, attempt = claim.attempt_count, "dead-lettered"
        ),
    }
}

/// Runs `sweep_once` on `concurrency` lanes until `stop` fires, and returns the sum of
/// what they did. Lane 0 polls every poll interval; every lane wakes on `wake` and when
/// another lane found a full batch (more work is likely waiting).
pub async fn run(sweeper: Arc<Sweeper>, wake: Wake, stop: StopSignal) -> SweepOutcome {
    let (more_work, _) = tokio::sync::watch::channel(0u64);
    let more_work = Arc::new(more_work);
    let lanes = sweeper.config.concurrency.max(1);
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
                let idle = match sweeper.sweep_once(&stop).await {
                    Ok(outcome) => {
                        failures = 0;
                        total += outcome;
                        if outcome.claimed >= sweeper.config.batch_size as u64 {
                            more_work.send_modify(|n| *n += 1);
                        }
                        outcome.claimed == 0
                    }
                    Err(error) => {
                        failures = failures.saturating_add(1);
                        tracing::error!(error = %crate::telemetry::describe(&error), lane, "sweep step failed");
                        true
                    }
                };
                if !idle {
                    continue;
                }
                let poll = if failures > 0 {
                    // Back off while the database is unreachable.
                    (sweeper.config.poll_interval * failures.min(5)).min(Duration::from_secs(5))
                } else {
                    sweeper.config.poll_interval
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
