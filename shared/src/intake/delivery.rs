//! What delivery looks like from outside: a notification's provider calls and webhook
//! events, and every
//! channel's provider, budgets, pause and circuit.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::AppState;
use super::error::ApiError;
use super::handlers::parse_id;
use crate::auth::Caller;
use crate::channel;
use crate::notification::{Channel, format_time};
use crate::queue;
use crate::webhook::events;

/// `GET /notifications/{id}/attempts`: its provider calls, oldest first.
pub async fn attempts(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let db = state.pool.get().await?;
    if queue::find(&db, id, caller.owner_filter()).await?.is_none() {
        return Err(ApiError::not_found(format!("Notification {id} not found")));
    }
    let items = queue::attempts(&db, id).await?;
    Ok(Json(json!({ "items": items })).into_response())
}

/// `GET /notifications/{id}/webhook-events`: the outcome events written for it and their
/// dispatch to the webhook, oldest first.
pub async fn webhook_events(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = parse_id(&id)?;
    let db = state.pool.get().await?;
    if queue::find(&db, id, caller.owner_filter()).await?.is_none() {
        return Err(ApiError::not_found(format!("Notification {id} not found")));
    }
    let items = events::events_of(&db, id).await?;
    Ok(Json(json!({ "items": items })).into_response())
}

/// `GET /providers`: per channel, its provider, class budgets (rate per second and tokens
/// now; absent when the channel is not paced), circuit and pause.
pub async fn providers(State(state): State<AppState>) -> Result<Response, ApiError> {
    let db = state.pool.get().await?;
    let channels = channel::read(&db, &state.providers.circuit).await?;
    let names = state.providers.names();
    let mut body = Map::new();
    for state in &channels {
        let index = Channel::ALL
            .iter()
            .position(|c| *c == state.channel)
            .unwrap_or_default();
        let mut budgets: Map<String, Value> = state
            .budgets
            .iter()
            .map(|(class, rate, tokens)| {
                (
                    class.as_str().to_string(),
                    json!({"ratePerSecond": rate, "tokens": (tokens * 1000.0).round() / 1000.0}),
                )
            })
            .collect();
        // A channel without a rate keeps the shape: both classes, unlimited (null).
        if budgets.is_empty() {
            for class in ["TRANSACTIONAL", "BULK"] {
                budgets.insert(
                    class.to_string(),
                    json!({"ratePerSecond": null, "tokens": null}),
                );
            }
        }
        body.insert(
            state.channel.as_str().to_string(),
            json!({
                "provider": names.get(index).copied().unwrap_or("simulated"),
                "circuit": {
                    "state": state.circuit,
                    "since": format_time(&state.circuit_since),
                    "failureRatio": (state.failure_ratio() * 1000.0).round() / 1000.0,
                    "calls": state.calls,
                },
                "pausedUntil": state.paused_until.as_ref().map(format_time),
                "pausedSince": state.paused_since.as_ref().map(format_time),
                "pauseReason": state.pause_reason,
                "refusedCalls": {
                    "THROTTLED": state.throttled_total,
                    "PROVIDER_MISCONFIGURED": state.misconfigured_total,
                },
                "budgets": budgets,
            }),
        );
    }
    Ok(Json(json!({ "channels": body })).into_response())
}
