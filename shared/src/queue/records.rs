//! Intake-side statements: insert with database-decided idempotency, read, keyset list,
//! and cancel as one conditional update.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde_json::Value;
use uuid::Uuid;

use super::{NOTIFICATION_COLUMNS, from_row};
use crate::notification::{Channel, Notification, Priority, Status};

/// When a new notification becomes due.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Due {
    /// An absolute instant; one in the past means "due now".
    At(DateTime<Utc>),
    /// Seconds after the database's `now()`.
    AfterSeconds(i32),
}

#[derive(Debug, Clone)]
pub struct NewNotification {
    pub id: Uuid,
    pub idempotency_key: String,
    pub fingerprint: String,
    pub recipient: String,
    pub channel: Channel,
    pub priority: Priority,
    pub payload: Value,
    pub due: Due,
    pub max_attempts: i32,
    /// The API key that created it; `None` for anonymous access.
    pub owner_key_id: Option<Uuid>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum InsertOutcome {
    Created(Notification),
    /// Same key, same fingerprint: the original in its current state.
    Replayed(Notification),
    /// Same key, different request.
    Conflict,
}

/// Inserts unless the key exists; the unique constraint is the arbiter, so simultaneous
/// duplicates are safe. A notification due now wakes listening sweepers.
pub async fn insert(
    db: &impl GenericClient,
    new: &NewNotification,
) -> Result<InsertOutcome, tokio_postgres::Error> {
    let sql = format!(
        "WITH inserted AS (
            INSERT INTO notifications (id, idempotency_key, fingerprint, recipient, channel, priority,
                                       payload, scheduled_at, next_attempt_at, max_attempts, owner_key_id)
            SELECT $1, $2, $3, $4, $5, $6, $7, due.at, due.at, $10, $11
            FROM (SELECT coalesce($8::timestamptz, now() + $9::int4 * interval '1 second') AS at) due
            ON CONFLICT (idempotency_key) DO NOTHING
            RETURNING {NOTIFICATION_COLUMNS}
        ), woken AS (
            SELECT pg_notify('{wake}', '') FROM inserted WHERE next_attempt_at <= now()
        )
        SELECT {NOTIFICATION_COLUMNS}, (SELECT count(*) FROM woken) AS woken FROM inserted",
        wake = super::WAKE_CHANNEL,
    );
    let (at, after): (Option<DateTime<Utc>>, Option<i32>) = match new.due {
        Due::At(at) => (Some(at), None),
        Due::AfterSeconds(seconds) => (None, Some(seconds)),
    };
    let statement = db.prepare_cached(&sql).await?;
    let inserted = db
        .query_opt(
            &statement,
            &[
                &new.id,
                &new.idempotency_key,
                &new.fingerprint,
                &new.recipient,
                &new.channel.as_str(),
                &new.priority.rank(),
                &new.payload,
                &at,
                &after,
                &new.max_attempts,
                &new.owner_key_id,
            ],
        )
        .await?;
    if let Some(row) = inserted {
        return Ok(InsertOutcome::Created(from_row(&row)?));
    }
    let sql = format!(
        "SELECT {NOTIFICATION_COLUMNS}, fingerprint, owner_key_id FROM notifications WHERE idempotency_key = $1"
    );
    let statement = db.prepare_cached(&sql).await?;
    let existing = db.query_one(&statement, &[&new.idempotency_key]).await?;
    let fingerprint: String = existing.try_get("fingerprint")?;
    let owner: Option<Uuid> = existing.try_get("owner_key_id")?;
    // Another caller's notification is never shown: a key reused across callers conflicts.
    Ok(
        if fingerprint == new.fingerprint && owner == new.owner_key_id {
            InsertOutcome::Replayed(from_row(&existing)?)
        } else {
            InsertOutcome::Conflict
        },
    )
}

/// Reads one notification; with `owner`, only if that key created it.
pub async fn find(
    db: &impl GenericClient,
    id: Uuid,
    owner: Option<Uuid>,
) -> Result<Option<Notification>, tokio_postgres::Error> {
    let sql = format!(
        "SELECT {NOTIFICATION_COLUMNS} FROM notifications
         WHERE id = $1 AND ($2::uuid IS NULL OR owner_key_id = $2)"
    );
    let statement = db.prepare_cached(&sql).await?;
    db.query_opt(&statement, &[&id, &owner])
        .await?
        .as_ref()
        .map(from_row)
        .transpose()
}

