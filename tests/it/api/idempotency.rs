//! Idempotency keys: simultaneous identical requests create one row, a key reused for
//! another request is refused, and the same request written differently is a replay.

use std::collections::HashSet;

use futures::future::join_all;
use notify_tests::{TestApp, factory};
use reqwest::StatusCode;
use serde_json::json;

use super::body;

#[tokio::test]
async fn twenty_five_simultaneous_identical_posts_create_one_row() {
    let app = TestApp::spawn().await;
    let request = body("same-key");
    let replies = join_all((0..25).map(|_| app.post_notification(&request))).await;
    let created = replies
        .iter()
        .filter(|r| r.status == StatusCode::CREATED)
        .count();
    let replayed: Vec<_> = replies
        .iter()
        .filter(|r| r.status == StatusCode::OK)
        .collect();
    assert_eq!(created, 1);
    assert_eq!(replayed.len(), 24);
    assert!(
        replayed
            .iter()
            .all(|r| r.headers["idempotent-replayed"] == "true")
    );
    let ids: HashSet<&str> = replies
        .iter()
        .filter_map(|r| r.body["id"].as_str())
        .collect();
    assert_eq!(ids.len(), 1);
    assert_eq!(factory::count_where(app.pool(), "true").await, 1);
}

#[tokio::test]
async fn one_key_with_two_bodies_keeps_one_row_and_the_loser_gets_409() {
    let app = TestApp::spawn().await;
    let a = body("contested");
    let mut b = body("contested");
    b["recipient"] = json!("grace@example.com");
    let responses = join_all((0..25).map(|i| {
        let request = if i % 2 == 0 { &a } else { &b };
        let app = &app;
        async move { (request["recipient"].clone(), app.create(request).await) }
    }))
    .await;
    assert_eq!(factory::count_where(app.pool(), "true").await, 1);
    let winner = responses
        .iter()
        .find(|(_, (s, _))| *s == StatusCode::CREATED)
        .map(|(r, _)| r.clone())
        .expect("one created");
    for (recipient, (status, response)) in &responses {
        if *recipient == winner {
            assert!(
                matches!(*status, StatusCode::CREATED | StatusCode::OK),
                "{response}"
            );
        } else {
            assert_eq!(*status, StatusCode::CONFLICT, "{response}");
            assert_eq!(
                response["message"],
                "Idempotency key \"contested\" was already used for a different notification request"
            );
        }
    }
}

#[tokio::test]
async fn the_same_instant_in_another_offset_and_key_order_is_a_replay() {
    let app = TestApp::spawn().await;
    let first = json!({"recipient": "r@example.com", "channel": "SMS", "priority": "LOW", "idempotencyKey": "tz",
                       "payload": {"a": 1, "b": {"c": 2, "d": 3}}, "sendAt": "2026-12-01T09:30:00+01:00"});
    let second = json!({"sendAt": "2026-12-01T08:30:00.000Z", "payload": {"b": {"d": 3, "c": 2}, "a": 1},
                        "idempotencyKey": "tz", "priority": "LOW", "channel": "SMS", "recipient": "r@example.com"});
    let (status, created) = app.create(&first).await;
    assert_eq!(status, StatusCode::CREATED);
    let replayed = app.post_notification(&second).await;
    assert_eq!(replayed.status, StatusCode::OK);
    assert_eq!(replayed.headers["idempotent-replayed"], "true");
    assert_eq!(replayed.body, created);
}
