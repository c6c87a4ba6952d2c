//! The campaign routes (operator): submit (idempotent by key and body), read, list,
//! cancel. Submission only stores the campaign; sweepers expand it in chunks.

use std::collections::{HashMap, HashSet};

use axum::Extension;
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::AppState;
use super::batch::BATCH_BODY_LIMIT;
use super::body::read_json;
use super::error::ApiError;
use super::fingerprint;
use super::handlers::parse_id;
use super::times::parse_iso;
use super::validation::{
    IDEMPOTENCY_KEY_MAX, SEND_AT_HORIZON_DAYS, is_recipient_id, template_use, to_milliseconds,
};
use crate::audience::profiles;
use crate::auth::Caller;
use crate::content::campaigns::{self, Campaign, NewCampaign, RECIPIENT_IDS_MAX, Submitted};
use crate::content::templates;
use crate::notification::{Channel, Priority};
use crate::problems::Problems;
use crate::queue::Cursor;

const NAME_MAX: usize = 200;
const FIELDS: [&str; 8] = [
    "idempotencyKey",
    "name",
    "channel",
    "template",
    "category",
    "priority",
    "sendAt",
    "audience",
];

/// A submission that passed validation, before its template is pinned.
struct Submission {
    idempotency_key: String,
    name: String,
    channel: Channel,
    template_id: String,
    version: Option<i32>,
    data: Value,
    category: String,
    priority: Priority,
    send_at: Option<DateTime<Utc>>,
    recipient_ids: Option<Vec<String>>,
}

impl Submission {
    /// The body without its key, defaults filled in and times in UTC: what tells a
    /// replay from a conflicting reuse of the key.
    fn fingerprint(&self) -> String {
        let mut template = Map::new();
        template.insert("id".into(), Value::from(self.template_id.as_str()));
        if let Some(version) = self.version {
            template.insert("version".into(), Value::from(version));
        }
        template.insert("data".into(), self.data.clone());
        fingerprint::digest(&json!({
            "name": self.name,
            "channel": self.channel.as_str(),
            "template": template,
            "category": self.category,
            "priority": self.priority.as_str(),
            "sendAt": self.send_at.map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)),
            "audience": match &self.recipient_ids {
                Some(ids) => json!({"recipientIds": ids}),
                None => json!({"allRecipients": true}),
            },
        }))
    }
}

pub async fn create(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let body = read_json(&headers, body, BATCH_BODY_LIMIT)
        .await?
        .unwrap_or(Value::Null);
    let submission = validate(&body)?;
    let owner = profiles::owner(caller.key_id);
    let db = state.pool.get().await?;
    let version = templates::find(&db, &submission.template_id, submission.version)
        .await?
        .ok_or_else(|| match submission.version {
            Some(version) => ApiError::field(
                "template.version",
                format!(
                    "Template {} has no version {version}",
                    submission.template_id
                ),
            ),
            None => ApiError::field(
                "template.id",
                format!("Template {} not found", submission.template_id),
            ),
        })?;
    if version.channel != submission.channel {
        return Err(ApiError::field(
            "template.id",
            format!(
                "Template {} is for {}, not {}",
                version.template_id,
                version.channel.as_str(),
                submission.channel.as_str()
            ),
        ));
    }
    let audience_size = match &submission.recipient_ids {
        Some(ids) => ids.len() as i64,
        None => profiles::count(&db, owner).await?,
    };
    let new = NewCampaign {
        id: Uuid::new_v4(),
        owner,
        fingerprint: submission.fingerprint(),
        idempotency_key: submission.idempotency_key,
        name: submission.name,
        channel: submission.channel,
        template_id: version.template_id.clone(),
        template_version: version.version,
        data: submission.data,
        category: submission.category,
        priority: submission.priority,
        send_at: submission.send_at,
        recipient_ids: submission.recipient_ids,
        audience_size: i32::try_from(audience_size).unwrap_or(i32::MAX),
    };
    match campaigns::insert(&db, &new).await? {
        Submitted::Created(campaign) => Ok((
            StatusCode::ACCEPTED,
            Json(campaign.to_json(&Default::default())),
        )
            .into_response()),
        Submitted::Replayed(campaign) => {
            let counts = campaigns::counts(&db, campaign.id).await?;
            Ok((StatusCode::OK, Json(campaign.to_json(&counts))).into_response())
        }
        Submitted::Conflict => Err(ApiError::conflict(format!(
            "Idempotency key \"{}\" was already used for a different campaign",
            new.idempotency_key
        ))),
    }
}

pub async fn get_one(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let db = state.pool.get().await?;
    let campaign = campaigns::find(&db, id)
        .await?
        .ok_or_else(|| not_found(id))?;
    let counts = campaigns::counts(&db, id).await?;
    Ok(Json(campaign.to_json(&counts)).into_response())
}

/// `limit` (1–100, default 20) and `cursor`; newest first.
pub async fn list(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let pairs = super::body::query_pairs(query.as_deref())?;
    let mut problems = Problems::new();
    let values = problems.query(&pairs, &["limit", "cursor"]);
    let (limit, after) = problems.page(&values, Cursor::decode);
    let limit = limit.unwrap_or(20);
    problems.or(())?;
    let db = state.pool.get().await?;
    let mut page: Vec<Campaign> = campaigns::list(&db, after.as_ref(), limit + 1).await?;
    let next = (page.len() as i64 > limit).then(|| {
        page.truncate(limit as usize);
        page.last().map(|c| c.cursor().encode())
    });
    let counts = campaigns::counts_of(&db, &page).await?;
    let none = HashMap::new();
    let items: Vec<Value> = page
        .iter()
        .map(|campaign| campaign.to_json(counts.get(&campaign.id).unwrap_or(&none)))
        .collect();
    Ok(Json(json!({"items": items, "nextCursor": next.flatten()})).into_response())
}

