//! Recipient profiles and their preferences over HTTP: `PUT/GET/DELETE /recipients/{id}`
//! and `GET/PATCH /recipients/{id}/preferences`. Each API key has its own recipients; an
//! operator reaches any key's (see [`profile_owner`]).

use std::collections::BTreeMap;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::AppState;
use super::body::{BODY_LIMIT, read_json};
use super::error::ApiError;
pub use super::recipient_body::{parse_preferences, parse_profile};
use super::validation::is_recipient_id;
use crate::audience::erasure;
use crate::audience::profiles::{self, Holder, Preference};
use crate::auth::{Caller, Scope};
use crate::notification::Channel;

/// `PUT /recipients/{recipientId}`: creates or replaces the profile; 200 with it.
pub async fn put(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let id = recipient_id(&id)?;
    let body = read_json(&headers, body, BODY_LIMIT).await?;
    let input = parse_profile(body.as_ref()).map_err(|p| ApiError::validation(p.into_errors()))?;
    let db = state.pool.get().await?;
    let owner = profile_owner(&db, &caller, &id).await?;
    let stored = profiles::upsert(&db, owner, &id, &input).await?;
    Ok(Json(stored).into_response())
}

/// `GET /recipients/{recipientId}`.
pub async fn get_one(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = recipient_id(&id)?;
    let db = state.pool.get().await?;
    let owner = profile_owner(&db, &caller, &id).await?;
    match profiles::find(&db, owner, &id).await? {
        Some(profile) => Ok(Json(profile).into_response()),
        None => Err(not_found(&id)),
    }
}

/// `DELETE /recipients/{recipientId}`: erasure. 204 once nothing keeps the person's
/// addresses (see [`erasure`]), whether or not anything was kept under the id: an erasure
/// repeated, or asked for a person never stored, holds as well as the first.
pub async fn erase(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = recipient_id(&id)?;
    let mut db = state.pool.get().await?;
    let owner = profile_owner(&db, &caller, &id).await?;
    let erased = erasure::erase(&mut db, &state.audience.secret, owner, &id).await?;
    tracing::info!(
        recipient_id = %id,
        profiles = erased.profiles,
        preferences = erased.preferences,
        notifications = erased.notifications,
        "recipient erased"
    );
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /recipients/{recipientId}/preferences`.
pub async fn get_preferences(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = recipient_id(&id)?;
    let db = state.pool.get().await?;
    let owner = profile_owner(&db, &caller, &id).await?;
    if profiles::find(&db, owner, &id).await?.is_none() {
        return Err(not_found(&id));
    }
    let preferences = profiles::preferences(&db, owner, &id).await?;
    Ok(Json(preferences_body(&preferences)).into_response())
}

/// `PATCH /recipients/{recipientId}/preferences`: merges the categories and channels
/// given; answers like `GET`.
pub async fn patch_preferences(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let id = recipient_id(&id)?;
    let body = read_json(&headers, body, BODY_LIMIT).await?;
    let changes =
        parse_preferences(body.as_ref()).map_err(|p| ApiError::validation(p.into_errors()))?;
    let db = state.pool.get().await?;
    let owner = profile_owner(&db, &caller, &id).await?;
    if profiles::find(&db, owner, &id).await?.is_none() {
        return Err(not_found(&id));
    }
    profiles::merge_preferences(&db, owner, &id, &changes).await?;
    let preferences = profiles::preferences(&db, owner, &id).await?;
    Ok(Json(preferences_body(&preferences)).into_response())
}

/// Whose profile `id` the caller means. A client key: its own. An operator (who sees
/// every key's recipients): its own if it has one, else the one key's that holds it; 409
/// when several keys hold that id and the operator has none of its own, since ids are
/// chosen by each client and may name different people.
async fn profile_owner(
    db: &impl deadpool_postgres::GenericClient,
    caller: &Caller,
    id: &str,
) -> Result<uuid::Uuid, ApiError> {
    let own = profiles::owner(caller.key_id);
    if caller.scope == Scope::Client {
        return Ok(own);
    }
    match profiles::holder(db, own, id).await? {
        Holder::One(owner) => Ok(owner),
        Holder::Several => Err(ApiError::conflict(format!(
            "Several API keys have a recipient {id}; use the key that created it"
        ))),
    }
}

fn recipient_id(text: &str) -> Result<String, ApiError> {
    if is_recipient_id(text) {
        Ok(text.to_string())
    } else {
        Err(ApiError::field(
            "recipientId",
            "recipientId must be 1 to 128 characters of A-Z, a-z, 0-9 and . _ : @ -",
        ))
    }
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("Recipient {id} not found"))
}

/// `{"categories": {"<category>": {"EMAIL": bool, "SMS": bool, "PUSH": bool}}}`: every
/// category with a stored preference, every channel of it (absent means opted in).
fn preferences_body(preferences: &[Preference]) -> Value {
    let mut categories: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
    for preference in preferences {
        let channels = categories
            .entry(preference.category.as_str())
            .or_insert_with(|| {
                Channel::ALL
                    .iter()
                    .map(|c| (c.as_str().to_string(), Value::Bool(true)))
                    .collect()
            });
        channels.insert(
            preference.channel.as_str().to_string(),
            Value::Bool(preference.opted_in),
        );
    }
    json!({ "categories": categories })
}
