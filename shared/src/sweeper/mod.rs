//! The sweeper: one step function, [`Sweeper::sweep_once`], that recovers expired claims,
//! claims a batch, fences it, delivers it and records every result in one statement.
//! [`run`] is the loop around it that the `sweeper` Lambda ([`function`]) and
//! `notify-local` share.

pub mod function;
mod outcome;
mod run;

pub use function::SweeperFunction;
pub use outcome::SweepOutcome;
pub use run::run;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use tokio::sync::Semaphore;

use crate::backoff::{Random, ThreadRandom, retry_delay};
use crate::config::{Config, RateLimitConfig, RetryPolicy, WorkerConfig};
use crate::provider::simulated::SimulatedProvider;
use crate::provider::{Attempt, Delivery, Gate, Provider, ProviderOutcome};
use crate::queue::{self, Claimed, Disposition};
use crate::ratelimit;
use crate::stop::StopSignal;

/// How often expired claims are looked for.
pub const RECOVERY_INTERVAL: Duration = Duration::from_secs(1);
/// Expired claims returned per recovery statement.
const RECOVERY_BATCH: i64 = 1000;

pub struct Sweeper {
    pool: Pool,
    provider: Arc<dyn Provider>,
    random: Arc<dyn Random>,
    worker_id: String,
    config: WorkerConfig,
    retry: RetryPolicy,
    rate_limit: Option<RateLimitConfig>,
    /// Deliveries in flight in this process: `WORKER_CONCURRENCY` places, shared by every
    /// lane.
    permits: Arc<Semaphore>,
    recovery_interval: Duration,
    last_recovery: Mutex<Option<Instant>>,
    last_prune: Mutex<Option<Instant>>,
}

/// Lease a claim must still have at the start fence beyond the provider time limit.
const FENCE_MARGIN: Duration = Duration::from_secs(5);

/// How often reservations of recipients no batch has seen lately are swept away.
const PRUNE_INTERVAL: Duration = Duration::from_secs(60);

impl Sweeper {
    /// The sweeper every process runs: the simulated provider, the configured retry
    /// policy and rate limit.
    pub fn from_config(pool: &Pool, config: &Config) -> Self {
        let provider = SimulatedProvider::new(pool.clone(), config.mock, Arc::new(ThreadRandom));
        Sweeper::new(
            pool.clone(),
            Arc::new(provider),
            Arc::new(ThreadRandom),
            config.worker.clone(),
            config.retry,
        )
        .with_rate_limit(config.rate_limit)
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
            worker_id: format!(
                "sweeper-{}-{}",
                std::process::id(),
                uuid::Uuid::new_v4().simple()
            ),
            permits: Arc::new(Semaphore::new(config.concurrency.max(1))),
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

    /// Waits until a delivery could start, so a lane claims no work that would only wait
    /// for a place (or until `stop`).
    pub async fn wait_for_capacity(&self, stop: &StopSignal) {
        if self.permits.available_permits() > 0 {
            return;
        }
        tokio::select! {
            permit = self.permits.acquire() => drop(permit),
            () = stop.stopped() => {}
        }
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
            outcome.released = self.release(&claimed.iter().collect::<Vec<_>>()).await;
            return Ok(outcome);
        }
        let (held, deferred) = match self.fence_and_admit(&claimed).await {
            Ok(admitted) => admitted,
            Err(error) => {
                // The step fails; what was handed back is visible in the log line.
                let released = self.release(&claimed.iter().collect::<Vec<_>>()).await;
                tracing::warn!(released, "start fence failed; claims released");
                return Err(error);
            }
        };
        outcome.deferred = deferred;
        outcome.lost = (claimed.len() - held.len()) as u64 - deferred;
        if held.is_empty() {
            return Ok(outcome);
        }

        let gate = Gate::new(
            self.permits.clone(),
            stop.clone(),
            self.config.provider_timeout,
        );
        let attempts = self.deliver(&held, &gate).await;
        let mut results: Vec<(&Claimed, Disposition)> = Vec::with_capacity(held.len());
        let mut unstarted: Vec<&Claimed> = Vec::new();
        for (claim, attempt) in held.iter().zip(attempts) {
            match attempt {
                Attempt::NotStarted => unstarted.push(claim),
                Attempt::Finished(provider_outcome) => {
                    let disposition = self.dispose(claim, provider_outcome);
                    match disposition {
                        Disposition::Sent => outcome.sent += 1,
                        Disposition::Failed { .. } => outcome.failed += 1,
                        Disposition::Retry { .. } => outcome.retried += 1,
                        Disposition::DeadLettered { .. } => outcome.dead_lettered += 1,
                    }
                    log_result(claim, &disposition);
                    results.push((claim, disposition));
                }
            }
        }
        // Stopped before these started: the provider never saw them.
        outcome.released += self.release(&unstarted).await;
        if results.is_empty() {
            return Ok(outcome);
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
        // The lease must outlast the deliveries that follow: one provider time limit per
        // round of WORKER_CONCURRENCY, capped at a whole lease.
        let rounds = claimed.len().div_ceil(self.config.concurrency.max(1));
        let needed = (self.config.provider_timeout * u32::try_from(rounds).unwrap_or(u32::MAX)
            + FENCE_MARGIN)
            .min(self.config.visibility_timeout);
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

    /// Hands the batch to the provider; each delivery passes `gate` before it starts.
    async fn deliver(&self, held: &[&Claimed], gate: &Gate) -> Vec<Attempt> {
        let batch: Vec<Delivery<'_>> = held
            .iter()
            .map(|c| Delivery {
                key: c.id,
                channel: c.channel,
                recipient: &c.recipient,
                payload: &c.payload,
            })
            .collect();
        let attempts = self.provider.send(&batch, gate).await;
        if attempts.len() == batch.len() {
            return attempts;
        }
        let error = format!(
            "Provider answered {} results for {} deliveries",
            attempts.len(),
            batch.len()
        );
        batch
            .iter()
            .map(|_| Attempt::Finished(ProviderOutcome::Temporary(error.clone())))
            .collect()
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

    /// Hands claims back untried, due now. Best effort: what cannot be released now is
    /// recovered when its lease expires.
    async fn release(&self, claimed: &[&Claimed]) -> u64 {
        if claimed.is_empty() {
            return 0;
        }
        let batch: Vec<(&Claimed, _)> = claimed.iter().map(|c| (*c, None)).collect();
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
