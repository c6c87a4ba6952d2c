//! The worker's statements. Each handles a whole claimed batch in one round trip.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde_json::Value;
use std::time::Duration;
use uuid::Uuid;

use crate::notification::{Channel, Priority, Status};

/// A notification this worker holds: PROCESSING with `token`.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: Uuid,
    pub token: Uuid,
    pub recipient: String,
    pub channel: Channel,
    pub priority: Priority,
    pub payload: Value,
    /// Already counts this attempt.
    pub attempt_count: i32,
    pub max_attempts: i32,
    pub next_attempt_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
}

impl Claimed {
    pub fn is_last_attempt(&self) -> bool {
        self.attempt_count >= self.max_attempts
    }
}

/// Claims up to `limit` due notifications: HIGH, then NORMAL, then LOW; within a priority
/// the longest-due first, then the oldest. Each priority is read from the top of the
/// partial claim index, so future and finished rows are never scanned. The attempt is
/// counted here, so a notification that crashes every worker still runs out of attempts.
/// The statement commits on its own: no lock outlives it.
pub async fn claim(
    db: &impl GenericClient,
    worker_id: &str,
    limit: i64,
    lease: Duration,
) -> Result<Vec<Claimed>, tokio_postgres::Error> {
    const DUE: &str =
        "status = 'PENDING' AND next_attempt_at <= now() AND attempt_count < max_attempts";
    let sql = format!(
        "WITH high AS (
            SELECT id FROM notifications WHERE priority = 0 AND {DUE}
            ORDER BY next_attempt_at, created_at LIMIT $1 FOR UPDATE SKIP LOCKED
        ), normal AS (
            SELECT id FROM notifications WHERE priority = 1 AND {DUE}
            ORDER BY next_attempt_at, created_at
            LIMIT $1 - (SELECT count(*) FROM high) FOR UPDATE SKIP LOCKED
        ), low AS (
            SELECT id FROM notifications WHERE priority = 2 AND {DUE}
            ORDER BY next_attempt_at, created_at
            LIMIT $1 - (SELECT count(*) FROM high) - (SELECT count(*) FROM normal) FOR UPDATE SKIP LOCKED
        ), picked AS (
            SELECT id FROM high UNION ALL SELECT id FROM normal UNION ALL SELECT id FROM low
        )
        UPDATE notifications n
        SET status = 'PROCESSING', claim_token = gen_random_uuid(), claimed_by = $2,
            lease_expires_at = now() + $3::int8 * interval '1 millisecond',
            attempt_count = n.attempt_count + 1, updated_at = now()
        FROM picked WHERE n.id = picked.id
        RETURNING n.id, n.claim_token, n.recipient, n.channel, n.priority, n.payload,
                  n.attempt_count, n.max_attempts, n.next_attempt_at, n.created_at"
    );
    let statement = db.prepare_cached(&sql).await?;
    let lease_ms = millis(lease);
    let rows = db
        .query(&statement, &[&limit, &worker_id, &lease_ms])
        .await?;
    let mut claimed = Vec::with_capacity(rows.len());
    for row in rows {
        let channel: String = row.try_get("channel")?;
        let priority: i16 = row.try_get("priority")?;
        claimed.push(Claimed {
            id: row.try_get("id")?,
            token: row.try_get("claim_token")?,
            recipient: row.try_get("recipient")?,
            // The CHECK constraints make other values impossible.
            channel: Channel::parse(&channel).unwrap_or(Channel::Email),
            priority: Priority::from_rank(priority).unwrap_or(Priority::Low),
            payload: row.try_get("payload")?,
            attempt_count: row.try_get("attempt_count")?,
            max_attempts: row.try_get("max_attempts")?,
            next_attempt_at: row.try_get("next_attempt_at")?,
            created_at: row.try_get("created_at")?,
        });
    }
    // UPDATE ... RETURNING has no order of its own; restore the claim order.
    claimed.sort_by_key(|c| (c.priority, c.next_attempt_at, c.created_at));
    Ok(claimed)
}

