//! One-click unsubscribe (RFC 8058) over HTTP. `POST /unsubscribe/{token}` with the form
//! body `List-Unsubscribe=One-Click` stores the opt-out, needs no API key (the signed token
//! is the authority) and may be repeated; `GET` only shows a page with a confirm button,
//! because link scanners follow GETs. `POST /unsubscribe-links` hands support staff the
//! link a bulk email carries.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::AppState;
use super::body::{BODY_LIMIT, read_bytes, read_json};
use super::error::ApiError;
use super::suppressions::check_address;
use super::validation::{is_category, is_recipient_id};
use crate::audience::profiles::{self, Holder};
use crate::audience::suppressions::{self, ListReason};
use crate::audience::unsubscribe::{Subject, Unsubscribe};
use crate::auth::Caller;
use crate::domain::names;
use crate::notification::Channel;
use crate::problems::Problems;

/// The pages allow their own inline style and posting back to themselves, nothing else.
const PAGE_CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'";

/// `GET /unsubscribe/{token}`: the confirmation page. Changes nothing. A forged token is
/// refused with a page for a browser, and with the error envelope for any other client.
pub async fn confirm_page(
    State(state): State<AppState>,
    Path(token): Path<String>,
    headers: HeaderMap,
) -> Response {
    match Unsubscribe::verify(&token, &state.audience.secret) {
        Some(unsubscribe) => page(
            StatusCode::OK,
            "Unsubscribe",
            &format!(
                "<p>Stop receiving {} by {}?</p>\
                 <form method=\"post\"><input type=\"hidden\" name=\"List-Unsubscribe\" \
                 value=\"One-Click\"><button type=\"submit\">Unsubscribe</button></form>",
                what(&unsubscribe),
                channel_word(unsubscribe.channel)
            ),
        ),
        None if wants_html(&headers) => forged_page(),
        None => forged().into_response(),
    }
}

/// `POST /unsubscribe/{token}` with `List-Unsubscribe=One-Click`: stores the opt-out of
/// the token's category (or, for a notification sent to a bare address, suppresses the
/// address). 200 each time; 400 for a forged token or another body.
pub async fn one_click(
    State(state): State<AppState>,
    Path(token): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let Some(unsubscribe) = Unsubscribe::verify(&token, &state.audience.secret) else {
        return Err(forged());
    };
    let bytes = read_bytes(&headers, body, BODY_LIMIT).await?;
    if !is_one_click(&headers, &bytes) {
        return Err(ApiError::bad_request(
            "The body must be List-Unsubscribe=One-Click (application/x-www-form-urlencoded)",
        ));
    }
    let db = state.pool.get().await?;
    match &unsubscribe.subject {
        Subject::Profile { owner, id } => {
            profiles::opt_out(&db, *owner, id, &unsubscribe.category, unsubscribe.channel).await?;
        }
        Subject::Address(address) => {
            suppressions::add(
                &db,
                &state.audience.secret,
                unsubscribe.channel,
                address,
                ListReason::Unsubscribed,
            )
            .await?;
        }
    }
    tracing::info!(channel = unsubscribe.channel.as_str(), category = %unsubscribe.category, "one-click unsubscribe");
    if wants_html(&headers) {
        return Ok(page(
            StatusCode::OK,
            "Unsubscribed",
            &format!(
                "<p>You will no longer receive {} by {}.</p>",
                what(&unsubscribe),
                channel_word(unsubscribe.channel)
            ),
        ));
    }
    let scope = match unsubscribe.subject {
        Subject::Profile { .. } => "CATEGORY",
        Subject::Address(_) => "ADDRESS",
    };
    Ok(Json(json!({
        "unsubscribed": true,
        "channel": unsubscribe.channel,
        "category": unsubscribe.category,
        "scope": scope,
    }))
    .into_response())
}

