//! What the API reads of `webhook_events`: the listing (`GET /webhook-events`), a
//! notification's events, and the replay of given-up events.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use uuid::Uuid;

use crate::sql::{Statement, statement};

const REPLAY: Statement = statement!("webhook_events/replay");
const LIST: Statement = statement!("webhook_events/list");
const LIST_FOR_NOTIFICATION: Statement = statement!("webhook_events/list_for_notification");

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

/// A notification's webhook event and its dispatch to one destination, as `GET
/// /notifications/{id}/webhook-events` shows it: an event sent to several endpoints is a
/// row per endpoint, all with the same `event_id`.
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
    /// When the next try is due; `None` once delivered or given up.
    #[serde(serialize_with = "optional_time")]
    pub next_dispatch_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    #[serde(serialize_with = "optional_time")]
    pub delivered_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "optional_time")]
    pub given_up_at: Option<DateTime<Utc>>,
    /// Where this row goes: `None` until routed, and for the default URL or no receiver.
    pub endpoint_id: Option<Uuid>,
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

/// The webhook events of a notification, a row per destination, oldest first.
pub async fn events_of(
    db: &impl GenericClient,
    notification: Uuid,
) -> Result<Vec<EventView>, tokio_postgres::Error> {
    let statement = LIST_FOR_NOTIFICATION.prepare(db).await?;
    db.query(&statement, &[&notification])
        .await?
        .iter()
        .map(|row| {
            let dispatch_state: String = row.try_get("dispatch_state")?;
            let waiting = matches!(dispatch_state.as_str(), "PENDING" | "DISPATCHING");
            Ok(EventView {
                event_id: row.try_get("event_id")?,
                kind: row.try_get("type")?,
                status: row.try_get("status")?,
                attempt_count: row.try_get("attempt_count")?,
                redrive_generation: row.try_get("redrive_generation")?,
                occurred_at: row.try_get("occurred_at")?,
                dispatch_attempts: row.try_get("dispatch_attempts")?,
                next_dispatch_at: if waiting {
                    Some(row.try_get("next_dispatch_at")?)
                } else {
                    None
                },
                dispatch_state,
                last_error: row.try_get("last_error")?,
                delivered_at: row.try_get("delivered_at")?,
                given_up_at: row.try_get("given_up_at")?,
                endpoint_id: row.try_get("endpoint_id")?,
            })
        })
        .collect()
}