/// The start fence, just before the provider call: returns the ids this worker still
/// holds; a missing id was lost (its lease expired and another worker recovered it) and
/// must not be sent. A claim whose lease has less than `needed` left is renewed to a full
/// `lease`; the others are only read, so the usual fence writes nothing.
pub async fn start_fence(
    db: &impl GenericClient,
    batch: &[&Claimed],
    needed: Duration,
    lease: Duration,
) -> Result<Vec<Uuid>, tokio_postgres::Error> {
    let ids: Vec<Uuid> = batch.iter().map(|c| c.id).collect();
    let tokens: Vec<Uuid> = batch.iter().map(|c| c.token).collect();
    let statement = db
        .prepare_cached(
            "WITH held AS (
                SELECT n.id, n.claim_token, n.lease_expires_at >= now() + $3::int8 * interval '1 millisecond' AS enough
                FROM notifications n JOIN unnest($1::uuid[], $2::uuid[]) AS mine(id, token)
                     ON n.id = mine.id AND n.claim_token = mine.token
                WHERE n.status = 'PROCESSING'
            ), renewed AS (
                UPDATE notifications n
                SET lease_expires_at = now() + $4::int8 * interval '1 millisecond'
                FROM held
                WHERE NOT held.enough AND n.id = held.id AND n.claim_token = held.claim_token
                  AND n.status = 'PROCESSING'
                RETURNING n.id
            )
            SELECT id FROM held WHERE enough
            UNION ALL
            SELECT id FROM renewed",
        )
        .await?;
    let rows = db
        .query(
            &statement,
            &[&ids, &tokens, &millis(needed), &millis(lease)],
        )
        .await?;
    rows.iter().map(|row| row.try_get(0)).collect()
}

/// What the worker decided for one claimed notification after the provider answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Disposition {
    Sent,
    Failed {
        error: String,
    },
    /// Back to PENDING after `delay`; the attempt stays counted.
    Retry {
        error: String,
        delay: Duration,
    },
    DeadLettered {
        error: String,
    },
}

impl Disposition {
    fn status(&self) -> Status {
        match self {
            Disposition::Sent => Status::Sent,
            Disposition::Failed { .. } => Status::Failed,
            Disposition::Retry { .. } => Status::Pending,
            Disposition::DeadLettered { .. } => Status::DeadLettered,
        }
    }

    fn error(&self) -> Option<&str> {
        match self {
            Disposition::Sent => None,
            Disposition::Failed { error }
            | Disposition::Retry { error, .. }
            | Disposition::DeadLettered { error } => Some(error),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordSummary {
    /// Rows this worker still held and therefore changed.
    pub recorded: u64,
    /// Webhook events written (one per SENT / FAILED / DEAD_LETTERED).
    pub events: u64,
}

/// Records a batch of results in one statement: each row only if still PROCESSING with
/// the token given, clearing the claim; final outcomes write their webhook event in the
/// same statement, so neither exists without the other.
pub async fn record(
    db: &impl GenericClient,
    results: &[(&Claimed, Disposition)],
) -> Result<RecordSummary, tokio_postgres::Error> {
    let ids: Vec<Uuid> = results.iter().map(|(c, _)| c.id).collect();
    let tokens: Vec<Uuid> = results.iter().map(|(c, _)| c.token).collect();
    let statuses: Vec<&str> = results.iter().map(|(_, d)| d.status().as_str()).collect();
    let errors: Vec<Option<&str>> = results.iter().map(|(_, d)| d.error()).collect();
    let delays: Vec<i64> = results
        .iter()
        .map(|(_, d)| match d {
            Disposition::Retry { delay, .. } => millis(*delay),
            _ => 0,
        })
        .collect();
    let statement = db
        .prepare_cached(
            "WITH results AS (
                SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::int8[])
                    AS r(id, token, status, error, retry_delay_ms)
            ), recorded AS (
                UPDATE notifications n
                SET status = r.status,
                    last_error = r.error,
                    next_attempt_at = CASE WHEN r.status = 'PENDING'
                        THEN now() + r.retry_delay_ms * interval '1 millisecond'
                        ELSE n.next_attempt_at END,
                    sent_at = CASE WHEN r.status = 'SENT' THEN now() END,
                    failed_at = CASE WHEN r.status = 'FAILED' THEN now() END,
                    dead_lettered_at = CASE WHEN r.status = 'DEAD_LETTERED' THEN now() END,
                    claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
                    updated_at = now()
                FROM results r
                WHERE n.id = r.id AND n.claim_token = r.token AND n.status = 'PROCESSING'
                RETURNING n.id, n.status, n.attempt_count, n.redrive_count
            ), events AS (
                INSERT INTO webhook_events (id, notification_id, status, attempt_count,
                                            redrive_generation, occurred_at)
                SELECT gen_random_uuid(), id, status, attempt_count, redrive_count, now()
                FROM recorded WHERE status IN ('SENT', 'FAILED', 'DEAD_LETTERED')
                ON CONFLICT (notification_id, status, redrive_generation) DO NOTHING
                RETURNING 1
            )
            SELECT (SELECT count(*) FROM recorded), (SELECT count(*) FROM events)",
        )
        .await?;
    let row = db
        .query_one(&statement, &[&ids, &tokens, &statuses, &errors, &delays])
        .await?;
    Ok(RecordSummary {
        recorded: u64::try_from(row.try_get::<_, i64>(0)?).unwrap_or(0),
        events: u64::try_from(row.try_get::<_, i64>(1)?).unwrap_or(0),
    })
}

/// Hands claims back untried: PENDING, attempt refunded, due at the given time (`None` =
/// now; a time means a rate-limit deferral and is counted as one). Used on shutdown, near a Lambda deadline, after an error before the provider was
/// called, and for rate-limit deferrals. Returns how many were still held.
pub async fn release(
    db: &impl GenericClient,
    batch: &[(&Claimed, Option<DateTime<Utc>>)],
) -> Result<u64, tokio_postgres::Error> {
    if batch.is_empty() {
        return Ok(0);
    }
    let ids: Vec<Uuid> = batch.iter().map(|(c, _)| c.id).collect();
    let tokens: Vec<Uuid> = batch.iter().map(|(c, _)| c.token).collect();
    let due: Vec<Option<DateTime<Utc>>> = batch.iter().map(|(_, due)| *due).collect();
    let statement = db
        .prepare_cached(
            "UPDATE notifications n
             SET status = 'PENDING', attempt_count = n.attempt_count - 1,
                 next_attempt_at = coalesce(held.due, now()),
                 rate_limit_deferrals = n.rate_limit_deferrals + (held.due IS NOT NULL)::int,
                 claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL, updated_at = now()
             FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS held(id, token, due)
             WHERE n.id = held.id AND n.claim_token = held.token AND n.status = 'PROCESSING'",
        )
        .await?;
    db.execute(&statement, &[&ids, &tokens, &due]).await
}

/// What one recovery pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Back to PENDING, due now (including reconciliation grants).
    pub requeued: u64,
    /// Expired a second time on their reconciliation attempt.
    pub dead_lettered: u64,
}