/// `POST /unsubscribe-links` (operators) `{"channel", "category", "recipientId" | "address"}`
/// → `{"url", "token"}`. A `recipientId` is looked up among every key's profiles as the
/// recipient routes do: the caller's own, else the one key holding it (409 when several
/// do), else the caller's own.
pub async fn link(
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
    problems.only(object, &["channel", "category", "recipientId", "address"]);
    let channel = problems.one_of(
        "channel",
        object.get("channel").and_then(Value::as_str),
        Channel::parse,
        &names(&Channel::ALL, Channel::as_str),
    );
    let category = match object.get("category").and_then(Value::as_str) {
        Some(category) if category == "*" || is_category(category) => Some(category.to_string()),
        _ => {
            problems.add(
                "category",
                "category must match ^[a-z0-9][a-z0-9_.-]{0,63}$ (or be * for every bulk category)",
            );
            None
        }
    };
    let text = |field: &str, problems: &mut Problems| match object.get(field) {
        None => None,
        Some(Value::String(value)) => Some(value.as_str()),
        Some(_) => {
            problems.add(field, format!("{field} must be a string"));
            None
        }
    };
    let recipient_id = text("recipientId", &mut problems);
    let address = text("address", &mut problems);
    match (recipient_id, address) {
        (Some(id), None) if !is_recipient_id(id) => problems.add(
            "recipientId",
            "recipientId must be 1 to 128 characters of A-Z, a-z, 0-9 and . _ : @ -",
        ),
        (None, Some(address)) => {
            if problems.text("address", address, 4096)
                && let Some(channel) = channel
                && state.real_providers.send(channel)
            {
                check_address(channel, address, &mut problems);
            }
        }
        (Some(_), None) => {}
        (Some(_), Some(_)) => problems.add("recipientId", "give recipientId or address, not both"),
        // A value of the wrong type was reported above.
        (None, None) if object.contains_key("recipientId") || object.contains_key("address") => {}
        (None, None) => problems.add("recipientId", "one of recipientId and address is required"),
    }
    let (Some(channel), Some(category)) = (channel, category) else {
        return Err(ApiError::validation(problems.into_errors()));
    };
    if !problems.is_empty() {
        return Err(ApiError::validation(problems.into_errors()));
    }
    let subject = match (recipient_id, address) {
        (Some(id), _) => {
            let db = state.pool.get().await?;
            let owner = match profiles::holder(&db, profiles::owner(caller.key_id), id).await? {
                Holder::One(owner) => owner,
                Holder::Several => {
                    return Err(ApiError::conflict(format!(
                        "Several API keys have a recipient {id}; unsubscribe links are made \
                         from their notifications' List-Unsubscribe header instead"
                    )));
                }
            };
            Subject::Profile {
                owner,
                id: id.to_string(),
            }
        }
        (None, Some(address)) => Subject::Address(address.to_string()),
        (None, None) => return Err(ApiError::internal()),
    };
    let unsubscribe = Unsubscribe {
        subject,
        channel,
        category,
    };
    Ok(Json(json!({
        "url": unsubscribe.url(&state.audience.secret, &state.audience.public_base_url),
        "token": unsubscribe.token(&state.audience.secret),
    }))
    .into_response())
}

/// RFC 8058's body, form-encoded (or as a multipart field).
fn is_one_click(headers: &HeaderMap, body: &[u8]) -> bool {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if content_type.starts_with("multipart/form-data") {
        let text = String::from_utf8_lossy(body);
        return text.contains("name=\"List-Unsubscribe\"") && text.contains("One-Click");
    }
    // Some senders end the form with a line break.
    serde_urlencoded::from_bytes::<Vec<(String, String)>>(body.trim_ascii()).is_ok_and(|pairs| {
        pairs
            .iter()
            .any(|(k, v)| k == "List-Unsubscribe" && v == "One-Click")
    })
}

/// The refusal of a token that does not verify: 400 naming the token, nothing stored.
fn forged() -> ApiError {
    ApiError::field(
        "token",
        "This unsubscribe link is not valid: it was altered or not issued here",
    )
}

/// A browser (the confirmation page's button) gets a page; mail clients get JSON.
fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| super::accept::prefers(accept, "text/html", "application/json"))
}

fn what(unsubscribe: &Unsubscribe) -> String {
    // A notification sent to a bare address has no person to hold preferences: its link
    // puts the address on the suppression list, which stops every message to it.
    if matches!(unsubscribe.subject, Subject::Address(_)) {
        return "any messages at this address".to_string();
    }
    if unsubscribe.category == "*" {
        "any marketing messages".to_string()
    } else {
        format!("“{}” messages", unsubscribe.category)
    }
}

fn channel_word(channel: Channel) -> &'static str {
    match channel {
        Channel::Email => "email",
        Channel::Sms => "text message",
        Channel::Push => "push notification",
    }
}

fn forged_page() -> Response {
    page(
        StatusCode::BAD_REQUEST,
        "Link not valid",
        "<p>This unsubscribe link is not valid: it was altered or not issued here.</p>",
    )
}

/// A small self-contained page. Everything interpolated into `body` is either fixed text
/// or a category, whose characters are limited to `[a-z0-9_.-*]`.
fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>{title}</title>\
         <style>body{{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;\
         padding:0 1rem}}button{{font-size:1rem;padding:.5rem 1rem}}</style></head>\
         <body><h1>{title}</h1>{body}</body></html>"
    );
    let mut response = (status, Html(html)).into_response();
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(PAGE_CSP),
    );
    response
}
