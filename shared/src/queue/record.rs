//! The worker's results, with their attempt history, and recovery of claims whose worker
//! died.

use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::{Claimed, count, millis};
use crate::notification::Status;
use crate::provider::Call;
use crate::sql::{Statement, statement};

const RECORD: Statement = statement!("notifications/record");
const RECOVER_EXPIRED: Statement = statement!("notifications/recover_expired");

/// What the worker decided for one claimed notification after the provider answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Disposition {
    Sent {
        message_id: Option<String>,
    },
    /// FAILED; with `suppress` the address joins the suppression list.
    Failed {
        error: String,
        suppress: bool,
    },
    /// Back to PENDING after `delay`; the attempt stays counted.
    Retry {
        error: String,
        delay: Duration,
    },
    DeadLettered {
        error: String,
    },
    /// Back to PENDING after `delay` with the attempt refunded: the provider refused to
    /// work for now (throttled) or for us at all (misconfigured), not this message.
    Refund {
        error: String,
        delay: Duration,
    },
}

impl Disposition {
    pub fn sent() -> Self {
        Disposition::Sent { message_id: None }
    }

    pub fn status(&self) -> Status {
        match self {
            Disposition::Sent { .. } => Status::Sent,
            Disposition::Failed { .. } => Status::Failed,
            Disposition::Retry { .. } | Disposition::Refund { .. } => Status::Pending,
            Disposition::DeadLettered { .. } => Status::DeadLettered,
        }
    }

    pub fn error(&self) -> Option<&str> {
        match self {
            Disposition::Sent { .. } => None,
            Disposition::Failed { error, .. }
            | Disposition::Retry { error, .. }
            | Disposition::DeadLettered { error }
            | Disposition::Refund { error, .. } => Some(error),
        }
    }

    fn delay(&self) -> Duration {
        match self {
            Disposition::Retry { delay, .. } | Disposition::Refund { delay, .. } => *delay,
            _ => Duration::ZERO,
        }
    }
}

/// One claimed notification after its provider call: what happens next, the call as
/// attempt history keeps it, and (for an invalid recipient) the keyed hash of the address
/// the suppression list gains.
#[derive(Debug, Clone)]
pub struct Settled<'a> {
    pub claim: &'a Claimed,
    pub disposition: Disposition,
    pub call: &'a Call,
    pub suppress_hash: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordSummary {
    /// Rows this worker still held and therefore changed.
    pub recorded: u64,
    /// Webhook events written (one per SENT / FAILED / DEAD_LETTERED).
    pub events: u64,
    /// Results left unrecorded because another worker took their claims over while the
    /// calls were out (their lease had expired): what became of them is its to say.
    pub taken_over: Vec<Uuid>,
}

impl RecordSummary {
    /// Whether the result for `id` was left unrecorded, its claim taken over.
    pub fn was_taken_over(&self, id: Uuid) -> bool {
        self.taken_over.contains(&id)
    }
}

/// Records a batch of results in one statement, each fenced on its claim token, with
/// one attempt row per provider call.
pub async fn record(
    db: &impl GenericClient,
    worker_id: &str,
    results: &[Settled<'_>],
) -> Result<RecordSummary, tokio_postgres::Error> {
    let ids: Vec<Uuid> = results.iter().map(|r| r.claim.id).collect();
    let tokens: Vec<Uuid> = results.iter().map(|r| r.claim.token).collect();
    let statuses: Vec<Status> = results.iter().map(|r| r.disposition.status()).collect();
    let errors: Vec<Option<&str>> = results.iter().map(|r| r.disposition.error()).collect();
    let delays: Vec<i64> = results
        .iter()
        .map(|r| millis(r.disposition.delay()))
        .collect();
    let refunds: Vec<bool> = results
        .iter()
        .map(|r| matches!(r.disposition, Disposition::Refund { .. }))
        .collect();
    let outcomes: Vec<&str> = results.iter().map(|r| r.call.outcome.class()).collect();
    let message_ids: Vec<Option<&str>> = results
        .iter()
        .map(|r| match &r.disposition {
            Disposition::Sent { message_id } => message_id.as_deref(),
            _ => None,
        })
        .collect();
    let started: Vec<DateTime<Utc>> = results.iter().map(|r| r.call.started_at).collect();
    let finished: Vec<DateTime<Utc>> = results.iter().map(|r| r.call.finished_at).collect();
    let suppress: Vec<Option<&str>> = results.iter().map(|r| r.suppress_hash.as_deref()).collect();
    let statement = RECORD.prepare(db).await?;
    let row = db
        .query_one(
            &statement,
            &[
                &ids,
                &tokens,
                &statuses,
                &errors,
                &delays,
                &refunds,
                &outcomes,
                &message_ids,
                &started,
                &finished,
                &suppress,
                &worker_id,
            ],
        )
        .await?;
    Ok(RecordSummary {
        recorded: count(&row, "recorded")?,
        events: count(&row, "events")?,
        taken_over: row.try_get("taken_over")?,
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
