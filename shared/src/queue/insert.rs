//! Creating notifications, one or a batch. The unique key constraint decides idempotency,
//! so simultaneous duplicates are safe; the request fingerprint then tells a replay from
//! a conflicting reuse of the key.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde_json::Value;
use uuid::Uuid;

use super::from_row;
use crate::notification::{Channel, Class, Notification, Priority, SuppressionReason};
use crate::sql::{Statement, statement};

const INSERT: Statement = statement!("notifications/insert");
const FIND_BY_KEY: Statement = statement!("notifications/find_by_key");
const INSERT_BATCH: Statement = statement!("notifications/insert_batch");
const FIND_KEYS: Statement = statement!("notifications/find_keys");

/// When a new notification becomes due.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Due {
    /// An absolute instant; one in the past means "due now".
    At(DateTime<Utc>),
    /// Seconds after the database's `now()`.
    AfterSeconds(i32),
}

impl Due {
    /// The two nullable parameters the insert statements take: `sendAt`, `delaySeconds`.
    fn parameters(self) -> (Option<DateTime<Utc>>, Option<i32>) {
        match self {
            Due::At(at) => (Some(at), None),
            Due::AfterSeconds(seconds) => (None, Some(seconds)),
        }
    }
}

/// When a notification stops being worth sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// `expiresAt`.
    At(DateTime<Utc>),
    /// `ttlSeconds`, counted from the due time.
    AfterSeconds(i32),
}

impl Expiry {
    /// The two nullable parameters the insert statements take: `expiresAt`, `ttlSeconds`.
    fn parameters(expiry: Option<Expiry>) -> (Option<DateTime<Utc>>, Option<i32>) {
        match expiry {
            Some(Expiry::At(at)) => (Some(at), None),
            Some(Expiry::AfterSeconds(seconds)) => (None, Some(seconds)),
            None => (None, None),
        }
    }
}

#[derive(Debug, Clone)]
pub struct NewNotification {
    pub id: Uuid,
    pub idempotency_key: String,
    pub fingerprint: String,
    /// `fingerprint` as erasure keys it (`audience::address::erased_fingerprint`): a replay of a
    /// request whose person was erased since matches this one. `None`: not compared.
    pub erased_fingerprint: Option<String>,
    pub recipient: String,
    pub channel: Channel,
    pub priority: Priority,
    pub payload: Value,
    pub due: Due,
    pub max_attempts: i32,
    /// The API key that created it; `None` for anonymous access.
    pub owner_key_id: Option<Uuid>,
    /// The recipient profile it was addressed through.
    pub recipient_id: Option<String>,
    pub class: Class,
    pub category: String,
    pub expiry: Option<Expiry>,
    /// Stored SUPPRESSED for this reason (never sent) instead of PENDING.
    pub suppressed: Option<SuppressionReason>,
    /// The keyed hash of `recipient` (`audience::address::hash`) for the insert to look
    /// up on the suppression list itself, storing the notification SUPPRESSED
    /// (`SUPPRESSED_ADDRESS`) when listed; `None` when the list was read before.
    pub listed_hash: Option<String>,
    /// The due time quiet hours moved it from (`due` is the moved one).
    pub quiet_hours_deferred_from: Option<DateTime<Utc>>,
}

impl NewNotification {
    /// A PENDING notification to `recipient` with the defaults of intake: NORMAL priority,
    /// transactional, the `general` category, no expiry, written by an operator (no
    /// owner). Callers set what differs on the returned value.
    pub fn new(
        idempotency_key: String,
        fingerprint: String,
        recipient: String,
        channel: Channel,
        payload: Value,
        due: Due,
        max_attempts: i32,
    ) -> Self {
        NewNotification {
            id: Uuid::new_v4(),
            idempotency_key,
            fingerprint,
            erased_fingerprint: None,
            recipient,
            channel,
            priority: Priority::Normal,
            payload,
            due,
            max_attempts,
            owner_key_id: None,
            recipient_id: None,
            class: Class::Transactional,
            category: "general".to_string(),
            expiry: None,
            suppressed: None,
            listed_hash: None,
            quiet_hours_deferred_from: None,
        }
    }
}

