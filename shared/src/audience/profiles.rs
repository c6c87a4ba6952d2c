//! Recipient profiles and their preferences: the only SQL on `recipients` and
//! `recipient_preferences`. A profile belongs to the API key that wrote it (the nil key
//! for anonymous access); one key never sees another's.

use std::collections::HashSet;

use chrono::{DateTime, NaiveTime, Utc};
use chrono_tz::Tz;
use deadpool_postgres::GenericClient;
use serde::Serialize;
use uuid::Uuid;

use super::decide::Profile;
use super::quiet::QuietHours;
use crate::notification::Channel;
use crate::sql::{Statement, statement};

const UPSERT: Statement = statement!("recipients/upsert");
const FIND: Statement = statement!("recipients/find");
const FACTS: Statement = statement!("recipients/facts");
const PREFERENCES: Statement = statement!("recipient_preferences/list");
const MERGE: Statement = statement!("recipient_preferences/merge");
const OPT_OUT: Statement = statement!("recipient_preferences/opt_out");
const OWNERS: Statement = statement!("recipients/owners");
const PAGE_IDS: Statement = statement!("recipients/page_ids");
const COUNT: Statement = statement!("recipients/count");
const ANALYZE: Statement = statement!("recipients/analyze");

/// Brings the planner's picture of the profiles up to date for [`page_ids`] walking them
/// (see the statement for why); a sample, so it costs tens of milliseconds, once a campaign.
pub async fn analyze(db: &impl GenericClient) -> Result<(), tokio_postgres::Error> {
    db.batch_execute(ANALYZE.text).await
}

/// The next `limit` recipient ids of `owner` after `after` (from the first without), in
/// key order: a keyset walk over every profile of an owner.
pub async fn page_ids(
    db: &impl GenericClient,
    owner: Uuid,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<String>, tokio_postgres::Error> {
    let statement = PAGE_IDS.prepare(db).await?;
    db.query(&statement, &[&owner, &after.unwrap_or(""), &limit])
        .await?
        .iter()
        .map(|row| row.try_get("recipient_id"))
        .collect()
}

/// How many profiles `owner` has.
pub async fn count(db: &impl GenericClient, owner: Uuid) -> Result<i64, tokio_postgres::Error> {
    let statement = COUNT.prepare(db).await?;
    db.query_one(&statement, &[&owner])
        .await?
        .try_get("profiles")
}

/// The namespace of recipient ids: the caller's key, or the nil key without one.
pub fn owner(key: Option<Uuid>) -> Uuid {
    key.unwrap_or(Uuid::nil())
}

/// A profile as `PUT` stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileInput {
    pub email: Option<String>,
    pub phone: Option<String>,
    pub push_tokens: Vec<String>,
    pub timezone: Tz,
    pub locale: String,
    pub quiet_hours: Option<QuietHours>,
    pub unsubscribed_all: bool,
}

/// A profile as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredProfile {
    pub recipient_id: String,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub push_tokens: Vec<String>,
    pub timezone: String,
    pub locale: String,
    pub quiet_hours: Option<QuietHoursView>,
    pub unsubscribed_all: bool,
    #[serde(serialize_with = "crate::notification::serialize_time")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::notification::serialize_time")]
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuietHoursView {
    pub start: String,
    pub end: String,
}