/// Cancels a PENDING notification in one conditional update. A sweeper claiming it at the
/// same instant either locked it first (the update then sees PROCESSING and changes
/// nothing) or skips it because the update holds its lock.
pub async fn cancel(
    db: &impl GenericClient,
    id: Uuid,
    owner: Option<Uuid>,
) -> Result<Option<Notification>, tokio_postgres::Error> {
    let sql = format!(
        "UPDATE notifications
         SET status = 'CANCELLED', cancelled_at = now(), updated_at = now()
         WHERE id = $1 AND status = 'PENDING' AND ($2::uuid IS NULL OR owner_key_id = $2)
         RETURNING {NOTIFICATION_COLUMNS}"
    );
    let statement = db.prepare_cached(&sql).await?;
    match db.query_opt(&statement, &[&id, &owner]).await? {
        Some(row) => Ok(Some(from_row(&row)?)),
        None => find(db, id, owner).await,
    }
}

/// A position in the newest-first order: rows strictly after it come next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub created_at_micros: i64,
    pub id: Uuid,
}

impl Cursor {
    pub fn of(notification: &Notification) -> Self {
        Cursor {
            created_at_micros: notification.created_at.timestamp_micros(),
            id: notification.id,
        }
    }

    /// Opaque, URL-safe text.
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("{}:{}", self.created_at_micros, self.id))
    }

    /// `None` for anything [`Cursor::encode`] did not produce.
    pub fn decode(text: &str) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        let text = std::str::from_utf8(&bytes).ok()?;
        let (micros, id) = text.split_once(':')?;
        let created_at_micros = micros.parse::<i64>().ok()?;
        DateTime::<Utc>::from_timestamp_micros(created_at_micros)?;
        let id = Uuid::try_parse(id).ok()?;
        // Only the canonical spelling is accepted, so a cursor has exactly one text form.
        (format!("{created_at_micros}:{id}") == text).then_some(Cursor {
            created_at_micros,
            id,
        })
    }
}

#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only notifications this key created (`None`: all).
    pub owner: Option<Uuid>,
    pub status: Option<Status>,
    pub recipient: Option<String>,
    pub after: Option<Cursor>,
    pub limit: i64,
}

#[derive(Debug, Clone)]
pub struct ListPage {
    pub items: Vec<Notification>,
    /// Present only when more rows exist.
    pub next: Option<Cursor>,
}

/// Newest first by `(created_at DESC, id DESC)`; one row beyond the page tells whether
/// there is a next page. Each filter combination is its own statement so that each can
/// use its index.
pub async fn list(
    db: &impl GenericClient,
    filter: &ListFilter,
) -> Result<ListPage, tokio_postgres::Error> {
    let status = filter.status.map(Status::as_str);
    let after_time = filter
        .after
        .and_then(|c| DateTime::<Utc>::from_timestamp_micros(c.created_at_micros));
    let after_id = filter.after.map(|c| c.id);
    let fetch = filter.limit + 1;

    let mut conditions = Vec::new();
    let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = Vec::new();
    if let Some(owner) = &filter.owner {
        params.push(owner);
        conditions.push(format!("owner_key_id = ${}", params.len()));
    }
    if let Some(status) = &status {
        params.push(status);
        conditions.push(format!("status = ${}", params.len()));
    }
    if let Some(recipient) = &filter.recipient {
        params.push(recipient);
        conditions.push(format!("recipient = ${}", params.len()));
    }
    if let (Some(time), Some(id)) = (&after_time, &after_id) {
        params.push(time);
        params.push(id);
        conditions.push(format!(
            "(created_at, id) < (${}, ${})",
            params.len() - 1,
            params.len()
        ));
    }
    params.push(&fetch);
    let where_clause = if conditions.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conditions.join(" AND "))
    };
    let sql = format!(
        "SELECT {NOTIFICATION_COLUMNS} FROM notifications {where_clause}
         ORDER BY created_at DESC, id DESC LIMIT ${}",
        params.len()
    );
    let statement = db.prepare_cached(&sql).await?;
    let rows = db.query(&statement, &params).await?;
    let mut items = rows.iter().map(from_row).collect::<Result<Vec<_>, _>>()?;
    let more = items.len() as i64 > filter.limit;
    items.truncate(usize::try_from(filter.limit).unwrap_or(0));
    let next = if more {
        items.last().map(Cursor::of)
    } else {
        None
    };
    Ok(ListPage { items, next })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips() {
        let cursor = Cursor {
            created_at_micros: 1_790_000_000_123_456,
            id: Uuid::new_v4(),
        };
        assert_eq!(Cursor::decode(&cursor.encode()), Some(cursor));
    }

    #[test]
    fn foreign_text_is_not_a_cursor() {
        for text in [
            "",
            "abc",
            "!!!!",
            &URL_SAFE_NO_PAD.encode("12:not-a-uuid"),
            &URL_SAFE_NO_PAD.encode("x:y"),
        ] {
            assert_eq!(Cursor::decode(text), None, "{text}");
        }
        let padded = URL_SAFE_NO_PAD.encode(format!("+12:{}", Uuid::nil()));
        assert_eq!(Cursor::decode(&padded), None);
    }
}

