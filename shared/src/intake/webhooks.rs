//! Webhook endpoints and their events over HTTP: `POST/GET /webhook-endpoints`,
//! `DELETE /webhook-endpoints/{id}`, `POST /webhook-endpoints/{id}/rotate-secret`,
//! `GET /webhook-events` and `POST /webhook-events/retry`. A client key sees and manages
//! only its own endpoints and their events; an operator key all of them.

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::AppState;
use super::body::{BODY_LIMIT, read_json};
use super::error::ApiError;
use super::handlers::parse_id;
use super::times::parse_iso;
use super::validation;
use crate::auth::{Caller, Scope};
use crate::notification::format_time;
use crate::problems::Problems;
use crate::webhook::destination;
use crate::webhook::endpoints::{self, EVENT_TYPES};
use crate::webhook::events::{self, EventFilter};

const URL_MAX: usize = 2048;
/// Events a replay sends again at most, per call.
const REPLAY_MAX: i64 = 1000;
const DISPATCH_STATES: [&str; 4] = ["PENDING", "DISPATCHING", "DELIVERED", "GIVEN_UP"];

/// `POST /webhook-endpoints` `{"url", "eventTypes"?}`: 201 with the endpoint and its
/// secret, shown this once. The URL is held to the SSRF rules now (literal addresses and
/// names resolving to a refused address are a 400) and again at every dispatch.
pub async fn create(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let body = read_json(&headers, body, BODY_LIMIT).await?;
    let mut problems = Problems::new();
    let empty = Map::new();
    let object = match &body {
        Some(Value::Object(object)) => object,
        _ => {
            problems.add("body", "body must be a JSON object");
            &empty
        }
    };
    problems.only(object, &["url", "eventTypes"]);
    let url = problems.required_text(object, "url", URL_MAX);
    let event_types = object
        .get("eventTypes")
        .and_then(|value| parse_event_types(value, &mut problems));
    if caller.scope == Scope::Client
        && let Some(types) = &event_types
        && types.iter().any(|t| endpoints::operator_only(t))
    {
        problems.add(
            "eventTypes",
            "circuit.opened and circuit.closed reach operator endpoints only",
        );
    }
    if let Some(url) = &url
        && let Err(reason) = destination::check_registration(url, state.webhooks).await
    {
        problems.add("url", reason);
    }
    let (Some(url), true) = (url, problems.is_empty()) else {
        return Err(ApiError::validation(problems.into_errors()));
    };
    let db = state.pool.get().await?;
    let (endpoint, secret) = endpoints::create(&db, &caller, &url, event_types.as_deref()).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "id": endpoint.id,
            "url": endpoint.url,
            "eventTypes": endpoint.event_types,
            "secret": secret,
            "createdAt": format_time(&endpoint.created_at),
        })),
    )
        .into_response())
}

/// A non-empty array of distinct known event types.
fn parse_event_types(value: &Value, problems: &mut Problems) -> Option<Vec<String>> {
    let allowed = EVENT_TYPES.join(", ");
    let Some(items) = value.as_array().filter(|items| !items.is_empty()) else {
        problems.add(
            "eventTypes",
            format!("eventTypes must be a non-empty array of: {allowed}"),
        );
        return None;
    };
    let mut types: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        match item.as_str().filter(|t| EVENT_TYPES.contains(t)) {
            Some(kind) if !types.iter().any(|t| t == kind) => types.push(kind.to_string()),
            Some(kind) => problems.add("eventTypes", format!("eventTypes lists {kind} twice")),
            None => {
                problems.add(
                    "eventTypes",
                    format!("eventTypes must contain only: {allowed}"),
                );
                return None;
            }
        }
    }
    Some(types)
}

/// `GET /webhook-endpoints`: the caller's endpoints (an operator's: all), without secrets.
pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let db = state.pool.get().await?;
    let items = endpoints::list(&db, &caller).await?;
    Ok(Json(json!({ "items": items })).into_response())
}

/// `DELETE /webhook-endpoints/{id}`: 204, or 404 when the caller has no such endpoint.
pub async fn delete(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let db = state.pool.get().await?;
    if endpoints::delete(&db, &caller, id).await? {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(not_found(id))
    }
}

/// `POST /webhook-endpoints/{id}/rotate-secret`: 200 `{"id","secret",
/// "previousSecretValidUntil"}`; the old secret keeps signing until then.
pub async fn rotate_secret(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let db = state.pool.get().await?;
    let rotated = endpoints::rotate(&db, &caller, id)
        .await?
        .ok_or_else(|| not_found(id))?;
    Ok(Json(json!({
        "id": rotated.id,
        "secret": rotated.secret,
        "previousSecretValidUntil": format_time(&rotated.previous_secret_valid_until),
    }))
    .into_response())
}

/// `GET /webhook-events?status=&endpointId=&limit=&cursor=`: newest first, keyset pages.
/// A client sees the events of its own endpoints only, and an `endpointId` not its own is
/// not found, as in a replay. An operator may name a deleted endpoint: its history stays.
pub async fn list_events(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let mut filter = parse_event_query(query.as_deref().unwrap_or(""))?;
    filter.owner = endpoints::manages(&caller);
    let db = state.pool.get().await?;
    if let (Some(id), Some(_)) = (filter.endpoint, filter.owner)
        && !endpoints::is_managed(&db, &caller, id).await?
    {
        return Err(not_found(id));
    }
    let mut items = events::list(
        &db,
        &EventFilter {
            limit: filter.limit + 1,
            ..filter.clone()
        },
    )
    .await?;
    let next = if items.len() as i64 > filter.limit {
        items.truncate(filter.limit as usize);
        items
            .last()
            .map(|last| encode_cursor(last.created_at, last.row_id))
    } else {
        None
    };
    Ok(Json(json!({ "items": items, "nextCursor": next })).into_response())
}

