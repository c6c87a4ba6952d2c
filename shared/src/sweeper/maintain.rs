//! The housekeeping a step does now and then, each part at its own interval: pruning old
//! reservations, expiring notifications, retention, campaign completion, recovering
//! expired claims; and campaign expansion, which runs beside the steps.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{SweepOutcome, Sweeper};
use crate::stop::StopSignal;
use crate::{content, queue, ratelimit, retention};

/// Expired claims returned per recovery statement.
const RECOVERY_BATCH: i64 = 1000;
/// How often PENDING notifications past their `expiresAt` are marked EXPIRED (the claim
/// skips them meanwhile), and how many per statement.
const EXPIRY_INTERVAL: Duration = Duration::from_secs(1);
const EXPIRY_BATCH: i64 = 1000;
/// How often finished campaigns are looked for.
const FINISH_INTERVAL: Duration = Duration::from_secs(1);
/// After finding no campaign to expand, the expansion does not look again for this long:
/// a new campaign waits for at most this before its first chunk (one cheap look, a few
/// times a second, while none waits).
pub(super) const EXPANSION_IDLE_INTERVAL: Duration = Duration::from_millis(250);
/// How often reservations of recipients no batch has seen lately are swept away.
const PRUNE_INTERVAL: Duration = Duration::from_secs(60);
/// How often a connection's prepared statements are prepared again. PostgreSQL caches a
/// generic plan per prepared statement, made for the tables as they were then: a claim
/// planned while the queue was nearly empty joins it to `notifications` by a sequential
/// scan per row, and once a campaign has added 100,000 rows each claim takes seconds until
/// an ANALYZE replaces the plan (B9 saw four minutes without a delivery). Prepared again,
/// a statement is planned for the tables' present size.
const REPLAN_INTERVAL: Duration = Duration::from_secs(3);

impl Sweeper {
    /// A pooled connection whose prepared statements are at most [`REPLAN_INTERVAL`] old.
    /// Only a connection this step holds is cleared, never another's: a pipeline
    /// ([`crate::db::PipelinedTransaction`]) relies on its statements staying prepared
    /// between warming them and sending it.
    pub(super) async fn connection(&self) -> anyhow::Result<deadpool_postgres::Object> {
        let db = self.pool.get().await?;
        let key = std::sync::Arc::as_ptr(&db.statement_cache) as usize;
        let now = Instant::now();
        if let Ok(mut prepared) = self.prepared_at.lock() {
            // Connections closed and opened again leave keys behind: forget them now and
            // then (a connection forgotten is only cleared one interval later).
            if prepared.len() > 4 * self.pool_size().max(1) {
                prepared.clear();
            }
            match prepared.get(&key) {
                Some(at) if now.duration_since(*at) < REPLAN_INTERVAL => {}
                Some(_) => {
                    db.statement_cache.clear();
                    prepared.insert(key, now);
                }
                // A connection seen for the first time has prepared nothing of this age.
                None => {
                    prepared.insert(key, now);
                }
            }
        }
        Ok(db)
    }

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

    /// Expands campaign chunks while there are any; returns how many recipients it
    /// expanded (0: none waiting, or a failure). A failure is logged, not the sweeper's:
    /// sending goes on, and the chunk that failed is expanded again by the next call. It
    /// runs on a task of its own beside the lanes ([`super::run`]): lanes busy delivering
    /// (a campaign's own notifications, say) must not hold up the rest of its audience.
    pub(super) async fn expand_campaigns(&self, stop: &StopSignal) -> usize {
        let mut recipients = 0;
        // One connection for every chunk of this call (see `Expander::expand_chunk`).
        let mut db = match self.pool.get().await {
            Ok(db) => db,
            Err(error) => {
                tracing::warn!(error = %crate::telemetry::describe(&anyhow::Error::from(error)), "campaign expansion found no connection; it resumes from its checkpoint");
                return 0;
            }
        };
        let mut expander =
            content::campaigns::Expander::new(&self.audience.secret, self.retry.max_attempts());
        while !stop.is_stopped() {
            match expander.expand_chunk(&mut db, &self.pool).await {
                Ok(Some(chunk)) => recipients += chunk,
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(error = %crate::telemetry::describe(&error), "campaign expansion failed; it resumes from its checkpoint");
                    break;
                }
            }
        }
        if recipients > 0 {
            tracing::info!(recipients, "campaign recipients expanded");
        }
        recipients
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
