//! Campaigns: the only SQL on `campaigns`. A campaign fans one pinned template out to an
//! audience in chunks of [`CHUNK`] recipients: each chunk is one transaction that inserts
//! its notifications (keys `campaign:<id>:<recipientId>`, through the same audience
//! rules and set-based insert as a batch) and advances the campaign's checkpoint, so a
//! crash re-runs at most the chunk it interrupted and never duplicates a notification.
//! Sweepers expand a bounded number of chunks per step; the next step or invocation
//! resumes from the checkpoint. Each chunk also stamps the campaign's progress time, from
//! which the digest tells a stalled expansion.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde_json::{Value, json};
use uuid::Uuid;

use super::templates;
use crate::notification::{Channel, Priority, format_time};
use crate::queue::{self, Cursor};
use crate::sql::{Statement, statement};

mod counts;
mod expansion;
pub use expansion::Expander;

const INSERT: Statement = statement!("campaigns/insert");
const FIND: Statement = statement!("campaigns/find");
const FIND_BY_KEY: Statement = statement!("campaigns/find_by_key");
const LIST: Statement = statement!("campaigns/list");
const CANCEL: Statement = statement!("campaigns/cancel");
const FINISH: Statement = statement!("campaigns/finish");
const STALLED: Statement = statement!("campaigns/stalled");

/// Recipients per chunk (one transaction).
pub const CHUNK: i64 = 1000;
/// Recipient ids one campaign may list.
pub const RECIPIENT_IDS_MAX: usize = 100_000;
/// Notifications cancelled per statement when a campaign is cancelled.
const CANCEL_BATCH: i64 = 1000;
/// Campaigns checked for completion per statement.
const FINISH_BATCH: i64 = 100;

/// A campaign as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Campaign {
    pub id: Uuid,
    pub owner: Uuid,
    pub idempotency_key: String,
    pub fingerprint: String,
    pub name: String,
    pub channel: Channel,
    pub template_id: String,
    pub template_version: i32,
    pub data: Value,
    pub category: String,
    pub priority: Priority,
    pub send_at: Option<DateTime<Utc>>,
    /// Every profile of the owner, rather than listed ids.
    pub all_recipients: bool,
    pub audience_size: i32,
    pub expanded: i32,
    /// `EXPANDING`, `QUEUED`, `DONE` or `CANCELLED`.
    pub status: String,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl Campaign {
    fn from_row(row: &tokio_postgres::Row) -> Result<Self, tokio_postgres::Error> {
        Ok(Campaign {
            id: row.try_get("id")?,
            owner: row.try_get("owner")?,
            idempotency_key: row.try_get("idempotency_key")?,
            fingerprint: row.try_get("fingerprint")?,
            name: row.try_get("name")?,
            channel: row.try_get("channel")?,
            template_id: row.try_get("template_id")?,
            template_version: row.try_get("template_version")?,
            data: row.try_get("data")?,
            category: row.try_get("category")?,
            priority: row.try_get("priority")?,
            send_at: row.try_get("send_at")?,
            all_recipients: row.try_get("all_recipients")?,
            audience_size: row.try_get("audience_size")?,
            expanded: row.try_get("expanded")?,
            status: row.try_get("status")?,
            created_at: row.try_get("created_at")?,
            finished_at: row.try_get("finished_at")?,
        })
    }

    /// The API representation, with the counts of its notifications by status.
    pub fn to_json(&self, counts: &HashMap<String, i64>) -> Value {
        let count = |status: &str| counts.get(status).copied().unwrap_or(0);
        json!({
            "id": self.id,
            "idempotencyKey": self.idempotency_key,
            "name": self.name,
            "channel": self.channel.as_str(),
            "template": {"id": self.template_id, "version": self.template_version},
            "category": self.category,
            "priority": self.priority.as_str(),
            "sendAt": self.send_at.as_ref().map(format_time),
            "audience": if self.all_recipients { "ALL_RECIPIENTS" } else { "RECIPIENT_IDS" },
            "status": self.status,
            "audienceSize": self.audience_size,
            "expanded": self.expanded,
            "counts": {
                "pending": count("PENDING") + count("PROCESSING"),
                "sent": count("SENT"),
                "failed": count("FAILED"),
                "deadLettered": count("DEAD_LETTERED"),
                "suppressed": count("SUPPRESSED"),
                "expired": count("EXPIRED"),
                "cancelled": count("CANCELLED"),
            },
            "createdAt": format_time(&self.created_at),
            "finishedAt": self.finished_at.as_ref().map(format_time),
        })
    }

    /// Where a listing continues after this campaign.
    pub fn cursor(&self) -> Cursor {
        Cursor {
            created_at_micros: self.created_at.timestamp_micros(),
            id: self.id,
        }
    }
}

/// A campaign still EXPANDING whose expansion has not moved for a while.
#[derive(Debug, Clone, PartialEq)]
pub struct StalledCampaign {
    pub id: Uuid,
    pub name: String,
    pub expanded: i32,
    pub audience_size: i32,
    /// When its last chunk committed (its creation, before the first).
    pub progressed_at: DateTime<Utc>,
    pub stalled_seconds: f64,
}

