//! Content from outside: templates (publish checks, SMS costs, versions, preview), template
//! notifications (pinning across a publish, the locale fallback chain, failure at send),
//! and campaigns (fan-out in chunks through crashes, idempotent submission, cancel).

mod campaigns;
mod sending;
mod templates;

use notify_tests::{Reply, TestApp};
use reqwest::Method;
use serde_json::{Value, json};

/// `method path` with `body` as JSON.
async fn call(app: &TestApp, method: Method, path: &str, body: Option<&Value>) -> Reply {
    let mut request = app.request(method, path);
    if let Some(body) = body {
        request = request.json(body);
    }
    app.send(request).await
}

/// Publishes a version of `id`; must answer 201.
async fn publish(app: &TestApp, id: &str, version: &Value) -> Value {
    let reply = call(
        app,
        Method::POST,
        &format!("/templates/{id}/versions"),
        Some(version),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    reply.body
}

/// An email template in English and Portuguese (Portugal, so `pt-BR` falls back to `pt`).
fn welcome(greeting: &str) -> Value {
    json!({
        "channel": "EMAIL",
        "defaultLocale": "en",
        "locales": {
            "en": {"subject": format!("{greeting} {{{{ name }}}}"), "text": "Welcome, {{ name }}", "html": "<p>Welcome, {{ name }}</p>"},
            "pt": {"subject": format!("{greeting} (pt) {{{{ name }}}}"), "text": "Bem-vindo, {{ name }}"}
        },
        "sampleData": {"name": "Ada"}
    })
}
