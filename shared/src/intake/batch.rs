//! `POST /notifications/batch`: up to 5,000 notifications in one set-based insert, each
//! with its own validation and idempotency result; one bad item never fails the others.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use super::AppState;
use super::admit::admit;
use super::body::{BODY_LIMIT, read_json};
use super::error::{ApiError, FieldError};
use super::request::CreateRequest;
use super::validation::validate_create_for;
use crate::auth::Caller;
use crate::problems::Problems;
use crate::queue::{self, BatchOutcome, NewNotification};

pub const BATCH_BODY_LIMIT: usize = 8 * 1024 * 1024;
/// Behind API Gateway and Lambda: a synchronous invocation's payload (the body plus the
/// event around it) is capped at 6 MB, so the batch body stops at 5 MiB with an answer
/// that says so, instead of an invocation error from Lambda.
pub const LAMBDA_BATCH_BODY_LIMIT: usize = 5 * 1024 * 1024;
pub const BATCH_MAX_ITEMS: usize = 5000;

#[derive(Debug, Serialize)]
struct ItemResult {
    index: usize,
    status: u16,
    id: Option<Uuid>,
    errors: Vec<FieldError>,
}

pub async fn create_batch(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let limit = state.batch_body_limit;
    let body = read_json(&headers, body, limit)
        .await
        .map_err(|error| {
            if error.status != StatusCode::PAYLOAD_TOO_LARGE || limit >= BATCH_BODY_LIMIT {
                return error;
            }
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "Batch body is larger than {limit} bytes, the limit of this deployment \
                     (AWS Lambda caps a request at 6 MB): send the items in smaller batches"
                ),
            )
        })?
        .unwrap_or(Value::Null);
    let items = batch_items(&body)?;
    let now = chrono::Utc::now();

    let mut results: Vec<ItemResult> = Vec::with_capacity(items.len());
    let mut valid: Vec<CreateRequest> = Vec::with_capacity(items.len());
    let mut valid_index: Vec<usize> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        if larger_than_a_single_body(item) {
            results.push(ItemResult {
                index,
                status: 400,
                id: None,
                errors: vec![FieldError {
                    field: "body".into(),
                    errors: vec![format!(
                        "a notification must be at most {BODY_LIMIT} bytes as JSON, as in \
                         POST /notifications"
                    )],
                }],
            });
            continue;
        }
        match validate_create_for(item, now, &state.real_providers) {
            Ok(request) => {
                valid_index.push(index);
                valid.push(request);
                results.push(ItemResult {
                    index,
                    status: 0,
                    id: None,
                    errors: Vec::new(),
                });
            }
            Err(errors) => results.push(ItemResult {
                index,
                status: 400,
                id: None,
                errors,
            }),
        }
    }

    let db = state.pool.get().await?;
    // One read of the templates named, then one of profiles and one of the suppression
    // list for the whole batch.
    let (valid, valid_index) = if valid.iter().any(|r| r.template.is_some()) {
        let mut kept = Vec::with_capacity(valid.len());
        let mut kept_index = Vec::with_capacity(valid.len());
        for (index, pinned) in valid_index
            .into_iter()
            .zip(super::templated::pin(&db, valid).await?)
        {
            match pinned {
                Ok(request) => {
                    kept.push(request);
                    kept_index.push(index);
                }
                Err(errors) => {
                    results[index].status = 400;
                    results[index].errors = errors;
                }
            }
        }
        (kept, kept_index)
    } else {
        (valid, valid_index)
    };
    let valid: Vec<NewNotification> = admit(
        &db,
        &state.audience.secret,
        caller.key_id,
        valid,
        state.max_attempts,
        now,
    )
    .await?;
    let outcomes = queue::insert_batch(&db, &valid).await?;
    for ((index, item), outcome) in valid_index.into_iter().zip(&valid).zip(outcomes) {
        let result = &mut results[index];
        match outcome {
            BatchOutcome::Created(id) => (result.status, result.id) = (201, Some(id)),
            BatchOutcome::Replayed(id) => (result.status, result.id) = (200, Some(id)),
            BatchOutcome::Conflict => {
                result.status = 409;
                result.errors.push(FieldError {
                    field: "idempotencyKey".into(),
                    errors: vec![format!(
                        "Idempotency key \"{}\" was already used for a different notification request",
                        item.idempotency_key
                    )],
                });
            }
        }
    }
    Ok(Json(serde_json::json!({ "results": results })).into_response())
}

/// Whether `item` written as JSON is larger than a single `POST /notifications` body may
/// be: a notification one route accepts, the other would refuse on a replay. Stops
/// counting at the limit.
fn larger_than_a_single_body(item: &Value) -> bool {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            if self.0 > BODY_LIMIT {
                return Err(std::io::ErrorKind::FileTooLarge.into());
            }
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(&mut Counter(0), item).is_err()
}

/// `{"notifications": [1–5000 objects]}` and nothing else.
fn batch_items(body: &Value) -> Result<&Vec<Value>, ApiError> {
    let Some(object) = body.as_object() else {
        return Err(ApiError::field("body", "body must be a JSON object"));
    };
    let mut problems = Problems::new();
    problems.only(object, &["notifications"]);
    let items = match object.get("notifications") {
        Some(Value::Array(items)) if (1..=BATCH_MAX_ITEMS).contains(&items.len()) => Some(items),
        Some(Value::Array(_)) => {
            problems.add(
                "notifications",
                format!("notifications must contain between 1 and {BATCH_MAX_ITEMS} items"),
            );
            None
        }
        _ => {
            problems.add("notifications", "notifications must be an array");
            None
        }
    };
    match items {
        Some(items) if problems.is_empty() => Ok(items),
        _ => Err(problems.into()),
    }
}