/// A campaign to store; `recipient_ids` `None` means every profile of the owner.
#[derive(Debug, Clone)]
pub struct NewCampaign {
    pub id: Uuid,
    pub owner: Uuid,
    pub idempotency_key: String,
    pub fingerprint: String,
    pub name: String,
    pub channel: Channel,
    pub template_id: String,
    pub template_version: i32,
    pub data: Value,
    pub category: String,
    pub priority: Priority,
    pub send_at: Option<DateTime<Utc>>,
    pub recipient_ids: Option<Vec<String>>,
    pub audience_size: i32,
}

/// What became of a submission.
#[derive(Debug, Clone, PartialEq)]
pub enum Submitted {
    Created(Campaign),
    /// Same key, same body: the campaign in its current state.
    Replayed(Campaign),
    /// Same key, different body.
    Conflict,
}

/// Stores `new` unless its owner already used the key.
pub async fn insert(
    db: &impl GenericClient,
    new: &NewCampaign,
) -> Result<Submitted, tokio_postgres::Error> {
    let statement = INSERT.prepare(db).await?;
    let row = db
        .query_opt(
            &statement,
            &[
                &new.id,
                &new.owner,
                &new.idempotency_key,
                &new.fingerprint,
                &new.name,
                &new.channel,
                &new.template_id,
                &new.template_version,
                &new.data,
                &new.category,
                &new.priority,
                &new.send_at,
                &new.recipient_ids,
                &new.audience_size,
            ],
        )
        .await?;
    if let Some(row) = row {
        return Ok(Submitted::Created(Campaign::from_row(&row)?));
    }
    let statement = FIND_BY_KEY.prepare(db).await?;
    let existing = Campaign::from_row(
        &db.query_one(&statement, &[&new.owner, &new.idempotency_key])
            .await?,
    )?;
    Ok(if existing.fingerprint == new.fingerprint {
        Submitted::Replayed(existing)
    } else {
        Submitted::Conflict
    })
}

pub async fn find(
    db: &impl GenericClient,
    id: Uuid,
) -> Result<Option<Campaign>, tokio_postgres::Error> {
    let statement = FIND.prepare(db).await?;
    db.query_opt(&statement, &[&id])
        .await?
        .as_ref()
        .map(Campaign::from_row)
        .transpose()
}

/// Up to `limit` campaigns, newest first, after `after`.
pub async fn list(
    db: &impl GenericClient,
    after: Option<&Cursor>,
    limit: i64,
) -> Result<Vec<Campaign>, tokio_postgres::Error> {
    let (at, id) = match after.and_then(|c| {
        DateTime::<Utc>::from_timestamp_micros(c.created_at_micros).map(|at| (at, c.id))
    }) {
        Some(position) => position,
        // Before the first row: no campaign is created after the end of time.
        None => (DateTime::<Utc>::MAX_UTC, Uuid::max()),
    };
    let statement = LIST.prepare(db).await?;
    db.query(&statement, &[&at, &id, &limit])
        .await?
        .iter()
        .map(Campaign::from_row)
        .collect()
}

/// The campaign's notifications by status.
pub async fn counts(
    db: &impl GenericClient,
    id: Uuid,
) -> Result<HashMap<String, i64>, tokio_postgres::Error> {
    Ok(counts::read(db, &[id])
        .await?
        .remove(&id)
        .unwrap_or_default())
}

/// The notifications of each of `campaigns` by status, in one statement (a page of a
/// listing); a campaign without notifications has no entry.
pub async fn counts_of(
    db: &impl GenericClient,
    campaigns: &[Campaign],
) -> Result<HashMap<Uuid, HashMap<String, i64>>, tokio_postgres::Error> {
    let ids: Vec<Uuid> = campaigns.iter().map(|c| c.id).collect();
    counts::read(db, &ids).await
}

/// Stops the campaign's expansion (waiting for a chunk in progress), then cancels every
/// notification of it still PENDING, [`CANCEL_BATCH`] per statement. `None` when unknown.
pub async fn cancel(
    db: &impl GenericClient,
    id: Uuid,
) -> Result<Option<Campaign>, tokio_postgres::Error> {
    let statement = CANCEL.prepare(db).await?;
    let Some(row) = db.query_opt(&statement, &[&id]).await? else {
        return Ok(None);
    };
    let campaign = Campaign::from_row(&row)?;
    if campaign.status == "CANCELLED" {
        queue::cancel_campaign(db, id, CANCEL_BATCH).await?;
    }
    Ok(Some(campaign))
}

/// Up to `limit` campaigns still EXPANDING without progress for at least `seconds`,
/// longest stalled first.
pub async fn stalled(
    db: &impl GenericClient,
    seconds: i64,
    limit: i64,
) -> Result<Vec<StalledCampaign>, tokio_postgres::Error> {
    let statement = STALLED.prepare(db).await?;
    db.query(&statement, &[&seconds, &limit])
        .await?
        .iter()
        .map(|row| {
            Ok(StalledCampaign {
                id: row.try_get("id")?,
                name: row.try_get("name")?,
                expanded: row.try_get("expanded")?,
                audience_size: row.try_get("audience_size")?,
                progressed_at: row.try_get("progressed_at")?,
                stalled_seconds: row.try_get("stalled_seconds")?,
            })
        })
        .collect()
}

/// Marks DONE the campaigns fully expanded with nothing left PENDING or PROCESSING, each
/// with its `campaign.done` webhook event; returns how many.
pub async fn finish(db: &impl GenericClient) -> Result<i64, tokio_postgres::Error> {
    let statement = FINISH.prepare(db).await?;
    db.query_one(&statement, &[&FINISH_BATCH])
        .await?
        .try_get("finished")
}
