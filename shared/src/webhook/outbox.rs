//! The only SQL on `webhook_events` outside the notification transitions that insert them:
//! route new events to their endpoints, claim due events under a lease, record a batch of
//! dispatch outcomes, count for metrics, list and replay.
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
use crate::webhook::signing::SigningKey;

const ROUTE: Statement = statement!("webhook_events/route");
const CLAIM: Statement = statement!("webhook_events/claim");
const REPLAY: Statement = statement!("webhook_events/replay");
const LIST: Statement = statement!("webhook_events/list");
const RECORD: Statement = statement!("webhook_events/record");
const COUNTS: Statement = statement!("webhook_events/counts");
const PURGE: Statement = statement!("webhook_events/purge");
const DIGEST_OUTBOX: Statement = statement!("webhook_events/digest_outbox");
const LIST_FOR_NOTIFICATION: Statement = statement!("webhook_events/list_for_notification");

/// The `last_error` of an event whose lease expired on its final dispatch attempt.
pub const LEASE_EXPIRED_ON_FINAL_ATTEMPT: &str =
    "Lease expired on the final dispatch attempt; the drainer stopped without recording";

/// The `last_error` of an event no endpoint of its client subscribes to (closed unsent).
pub const NOT_SUBSCRIBED: &str =
    "Not sent: no webhook endpoint of its client subscribes to this event type";

/// The `last_error` of an event of a client with no endpoint when no default URL is set.
pub const NO_DESTINATION: &str =
    "Not sent: its client has no webhook endpoint and WEBHOOK_URL is not set";

/// What one routing statement decided.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Routed {
    /// Rows given a registered endpoint (copies for further endpoints included).
    pub to_endpoints: u64,
    /// Rows for the default URL (`WEBHOOK_URL`).
    pub to_default: u64,
    /// Rows with no destination at all (no endpoint, no default URL): closed unsent.
    pub no_destination: u64,
    /// Rows whose client has endpoints, none subscribed to the type: closed unsent.
    pub unsubscribed: u64,
}

/// Routes up to `limit` new events (see the statement): each to the endpoints of the client
/// that created it, else to the default URL when `default_configured`, else nowhere.
pub async fn route(
    db: &impl GenericClient,
    limit: i64,
    default_configured: bool,
) -> Result<Routed, tokio_postgres::Error> {
    let statement = ROUTE.prepare(db).await?;
    let rows = db
        .query(
            &statement,
            &[
                &limit,
                &default_configured,
                &NOT_SUBSCRIBED,
                &NO_DESTINATION,
            ],
        )
        .await?;
    let mut routed = Routed::default();
    for row in &rows {
        let closed: bool = row.try_get("closed")?;
        let has_endpoints: bool = row.try_get("has_endpoints")?;
        match (closed, has_endpoints) {
            (true, true) => routed.unsubscribed += 1,
            (true, false) => routed.no_destination += 1,
            (false, _) if row.try_get::<_, Option<Uuid>>("endpoint_id")?.is_some() => {
                routed.to_endpoints += 1
            }
            (false, _) => routed.to_default += 1,
        }
    }
    if let Some(row) = rows.first() {
        routed.to_endpoints += u64::try_from(row.try_get::<_, i64>("copies")?).unwrap_or(0);
    }
    Ok(routed)
}

/// Where a claimed event goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// The default URL, `WEBHOOK_URL`, signed with `WEBHOOK_SECRET`.
    Default,
    /// A registered endpoint: its URL and the keys that sign (the current secret, then the
    /// previous one while it still signs).
    Endpoint {
        id: Uuid,
        url: String,
        keys: Vec<SigningKey>,
    },
    /// Its endpoint was deleted after the event was routed to it.
    Deleted(Uuid),
}

/// An event this drainer holds: DISPATCHING with `dispatch_attempts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedEvent {
    /// The row: the fence for [`record`].
    pub id: Uuid,
    /// The `eventId` sent: the row's id, or for a copy made for a further endpoint the
    /// original row's id, so every endpoint receives the same one.
    pub event_id: Uuid,
    pub destination: Destination,
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
                event_id: row.try_get("event_id")?,
                destination: destination(&row)?,
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