/// Returns expired claims to the queue. A claim that expired on its final attempt gets
/// one reconciliation attempt (the provider may have delivered; resending with the same
/// key confirms it); a second expiry dead-letters it with its webhook event.
pub async fn recover_expired(
    db: &impl GenericClient,
    visibility_timeout: Duration,
    limit: i64,
) -> Result<Recovered, tokio_postgres::Error> {
    let statement = db
        .prepare_cached(
            "WITH expired AS (
                SELECT id FROM notifications
                WHERE status = 'PROCESSING' AND lease_expires_at < now()
                ORDER BY lease_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
            ), recovered AS (
                UPDATE notifications n
                SET status = CASE WHEN n.attempt_count >= n.max_attempts AND n.reconciliation_granted
                                  THEN 'DEAD_LETTERED' ELSE 'PENDING' END,
                    dead_lettered_at = CASE WHEN n.attempt_count >= n.max_attempts
                                            AND n.reconciliation_granted THEN now() END,
                    max_attempts = CASE WHEN n.attempt_count >= n.max_attempts
                                        AND NOT n.reconciliation_granted
                                        THEN n.max_attempts + 1 ELSE n.max_attempts END,
                    reconciliation_granted = n.reconciliation_granted
                                             OR n.attempt_count >= n.max_attempts,
                    next_attempt_at = now(),
                    last_error = 'Claim expired after ' || $1::int8 || 's without completion',
                    claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL, updated_at = now()
                FROM expired WHERE n.id = expired.id
                RETURNING n.id, n.status, n.attempt_count, n.redrive_count
            ), events AS (
                INSERT INTO webhook_events (id, notification_id, status, attempt_count,
                                            redrive_generation, occurred_at)
                SELECT gen_random_uuid(), id, status, attempt_count, redrive_count, now()
                FROM recovered WHERE status = 'DEAD_LETTERED'
                ON CONFLICT (notification_id, status, redrive_generation) DO NOTHING
            )
            SELECT count(*) FILTER (WHERE status = 'PENDING'),
                   count(*) FILTER (WHERE status = 'DEAD_LETTERED')
            FROM recovered",
        )
        .await?;
    let seconds = i64::try_from(visibility_timeout.as_secs()).unwrap_or(i64::MAX);
    let row = db.query_one(&statement, &[&seconds, &limit]).await?;
    Ok(Recovered {
        requeued: u64::try_from(row.try_get::<_, i64>(0)?).unwrap_or(0),
        dead_lettered: u64::try_from(row.try_get::<_, i64>(1)?).unwrap_or(0),
    })
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}
