//! The only SQL on `webhook_events` outside the notification transitions that insert them:
//! claim due events under a lease, record a batch of dispatch outcomes, count for metrics.
//!
//! A claim counts the dispatch attempt; every later statement names the attempt it expects
//! (`id, dispatch_attempts`), so a drainer whose lease expired and was taken over changes
//! nothing.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use std::time::Duration;
use uuid::Uuid;

use crate::queue::millis;
use crate::sql::{Statement, statement};

const CLAIM: Statement = statement!("webhook_events/claim");
const RECORD: Statement = statement!("webhook_events/record");
const COUNTS: Statement = statement!("webhook_events/counts");
const DIGEST_OUTBOX: Statement = statement!("webhook_events/digest_outbox");
const LIST_FOR_NOTIFICATION: Statement = statement!("webhook_events/list_for_notification");

/// The `last_error` of an event whose lease expired on its final dispatch attempt.
pub const LEASE_EXPIRED_ON_FINAL_ATTEMPT: &str =
    "Lease expired on the final dispatch attempt; the drainer stopped without recording";

/// An event this drainer holds: DISPATCHING with `dispatch_attempts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedEvent {
    pub id: Uuid,
    /// `notification.sent`, `circuit.opened`, …
    pub kind: String,
    pub subject: Subject,
    pub occurred_at: DateTime<Utc>,
    /// Already counts this dispatch; the fence for [`record`].
    pub dispatch_attempts: i32,
}

/// What an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A notification's transition: its id, new status and attempt count then.
    Notification {
        id: Uuid,
        status: String,
        attempt_count: i32,
    },
    /// Anything else (a channel's circuit): the fields of the body, as written.
    Other(serde_json::Value),
}

/// What one claim statement returned.
#[derive(Debug, Clone, Default)]
pub struct Claim {
    /// Now DISPATCHING under this drainer's lease: send them.
    pub events: Vec<ClaimedEvent>,
    /// Found with an expired lease on their final attempt and given up instead.
    pub given_up: u64,
}

/// Claims up to `limit` due events for `lease`, oldest due first, including those whose
/// drainer died; an expired lease on the final attempt is given up instead (see the
/// statement).
pub async fn claim(
    db: &impl GenericClient,
    limit: i64,
    lease: Duration,
    max_attempts: i32,
) -> Result<Claim, tokio_postgres::Error> {
    let statement = CLAIM.prepare(db).await?;
    let rows = db
        .query(
            &statement,
            &[
                &limit,
                &millis(lease),
                &max_attempts,
                &LEASE_EXPIRED_ON_FINAL_ATTEMPT,
            ],
        )
        .await?;
    let mut claim = Claim::default();
    let mut ordered = Vec::with_capacity(rows.len());
    for row in rows {
        if row.try_get::<_, bool>("give_up")? {
            claim.given_up += 1;
            continue;
        }
        let due: DateTime<Utc> = row.try_get("next_dispatch_at")?;
        ordered.push((
            due,
            ClaimedEvent {
                id: row.try_get("id")?,
                kind: row.try_get("type")?,
                subject: match row.try_get::<_, Option<Uuid>>("notification_id")? {
                    Some(id) => Subject::Notification {
                        id,
                        status: row.try_get("status")?,
                        attempt_count: row.try_get("attempt_count")?,
                    },
                    None => Subject::Other(
                        row.try_get::<_, Option<serde_json::Value>>("body")?
                            .unwrap_or_default(),
                    ),
                },
                occurred_at: row.try_get("occurred_at")?,
                dispatch_attempts: row.try_get("dispatch_attempts")?,
            },
        ));
    }
    // UPDATE ... RETURNING has no order of its own; send the oldest events first.
    ordered.sort_by_key(|(due, event)| (*due, event.occurred_at));
    claim.events = ordered.into_iter().map(|(_, event)| event).collect();
    Ok(claim)
}

/// What happened to one claimed event.
#[derive(Debug, Clone, PartialEq)]
pub enum Dispatch {
    /// The receiver answered 2xx.
    Delivered,
    /// Failed with attempts left: PENDING again after `delay`.
    Retry { error: String, delay: Duration },
    /// Failed on the final attempt.
    GivenUp { error: String },
    /// Never sent (the drainer was stopping): PENDING, due now, attempt refunded.
    Released,
}

impl Dispatch {
    fn state(&self) -> &'static str {
        match self {
            Dispatch::Delivered => "DELIVERED",
            Dispatch::Retry { .. } | Dispatch::Released => "PENDING",
            Dispatch::GivenUp { .. } => "GIVEN_UP",
        }
    }

    fn error(&self) -> Option<&str> {
        match self {
            Dispatch::Retry { error, .. } | Dispatch::GivenUp { error } => Some(error),
            Dispatch::Delivered | Dispatch::Released => None,
        }
    }
}