impl NewNotification {
    /// Whether `stored`, the fingerprint of what holds this key, is this request's: as
    /// fingerprinted, or as an erasure keyed it.
    fn is_fingerprinted(&self, stored: &str) -> bool {
        stored == self.fingerprint || self.erased_fingerprint.as_deref() == Some(stored)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum InsertOutcome {
    Created(Notification),
    /// Same key, same fingerprint: the original in its current state.
    Replayed(Notification),
    /// Same key, different request.
    Conflict,
}

/// Inserts unless the key exists; a notification due now wakes listening sweepers.
pub async fn insert(
    db: &impl GenericClient,
    new: &NewNotification,
) -> Result<InsertOutcome, tokio_postgres::Error> {
    let (at, after) = new.due.parameters();
    let (expires_at, ttl) = Expiry::parameters(new.expiry);
    let statement = INSERT.prepare(db).await?;
    let inserted = db
        .query_opt(
            &statement,
            &[
                &new.id,
                &new.idempotency_key,
                &new.fingerprint,
                &new.recipient,
                &new.channel,
                &new.priority,
                &new.payload,
                &at,
                &after,
                &new.max_attempts,
                &new.owner_key_id,
                &new.class,
                &new.category,
                &new.recipient_id,
                &expires_at,
                &ttl,
                &new.suppressed,
                &new.quiet_hours_deferred_from,
                &new.listed_hash,
            ],
        )
        .await?;
    if let Some(row) = inserted {
        return Ok(InsertOutcome::Created(from_row(&row)?));
    }
    let statement = FIND_BY_KEY.prepare(db).await?;
    let existing = db
        .query_one(&statement, &[&new.idempotency_key, &new.owner_key_id])
        .await?;
    let fingerprint: String = existing.try_get("fingerprint")?;
    Ok(if new.is_fingerprinted(&fingerprint) {
        InsertOutcome::Replayed(from_row(&existing)?)
    } else {
        InsertOutcome::Conflict
    })
}

/// The idempotency outcome of one item of a batch insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOutcome {
    Created(Uuid),
    Replayed(Uuid),
    Conflict,
}

/// Inserts many notifications of one owner with one set-based statement; each item gets
/// its own idempotency outcome, exactly as if the items had been posted alone in order: an
/// item repeating an earlier item's key is a replay or a conflict of the earlier one.
pub async fn insert_batch(
    db: &impl GenericClient,
    all: &[NewNotification],
) -> Result<Vec<BatchOutcome>, tokio_postgres::Error> {
    let Some(owner) = all.first().map(|n| n.owner_key_id) else {
        return Ok(Vec::new());
    };
    // Only the first item of each key goes to the insert; the others are settled against
    // whatever holds the key afterwards.
    let mut seen = HashSet::new();
    let items: Vec<&NewNotification> = all
        .iter()
        .filter(|n| seen.insert(n.idempotency_key.as_str()))
        .collect();
    let ids: Vec<Uuid> = items.iter().map(|n| n.id).collect();
    let keys: Vec<&str> = items.iter().map(|n| n.idempotency_key.as_str()).collect();
    let fingerprints: Vec<&str> = items.iter().map(|n| n.fingerprint.as_str()).collect();
    let recipients: Vec<&str> = items.iter().map(|n| n.recipient.as_str()).collect();
    let channels: Vec<Channel> = items.iter().map(|n| n.channel).collect();
    let priorities: Vec<Priority> = items.iter().map(|n| n.priority).collect();
    let payloads: Vec<&Value> = items.iter().map(|n| &n.payload).collect();
    let (at, after): (Vec<_>, Vec<_>) = items.iter().map(|n| n.due.parameters()).unzip();
    let max_attempts: Vec<i32> = items.iter().map(|n| n.max_attempts).collect();
    let owners: Vec<Option<Uuid>> = items.iter().map(|n| n.owner_key_id).collect();
    let classes: Vec<Class> = items.iter().map(|n| n.class).collect();
    let categories: Vec<&str> = items.iter().map(|n| n.category.as_str()).collect();
    let recipient_ids: Vec<Option<&str>> =
        items.iter().map(|n| n.recipient_id.as_deref()).collect();
    let (expires_at, ttl): (Vec<_>, Vec<_>) =
        items.iter().map(|n| Expiry::parameters(n.expiry)).unzip();
    let suppressed: Vec<Option<SuppressionReason>> = items.iter().map(|n| n.suppressed).collect();
    let deferred_from: Vec<Option<DateTime<Utc>>> =
        items.iter().map(|n| n.quiet_hours_deferred_from).collect();
    let listed_hashes: Vec<Option<&str>> = items.iter().map(|n| n.listed_hash.as_deref()).collect();

    let statement = INSERT_BATCH.prepare(db).await?;
    let rows = db
        .query(
            &statement,
            &[
                &ids,
                &keys,
                &fingerprints,
                &recipients,
                &channels,
                &priorities,
                &payloads,
                &at,
                &after,
                &max_attempts,
                &owners,
                &classes,
                &categories,
                &recipient_ids,
                &expires_at,
                &ttl,
                &suppressed,
                &deferred_from,
                &listed_hashes,
            ],
        )
        .await?;
    let inserted: HashSet<Uuid> = rows
        .iter()
        .map(|row| row.try_get("id"))
        .collect::<Result<_, _>>()?;

    // Keys held before this batch, and repeated keys: read what holds them to tell
    // replays from conflicts. An item of this batch that was inserted holds its key too.
    let mut holders: HashMap<&str, (Uuid, &str)> = items
        .iter()
        .filter(|n| inserted.contains(&n.id))
        .map(|n| (n.idempotency_key.as_str(), (n.id, n.fingerprint.as_str())))
        .collect();
    let lost: Vec<&str> = items
        .iter()
        .filter(|n| !inserted.contains(&n.id))
        .map(|n| n.idempotency_key.as_str())
        .collect();
    let rows = if lost.is_empty() {
        Vec::new()
    } else {
        let statement = FIND_KEYS.prepare(db).await?;
        db.query(&statement, &[&lost, &owner]).await?
    };
    for row in &rows {
        holders.insert(
            row.try_get("idempotency_key")?,
            (row.try_get("id")?, row.try_get("fingerprint")?),
        );
    }
    Ok(all
        .iter()
        .map(|item| {
            if inserted.contains(&item.id) {
                return BatchOutcome::Created(item.id);
            }
            match holders.get(item.idempotency_key.as_str()) {
                Some((id, fingerprint)) if item.is_fingerprinted(fingerprint) => {
                    BatchOutcome::Replayed(*id)
                }
                _ => BatchOutcome::Conflict,
            }
        })
        .collect())
}
