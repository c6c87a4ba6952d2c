//! Registered webhook endpoints: where a client's outcomes go, the event types each one
//! receives, and its Standard Webhooks secret (shown once, at registration or rotation).
//! A key manages only its own endpoints; operators may manage every one.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use std::time::Duration;
use uuid::Uuid;

use crate::auth::{Caller, Scope};
use crate::queue::millis;
use crate::sql::{Statement, statement};
use crate::webhook::signing::SigningKey;

const CREATE: Statement = statement!("webhook_endpoints/create");
const LIST: Statement = statement!("webhook_endpoints/list");
const LIST_ALL: Statement = statement!("webhook_endpoints/list_all");
const DELETE: Statement = statement!("webhook_endpoints/delete");
const ROTATE: Statement = statement!("webhook_endpoints/rotate");
const OWNER: Statement = statement!("webhook_endpoints/owner");
const ANY: Statement = statement!("webhook_endpoints/any");

/// Every event type an endpoint may subscribe to. `circuit.*` events have no client and
/// reach only endpoints registered by operators.
pub const EVENT_TYPES: [&str; 8] = [
    "notification.sent",
    "notification.failed",
    "notification.dead_lettered",
    "notification.suppressed",
    "notification.expired",
    "campaign.done",
    "circuit.opened",
    "circuit.closed",
];

/// Whether only endpoints registered by operators may receive `kind`: a circuit change
/// belongs to no client.
pub fn operator_only(kind: &str) -> bool {
    kind.starts_with("circuit.")
}

/// Every event type an endpoint registered by an operator (`circuit.*` included) or by a
/// client receives.
pub fn every_type_for(operator: bool) -> Vec<String> {
    EVENT_TYPES
        .iter()
        .filter(|kind| operator || !operator_only(kind))
        .map(|kind| kind.to_string())
        .collect()
}

/// How long a rotated-out secret keeps signing, next to the new one.
pub const ROTATION_OVERLAP: Duration = Duration::from_secs(24 * 3600);
/// Rotated-out secrets that sign at once, each until its own end: every one adds a
/// signature to each delivery, so a burst of rotations inside one day stops the oldest
/// early rather than growing the header without bound.
pub const ROTATED_SECRETS_MAX: i64 = 10;

/// The owner of work created without a key (matches the nil owner of recipients).
pub const ANONYMOUS_OWNER: Uuid = Uuid::nil();

/// An endpoint as listed: never its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    pub id: Uuid,
    pub url: String,
    /// The types it receives: those it subscribed to, or (stored as NULL, which also takes
    /// types added later) every type its registrant may receive.
    pub event_types: Vec<String>,
    #[serde(serialize_with = "crate::notification::serialize_time")]
    pub created_at: DateTime<Utc>,
    /// Until the last rotated-out secret stops signing (absent when none signs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_secret_valid_until: Option<String>,
}

fn endpoint(row: &tokio_postgres::Row) -> Result<Endpoint, tokio_postgres::Error> {
    Ok(Endpoint {
        id: row.try_get("id")?,
        url: row.try_get("url")?,
        event_types: match row.try_get::<_, Option<Vec<String>>>("event_types")? {
            Some(types) => types,
            None => every_type_for(row.try_get("operator")?),
        },
        created_at: row.try_get("created_at")?,
        previous_secret_valid_until: row
            .try_get::<_, Option<DateTime<Utc>>>("previous_secret_valid_until")?
            .as_ref()
            .map(crate::notification::format_time),
    })
}

/// Whose endpoints a caller registers: its key, or the nil key when anonymous.
pub fn owner_of(caller: &Caller) -> Uuid {
    caller.key_id.unwrap_or(ANONYMOUS_OWNER)
}

/// Which endpoints a caller manages: `None` for operators (all), else its own.
pub fn manages(caller: &Caller) -> Option<Uuid> {
    match caller.scope {
        Scope::Operator => None,
        Scope::Client => Some(owner_of(caller)),
    }
}

/// Registers an endpoint for `caller` and returns it with its new secret (shown once).
pub async fn create(
    db: &impl GenericClient,
    caller: &Caller,
    url: &str,
    event_types: Option<&[String]>,
) -> Result<(Endpoint, String), tokio_postgres::Error> {
    let secret = SigningKey::generate_secret();
    let statement = CREATE.prepare(db).await?;
    let row = db
        .query_one(
            &statement,
            &[
                &Uuid::new_v4(),
                &owner_of(caller),
                &(caller.scope == Scope::Operator),
                &url,
                &event_types,
                &secret,
            ],
        )
        .await?;
    Ok((endpoint(&row)?, secret))
}

/// The endpoints `caller` manages, oldest first.
pub async fn list(
    db: &impl GenericClient,
    caller: &Caller,
) -> Result<Vec<Endpoint>, tokio_postgres::Error> {
    let rows = match manages(caller) {
        Some(owner) => {
            let statement = LIST.prepare(db).await?;
            db.query(&statement, &[&owner]).await?
        }
        None => {
            let statement = LIST_ALL.prepare(db).await?;
            db.query(&statement, &[]).await?
        }
    };
    rows.iter().map(endpoint).collect()
}

/// Deletes an endpoint `caller` manages; `false` when there is none by that id. Its events
/// not yet sent are given up when claimed.
pub async fn delete(
    db: &impl GenericClient,
    caller: &Caller,
    id: Uuid,
) -> Result<bool, tokio_postgres::Error> {
    let statement = DELETE.prepare(db).await?;
    Ok(db.execute(&statement, &[&id, &manages(caller)]).await? > 0)
}

/// A new secret for an endpoint `caller` manages; the current one keeps signing for
/// [`ROTATION_OVERLAP`], and so do the secrets rotated out before it, each until its own
/// end (at most [`ROTATED_SECRETS_MAX`]). `None` when there is no endpoint by that id.
pub struct Rotated {
    pub id: Uuid,
    pub secret: String,
    pub previous_secret_valid_until: DateTime<Utc>,
}

pub async fn rotate(
    db: &impl GenericClient,
    caller: &Caller,
    id: Uuid,
) -> Result<Option<Rotated>, tokio_postgres::Error> {
    let secret = SigningKey::generate_secret();
    let statement = ROTATE.prepare(db).await?;
    let row = db
        .query_opt(
            &statement,
            &[
                &id,
                &manages(caller),
                &secret,
                &millis(ROTATION_OVERLAP),
                &ROTATED_SECRETS_MAX,
            ],
        )
        .await?;
    row.map(|row| {
        Ok(Rotated {
            id: row.try_get("id")?,
            secret,
            previous_secret_valid_until: row.try_get("previous_secret_valid_until")?,
        })
    })
    .transpose()
}

/// Whether `caller` manages endpoint `id`.
pub async fn is_managed(
    db: &impl GenericClient,
    caller: &Caller,
    id: Uuid,
) -> Result<bool, tokio_postgres::Error> {
    let statement = OWNER.prepare(db).await?;
    db.query_one(&statement, &[&id, &manages(caller)])
        .await?
        .try_get("found")
}

/// Whether any endpoint is registered at all.
pub async fn any_registered(db: &impl GenericClient) -> Result<bool, tokio_postgres::Error> {
    let statement = ANY.prepare(db).await?;
    db.query_one(&statement, &[]).await?.try_get("registered")
}