fn destination(row: &tokio_postgres::Row) -> Result<Destination, tokio_postgres::Error> {
    let Some(id) = row.try_get::<_, Option<Uuid>>("endpoint_id")? else {
        return Ok(Destination::Default);
    };
    if !row.try_get::<_, bool>("endpoint_found")? {
        return Ok(Destination::Deleted(id));
    }
    let secrets = [
        row.try_get::<_, Option<String>>("secret")?,
        row.try_get::<_, Option<String>>("previous_secret")?,
    ];
    Ok(Destination::Endpoint {
        id,
        url: row.try_get::<_, Option<String>>("url")?.unwrap_or_default(),
        keys: secrets
            .iter()
            .flatten()
            .filter_map(|secret| SigningKey::from_secret(secret))
            .collect(),
    })
}

/// Sends up to `limit` GIVEN_UP events again (see the statement) and returns their row ids.
/// `owner`: only events of that key's endpoints (a client); `endpoint`: only that one's;
/// `since`: only events created then or later.
pub async fn replay(
    db: &impl GenericClient,
    owner: Option<Uuid>,
    endpoint: Option<Uuid>,
    since: Option<DateTime<Utc>>,
    limit: i64,
) -> Result<Vec<Uuid>, tokio_postgres::Error> {
    let statement = REPLAY.prepare(db).await?;
    db.query(&statement, &[&owner, &endpoint, &since, &limit])
        .await?
        .iter()
        .map(|row| row.try_get("id"))
        .collect()
}

/// One row of `GET /webhook-events`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedEvent {
    pub event_id: Uuid,
    #[serde(rename = "type")]
    pub kind: String,
    pub status: String,
    pub attempts: i32,
    pub endpoint_id: Option<Uuid>,
    #[serde(serialize_with = "crate::notification::serialize_time")]
    pub created_at: DateTime<Utc>,
    pub last_error: Option<String>,
    /// The keyset position (the row), for the next page's cursor.
    #[serde(skip)]
    pub row_id: Uuid,
}

/// What `GET /webhook-events` filters on.
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    /// Only events of that key's endpoints (a client).
    pub owner: Option<Uuid>,
    pub endpoint: Option<Uuid>,
    /// A dispatch state: PENDING, DISPATCHING, DELIVERED or GIVEN_UP.
    pub status: Option<String>,
    /// After this (created_at, row id), newest first.
    pub after: Option<(DateTime<Utc>, Uuid)>,
    pub limit: i64,
}

pub async fn list(
    db: &impl GenericClient,
    filter: &EventFilter,
) -> Result<Vec<ListedEvent>, tokio_postgres::Error> {
    let statement = LIST.prepare(db).await?;
    let (after_time, after_id) = match filter.after {
        Some((time, id)) => (Some(time), Some(id)),
        None => (None, None),
    };
    db.query(
        &statement,
        &[
            &filter.owner,
            &filter.endpoint,
            &filter.status,
            &filter.limit,
            &after_time,
            &after_id,
        ],
    )
    .await?
    .iter()
    .map(|row| {
        Ok(ListedEvent {
            event_id: row.try_get("event_id")?,
            kind: row.try_get("type")?,
            status: row.try_get("dispatch_state")?,
            attempts: row.try_get("dispatch_attempts")?,
            endpoint_id: row.try_get("endpoint_id")?,
            created_at: row.try_get("created_at")?,
            last_error: row.try_get("last_error")?,
            row_id: row.try_get("id")?,
        })
    })
    .collect()
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

/// Retention: deletes up to `limit` delivered or given-up events older than `age`, oldest
/// first. Returns how many went.
pub async fn purge(
    db: &impl GenericClient,
    age: Duration,
    limit: i64,
) -> Result<u64, tokio_postgres::Error> {
    let statement = PURGE.prepare(db).await?;
    let age = i64::try_from(age.as_secs()).unwrap_or(i64::MAX);
    let row = db.query_one(&statement, &[&age, &limit]).await?;
    Ok(u64::try_from(row.try_get::<_, i64>("deleted")?).unwrap_or(0))
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
