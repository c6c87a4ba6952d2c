//! The suppression list: addresses that must not be sent to, per channel, found by a keyed
//! hash of the address (see [`super::address`]). Fed by operators, one-click
//! unsubscribes, provider feedback and (in the record statement, with the transition)
//! invalid-recipient outcomes. The only SQL on `suppressions` outside that statement.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use uuid::Uuid;

use super::address;
use crate::domain::{Channel, names};
use crate::sql::{Statement, statement};

const FIND: Statement = statement!("suppressions/find");
const ADD: Statement = statement!("suppressions/add");
const ADD_REPORTED: Statement = statement!("suppressions/add_reported");
const REMOVE: Statement = statement!("suppressions/remove");
const LIST: Statement = statement!("suppressions/list");
const LIST_ADDRESS: Statement = statement!("suppressions/list_address");
const DIGEST_HOURLY: Statement = statement!("suppressions/digest_hourly");

/// Why an address is listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ListReason {
    Manual,
    Unsubscribed,
    Bounced,
    Complained,
    InvalidRecipient,
}

impl ListReason {
    pub const ALL: [ListReason; 5] = [
        ListReason::Manual,
        ListReason::Unsubscribed,
        ListReason::Bounced,
        ListReason::Complained,
        ListReason::InvalidRecipient,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ListReason::Manual => "MANUAL",
            ListReason::Unsubscribed => "UNSUBSCRIBED",
            ListReason::Bounced => "BOUNCED",
            ListReason::Complained => "COMPLAINED",
            ListReason::InvalidRecipient => "INVALID_RECIPIENT",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == text)
    }

    pub fn names() -> String {
        names(&Self::ALL, Self::as_str)
    }
}

/// Which of `wanted` (channel, keyed hash) are listed.
pub async fn listed(
    db: &impl GenericClient,
    wanted: &[(Channel, String)],
) -> Result<Vec<(Channel, String)>, tokio_postgres::Error> {
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let channels: Vec<Channel> = wanted.iter().map(|(c, _)| *c).collect();
    let hashes: Vec<&str> = wanted.iter().map(|(_, h)| h.as_str()).collect();
    let statement = FIND.prepare(db).await?;
    db.query(&statement, &[&channels, &hashes])
        .await?
        .iter()
        .map(|row| Ok((row.try_get("channel")?, row.try_get("address_hash")?)))
        .collect()
}

/// One entry as operators see it; the address is gone once its person was erased.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub channel: Channel,
    pub address: Option<String>,
    pub reason: String,
    #[serde(serialize_with = "crate::notification::serialize_time")]
    pub created_at: DateTime<Utc>,
}

/// Lists `address` on `channel` with `reason` unless it is listed already; returns the
/// entry and whether this call added it.
pub async fn add(
    db: &impl GenericClient,
    secret: &[u8],
    channel: Channel,
    address: &str,
    reason: ListReason,
) -> Result<(Entry, bool), tokio_postgres::Error> {
    let hash = address::hash(secret, channel, address);
    let stored = address::normalize(channel, address);
    let statement = ADD.prepare(db).await?;
    // A second call racing this one may commit between the insert's conflict check and
    // the read of the existing entry, which then sees neither: asking again finds it.
    loop {
        if let Some(row) = db
            .query_opt(&statement, &[&channel, &hash, &stored, &reason.as_str()])
            .await?
        {
            return Ok((entry(&row)?, row.try_get("added")?));
        }
    }
}

/// What adding a provider report's addresses changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Added {
    /// Addresses that were not listed before.
    pub added: u64,
    /// The notification that sent the reported message, when an attempt has its id.
    pub notification: Option<Uuid>,
}

/// Lists the email `addresses` a provider reported for `message_id` with `reason`;
/// listed ones keep their first reason.
pub async fn add_reported(
    db: &impl GenericClient,
    secret: &[u8],
    addresses: &[String],
    reason: ListReason,
    message_id: &str,
) -> Result<Added, tokio_postgres::Error> {
    let stored: Vec<String> = addresses
        .iter()
        .map(|a| address::normalize(Channel::Email, a))
        .collect();
    let hashes: Vec<String> = addresses
        .iter()
        .map(|a| address::hash(secret, Channel::Email, a))
        .collect();
    let statement = ADD_REPORTED.prepare(db).await?;
    let row = db
        .query_one(
            &statement,
            &[
                &Channel::Email,
                &stored,
                &message_id,
                &reason.as_str(),
                &hashes,
            ],
        )
        .await?;
    Ok(Added {
        added: u64::try_from(row.try_get::<_, i64>("added")?).unwrap_or_default(),
        notification: row.try_get("notification_id")?,
    })
}

