//! The audience layer from outside: the enqueue decision and its precedence, a large batch
//! with opt-outs, quiet hours across DST changes, one-click unsubscribe (also in the middle
//! of a drain), profiles and the suppression list over HTTP, erasure, expiry.

mod api;
mod batch;
mod decisions;
mod erasure;
mod expiry;
mod quiet;
mod unsubscribe;

use notify_shared::auth::{self, Scope};
use notify_tests::{Reply, TestApp};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// `method path` with `key` as the bearer token (none without) and `body` as JSON.
async fn call(
    app: &TestApp,
    method: Method,
    path: &str,
    key: Option<&str>,
    body: Option<&Value>,
) -> Reply {
    let mut request = app.request(method, path);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if let Some(body) = body {
        request = request.json(body);
    }
    app.send(request).await
}

/// A new API key of `scope` on the app's database; returns the bearer token.
async fn key(app: &TestApp, name: &str, scope: Scope) -> String {
    let db = app.pool().get().await.expect("connection");
    auth::create_key(&db, name, scope).await.expect("key").1
}

/// Now as an ISO 8601 `sendAt` ("due now").
fn now_iso() -> String {
    chrono::Utc::now().to_rfc3339()
}

/// `PUT /recipients/{id}` with `profile`; must answer 200.
pub async fn put_profile(app: &TestApp, id: &str, profile: Value) -> Value {
    let (status, body) = app
        .send(
            app.request(Method::PUT, &format!("/recipients/{id}"))
                .json(&profile),
        )
        .await
        .pair();
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// `PATCH /recipients/{id}/preferences` with `categories`; must answer 200.
pub async fn patch_preferences(app: &TestApp, id: &str, categories: Value) -> Value {
    let (status, body) = app
        .send(
            app.request(Method::PATCH, &format!("/recipients/{id}/preferences"))
                .json(&json!({ "categories": categories })),
        )
        .await
        .pair();
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// `POST /suppressions`; answers 201 or 200.
pub async fn suppress(app: &TestApp, channel: &str, address: &str) {
    let (status, body) = app
        .send(
            app.request(Method::POST, "/suppressions")
                .json(&json!({"channel": channel, "address": address})),
        )
        .await
        .pair();
    assert!(status.is_success(), "{status} {body}");
}

/// A create body for `target` (`{"recipientId": …}` or `{"recipient": …}`) due in
/// `delay_seconds` (0: due now), with a payload that suits `channel`'s real provider too.
pub fn notification(
    key: &str,
    target: Value,
    channel: &str,
    class: &str,
    category: &str,
    delay_seconds: i64,
) -> Value {
    let payload = match channel {
        "EMAIL" => json!({"subject": "Hello", "text": "Hello"}),
        "SMS" => json!({"text": "Hello"}),
        _ => json!({"title": "Hello", "body": "Hello"}),
    };
    let due = if delay_seconds == 0 {
        json!({"sendAt": chrono::Utc::now().to_rfc3339()})
    } else {
        json!({"delaySeconds": delay_seconds})
    };
    let mut body = json!({
        "idempotencyKey": key, "channel": channel, "priority": "NORMAL",
        "payload": payload, "class": class, "category": category,
    });
    if let (Some(body), Some(due)) = (body.as_object_mut(), due.as_object()) {
        body.extend(due.clone());
    }
    if let (Some(body), Some(target)) = (body.as_object_mut(), target.as_object()) {
        body.extend(target.clone());
    }
    body
}

/// The one-click token of a link made by `POST /unsubscribe-links`.
pub async fn unsubscribe_token(app: &TestApp, request: Value) -> String {
    let (status, body) = app
        .send(
            app.request(Method::POST, "/unsubscribe-links")
                .json(&request),
        )
        .await
        .pair();
    assert_eq!(status, StatusCode::OK, "{body}");
    let url = body["url"].as_str().expect("url");
    let token = body["token"].as_str().expect("token").to_string();
    assert!(url.ends_with(&format!("/unsubscribe/{token}")), "{url}");
    token
}

/// `POST /unsubscribe/{token}` with RFC 8058's body, as a mail client sends it.
pub async fn one_click(app: &TestApp, token: &str) -> (StatusCode, Value) {
    app.send(
        app.request(Method::POST, &format!("/unsubscribe/{token}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("List-Unsubscribe=One-Click"),
    )
    .await
    .pair()
}

/// Makes the link for `request` and clicks it as a mail client would; the token, to click
/// again.
pub async fn click_new_link(app: &TestApp, request: Value) -> String {
    let token = unsubscribe_token(app, request).await;
    let (status, body) = one_click(app, &token).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    token
}
