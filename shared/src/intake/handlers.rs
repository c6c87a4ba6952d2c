//! The route handlers: parse, call the queue, shape the response.

use axum::Extension;
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use serde_json::{Value, json};
use uuid::Uuid;

use super::AppState;
use super::body::{BODY_LIMIT, read_json};
use super::error::ApiError;
use super::request::RequestTarget;
use super::validation::{self, RECIPIENT_MAX, validate_create_for};
use crate::auth::Caller;
use crate::domain::names;
use crate::notification::{Class, Status};
use crate::problems::Problems;
use crate::queue::{self, Cursor, InsertOutcome, ListFilter};

const REPLAYED: &str = "idempotent-replayed";
const CURSOR_MAX: usize = 512;

pub async fn create(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let body = read_json(&headers, body, BODY_LIMIT)
        .await?
        .unwrap_or(Value::Null);
    let request = validate_create_for(&body, chrono::Utc::now(), &state.real_providers)
        .map_err(ApiError::validation)?;
    let db = state.pool.get().await?;
    let request = if request.template.is_some() {
        match super::templated::pin(&db, vec![request]).await?.pop() {
            Some(pinned) => pinned.map_err(ApiError::validation)?,
            None => return Err(ApiError::internal()),
        }
    } else {
        request
    };
    let new = match request.target {
        // Nothing to read first: the insert checks the suppression list itself.
        RequestTarget::Address(_) => super::admit::admit_addressed(
            &state.audience.secret,
            caller.key_id,
            request,
            state.max_attempts,
            chrono::Utc::now(),
        ),
        RequestTarget::Profile(_) => super::admit::admit(
            &db,
            &state.audience.secret,
            caller.key_id,
            vec![request],
            state.max_attempts,
            chrono::Utc::now(),
        )
        .await?
        .pop(),
    };
    let Some(new) = new else {
        return Err(ApiError::internal());
    };
    match queue::insert(&db, &new).await? {
        InsertOutcome::Created(mut notification) => {
            notification.show_template(&new.payload);
            Ok(with_replayed(
                (StatusCode::CREATED, Json(notification)).into_response(),
                false,
            ))
        }
        InsertOutcome::Replayed(mut notification) => {
            queue::show_templates(&db, std::slice::from_mut(&mut notification)).await?;
            Ok(with_replayed(
                (StatusCode::OK, Json(notification)).into_response(),
                true,
            ))
        }
        InsertOutcome::Conflict => Err(ApiError::conflict(format!(
            "Idempotency key \"{}\" was already used for a different notification request",
            new.idempotency_key
        ))),
    }
}

fn with_replayed(mut response: Response, replayed: bool) -> Response {
    let value = if replayed { "true" } else { "false" };
    response
        .headers_mut()
        .insert(REPLAYED, HeaderValue::from_static(value));
    response
}

pub async fn get_one(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let db = state.pool.get().await?;
    match queue::find(&db, id, caller.owner_filter()).await? {
        Some(mut notification) => {
            queue::show_templates(&db, std::slice::from_mut(&mut notification)).await?;
            Ok(Json(notification).into_response())
        }
        None => Err(not_found(id)),
    }
}

pub async fn cancel(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let db = state.pool.get().await?;
    let mut notification = queue::cancel(&db, id, caller.owner_filter())
        .await?
        .ok_or_else(|| not_found(id))?;
    queue::show_templates(&db, std::slice::from_mut(&mut notification)).await?;
    match notification.status {
        Status::Cancelled => Ok(Json(notification).into_response()),
        other => Err(ApiError::conflict(format!(
            "Notification {id} is {}; only PENDING jobs can be cancelled",
            other.as_str()
        ))),
    }
}

pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let mut filter = parse_list_query(query.as_deref().unwrap_or(""))?;
    filter.owner = caller.owner_filter();
    let db = state.pool.get().await?;
    let mut page = queue::list(&db, &filter).await?;
    queue::show_templates(&db, &mut page.items).await?;
    Ok(Json(json!({
        "items": page.items,
        "nextCursor": page.next.map(|c| c.encode()),
    }))
    .into_response())
}

/// `status`, `recipient`, `class`, `category`, `limit` (1–100, default 20) and `cursor`;
/// nothing else, each once.
pub fn parse_list_query(query: &str) -> Result<ListFilter, ApiError> {
    let pairs = super::body::query_pairs(Some(query))?;
    let mut problems = Problems::new();
    let values = problems.query(
        &pairs,
        &[
            "status",
            "recipient",
            "class",
            "category",
            "limit",
            "cursor",
        ],
    );
    let mut filter = ListFilter {
        limit: 20,
        ..ListFilter::default()
    };
    if let Some(status) = values.get("status") {
        filter.status = problems.one_of(
            "status",
            Some(status),
            Status::parse,
            &names(&Status::ALL, Status::as_str),
        );
    }
    if let Some(recipient) = values.get("recipient")
        && problems.text("recipient", recipient, RECIPIENT_MAX)
    {
        filter.recipient = Some((*recipient).to_string());
    }
    if let Some(class) = values.get("class") {
        filter.class = problems.one_of("class", Some(*class), Class::parse, "TRANSACTIONAL, BULK");
    }
    if let Some(category) = values.get("category") {
        if validation::is_category(category) {
            filter.category = Some((*category).to_string());
        } else {
            problems.add(
                "category",
                "category must be 1 to 64 lower-case letters, digits or _.- starting with a letter or digit",
            );
        }
    }
    let (limit, after) = problems.page(&values, |cursor| {
        (cursor.len() <= CURSOR_MAX)
            .then(|| Cursor::decode(cursor))
            .flatten()
    });
    filter.limit = limit.unwrap_or(filter.limit);
    filter.after = after;
    Ok(problems.or(filter)?)
}

pub async fn health(State(state): State<AppState>) -> Response {
    let check = async {
        let db = state.pool.get().await.ok()?;
        db.simple_query("SELECT 1").await.ok()
    };
    match tokio::time::timeout(std::time::Duration::from_millis(1500), check).await {
        Ok(Some(_)) => {
            Json(json!({"status": "ok", "info": {"database": {"status": "up"}}})).into_response()
        }
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "error", "info": {}, "error": {"database": {"status": "down"}}})),
        )
            .into_response(),
    }
}

pub async fn openapi() -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        super::docs::OPENAPI_JSON,
    )
        .into_response()
}

pub async fn docs_page() -> Response {
    let mut response = Html(super::docs::DOCS_HTML).into_response();
    if let Ok(csp) = HeaderValue::from_str(&super::docs::docs_csp()) {
        response
            .headers_mut()
            .insert(axum::http::header::CONTENT_SECURITY_POLICY, csp);
    }
    response
}

pub(super) fn parse_id(text: &str) -> Result<Uuid, ApiError> {
    super::validation::uuid(text).ok_or_else(|| ApiError::field("id", "id must be a UUID"))
}

fn not_found(id: Uuid) -> ApiError {
    ApiError::not_found(format!("Notification {id} not found"))
}
