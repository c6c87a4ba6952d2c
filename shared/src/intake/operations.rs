//! Operator routes: redrive one or many, and metrics.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::AppState;
use super::accept::prefers;
use super::body::{BODY_LIMIT, read_json};
use super::error::ApiError;
use super::handlers::parse_id;
use super::times::parse_iso;
use super::validation::RECIPIENT_MAX;
use crate::audience::erasure::ERASED_RECIPIENT;
use crate::digest;
use crate::metrics::Snapshot;
use crate::notification::{Channel, Status};
use crate::problems::Problems;
use crate::queue::{self, RedriveFilter};
use crate::redrive::{self, ERROR_TEXT_MAX, MAX_BATCH, RedriveError, SingleRedrive};

impl From<RedriveError> for ApiError {
    fn from(error: RedriveError) -> Self {
        match error {
            RedriveError::Pool(error) => error.into(),
            RedriveError::Database(error) => error.into(),
        }
    }
}

pub async fn retry_one(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    match redrive::redrive_one(&state.pool, id, state.max_attempts).await? {
        SingleRedrive::Redriven(mut notification) => {
            // Shown as GET shows it: a templated notification with its template.
            let db = state.pool.get().await?;
            queue::show_templates(&db, std::slice::from_mut(&mut notification)).await?;
            Ok(Json(notification).into_response())
        }
        SingleRedrive::WrongStatus(notification) if notification.recipient == ERASED_RECIPIENT => {
            Err(ApiError::conflict(format!(
                "Notification {id} belonged to an erased recipient; it cannot be retried"
            )))
        }
        SingleRedrive::WrongStatus(notification) => Err(ApiError::conflict(format!(
            "Notification {id} is {}; only DEAD_LETTERED or FAILED jobs can be retried",
            notification.status.as_str()
        ))),
        SingleRedrive::NotFound => Err(ApiError::not_found(format!("Notification {id} not found"))),
    }
}

pub async fn retry_bulk(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let body = read_json(&headers, body, BODY_LIMIT).await?;
    let (filter, limit) = parse_bulk_retry(body.as_ref())?;
    let summary = redrive::redrive_batch(&state.pool, &filter, limit, state.max_attempts).await?;
    Ok(Json(summary).into_response())
}

/// `{status?: DEAD_LETTERED | FAILED, recipient?, channel?, errorContains?, createdAfter?,
/// createdBefore?, limit?: 1–1000 (100)}`, nothing else: the filter of `dlq-redrive`.
pub fn parse_bulk_retry(body: Option<&Value>) -> Result<(RedriveFilter, i64), ApiError> {
    let mut filter = RedriveFilter {
        status: Some(Status::DeadLettered),
        ..RedriveFilter::default()
    };
    let mut limit = 100;
    let Some(body) = body else {
        return Ok((filter, limit));
    };
    let Some(object) = body.as_object() else {
        return Err(ApiError::field("body", "body must be a JSON object"));
    };
    let mut problems = Problems::new();
    for (key, value) in object {
        match key.as_str() {
            "status" => {
                filter.status = problems
                    .one_of(
                        "status",
                        value.as_str(),
                        redrivable,
                        "DEAD_LETTERED, FAILED",
                    )
                    .or(filter.status);
            }
            "recipient" => match value.as_str() {
                Some(recipient) if problems.text("recipient", recipient, RECIPIENT_MAX) => {
                    filter.recipient = Some(recipient.to_string());
                }
                Some(_) => {}
                None => problems.add("recipient", "recipient must be a string"),
            },
            "channel" => {
                filter.channel = problems.one_of(
                    "channel",
                    value.as_str(),
                    Channel::parse,
                    "EMAIL, SMS, PUSH",
                );
            }
            "errorContains" => match value.as_str() {
                Some(text) if problems.text("errorContains", text, ERROR_TEXT_MAX) => {
                    filter.error_contains = Some(text.to_string());
                }
                Some(_) => {}
                None => problems.add("errorContains", "errorContains must be a string"),
            },
            "createdAfter" | "createdBefore" => {
                let time = match value.as_str() {
                    Some(text) => parse_iso(key, text)
                        .map_err(|message| problems.add(key, message))
                        .ok(),
                    None => {
                        problems.add(key, format!("{key} must be an ISO 8601 date-time string"));
                        None
                    }
                };
                if key == "createdAfter" {
                    filter.created_after = time;
                } else {
                    filter.created_before = time;
                }
            }
            "limit" => {
                if let Some(n) =
                    problems.integer_in("limit", crate::problems::integer(value), 1..=MAX_BATCH)
                {
                    limit = n;
                }
            }
            other => problems.unknown(other),
        }
    }
    Ok(problems.or((filter, limit))?)
}

/// The statuses a redrive leaves from.
fn redrivable(text: &str) -> Option<Status> {
    Status::parse(text).filter(|s| matches!(s, Status::DeadLettered | Status::Failed))
}

/// `GET /digest`: the ranked findings (see [`crate::digest`]).
pub async fn digest(State(state): State<AppState>) -> Result<Response, ApiError> {
    let db = state.pool.get().await?;
    let digest = digest::read(&db, &state.providers.circuit).await?;
    Ok(Json(digest).into_response())
}

/// JSON by default; Prometheus text for `Accept: text/plain` or `?format=prometheus`.
pub async fn metrics(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let pairs = super::body::query_pairs(query.as_deref())?;
    let mut format = None;
    for (key, value) in &pairs {
        match (key.as_str(), value.as_str()) {
            ("format", "json" | "prometheus") if format.is_none() => format = Some(value.clone()),
            ("format", _) => {
                return Err(ApiError::field(
                    "format",
                    "format must be one of the following values: json, prometheus",
                ));
            }
            (other, _) => {
                return Err(ApiError::field(
                    other,
                    format!("property {other} should not exist"),
                ));
            }
        }
    }
    let wants_text = match format.as_deref() {
        Some(format) => format == "prometheus",
        None => headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|accept| prefers(accept, "text/plain", "application/json")),
    };
    let db = state.pool.get().await?;
    let snapshot = Snapshot::read(&db, &state.providers.circuit).await?;
    if wants_text {
        let text = snapshot.prometheus().map_err(|_| ApiError::internal())?;
        let mut response = text.into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        );
        Ok(response)
    } else {
        Ok(Json(snapshot.summary()).into_response())
    }
}
