//! Operator redrive: FAILED or DEAD_LETTERED back to PENDING with a fresh set of attempts.
//! Each redrive bumps `redrive_count`, the generation that keys the next webhook event.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::{count, find, from_row};
use crate::notification::{Channel, Notification, Status};
use crate::sql::{Statement, statement};

const REDRIVE_ONE: Statement = statement!("notifications/redrive_one");
const REDRIVE_MATCHING: Statement = statement!("notifications/redrive_matching");
const COUNT_MATCHING: Statement = statement!("notifications/count_matching");

/// Redrives one notification if it is FAILED or DEAD_LETTERED and its recipient was not
/// erased. Otherwise returns it as it is (`None` when it does not exist), and the caller
/// answers 409 or 404.
pub async fn redrive_one(
    db: &impl GenericClient,
    id: Uuid,
    max_attempts: i32,
) -> Result<Option<(Notification, bool)>, tokio_postgres::Error> {
    let statement = REDRIVE_ONE.prepare(db).await?;
    if let Some(row) = db.query_opt(&statement, &[&max_attempts, &id]).await? {
        return Ok(Some((from_row(&row)?, true)));
    }
    Ok(find(db, id, None).await?.map(|n| (n, false)))
}

/// Which notifications a bulk redrive takes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RedriveFilter {
    /// FAILED or DEAD_LETTERED (DEAD_LETTERED when not given).
    pub status: Option<Status>,
    pub recipient: Option<String>,
    pub channel: Option<Channel>,
    /// Case-insensitive substring of `last_error`.
    pub error_contains: Option<String>,
    pub created_before: Option<DateTime<Utc>>,
    pub created_after: Option<DateTime<Utc>>,
}

impl RedriveFilter {
    fn status(&self) -> Status {
        self.status.unwrap_or(Status::DeadLettered)
    }

    /// The six parameters `$1`–`$6` of both filter statements.
    fn parameters<'a>(&'a self, status: &'a Status) -> [&'a (dyn ToSql + Sync); 6] {
        [
            status,
            &self.recipient,
            &self.channel,
            &self.error_contains,
            &self.created_before,
            &self.created_after,
        ]
    }
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
    let status = filter.status();
    let mut parameters = filter.parameters(&status).to_vec();
    parameters.extend([&max_attempts as &(dyn ToSql + Sync), &limit]);
    let statement = REDRIVE_MATCHING.prepare(db).await?;
    let row = db.query_one(&statement, &parameters).await?;
    count(&row, "redriven")
}

/// How many notifications still match the filter.
pub async fn count_matching(
    db: &impl GenericClient,
    filter: &RedriveFilter,
) -> Result<u64, tokio_postgres::Error> {
    let status = filter.status();
    let statement = COUNT_MATCHING.prepare(db).await?;
    let row = db
        .query_one(&statement, &filter.parameters(&status))
        .await?;
    count(&row, "count")
}
