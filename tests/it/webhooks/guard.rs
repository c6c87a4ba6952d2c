//! Where webhooks may go: registration refuses addresses of this machine, private
//! networks, plain http and unknown event types; dispatch checks the address again (DNS
//! may have changed) and never follows a redirect.

use std::collections::HashMap;

use notify_shared::auth::Scope;
use notify_shared::config::Config;
use notify_tests::db::execute;
use notify_tests::receiver::{Receiver, Reply};
use notify_tests::{TestApp, TestDb, worker};
use reqwest::{Method, StatusCode};
use serde_json::json;
use uuid::Uuid;

use super::endpoints::{GUARDED, OPEN, call, endpoint_row, event_ids, ids, key, owned_event};
use super::event_row;

#[tokio::test]
async fn endpoints_on_this_machine_or_private_networks_are_refused_at_dispatch() {
    let db = TestDb::new().await;
    let receiver = Receiver::start(&[], Reply::Status(200)).await;
    let port = receiver.address.port();
    let targets = [
        (format!("http://127.0.0.1:{port}/hooks"), "is loopback"),
        ("http://10.0.0.1/hooks".to_string(), "is private"),
        (
            "http://169.254.169.254/latest/meta-data/".to_string(),
            "is link-local",
        ),
        (format!("http://[::1]:{port}/hooks"), "is loopback"),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/hooks"),
            "is loopback",
        ),
        // A name: refused by the resolver inside the HTTP client, at connect time.
        (
            format!("http://localhost:{port}/hooks"),
            "the host localhost resolves to",
        ),
    ];
    let mut events = Vec::new();
    for (i, (url, _)) in targets.iter().enumerate() {
        let (owner, _) = key(&db, &format!("client-{i}"), Scope::Client).await;
        endpoint_row(&db, owner, url).await;
        events.push(owned_event(&db, Some(owner), "SENT").await);
    }
    let guarded = worker::drainer(&db.pool, &receiver.url, 10)
        .destinations(GUARDED)
        .build();
    let started = std::time::Instant::now();
    let outcome = worker::drain(&guarded).await;
    assert_eq!(
        (outcome.claimed, outcome.retried),
        (targets.len() as u64, targets.len() as u64),
        "{outcome:?}"
    );
    // 10.0.0.1 was never dialled: a connect attempt would wait for the 2 s time limit.
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    for ((url, reason), event) in targets.iter().zip(&events) {
        let row = event_row(&db.pool, *event).await;
        let error = row.last_error.unwrap_or_default();
        assert!(
            error.contains(reason) && error.contains("ALLOW_PRIVATE_WEBHOOKS"),
            "{url}: {error}"
        );
    }
    assert!(receiver.received().is_empty(), "nothing reached 127.0.0.1");

    // The IPv4 loopback endpoints are reached when private addresses are allowed: the
    // refusals above are the rule, not a broken setup. The others are kept from being
    // dialled for real.
    let reachable = [events[0], events[5]];
    execute(
        &db.pool,
        "UPDATE webhook_events
         SET next_dispatch_at = CASE WHEN id = ANY($1) THEN now() ELSE 'infinity' END",
        &[&reachable.to_vec()],
    )
    .await;
    let open = worker::drainer(&db.pool, &receiver.url, 10)
        .destinations(OPEN)
        .build();
    let outcome = worker::drain(&open).await;
    assert_eq!((outcome.claimed, outcome.delivered), (2, 2), "{outcome:?}");
    assert_eq!(event_ids(&receiver), ids(&reachable));
}

#[tokio::test]
async fn a_redirect_is_not_followed() {
    let db = TestDb::new().await;
    let target = Receiver::start(&[], Reply::Status(200)).await;
    let redirecting = Receiver::start(&[], Reply::RedirectTo(target.address)).await;
    let (owner, _) = key(&db, "client", Scope::Client).await;
    endpoint_row(&db, owner, &redirecting.url).await;
    let event = owned_event(&db, Some(owner), "SENT").await;
    let drainer = worker::drainer(&db.pool, &target.url, 10)
        .destinations(OPEN)
        .build();

    let outcome = worker::drain(&drainer).await;
    assert_eq!(outcome.retried, 1, "{outcome:?}");
    let row = event_row(&db.pool, event).await;
    assert_eq!(
        row.last_error.as_deref(),
        Some("Webhook receiver answered HTTP 307")
    );
    assert_eq!(redirecting.received().len(), 1);
    assert!(
        target.received().is_empty(),
        "the redirect was not followed"
    );
}

#[tokio::test]
async fn registration_refuses_addresses_of_this_machine_plain_http_and_unknown_types() {
    // The deployed rules.
    let app = TestApp::spawn_with_keys_and_config(
        Config::from_vars(HashMap::new()).expect("configuration"),
    )
    .await;
    let (_, client) = key(&app.db, "client", Scope::Client).await;
    for url in [
        "https://127.0.0.1/hooks",
        "https://10.0.0.1/hooks",
        "https://169.254.169.254/latest/meta-data/",
        "https://[::1]/hooks",
        "https://[::ffff:169.254.169.254]/",
        "https://localhost/hooks",
        "http://example.com/hooks",
        "ftp://example.com/hooks",
        "not a url",
    ] {
        let (status, reply) = call(
            &app,
            Method::POST,
            "/webhook-endpoints",
            &client,
            Some(json!({ "url": url })),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {reply}");
        assert_eq!(reply["details"][0]["field"], "url", "{url}: {reply}");
    }
    for body in [
        json!({"url": "https://hooks.example.com/", "eventTypes": ["notification.nope"]}),
        json!({"url": "https://hooks.example.com/", "eventTypes": []}),
        json!({"url": "https://hooks.example.com/", "eventTypes": ["circuit.opened"]}),
        json!({"url": "https://hooks.example.com/", "extra": 1}),
        json!({"eventTypes": ["notification.sent"]}),
    ] {
        let (status, reply) = call(
            &app,
            Method::POST,
            "/webhook-endpoints",
            &client,
            Some(body.clone()),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {reply}");
    }
    // A name that resolves to nothing now is not refused (a `.invalid` name never
    // resolves): dispatch looks it up and checks it again before every send.
    let (status, reply) = call(
        &app,
        Method::POST,
        "/webhook-endpoints",
        &client,
        Some(json!({ "url": "https://hooks.invalid/hooks" })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{reply}");
    let (status, reply) = call(
        &app,
        Method::GET,
        "/webhook-events?status=LOST",
        &client,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{reply}");
    let (status, reply) = call(
        &app,
        Method::POST,
        "/webhook-events/retry",
        &client,
        Some(json!({"since": "yesterday", "limit": 0})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{reply}");
    assert_eq!(
        reply["details"].as_array().map(Vec::len),
        Some(2),
        "{reply}"
    );
    let (status, _) = call(
        &app,
        Method::DELETE,
        &format!("/webhook-endpoints/{}", Uuid::new_v4()),
        &client,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