/// The idempotency outcome of one item of a batch insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOutcome {
    Created(Uuid),
    Replayed(Uuid),
    Conflict,
}

/// Inserts many notifications with one set-based statement; each item gets its own
/// idempotency outcome, exactly as if it had been posted alone (an item repeating an
/// earlier item's key in the same batch is a replay or a conflict of that item).
pub async fn insert_batch(
    db: &impl GenericClient,
    items: &[NewNotification],
) -> Result<Vec<BatchOutcome>, tokio_postgres::Error> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Uuid> = items.iter().map(|n| n.id).collect();
    let keys: Vec<&str> = items.iter().map(|n| n.idempotency_key.as_str()).collect();
    let fingerprints: Vec<&str> = items.iter().map(|n| n.fingerprint.as_str()).collect();
    let recipients: Vec<&str> = items.iter().map(|n| n.recipient.as_str()).collect();
    let channels: Vec<&str> = items.iter().map(|n| n.channel.as_str()).collect();
    let priorities: Vec<i16> = items.iter().map(|n| n.priority.rank()).collect();
    let payloads: Vec<&Value> = items.iter().map(|n| &n.payload).collect();
    let at: Vec<Option<DateTime<Utc>>> = items
        .iter()
        .map(|n| match n.due {
            Due::At(at) => Some(at),
            Due::AfterSeconds(_) => None,
        })
        .collect();
    let after: Vec<Option<i32>> = items
        .iter()
        .map(|n| match n.due {
            Due::At(_) => None,
            Due::AfterSeconds(seconds) => Some(seconds),
        })
        .collect();
    let max_attempts: Vec<i32> = items.iter().map(|n| n.max_attempts).collect();
    let owners: Vec<Option<Uuid>> = items.iter().map(|n| n.owner_key_id).collect();

    let statement = db
        .prepare_cached(&format!(
            "WITH inserted AS (
                INSERT INTO notifications (id, idempotency_key, fingerprint, recipient, channel, priority,
                                           payload, scheduled_at, next_attempt_at, max_attempts, owner_key_id)
                SELECT id, key, fingerprint, recipient, channel, priority, payload, due, due, max_attempts, owner
                FROM (SELECT *, coalesce(at, now() + after_s * interval '1 second') AS due
                      FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int2[],
                                  $7::jsonb[], $8::timestamptz[], $9::int4[], $10::int4[], $11::uuid[])
                           AS i(id, key, fingerprint, recipient, channel, priority, payload, at, after_s,
                                max_attempts, owner)) AS input
                -- In key order: two batches sharing keys then wait for each other in the
                -- same order and cannot deadlock.
                ORDER BY key
                ON CONFLICT (idempotency_key) DO NOTHING
                RETURNING id, next_attempt_at
            ), woken AS (
                SELECT pg_notify('{wake}', '') WHERE EXISTS (SELECT 1 FROM inserted WHERE next_attempt_at <= now())
            )
            SELECT id, (SELECT count(*) FROM woken) FROM inserted",
            wake = super::WAKE_CHANNEL
        ))
        .await?;
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
            ],
        )
        .await?;
    let inserted: std::collections::HashSet<Uuid> = rows
        .iter()
        .map(|row| row.try_get(0))
        .collect::<Result<_, _>>()?;

    // Keys that were not inserted belong to an earlier row (or an earlier item of this
    // batch): read what won to tell replays from conflicts.
    let lost: Vec<&str> = items
        .iter()
        .filter(|n| !inserted.contains(&n.id))
        .map(|n| n.idempotency_key.as_str())
        .collect();
    let mut winners: std::collections::HashMap<String, (Uuid, String, Option<Uuid>)> =
        std::collections::HashMap::new();
    if !lost.is_empty() {
        let statement = db
            .prepare_cached(
                "SELECT idempotency_key, id, fingerprint, owner_key_id FROM notifications
                 WHERE idempotency_key = ANY($1)",
            )
            .await?;
        for row in db.query(&statement, &[&lost]).await? {
            winners.insert(
                row.try_get(0)?,
                (row.try_get(1)?, row.try_get(2)?, row.try_get(3)?),
            );
        }
    }
    Ok(items
        .iter()
        .map(|item| {
            if inserted.contains(&item.id) {
                return BatchOutcome::Created(item.id);
            }
            match winners.get(&item.idempotency_key) {
                Some((id, fingerprint, owner))
                    if *fingerprint == item.fingerprint && *owner == item.owner_key_id =>
                {
                    BatchOutcome::Replayed(*id)
                }
                _ => BatchOutcome::Conflict,
            }
        })
        .collect())
}