/// Stops expansion and cancels what is still PENDING; 200 with the campaign. One already
/// CANCELLED or DONE has nothing left to stop and is answered as it is.
pub async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let db = state.pool.get().await?;
    let campaign = campaigns::cancel(&db, id)
        .await?
        .ok_or_else(|| not_found(id))?;
    let counts = campaigns::counts(&db, id).await?;
    Ok(Json(campaign.to_json(&counts)).into_response())
}

fn validate(body: &Value) -> Result<Submission, ApiError> {
    let Some(object) = body.as_object() else {
        return Err(ApiError::field("body", "body must be a JSON object"));
    };
    let mut problems = Problems::new();
    problems.only(object, &FIELDS);
    let idempotency_key = problems.required_text(object, "idempotencyKey", IDEMPOTENCY_KEY_MAX);
    let name = problems.required_text(object, "name", NAME_MAX);
    let channel = match object.get("channel") {
        None => {
            problems.add("channel", "channel is required");
            None
        }
        Some(value) => problems.one_of(
            "channel",
            value.as_str(),
            Channel::parse,
            "EMAIL, SMS, PUSH",
        ),
    };
    let template = match object.get("template") {
        None => {
            problems.add("template", "template is required");
            None
        }
        Some(value) => template_use(value, &mut problems),
    };
    let category = super::validation::category(object.get("category"), &mut problems);
    // Campaigns are bulk: LOW unless told otherwise.
    let priority = match object.get("priority") {
        None => Some(Priority::Low),
        Some(value) => problems.one_of(
            "priority",
            value.as_str(),
            Priority::parse,
            "HIGH, NORMAL, LOW",
        ),
    };
    let send_at = match object.get("sendAt") {
        None => Some(None),
        Some(Value::String(text)) => match parse_iso("sendAt", text).map(to_milliseconds) {
            // The horizon of a single notification holds for a campaign's too.
            Ok(at) if at - Utc::now() > chrono::TimeDelta::days(SEND_AT_HORIZON_DAYS) => {
                problems.add(
                    "sendAt",
                    format!("sendAt must be within {SEND_AT_HORIZON_DAYS} days from now"),
                );
                None
            }
            Ok(at) => Some(Some(at)),
            Err(message) => {
                problems.add("sendAt", message);
                None
            }
        },
        Some(_) => {
            problems.add("sendAt", "sendAt must be a valid ISO 8601 date-time");
            None
        }
    };
    let recipient_ids = audience(object.get("audience"), &mut problems);
    match (
        idempotency_key,
        name,
        channel,
        template,
        category,
        priority,
        send_at,
        recipient_ids,
    ) {
        (
            Some(idempotency_key),
            Some(name),
            Some(channel),
            Some((template, data)),
            Some(category),
            Some(priority),
            Some(send_at),
            Some(recipient_ids),
        ) if problems.is_empty() => Ok(Submission {
            idempotency_key,
            name,
            channel,
            template_id: template.id,
            version: template.version,
            data,
            category,
            priority,
            send_at,
            recipient_ids,
        }),
        _ => Err(problems.into()),
    }
}

/// How many invalid recipient ids an error names one by one; the rest are counted.
const INVALID_IDS_NAMED: usize = 100;

/// `{"recipientIds": [1–100,000 ids]}` (duplicates dropped, order kept) or
/// `{"allRecipients": true}` (`Some(None)`).
fn audience(value: Option<&Value>, problems: &mut Problems) -> Option<Option<Vec<String>>> {
    let message = "audience must be {\"recipientIds\": [...]} or {\"allRecipients\": true}";
    let Some(object) = value.and_then(Value::as_object) else {
        problems.add("audience", message);
        return None;
    };
    if object.len() != 1 {
        problems.add("audience", message);
        return None;
    }
    match (object.get("recipientIds"), object.get("allRecipients")) {
        (Some(Value::Array(ids)), None) if (1..=RECIPIENT_IDS_MAX).contains(&ids.len()) => {
            let mut seen = HashSet::with_capacity(ids.len());
            let mut unique = Vec::with_capacity(ids.len());
            let mut invalid = 0;
            for (index, id) in ids.iter().enumerate() {
                match id.as_str() {
                    Some(id) if is_recipient_id(id) => {
                        if seen.insert(id) {
                            unique.push(id.to_string());
                        }
                    }
                    _ => {
                        invalid += 1;
                        if invalid <= INVALID_IDS_NAMED {
                            problems.add(
                                &format!("audience.recipientIds.{index}"),
                                "a recipient id must be 1 to 128 letters, digits or ._:@-",
                            );
                        }
                    }
                }
            }
            if invalid > INVALID_IDS_NAMED {
                problems.add(
                    "audience.recipientIds",
                    format!(
                        "{} more recipient ids are invalid",
                        invalid - INVALID_IDS_NAMED
                    ),
                );
            }
            (invalid == 0).then_some(Some(unique))
        }
        (Some(_), None) => {
            problems.add(
                "audience.recipientIds",
                format!("audience.recipientIds must be an array of 1 to {RECIPIENT_IDS_MAX} recipient ids"),
            );
            None
        }
        (None, Some(Value::Bool(true))) => Some(None),
        _ => {
            problems.add("audience", message);
            None
        }
    }
}

fn not_found(id: Uuid) -> ApiError {
    ApiError::not_found(format!("Campaign {id} not found"))
}
