//! The suppression list over HTTP (operators): `GET/POST /suppressions` and
//! `DELETE /suppressions/{channel}/{address}`.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value, json};

use super::AppState;
use super::body::{BODY_LIMIT, read_json};
use super::error::ApiError;
use super::payload::{is_e164, is_email_address, is_push_target};
use crate::audience::suppressions::{self, ListReason, Position};
use crate::domain::names;
use crate::notification::Channel;
use crate::problems::Problems;

const ADDRESS_MAX: usize = 4096;

/// `GET /suppressions?channel=&address=&limit=&cursor=`: newest first.
pub async fn list(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let query = parse_query(query.as_deref().unwrap_or(""))?;
    let db = state.pool.get().await?;
    let (items, next) = suppressions::page(
        &db,
        &state.audience.secret,
        query.channel,
        query.address.as_deref(),
        query.after.as_ref(),
        query.limit,
    )
    .await?;
    Ok(Json(json!({
        "items": items,
        "nextCursor": next.as_ref().map(encode_cursor),
    }))
    .into_response())
}

/// `POST /suppressions` `{"channel", "address", "reason"?}` (reason `MANUAL` by default):
/// 201 with the entry, or 200 with the entry as it was when the address was listed
/// already.
pub async fn add(
    State(state): State<AppState>,
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
    problems.only(object, &["channel", "address", "reason"]);
    let channel = problems.one_of(
        "channel",
        object.get("channel").and_then(Value::as_str),
        Channel::parse,
        &names(&Channel::ALL, Channel::as_str),
    );
    let address = problems.required_text(object, "address", ADDRESS_MAX);
    let reason = match object.get("reason") {
        None => Some(ListReason::Manual),
        Some(value) => problems.one_of(
            "reason",
            value.as_str(),
            ListReason::parse,
            &ListReason::names(),
        ),
    };
    if let (Some(channel), Some(address)) = (channel, &address)
        && state.real_providers.send(channel)
    {
        check_address(channel, address, &mut problems);
    }
    let (Some(channel), Some(address), Some(reason)) = (channel, address, reason) else {
        return Err(ApiError::validation(problems.into_errors()));
    };
    if !problems.is_empty() {
        return Err(ApiError::validation(problems.into_errors()));
    }
    let db = state.pool.get().await?;
    let (entry, added) =
        suppressions::add(&db, &state.audience.secret, channel, &address, reason).await?;
    let status = if added {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(entry)).into_response())
}

/// `DELETE /suppressions/{channel}/{address}`: 204, or 404 when it was not listed.
pub async fn remove(
    State(state): State<AppState>,
    Path((channel, address)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let Some(channel) = Channel::parse(&channel) else {
        return Err(ApiError::field(
            "channel",
            format!(
                "channel must be one of the following values: {}",
                names(&Channel::ALL, Channel::as_str)
            ),
        ));
    };
    let db = state.pool.get().await?;
    if suppressions::remove(&db, &state.audience.secret, channel, &address).await? {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError::not_found(format!(
            "{} address {address} is not on the suppression list",
            channel.as_str()
        )))
    }
}

/// The address rule of `channel`'s real provider, as intake checks recipients (a channel
/// the simulated provider sends takes any recipient, and so any address here).
pub(super) fn check_address(channel: Channel, address: &str, problems: &mut Problems) {
    let (ok, rule) = match channel {
        Channel::Email => (is_email_address(address), "an email address"),
        Channel::Sms => (is_e164(address), "an E.164 phone number"),
        Channel::Push => (
            is_push_target(address),
            "a device token or an SNS endpoint ARN",
        ),
    };
    if !ok {
        problems.add(
            "address",
            format!("address must be {rule} for channel {}", channel.as_str()),
        );
    }
}

struct ListQuery {
    channel: Option<Channel>,
    address: Option<String>,
    after: Option<Position>,
    limit: i64,
}

fn parse_query(query: &str) -> Result<ListQuery, ApiError> {
    let pairs = super::body::query_pairs(Some(query))?;
    let mut problems = Problems::new();
    let values = problems.query(&pairs, &["channel", "address", "limit", "cursor"]);
    let mut parsed = ListQuery {
        channel: None,
        address: None,
        after: None,
        limit: 20,
    };
    if let Some(channel) = values.get("channel") {
        parsed.channel = problems.one_of(
            "channel",
            Some(channel),
            Channel::parse,
            &names(&Channel::ALL, Channel::as_str),
        );
    }
    if let Some(address) = values.get("address")
        && problems.text("address", address, ADDRESS_MAX)
    {
        parsed.address = Some((*address).to_string());
    }
    let (limit, after) = problems.page(&values, decode_cursor);
    parsed.limit = limit.unwrap_or(parsed.limit);
    parsed.after = after;
    Ok(problems.or(parsed)?)
}

/// `<microseconds>:<channel>:<hash>`, base64url.
fn encode_cursor(position: &Position) -> String {
    URL_SAFE_NO_PAD.encode(format!(
        "{}:{}:{}",
        position.created_at.timestamp_micros(),
        position.channel.as_str(),
        position.hash
    ))
}

fn decode_cursor(cursor: &str) -> Option<Position> {
    if cursor.len() > 256 {
        return None;
    }
    let text = String::from_utf8(URL_SAFE_NO_PAD.decode(cursor).ok()?).ok()?;
    let mut parts = text.splitn(3, ':');
    let micros: i64 = parts.next()?.parse().ok()?;
    let channel = Channel::parse(parts.next()?)?;
    let hash = parts.next()?;
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(Position {
        created_at: crate::queue::cursor_time(micros)?,
        channel,
        hash: hash.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_tampering() {
        let position = Position {
            created_at: chrono::DateTime::from_timestamp_micros(1_700_000_000_123_456)
                .expect("time"),
            channel: Channel::Sms,
            hash: "a".repeat(64),
        };
        let cursor = encode_cursor(&position);
        assert_eq!(decode_cursor(&cursor), Some(position));
        assert_eq!(decode_cursor("bm90LWEtY3Vyc29y"), None);
        assert_eq!(decode_cursor(&URL_SAFE_NO_PAD.encode("1:FAX:aa")), None);
        let ancient = format!("-300000000000000000:EMAIL:{}", "a".repeat(64));
        assert_eq!(decode_cursor(&URL_SAFE_NO_PAD.encode(ancient)), None);
    }
}
