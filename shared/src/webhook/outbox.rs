//! The only SQL on `webhook_events` outside the notification transitions that insert them
//! and what the API reads ([`super::events`]): route new events to their endpoints, claim
//! due events under a lease, record a batch of dispatch outcomes, count for metrics, purge.
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
const RECORD: Statement = statement!("webhook_events/record");
const COUNTS: Statement = statement!("webhook_events/counts");
const PURGE: Statement = statement!("webhook_events/purge");
const DIGEST_OUTBOX: Statement = statement!("webhook_events/digest_outbox");

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
    /// New events this statement decided on (the limit's worth: more may be waiting).
    pub events: u64,
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
/// that created it, else to the default URL when `default_configured`, else nowhere. Work
/// created without a key goes to the default URL when configured, and to the endpoints
/// registered without a key besides.
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
    let mut routed = Routed {
        events: rows.len() as u64,
        ..Routed::default()
    };
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
    let current = row.try_get::<_, Option<String>>("secret")?;
    let rotated = row.try_get::<_, Vec<String>>("previous_secrets")?;
    Ok(Destination::Endpoint {
        id,
        url: row.try_get::<_, Option<String>>("url")?.unwrap_or_default(),
        keys: current
            .iter()
            .chain(&rotated)
            .filter_map(|secret| SigningKey::from_secret(secret))
            .collect(),
    })
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

/// The outbox for the digest, per destination (`endpointId` null for the default
/// `WEBHOOK_URL`):
/// - late events: of the events due more than `late_seconds` ago, the `late_sample` oldest
///   grouped by destination (`[{endpointId, url, routed, count, oldestDue, lagSeconds}]`,
///   oldest first; `routed` false for events the drainer has not routed yet);
/// - the events given up in a recent window, in all and per destination (`[{endpointId,
///   url, count, since, topErrors: [{error, count}]}]`).
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxHealth {
    pub late_by_destination: serde_json::Value,
    pub given_up: i64,
    pub given_up_by_destination: serde_json::Value,
}

pub async fn health(
    db: &impl GenericClient,
    given_up_window_seconds: i64,
    late_seconds: f64,
    late_sample: i64,
) -> Result<OutboxHealth, tokio_postgres::Error> {
    let statement = DIGEST_OUTBOX.prepare(db).await?;
    let row = db
        .query_one(
            &statement,
            &[&given_up_window_seconds, &late_seconds, &late_sample],
        )
        .await?;
    Ok(OutboxHealth {
        late_by_destination: row.try_get("late_by_destination")?,
        given_up: row.try_get("given_up")?,
        given_up_by_destination: row.try_get("by_destination")?,
    })
}
