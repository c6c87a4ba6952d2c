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
#[derive(Debug, Default)]
pub struct Admission<'a> {
    pub admitted: Vec<&'a Claimed>,
    pub deferred: Vec<(&'a Claimed, DateTime<Utc>)>,
    /// The admitted that take a new reservation (the others hold one from an earlier try).
    pub reserve: Vec<&'a Claimed>,
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

/// The live reservations of a batch's recipients, read under their locks, and the
/// database clock.
#[derive(Debug)]
pub struct Reservations {
    now: DateTime<Utc>,
    /// Recipient, the notification holding the slot, and when it was taken.
    slots: Vec<(String, Uuid, DateTime<Utc>)>,
}

/// Prepares (once per connection) every statement admission runs, so that a pipeline of
/// them sends each at once and in order (see [`crate::db::PipelinedTransaction`]).
pub async fn prepare(db: &impl GenericClient) -> Result<(), tokio_postgres::Error> {
    tokio::try_join!(
        LOCK_RECIPIENTS.prepare(db),
        LIVE.prepare(db),
        RESERVE.prepare(db)
    )?;
    Ok(())
}

/// Locks `recipients` for the rest of the transaction, in a fixed order, then reads their
/// live reservations (pruning expired ones on the way). Both statements are sent at once,
/// the lock first: one round trip, and the read sees every reservation committed by a
/// transaction that held one of these locks before.
pub async fn lock_and_read(
    tx: &impl GenericClient,
    recipients: &[&str],
    window: Duration,
) -> Result<Reservations, tokio_postgres::Error> {
    let (lock, live) = tokio::try_join!(LOCK_RECIPIENTS.prepare(tx), LIVE.prepare(tx))?;
    let window_ms = millis(window);
    // `try_join` sends its first future's statement first.
    let ((), rows) = futures::future::try_join(
        async { tx.execute(&lock, &[&recipients]).await.map(drop) },
        tx.query(&live, &[&recipients, &window_ms]),
    )
    .await?;
    let mut reservations = Reservations {
        now: Utc::now(),
        slots: Vec::with_capacity(rows.len()),
    };
    for row in &rows {
        reservations.now = row.try_get("now")?;
        // The one row of a batch whose recipients hold no reservation carries only the clock.
        let Some(reserved_at) = row.try_get::<_, Option<DateTime<Utc>>>("reserved_at")? else {
            continue;
        };
        reservations.slots.push((
            row.try_get("recipient")?,
            row.try_get("notification_id")?,
            reserved_at,
        ));
    }
    Ok(reservations)
}

/// Decides admission for `batch` (in claim order) from the reservations read under the
/// recipients' locks. The admitted that hold no reservation yet are in
/// [`Admission::reserve`], for [`reserve`] in the same transaction.
pub fn admit<'a>(
    limit: &RateLimitConfig,
    reservations: Reservations,
    batch: &[&'a Claimed],
) -> Admission<'a> {
    // Per recipient: the times of its live reservations, oldest first.
    let mut windows: HashMap<String, Window> = HashMap::new();
    let mut holders: HashSet<Uuid> = HashSet::new();
    for (recipient, holder, reserved_at) in reservations.slots {
        holders.insert(holder);
        windows
            .entry(recipient)
            .or_default()
            .slots
            .push(reserved_at);
    }
    for window in windows.values_mut() {
        window.slots.sort();
    }
    let length = TimeDelta::from_std(limit.window).unwrap_or(TimeDelta::MAX);
    let max = usize::try_from(limit.max_notifications).unwrap_or(usize::MAX);

    let mut admission = Admission::default();
    for claim in batch {
        let window = windows.entry(claim.recipient.clone()).or_default();
        if holders.contains(&claim.id) {
            admission.admitted.push(claim);
        } else if window.slots.len() < max {
            window.slots.push(reservations.now);
            admission.reserve.push(claim);
            admission.admitted.push(claim);
        } else {
            admission.deferred.push((claim, window.next_free(length)));
        }
    }
    admission
}

/// Records the reservations of newly admitted notifications, reserved now.
pub async fn reserve(
    tx: &impl GenericClient,
    admitted: &[&Claimed],
) -> Result<(), tokio_postgres::Error> {
    if admitted.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = admitted.iter().map(|c| c.id).collect();
    let recipients: Vec<&str> = admitted.iter().map(|c| c.recipient.as_str()).collect();
    let statement = RESERVE.prepare(tx).await?;
    tx.execute(&statement, &[&ids, &recipients]).await?;
    Ok(())
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
