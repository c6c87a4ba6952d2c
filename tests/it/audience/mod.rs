//! The audience layer (see the audience spec): recipient profiles, preferences and the
//! suppression list over HTTP, erasure, and expiry, against a real PostgreSQL.

mod api;
mod erasure;
mod expiry;

use notify_shared::auth::{self, Scope};
use notify_tests::{Reply, TestApp};
use reqwest::Method;
use serde_json::Value;

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
