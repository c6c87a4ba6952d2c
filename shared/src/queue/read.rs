//! Reading notifications: one by id, and keyset pages newest first.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::from_row;
use crate::notification::{Class, Notification, Status};
use crate::sql::{Statement, statement};

const FIND: Statement = statement!("notifications/find");
const LIST_ALL: Statement = statement!("notifications/list_all");
const LIST_BY_STATUS: Statement = statement!("notifications/list_by_status");
const LIST_BY_RECIPIENT: Statement = statement!("notifications/list_by_recipient");
const LIST_BY_OWNER: Statement = statement!("notifications/list_by_owner");
const LIST_BY_OWNER_STATUS: Statement = statement!("notifications/list_by_owner_status");
const LIST_BY_OWNER_RECIPIENT: Statement = statement!("notifications/list_by_owner_recipient");

/// Reads one notification; with `owner`, only if that key created it.
pub async fn find(
    db: &impl GenericClient,
    id: Uuid,
    owner: Option<Uuid>,
) -> Result<Option<Notification>, tokio_postgres::Error> {
    let statement = FIND.prepare(db).await?;
    db.query_opt(&statement, &[&id, &owner])
        .await?
        .as_ref()
        .map(from_row)
        .transpose()
}

/// A position in the newest-first order: rows strictly after it come next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub created_at_micros: i64,
    pub id: Uuid,
}

/// The time of a cursor's position, `micros` after the epoch; `None` unless PostgreSQL
/// can compare with it (years 1 to 9999): a cursor holding anything else was never one
/// the service wrote, and passed on it would be a database error.
pub fn cursor_time(micros: i64) -> Option<DateTime<Utc>> {
    let at = DateTime::<Utc>::from_timestamp_micros(micros)?;
    (1..=9999)
        .contains(&chrono::Datelike::year(&at))
        .then_some(at)
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
        cursor_time(created_at_micros)?;
        let id = Uuid::try_parse(id).ok()?;
        // Only the canonical spelling is accepted, so a cursor has exactly one text form.
        (format!("{created_at_micros}:{id}") == text).then_some(Cursor {
            created_at_micros,
            id,
        })
    }

    /// The position as the list statements take it.
    fn position(cursor: Option<Cursor>) -> (DateTime<Utc>, Uuid) {
        cursor
            .and_then(|c| {
                DateTime::<Utc>::from_timestamp_micros(c.created_at_micros).map(|at| (at, c.id))
            })
            // Before the first row: no row is created after the end of time.
            .unwrap_or((DateTime::<Utc>::MAX_UTC, Uuid::max()))
    }
}

#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only notifications this key created (`None`: all).
    pub owner: Option<Uuid>,
    pub status: Option<Status>,
    pub recipient: Option<String>,
    /// TRANSACTIONAL or BULK only; any when `None`.
    pub class: Option<Class>,
    /// One category only; any when `None`.
    pub category: Option<String>,
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
/// there is a next page. Each combination of owner, status and recipient has its own
/// statement, served by its own index; class and category are filtered on the way.
pub async fn list(
    db: &impl GenericClient,
    filter: &ListFilter,
) -> Result<ListPage, tokio_postgres::Error> {
    let (after_time, after_id) = Cursor::position(filter.after);
    let fetch = filter.limit + 1;
    let class = filter.class.map(Class::as_str);
    let page: [&(dyn ToSql + Sync); 5] = [&after_time, &after_id, &fetch, &class, &filter.category];
    let (statement, filters): (Statement, Vec<&(dyn ToSql + Sync)>) =
        match (&filter.owner, &filter.status, &filter.recipient) {
            (None, None, None) => (LIST_ALL, vec![]),
            (None, Some(status), None) => (LIST_BY_STATUS, vec![status]),
            (None, status, Some(recipient)) => (LIST_BY_RECIPIENT, vec![recipient, status]),
            (Some(owner), None, None) => (LIST_BY_OWNER, vec![owner]),
            (Some(owner), Some(status), None) => (LIST_BY_OWNER_STATUS, vec![owner, status]),
            (Some(owner), status, Some(recipient)) => {
                (LIST_BY_OWNER_RECIPIENT, vec![recipient, owner, status])
            }
        };
    let params: Vec<&(dyn ToSql + Sync)> = filters.into_iter().chain(page).collect();
    let prepared = statement.prepare(db).await?;
    let rows = db.query(&prepared, &params).await?;
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
        // Before 4713 BC PostgreSQL refuses the time; such a cursor is simply invalid.
        let ancient = URL_SAFE_NO_PAD.encode(format!("-210866803200000001:{}", Uuid::nil()));
        assert_eq!(Cursor::decode(&ancient), None);
    }
}
