//! The worker's results, and recovery of claims whose worker died.

use std::time::Duration;

use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::{Claimed, count, millis};
use crate::notification::Status;
use crate::sql::{Statement, statement};

const RECORD: Statement = statement!("notifications/record");
const RECOVER_EXPIRED: Statement = statement!("notifications/recover_expired");

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
    pub fn status(&self) -> Status {
        match self {
            Disposition::Sent => Status::Sent,
            Disposition::Failed { .. } => Status::Failed,
            Disposition::Retry { .. } => Status::Pending,
            Disposition::DeadLettered { .. } => Status::DeadLettered,
        }
    }

    pub fn error(&self) -> Option<&str> {
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

/// Records a batch of results in one statement, each fenced on its claim token.
pub async fn record(
    db: &impl GenericClient,
    results: &[(&Claimed, Disposition)],
) -> Result<RecordSummary, tokio_postgres::Error> {
    let ids: Vec<Uuid> = results.iter().map(|(c, _)| c.id).collect();
    let tokens: Vec<Uuid> = results.iter().map(|(c, _)| c.token).collect();
    let statuses: Vec<Status> = results.iter().map(|(_, d)| d.status()).collect();
    let errors: Vec<Option<&str>> = results.iter().map(|(_, d)| d.error()).collect();
    let delays: Vec<i64> = results
        .iter()
        .map(|(_, d)| match d {
            Disposition::Retry { delay, .. } => millis(*delay),
            _ => 0,
        })
        .collect();
    let statement = RECORD.prepare(db).await?;
    let row = db
        .query_one(&statement, &[&ids, &tokens, &statuses, &errors, &delays])
        .await?;
    Ok(RecordSummary {
        recorded: count(&row, "recorded")?,
        events: count(&row, "events")?,
    })
}

/// What one recovery pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Back to PENDING, due now (including reconciliation grants).
    pub requeued: u64,
    /// Expired a second time on their reconciliation attempt.
    pub dead_lettered: u64,
}

/// Returns up to `limit` expired claims to the queue; see the statement for the
/// reconciliation rule.
pub async fn recover_expired(
    db: &impl GenericClient,
    visibility_timeout: Duration,
    limit: i64,
) -> Result<Recovered, tokio_postgres::Error> {
    let statement = RECOVER_EXPIRED.prepare(db).await?;
    let seconds = i64::try_from(visibility_timeout.as_secs()).unwrap_or(i64::MAX);
    let row = db.query_one(&statement, &[&seconds, &limit]).await?;
    Ok(Recovered {
        requeued: count(&row, "requeued")?,
        dead_lettered: count(&row, "dead_lettered")?,
    })
}
