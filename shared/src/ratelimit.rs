//! The per-recipient rolling-window limit: at most N admissions per recipient in any
//! window, decided for a whole claimed batch inside one short transaction. The only SQL
//! on `rate_limit_reservations` lives here.
//!
//! Two sweepers admitting for one recipient at once would both see "one slot left", so
//! admission takes a transaction-scoped advisory lock per recipient first, always in
//! ascending key order so that two batches sharing recipients cannot deadlock.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use deadpool_postgres::GenericClient;
use uuid::Uuid;

use crate::config::RateLimitConfig;
use crate::queue::{Claimed, millis};
use crate::sql::{Statement, statement};

const LOCK_RECIPIENTS: Statement = statement!("rate_limit_reservations/lock_recipients");
const LIVE: Statement = statement!("rate_limit_reservations/live");
const RESERVE: Statement = statement!("rate_limit_reservations/reserve");
const PRUNE: Statement = statement!("rate_limit_reservations/prune");

/// The outcome for one batch: what may be sent now, and what waits until a slot frees.
#[derive(Debug)]
pub struct Admission<'a> {
    pub admitted: Vec<&'a Claimed>,
    pub deferred: Vec<(&'a Claimed, DateTime<Utc>)>,
}

/// One recipient's window while a batch is admitted.
#[derive(Debug, Default)]
struct Window {
    /// Times of its live reservations, oldest first (new admissions at the end).
    slots: Vec<DateTime<Utc>>,
    /// Notifications refused so far in this batch.
    refused: usize,
}

impl Window {
    /// When the next refused notification may go: the k-th refused waits for the k-th
    /// oldest slot to leave the window, and past the last slot for the slot the deferral
    /// before it will have taken, a window later. So a backlog is spread over the slots
    /// as they free, instead of every deferral waking at the same instant.
    fn next_free(&mut self, length: TimeDelta) -> DateTime<Utc> {
        let k = self.refused;
        self.refused += 1;
        let n = self.slots.len().max(1);
        let rounds = i32::try_from(k / n + 1).unwrap_or(i32::MAX);
        let oldest = self.slots.get(k % n).copied().unwrap_or_else(Utc::now);
        length
            .checked_mul(rounds)
            .and_then(|wait| oldest.checked_add_signed(wait))
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }
}

/// Locks the recipients of a batch for the rest of the transaction, in a fixed order.
pub async fn lock_recipients(
    tx: &impl GenericClient,
    recipients: &[&str],
) -> Result<(), tokio_postgres::Error> {
    let statement = LOCK_RECIPIENTS.prepare(tx).await?;
    tx.execute(&statement, &[&recipients]).await?;
    Ok(())
}

/// Decides admission for `batch` (in claim order) and records the new reservations.
/// Must run inside the transaction that holds [`lock_recipients`] for these recipients.
pub async fn admit<'a>(
    tx: &impl GenericClient,
    limit: &RateLimitConfig,
    batch: &[&'a Claimed],
) -> Result<Admission<'a>, tokio_postgres::Error> {
    if batch.is_empty() {
        return Ok(Admission {
            admitted: Vec::new(),
            deferred: Vec::new(),
        });
    }
    let window_ms = millis(limit.window);
    let recipients: Vec<&str> = batch.iter().map(|c| c.recipient.as_str()).collect();

    // Live reservations of these recipients (expired ones are pruned on the way).
    let statement = LIVE.prepare(tx).await?;
    let rows = tx.query(&statement, &[&recipients, &window_ms]).await?;

    // Per recipient: the times of its live reservations, oldest first.
    let mut windows: HashMap<String, Window> = HashMap::new();
    let mut holders: HashSet<Uuid> = HashSet::new();
    let mut now: Option<DateTime<Utc>> = None;
    for row in &rows {
        now = Some(row.try_get("now")?);
        // The one row of a batch whose recipients hold no reservation carries only the clock.
        let Some(reserved_at) = row.try_get::<_, Option<DateTime<Utc>>>("reserved_at")? else {
            continue;
        };
        holders.insert(row.try_get("notification_id")?);
        let recipient: String = row.try_get("recipient")?;
        windows
            .entry(recipient)
            .or_default()
            .slots
            .push(reserved_at);
    }
    for window in windows.values_mut() {
        window.slots.sort();
    }
    let now = now.unwrap_or_else(Utc::now);
    let length = TimeDelta::from_std(limit.window).unwrap_or(TimeDelta::MAX);
    let max = usize::try_from(limit.max_notifications).unwrap_or(usize::MAX);

    let mut admission = Admission {
        admitted: Vec::new(),
        deferred: Vec::new(),
    };
    let mut reserve: Vec<&Claimed> = Vec::new();
    for claim in batch {
        let window = windows.entry(claim.recipient.clone()).or_default();
        if holders.contains(&claim.id) {
            admission.admitted.push(claim);
        } else if window.slots.len() < max {
            window.slots.push(now);
            reserve.push(claim);
            admission.admitted.push(claim);
        } else {
            admission.deferred.push((claim, window.next_free(length)));
        }
    }

    if !reserve.is_empty() {
        let ids: Vec<Uuid> = reserve.iter().map(|c| c.id).collect();
        let owners: Vec<&str> = reserve.iter().map(|c| c.recipient.as_str()).collect();
        let statement = RESERVE.prepare(tx).await?;
        tx.execute(&statement, &[&ids, &owners]).await?;
    }
    Ok(admission)
}

/// Deletes reservations that left the window for every recipient (admission prunes only
/// the recipients it sees). Bounded per call.
pub async fn prune_expired(
    db: &impl GenericClient,
    window: Duration,
) -> Result<u64, tokio_postgres::Error> {
    let window_ms = millis(window);
    let statement = PRUNE.prepare(db).await?;
    db.execute(&statement, &[&window_ms]).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deferrals_are_spread_over_the_slots_as_they_free() {
        let t0 = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).expect("time");
        let second = TimeDelta::seconds(1);
        let mut window = Window {
            slots: vec![t0, t0 + second * 10],
            refused: 0,
        };
        let hour = TimeDelta::hours(1);
        let waits: Vec<DateTime<Utc>> = (0..5).map(|_| window.next_free(hour)).collect();
        assert_eq!(
            waits,
            [
                t0 + hour,
                t0 + second * 10 + hour,
                t0 + hour * 2,
                t0 + second * 10 + hour * 2,
                t0 + hour * 3,
            ]
        );
    }
}