/// Removes `address` from `channel`'s list; `false` when it was not listed.
pub async fn remove(
    db: &impl GenericClient,
    secret: &[u8],
    channel: Channel,
    address: &str,
) -> Result<bool, tokio_postgres::Error> {
    let statement = REMOVE.prepare(db).await?;
    let hash = address::hash(secret, channel, address);
    Ok(db
        .query_opt(&statement, &[&channel, &hash])
        .await?
        .is_some())
}

/// A position in the newest-first listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    pub created_at: DateTime<Utc>,
    pub channel: Channel,
    pub hash: String,
}

/// A page of the list, newest first, after `after`, optionally of one channel, one address
/// (on every channel unless one is named), or both.
pub async fn page(
    db: &impl GenericClient,
    secret: &[u8],
    channel: Option<Channel>,
    address: Option<&str>,
    after: Option<&Position>,
    limit: i64,
) -> Result<(Vec<Entry>, Option<Position>), tokio_postgres::Error> {
    let (at, after_channel, after_hash) = match after {
        Some(p) => (p.created_at, p.channel.as_str(), p.hash.clone()),
        // After the end of time: the first page.
        None => (DateTime::<Utc>::MAX_UTC, "~", "~".to_string()),
    };
    let rows = match address {
        None => {
            let statement = LIST.prepare(db).await?;
            db.query(
                &statement,
                &[&channel, &at, &after_channel, &after_hash, &(limit + 1)],
            )
            .await?
        }
        Some(address) => {
            // The hash is keyed per channel: an address without a channel is looked for
            // under each channel's hash.
            let channels = channel.map_or(Channel::ALL.to_vec(), |channel| vec![channel]);
            let (listed_under, hashes): (Vec<&str>, Vec<String>) = channels
                .iter()
                .map(|channel| (channel.as_str(), address::hash(secret, *channel, address)))
                .unzip();
            let statement = LIST_ADDRESS.prepare(db).await?;
            db.query(
                &statement,
                &[
                    &listed_under,
                    &hashes,
                    &at,
                    &after_channel,
                    &after_hash,
                    &(limit + 1),
                ],
            )
            .await?
        }
    };
    let mut entries = Vec::with_capacity(rows.len());
    let mut last = None;
    for row in rows.iter().take(usize::try_from(limit).unwrap_or(0)) {
        entries.push(entry(row)?);
        last = Some(Position {
            created_at: row.try_get("created_at")?,
            channel: row.try_get("channel")?,
            hash: row.try_get("address_hash")?,
        });
    }
    let more = rows.len() as i64 > limit;
    Ok((entries, if more { last } else { None }))
}

fn entry(row: &tokio_postgres::Row) -> Result<Entry, tokio_postgres::Error> {
    Ok(Entry {
        channel: row.try_get("channel")?,
        address: row.try_get("address")?,
        reason: row.try_get("reason")?,
        created_at: row.try_get("created_at")?,
    })
}

/// Provider-reported suppressions of one channel and reason: in the last hour, and in the
/// baseline hours before it.
#[derive(Debug, Clone, PartialEq)]
pub struct HourlySuppressions {
    pub channel: Channel,
    pub reason: String,
    pub last_hour: i64,
    pub baseline: i64,
}

/// Bounces, complaints and invalid recipients per channel and reason: the last hour and
/// the `baseline_hours` before it.
pub async fn hourly(
    db: &impl GenericClient,
    baseline_hours: i64,
) -> Result<Vec<HourlySuppressions>, tokio_postgres::Error> {
    let statement = DIGEST_HOURLY.prepare(db).await?;
    db.query(&statement, &[&baseline_hours])
        .await?
        .iter()
        .map(|row| {
            Ok(HourlySuppressions {
                channel: row.try_get("channel")?,
                reason: row.try_get("reason")?,
                last_hour: row.try_get("last_hour")?,
                baseline: row.try_get("baseline")?,
            })
        })
        .collect()
}
