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

    let mut live: HashMap<String, (i64, Option<DateTime<Utc>>)> = HashMap::new();
    let mut holders: HashSet<Uuid> = HashSet::new();
    let mut now: Option<DateTime<Utc>> = None;
    for row in &rows {
        now = Some(row.try_get("now")?);
        // The one row of a batch whose recipients hold no reservation carries only the clock.
        let Some(reserved_at) = row.try_get::<_, Option<DateTime<Utc>>>("reserved_at")? else {
            continue;
        };
        let recipient: String = row.try_get("recipient")?;
        holders.insert(row.try_get("notification_id")?);
        let entry = live.entry(recipient).or_insert((0, None));
        entry.0 += 1;
        entry.1 = Some(
            entry
                .1
                .map_or(reserved_at, |oldest: DateTime<Utc>| oldest.min(reserved_at)),
        );
    }
    let now = now.unwrap_or_else(Utc::now);
    let window = TimeDelta::from_std(limit.window).unwrap_or(TimeDelta::MAX);

    let mut admission = Admission {
        admitted: Vec::new(),
        deferred: Vec::new(),
    };
    let mut reserve: Vec<&Claimed> = Vec::new();
    for claim in batch {
        let (count, oldest) = live.entry(claim.recipient.clone()).or_insert((0, None));
        if holders.contains(&claim.id) {
            admission.admitted.push(claim);
        } else if *count < limit.max_notifications {
            *count += 1;
            *oldest = Some(oldest.map_or(now, |o| o.min(now)));
            reserve.push(claim);
            admission.admitted.push(claim);
        } else {
            // A slot frees when the oldest reservation leaves the window.
            let frees_at = oldest.map_or(now, |o| o + window);
            admission.deferred.push((claim, frees_at));
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