/// Records a batch of outcomes in one statement. Each row changes only if it is still
/// DISPATCHING with the attempt given; returns how many did. A delivered event keeps the
/// last failure's `last_error` for diagnosis.
pub async fn record(
    db: &impl GenericClient,
    results: &[(&ClaimedEvent, Dispatch)],
) -> Result<u64, tokio_postgres::Error> {
    if results.is_empty() {
        return Ok(0);
    }
    let ids: Vec<Uuid> = results.iter().map(|(e, _)| e.id).collect();
    let attempts: Vec<i32> = results.iter().map(|(e, _)| e.dispatch_attempts).collect();
    let states: Vec<&str> = results.iter().map(|(_, d)| d.state()).collect();
    let errors: Vec<Option<&str>> = results.iter().map(|(_, d)| d.error()).collect();
    let refunds: Vec<bool> = results
        .iter()
        .map(|(_, d)| matches!(d, Dispatch::Released))
        .collect();
    let delays: Vec<i64> = results
        .iter()
        .map(|(_, d)| match d {
            Dispatch::Retry { delay, .. } => millis(*delay),
            _ => 0,
        })
        .collect();
    let statement = RECORD.prepare(db).await?;
    db.execute(
        &statement,
        &[&ids, &attempts, &states, &errors, &delays, &refunds],
    )
    .await
}

/// Outbox totals for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxCounts {
    /// Waiting or being sent (PENDING + DISPATCHING).
    pub pending: i64,
    pub delivered: i64,
    pub given_up: i64,
}

pub async fn counts(db: &impl GenericClient) -> Result<OutboxCounts, tokio_postgres::Error> {
    let statement = COUNTS.prepare(db).await?;
    let row = db.query_one(&statement, &[]).await?;
    Ok(OutboxCounts {
        pending: row.try_get("pending")?,
        delivered: row.try_get("delivered")?,
        given_up: row.try_get("given_up")?,
    })
}

/// The outbox for the digest: the oldest due event's due time, and the events given up in
/// a recent window with their most frequent errors (`[{error, count}]`).
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxHealth {
    pub oldest_due: Option<DateTime<Utc>>,
    pub given_up: i64,
    pub top_errors: serde_json::Value,
}

pub async fn health(
    db: &impl GenericClient,
    given_up_window_seconds: i64,
) -> Result<OutboxHealth, tokio_postgres::Error> {
    let statement = DIGEST_OUTBOX.prepare(db).await?;
    let row = db
        .query_one(&statement, &[&given_up_window_seconds])
        .await?;
    Ok(OutboxHealth {
        oldest_due: row.try_get("oldest_due")?,
        given_up: row.try_get("given_up")?,
        top_errors: row.try_get("top_errors")?,
    })
}

/// A notification's webhook event and its dispatch, as `GET
/// /notifications/{id}/webhook-events` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    pub event_id: Uuid,
    #[serde(rename = "type")]
    pub kind: String,
    pub status: Option<String>,
    pub attempt_count: Option<i32>,
    pub redrive_generation: Option<i32>,
    #[serde(serialize_with = "crate::notification::serialize_time")]
    pub occurred_at: DateTime<Utc>,
    pub dispatch_state: String,
    pub dispatch_attempts: i32,
    #[serde(serialize_with = "crate::notification::serialize_time")]
    pub next_dispatch_at: DateTime<Utc>,
    pub last_error: Option<String>,
    #[serde(serialize_with = "optional_time")]
    pub delivered_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "optional_time")]
    pub given_up_at: Option<DateTime<Utc>>,
}

fn optional_time<S: serde::Serializer>(
    time: &Option<DateTime<Utc>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match time {
        Some(time) => crate::notification::serialize_time(time, s),
        None => s.serialize_none(),
    }
}

/// The webhook events of a notification, oldest first.
pub async fn events_of(
    db: &impl GenericClient,
    notification: Uuid,
) -> Result<Vec<EventView>, tokio_postgres::Error> {
    let statement = LIST_FOR_NOTIFICATION.prepare(db).await?;
    db.query(&statement, &[&notification])
        .await?
        .iter()
        .map(|row| {
            Ok(EventView {
                event_id: row.try_get("id")?,
                kind: row.try_get("type")?,
                status: row.try_get("status")?,
                attempt_count: row.try_get("attempt_count")?,
                redrive_generation: row.try_get("redrive_generation")?,
                occurred_at: row.try_get("occurred_at")?,
                dispatch_state: row.try_get("dispatch_state")?,
                dispatch_attempts: row.try_get("dispatch_attempts")?,
                next_dispatch_at: row.try_get("next_dispatch_at")?,
                last_error: row.try_get("last_error")?,
                delivered_at: row.try_get("delivered_at")?,
                given_up_at: row.try_get("given_up_at")?,
            })
        })
        .collect()
}