fn parse_event_query(query: &str) -> Result<EventFilter, ApiError> {
    let pairs = super::body::query_pairs(Some(query))?;
    let mut problems = Problems::new();
    let values = problems.query(&pairs, &["status", "endpointId", "limit", "cursor"]);
    let mut filter = EventFilter {
        limit: 20,
        ..EventFilter::default()
    };
    if let Some(status) = values.get("status") {
        filter.status = problems.one_of(
            "status",
            Some(status),
            |s| DISPATCH_STATES.contains(&s).then(|| s.to_string()),
            &DISPATCH_STATES.join(", "),
        );
    }
    if let Some(id) = values.get("endpointId") {
        match validation::uuid(id) {
            Some(id) => filter.endpoint = Some(id),
            None => problems.add("endpointId", "endpointId must be a UUID"),
        }
    }
    let (limit, after) = problems.page(&values, decode_cursor);
    filter.limit = limit.unwrap_or(filter.limit);
    filter.after = after;
    Ok(problems.or(filter)?)
}

/// `POST /webhook-events/retry` `{"endpointId"?, "since"?, "limit"?}`: sends GIVEN_UP
/// events again (the oldest first, up to `limit`, 1–1000, default 100), keeping their
/// eventId. A client replays only the events of its own endpoints; `since` counts from
/// when the event was written.
pub async fn replay(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let body = read_json(&headers, body, BODY_LIMIT).await?;
    let mut problems = Problems::new();
    let mut endpoint: Option<Uuid> = None;
    let mut since: Option<DateTime<Utc>> = None;
    let mut limit = 100;
    match &body {
        None => {}
        Some(Value::Object(object)) => {
            for (key, value) in object {
                match (key.as_str(), value) {
                    ("endpointId", Value::String(id)) => match validation::uuid(id) {
                        Some(id) => endpoint = Some(id),
                        None => problems.add("endpointId", "endpointId must be a UUID"),
                    },
                    ("endpointId", _) => problems.add("endpointId", "endpointId must be a UUID"),
                    ("since", Value::String(text)) => match parse_iso("since", text) {
                        Ok(at) => since = Some(at),
                        Err(message) => problems.add("since", message),
                    },
                    ("since", _) => problems.add("since", "since must be an ISO 8601 date-time"),
                    ("limit", value) => {
                        if let Some(n) = problems.integer_in(
                            "limit",
                            crate::problems::integer(value),
                            1..=REPLAY_MAX,
                        ) {
                            limit = n;
                        }
                    }
                    (other, _) => problems.unknown(other),
                }
            }
        }
        Some(_) => problems.add("body", "body must be a JSON object"),
    }
    let (endpoint, since, limit) = problems.or((endpoint, since, limit))?;
    let db = state.pool.get().await?;
    if let Some(id) = endpoint
        && !endpoints::is_managed(&db, &caller, id).await?
    {
        return Err(not_found(id));
    }
    let replayed = events::replay(&db, endpoints::manages(&caller), endpoint, since, limit).await?;
    Ok(Json(json!({ "replayed": replayed.len() })).into_response())
}

fn not_found(id: Uuid) -> ApiError {
    ApiError::not_found(format!("Webhook endpoint {id} not found"))
}

/// `<microseconds>:<row id>`, base64url.
fn encode_cursor(created_at: DateTime<Utc>, id: Uuid) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}:{id}", created_at.timestamp_micros()))
}

fn decode_cursor(cursor: &str) -> Option<(DateTime<Utc>, Uuid)> {
    if cursor.len() > 256 {
        return None;
    }
    let text = String::from_utf8(URL_SAFE_NO_PAD.decode(cursor).ok()?).ok()?;
    let (micros, id) = text.split_once(':')?;
    Some((
        crate::queue::cursor_time(micros.parse().ok()?)?,
        validation::uuid(id)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_tampering() {
        let at = DateTime::from_timestamp_micros(1_700_000_000_123_456).expect("time");
        let id = Uuid::new_v4();
        assert_eq!(decode_cursor(&encode_cursor(at, id)), Some((at, id)));
        assert_eq!(decode_cursor("bm90LWEtY3Vyc29y"), None);
        // Before year 1: a time chrono can hold and PostgreSQL cannot compare with.
        let ancient = URL_SAFE_NO_PAD.encode(format!("-300000000000000000:{id}"));
        assert_eq!(decode_cursor(&ancient), None);
    }

    #[test]
    fn event_types_must_be_known_and_distinct() {
        let mut problems = Problems::new();
        assert_eq!(
            parse_event_types(&json!(["notification.sent"]), &mut problems),
            Some(vec!["notification.sent".to_string()])
        );
        assert!(problems.is_empty());
        assert_eq!(parse_event_types(&json!([]), &mut problems), None);
        assert_eq!(parse_event_types(&json!(["nope"]), &mut problems), None);
        parse_event_types(&json!(["circuit.opened", "circuit.opened"]), &mut problems);
        let errors = problems.into_errors();
        assert_eq!(errors.len(), 1, "one field");
        assert_eq!(errors[0].errors.len(), 3, "{errors:?}");
    }
}
