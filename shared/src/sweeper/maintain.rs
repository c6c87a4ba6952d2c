//! The housekeeping a step does now and then, each part at its own interval: pruning old
//! reservations, expiring notifications, retention, campaign expansion and completion,
//! recovering expired claims.

use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{SweepOutcome, Sweeper};
use crate::{content, queue, ratelimit, retention};

/// Expired claims returned per recovery statement.
const RECOVERY_BATCH: i64 = 1000;
/// How often PENDING notifications past their `expiresAt` are marked EXPIRED (the claim
/// skips them meanwhile), and how many per statement.
const EXPIRY_INTERVAL: Duration = Duration::from_secs(1);
const EXPIRY_BATCH: i64 = 1000;
/// Time a step may spend expanding campaigns (at least one chunk when one is expanding),
/// and how often finished campaigns are looked for.
const EXPANSION_BUDGET: Duration = Duration::from_millis(250);
const FINISH_INTERVAL: Duration = Duration::from_secs(1);
/// After finding no campaign to expand, steps do not look again for this long (so steps
/// without campaigns pay nothing for them).
const EXPANSION_IDLE_INTERVAL: Duration = Duration::from_secs(1);
/// How often reservations of recipients no batch has seen lately are swept away.
const PRUNE_INTERVAL: Duration = Duration::from_secs(60);

impl Sweeper {
    /// The housekeeping a step does now and then: pruning old reservations, expiring
    /// notifications past their `expiresAt`, recovering expired claims, deleting what
    /// finished longer ago than the retention.
    pub(super) async fn maintain(&self) -> anyhow::Result<SweepOutcome> {
        let mut outcome = SweepOutcome::default();
        if let Some(limit) = &self.rate_limit
            && due(&self.last_prune, PRUNE_INTERVAL)
        {
            let db = self.pool.get().await?;
            ratelimit::prune_expired(&db, limit.window).await?;
        }
        if due(&self.last_expiry, EXPIRY_INTERVAL) {
            let db = self.pool.get().await?;
            outcome.expired += queue::expire(&db, EXPIRY_BATCH).await?;
        }
        if let Some(turn) = self.retention_pacer.take(Instant::now()) {
            let step = retention::timed_step(&self.pool, &self.retention).await?;
            // A vacuum that fails (a statement timeout, say) costs the tables some bloat
            // until the next step, not this step its deliveries.
            match retention::vacuum_due_tables(&self.pool).await {
                Ok(vacuumed) if !vacuumed.is_empty() => {
                    tracing::debug!(tables = ?vacuumed, "vacuumed");
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(error = %crate::telemetry::describe(&error), "vacuum after retention failed");
                }
            }
            turn.finish(&step);
            let deleted = step.deleted;
            outcome.purged += deleted.notifications_deleted;
            outcome.webhook_events_purged += deleted.webhook_events_deleted;
            if deleted != retention::Deleted::default() {
                tracing::info!(
                    notifications = deleted.notifications_deleted,
                    webhook_events = deleted.webhook_events_deleted,
                    "retention deleted finished work"
                );
            }
        }
        self.expand_campaigns().await;
        if due(&self.last_finish, FINISH_INTERVAL) {
            let db = self.pool.get().await?;
            let finished = content::campaigns::finish(&db).await?;
            if finished > 0 {
                tracing::info!(finished, "campaigns done");
            }
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
        Ok(outcome)
    }

    /// Expands campaign chunks for at most [`EXPANSION_BUDGET`], in one lane at a time. A
    /// failure is logged, not the step's: sending goes on, and the chunk that failed is
    /// expanded again by a later step.
    async fn expand_campaigns(&self) {
        let idle = self
            .nothing_to_expand
            .lock()
            .ok()
            .and_then(|at| *at)
            .is_some_and(|at| at.elapsed() < EXPANSION_IDLE_INTERVAL);
        if idle || self.expanding.swap(true, Ordering::AcqRel) {
            return;
        }
        let started = Instant::now();
        let mut recipients = 0;
        while started.elapsed() < EXPANSION_BUDGET {
            match content::campaigns::expand_chunk(
                &self.pool,
                &self.audience.secret,
                self.retry.max_attempts(),
            )
            .await
            {
                Ok(Some(chunk)) => recipients += chunk,
                Ok(None) => {
                    if let Ok(mut at) = self.nothing_to_expand.lock() {
                        *at = Some(Instant::now());
                    }
                    break;
                }
                Err(error) => {
                    tracing::warn!(error = %crate::telemetry::describe(&error), "campaign expansion failed; a later step resumes it");
                    break;
                }
            }
        }
        if recipients > 0 {
            tracing::info!(recipients, "campaign recipients expanded");
        }
        self.expanding.store(false, Ordering::Release);
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
