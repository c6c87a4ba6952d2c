//! What the console stands on: the page and its headers, and a notification's webhook
//! events. The page in a browser is tested by `tests/console_browser.py`.

use notify_tests::{TestApp, factory};
use reqwest::{Method, StatusCode};
use serde_json::json;
use uuid::Uuid;

#[tokio::test]
async fn the_console_is_one_page_under_a_csp_that_allows_only_its_own_script_and_style() {
    let app = TestApp::spawn_with_keys().await;
    // Open: the page holds no data, every call it makes carries the operator's key.
    let response = app.client().get(app.url("/console")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers().clone();
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert_eq!(headers["cache-control"], "no-store");
    let csp = headers["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        csp.starts_with("default-src 'none'; script-src 'sha256-"),
        "{csp}"
    );
    assert!(
        csp.contains("connect-src 'self'") && !csp.contains("unsafe"),
        "{csp}"
    );
    let page = response.text().await.unwrap();
    assert!(page.contains("sessionStorage") && !page.contains("localStorage"));
}

#[tokio::test]
async fn a_notifications_webhook_events_are_listed_oldest_first_with_their_dispatch() {
    let app = TestApp::spawn().await;
    let pool = &app.db.pool;
    let n = factory::create(pool, factory::Spec::default()).await;
    let now = chrono::Utc::now();
    let first = factory::insert_event(
        pool,
        n.id,
        "FAILED",
        1,
        now - chrono::TimeDelta::seconds(60),
    )
    .await;
    let second = factory::insert_event(pool, n.id, "DEAD_LETTERED", 6, now).await;
    app.db
        .execute(
            "UPDATE webhook_events SET redrive_generation = 1 WHERE id = $1",
            &[&second],
        )
        .await;
    app.db
        .execute(
            "UPDATE webhook_events SET dispatch_state = 'GIVEN_UP', given_up_at = now(),
                    dispatch_attempts = 10, last_error = 'HTTP 503' WHERE id = $1",
            &[&first],
        )
        .await;
    let reply = app
        .send(app.request(
            Method::GET,
            &format!("/notifications/{}/webhook-events", n.id),
        ))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let items = reply.body["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["eventId"], json!(first));
    assert_eq!(items[0]["type"], "notification.failed");
    assert_eq!(items[0]["dispatchState"], "GIVEN_UP");
    assert_eq!(items[0]["dispatchAttempts"], 10);
    assert_eq!(items[0]["lastError"], "HTTP 503");
    assert!(items[0]["givenUpAt"].as_str().is_some());
    assert_eq!(items[1]["eventId"], json!(second));
    assert_eq!(items[1]["status"], "DEAD_LETTERED");
    assert_eq!(items[1]["dispatchState"], "PENDING");
    assert_eq!(items[1]["deliveredAt"], serde_json::Value::Null);

    let unknown = Uuid::new_v4();
    let reply = app
        .send(app.request(
            Method::GET,
            &format!("/notifications/{unknown}/webhook-events"),
        ))
        .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    let reply = app
        .send(app.request(Method::GET, "/notifications/nope/webhook-events"))
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
}