fn stored(row: &tokio_postgres::Row) -> Result<StoredProfile, tokio_postgres::Error> {
    let start: Option<NaiveTime> = row.try_get("quiet_start")?;
    let end: Option<NaiveTime> = row.try_get("quiet_end")?;
    Ok(StoredProfile {
        recipient_id: row.try_get("recipient_id")?,
        email: row.try_get("email")?,
        phone: row.try_get("phone")?,
        push_tokens: row.try_get("push_tokens")?,
        timezone: row.try_get("timezone")?,
        locale: row.try_get("locale")?,
        quiet_hours: start.zip(end).map(|(start, end)| QuietHoursView {
            start: start.format("%H:%M").to_string(),
            end: end.format("%H:%M").to_string(),
        }),
        unsubscribed_all: row.try_get("unsubscribed_all")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

pub async fn upsert(
    db: &impl GenericClient,
    owner: Uuid,
    id: &str,
    profile: &ProfileInput,
) -> Result<StoredProfile, tokio_postgres::Error> {
    let statement = UPSERT.prepare(db).await?;
    let timezone = profile.timezone.name();
    let (start, end) = match profile.quiet_hours {
        Some(hours) => (Some(hours.start), Some(hours.end)),
        None => (None, None),
    };
    let row = db
        .query_one(
            &statement,
            &[
                &owner,
                &id,
                &profile.email,
                &profile.phone,
                &profile.push_tokens,
                &timezone,
                &profile.locale,
                &start,
                &end,
                &profile.unsubscribed_all,
            ],
        )
        .await?;
    stored(&row)
}

pub async fn find(
    db: &impl GenericClient,
    owner: Uuid,
    id: &str,
) -> Result<Option<StoredProfile>, tokio_postgres::Error> {
    let statement = FIND.prepare(db).await?;
    db.query_opt(&statement, &[&owner, &id])
        .await?
        .as_ref()
        .map(stored)
        .transpose()
}

/// What the audience rules read of the profiles `ids` of `owner`, in one statement.
pub async fn facts(
    db: &impl GenericClient,
    owner: Uuid,
    ids: &[&str],
) -> Result<Vec<(String, Profile)>, tokio_postgres::Error> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let statement = FACTS.prepare(db).await?;
    let mut profiles = Vec::new();
    for row in db.query(&statement, &[&owner, &ids]).await? {
        let timezone: String = row.try_get("timezone")?;
        let start: Option<NaiveTime> = row.try_get("quiet_start")?;
        let end: Option<NaiveTime> = row.try_get("quiet_end")?;
        let categories: Vec<String> = row.try_get("opted_out_categories")?;
        let channels: Vec<Channel> = row.try_get("opted_out_channels")?;
        profiles.push((
            row.try_get("recipient_id")?,
            Profile {
                email: row.try_get("email")?,
                phone: row.try_get("phone")?,
                push_tokens: row.try_get("push_tokens")?,
                // Stored only after the PUT checked it; UTC should the database disagree.
                timezone: timezone.parse().unwrap_or(chrono_tz::UTC),
                locale: row.try_get("locale")?,
                quiet_hours: start.zip(end).map(|(start, end)| QuietHours { start, end }),
                unsubscribed_all: row.try_get("unsubscribed_all")?,
                opt_outs: categories.into_iter().zip(channels).collect::<HashSet<_>>(),
            },
        ));
    }
    Ok(profiles)
}

/// One preference: opted in (or out) of `category` on `channel`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preference {
    pub category: String,
    pub channel: Channel,
    pub opted_in: bool,
}

pub async fn preferences(
    db: &impl GenericClient,
    owner: Uuid,
    id: &str,
) -> Result<Vec<Preference>, tokio_postgres::Error> {
    let statement = PREFERENCES.prepare(db).await?;
    db.query(&statement, &[&owner, &id])
        .await?
        .iter()
        .map(|row| {
            Ok(Preference {
                category: row.try_get("category")?,
                channel: row.try_get("channel")?,
                opted_in: row.try_get("opted_in")?,
            })
        })
        .collect()
}

/// Merges `changes` into the profile's preferences (the profile must exist).
pub async fn merge_preferences(
    db: &impl GenericClient,
    owner: Uuid,
    id: &str,
    changes: &[Preference],
) -> Result<(), tokio_postgres::Error> {
    let categories: Vec<&str> = changes.iter().map(|p| p.category.as_str()).collect();
    let channels: Vec<Channel> = changes.iter().map(|p| p.channel).collect();
    let opted_in: Vec<bool> = changes.iter().map(|p| p.opted_in).collect();
    let statement = MERGE.prepare(db).await?;
    db.execute(
        &statement,
        &[&owner, &id, &categories, &channels, &opted_in],
    )
    .await?;
    Ok(())
}

/// Opts the profile out of `category` (`*`: every bulk category) on `channel`, whether or
/// not the profile exists now: it applies from the moment it does.
pub async fn opt_out(
    db: &impl GenericClient,
    owner: Uuid,
    id: &str,
    category: &str,
    channel: Channel,
) -> Result<(), tokio_postgres::Error> {
    let statement = OPT_OUT.prepare(db).await?;
    db.execute(&statement, &[&owner, &id, &category, &channel])
        .await?;
    Ok(())
}

/// Whose profile named `id` a caller whose own profiles are `own`'s means, when it may
/// reach every key's (an operator): its own if it has one, else the one key's that holds
/// it, else its own (none exists yet). One look-up.
pub async fn holder(
    db: &impl GenericClient,
    own: Uuid,
    id: &str,
) -> Result<Holder, tokio_postgres::Error> {
    let statement = OWNERS.prepare(db).await?;
    let owners = db
        .query(&statement, &[&id, &own])
        .await?
        .iter()
        .map(|row| row.try_get("owner"))
        .collect::<Result<Vec<Uuid>, _>>()?;
    Ok(match owners.as_slice() {
        [] => Holder::One(own),
        [first, ..] if *first == own => Holder::One(own),
        [one] => Holder::One(*one),
        _ => Holder::Several,
    })
}

/// The answer of [`holder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    One(Uuid),
    /// Several other keys hold a profile of that id: ids are chosen by each client, so
    /// they may name different people.
    Several,
}
