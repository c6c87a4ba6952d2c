//! Operator redrive: FAILED or DEAD_LETTERED back to PENDING with a fresh set of attempts.
//! Each redrive bumps `redrive_count`, the generation that keys the next webhook event.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::{NOTIFICATION_COLUMNS, WAKE_CHANNEL, from_row};
use crate::notification::{Channel, Notification, Status};

/// The columns a redrive sets, shared by the single and the bulk statement.
const REDRIVE_SET: &str = "status = 'PENDING', next_attempt_at = now(), attempt_count = 0,
    max_attempts = $1, failed_at = NULL, dead_lettered_at = NULL, reconciliation_granted = false,
    redrive_count = n.redrive_count + 1, last_redriven_at = now(), updated_at = now()";

/// Redrives one notification if it is FAILED or DEAD_LETTERED. Otherwise returns it as
/// it is (`None` when it does not exist), and the caller answers 409 or 404.
pub async fn redrive_one(
    db: &impl GenericClient,
    id: Uuid,
    max_attempts: i32,
) -> Result<Option<(Notification, bool)>, tokio_postgres::Error> {
    let sql = format!(
        "WITH redriven AS (
            UPDATE notifications n SET {REDRIVE_SET}
            WHERE n.id = $2 AND n.status IN ('FAILED', 'DEAD_LETTERED')
            RETURNING {NOTIFICATION_COLUMNS}
        ), woken AS (SELECT pg_notify('{WAKE_CHANNEL}', '') FROM redriven)
        SELECT {NOTIFICATION_COLUMNS}, (SELECT count(*) FROM woken) FROM redriven"
    );
    let statement = db.prepare_cached(&sql).await?;
    if let Some(row) = db.query_opt(&statement, &[&max_attempts, &id]).await? {
        return Ok(Some((from_row(&row)?, true)));
    }
    Ok(super::find(db, id, None).await?.map(|n| (n, false)))
}

/// Which notifications a bulk redrive takes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RedriveFilter {
    /// FAILED or DEAD_LETTERED.
    pub status: Option<Status>,
    pub recipient: Option<String>,
    pub channel: Option<Channel>,
    /// Case-insensitive substring of `last_error`.
    pub error_contains: Option<String>,
    pub created_before: Option<DateTime<Utc>>,
    pub created_after: Option<DateTime<Utc>>,
}

impl RedriveFilter {
    fn status(&self) -> &'static str {
        self.status.unwrap_or(Status::DeadLettered).as_str()
    }
}

/// The filter as SQL over `n`, with its six parameters numbered from `$first`.
fn matches(first: usize) -> String {
    let [status, recipient, channel, error, before, after] = std::array::from_fn(|i| first + i);
    format!(
        "n.status = ${status}
         AND (${recipient}::text IS NULL OR n.recipient = ${recipient})
         AND (${channel}::text IS NULL OR n.channel = ${channel})
         AND (${error}::text IS NULL OR strpos(lower(coalesce(n.last_error, '')), lower(${error})) > 0)
         AND (${before}::timestamptz IS NULL OR n.created_at < ${before})
         AND (${after}::timestamptz IS NULL OR n.created_at > ${after})"
    )
}

/// Redrives up to `limit` matching notifications, oldest first, in one statement that
/// skips rows another redrive holds; concurrent calls never redrive one twice. Returns
/// how many were redriven.
pub async fn redrive_matching(
    db: &impl GenericClient,
    filter: &RedriveFilter,
    limit: i64,
    max_attempts: i32,
) -> Result<u64, tokio_postgres::Error> {
    let sql = format!(
        "WITH picked AS (
            SELECT n.id FROM notifications n WHERE {filter}
            ORDER BY n.created_at, n.id LIMIT $8 FOR UPDATE SKIP LOCKED
        ), redriven AS (
            UPDATE notifications n SET {REDRIVE_SET}
            FROM picked WHERE n.id = picked.id
            RETURNING n.id
        ), woken AS (
            SELECT pg_notify('{WAKE_CHANNEL}', '') WHERE EXISTS (SELECT 1 FROM redriven)
        )
        SELECT (SELECT count(*) FROM redriven), (SELECT count(*) FROM woken)",
        filter = matches(2)
    );
    let statement = db.prepare_cached(&sql).await?;
    let (status, channel) = (filter.status(), filter.channel.map(Channel::as_str));
    let mut params = filter_params(filter, &status, &channel);
    params.insert(0, &max_attempts);
    params.push(&limit);
    let row = db.query_one(&statement, &params).await?;
    Ok(u64::try_from(row.try_get::<_, i64>(0)?).unwrap_or(0))
}

/// How many notifications still match the filter.
pub async fn count_matching(
    db: &impl GenericClient,
    filter: &RedriveFilter,
) -> Result<u64, tokio_postgres::Error> {
    let sql = format!("SELECT count(*) FROM notifications n WHERE {}", matches(1));
    let statement = db.prepare_cached(&sql).await?;
    let (status, channel) = (filter.status(), filter.channel.map(Channel::as_str));
    let row = db
        .query_one(&statement, &filter_params(filter, &status, &channel))
        .await?;
    Ok(u64::try_from(row.try_get::<_, i64>(0)?).unwrap_or(0))
}

/// The six values [`matches`] numbers, in its order.
fn filter_params<'a>(
    filter: &'a RedriveFilter,
    status: &'a &'static str,
    channel: &'a Option<&'static str>,
) -> Vec<&'a (dyn ToSql + Sync)> {
    vec![
        status,
        &filter.recipient,
        channel,
        &filter.error_contains,
        &filter.created_before,
        &filter.created_after,
    ]
}
