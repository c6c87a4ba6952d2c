//! `POST /notifications/batch`: one set-based insert, a result per item.

use notify_tests::app::{assert_envelope, details};
use notify_tests::{TestApp, factory};
use reqwest::StatusCode;
use serde_json::{Value, json};

fn item(key: &str) -> Value {
    json!({"recipient": format!("{key}@example.com"), "channel": "PUSH", "payload": {"n": key},
           "priority": "NORMAL", "idempotencyKey": key, "delaySeconds": 30})
}

#[tokio::test]
async fn each_item_gets_its_own_result_and_a_bad_item_fails_only_itself() {
    let app = TestApp::spawn().await;
    // An earlier single POST owns key "taken"; the batch replays it once and conflicts once.
    let (status, _) = app
        .create_batch(&json!({"notifications": [item("taken")]}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let mut conflicting = item("taken");
    conflicting["payload"] = json!({"different": true});
    let mut invalid = item("invalid");
    invalid["channel"] = json!("FAX");
    let mut repeated_differently = item("fresh");
    repeated_differently["priority"] = json!("HIGH");

    let (status, body) = app.create_batch(
        &json!({"notifications": [item("fresh"), item("taken"), conflicting, invalid, item("fresh"), repeated_differently]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let results = body["results"].as_array().expect("results");
    let statuses: Vec<i64> = results
        .iter()
        .map(|r| r["status"].as_i64().expect("status"))
        .collect();
    assert_eq!(statuses, [201, 200, 409, 400, 200, 409]);
    let indexes: Vec<i64> = results
        .iter()
        .map(|r| r["index"].as_i64().expect("index"))
        .collect();
    assert_eq!(indexes, [0, 1, 2, 3, 4, 5]);
    assert_eq!(
        results[0]["id"], results[4]["id"],
        "a repeated item replays the first"
    );
    assert!(results[3]["id"].is_null());
    assert_eq!(results[3]["errors"][0]["field"], "channel");
    assert_eq!(results[2]["errors"][0]["field"], "idempotencyKey");
    assert_eq!(factory::count_where(app.pool(), "true").await, 2);
}

/// An item may be as large as a single POST body (64 KiB), no larger.
#[tokio::test]
async fn an_item_larger_than_a_single_body_fails_only_itself() {
    let app = TestApp::spawn().await;
    let sized = |key: &str, bytes: usize| {
        let mut item = item(key);
        item["payload"] = json!({"p": ""});
        let overhead = item.to_string().len();
        item["payload"] = json!({"p": "a".repeat(bytes - overhead)});
        assert_eq!(item.to_string().len(), bytes);
        item
    };
    let (status, body) = app
        .create_batch(&json!({"notifications": [sized("fits", 65_536), sized("too-big", 65_537)]}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["results"][0]["status"], 201, "{body}");
    assert_eq!(body["results"][1]["status"], 400, "{body}");
    assert_eq!(body["results"][1]["errors"][0]["field"], "body");
    assert_eq!(factory::count_where(app.pool(), "true").await, 1);
}

#[tokio::test]
async fn five_thousand_items_go_in_one_call_and_more_are_refused() {
    let app = TestApp::spawn().await;
    let items: Vec<Value> = (0..5000).map(|i| item(&format!("bulk-{i}"))).collect();
    let (status, body) = app.create_batch(&json!({"notifications": items})).await;
    assert_eq!(status, StatusCode::OK);
    let created = body["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["status"] == 201)
        .count();
    assert_eq!(created, 5000);
    assert_eq!(factory::count_where(app.pool(), "true").await, 5000);

    let too_many: Vec<Value> = (0..5001).map(|i| item(&format!("over-{i}"))).collect();
    let (status, error) = app.create_batch(&json!({"notifications": too_many})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(error["details"][0]["field"], "notifications");
    for bad in [
        json!({"notifications": []}),
        json!({"notifications": {}}),
        json!({"items": []}),
        json!([]),
    ] {
        let (status, _) = app.create_batch(&bad).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    }
    assert_eq!(factory::count_where(app.pool(), "true").await, 5000);
}

#[tokio::test]
async fn simultaneous_batches_sharing_keys_create_each_key_once() {
    let app = TestApp::spawn().await;
    let items: Vec<Value> = (0..200).map(|i| item(&format!("shared-{i}"))).collect();
    let forward = json!({"notifications": items});
    let backward = json!({"notifications": items.iter().rev().collect::<Vec<_>>()});
    // Opposite orders: inserting in request order would let two batches deadlock.
    let responses = futures::future::join_all(
        (0..6).map(|i| app.create_batch(if i % 2 == 0 { &forward } else { &backward })),
    )
    .await;
    let mut created = 0;
    for (status, body) in &responses {
        assert_eq!(*status, StatusCode::OK);
        for result in body["results"].as_array().expect("results") {
            match result["status"].as_i64() {
                Some(201) => created += 1,
                Some(200) => {}
                other => panic!("unexpected item status {other:?}: {result}"),
            }
        }
    }
    assert_eq!(
        created, 200,
        "every key created exactly once across the batches"
    );
    assert_eq!(factory::count_where(app.pool(), "true").await, 200);
}

#[tokio::test]
async fn every_problem_with_the_batch_body_is_reported_at_once() {
    let app = TestApp::spawn().await;
    let (status, error) = app
        .create_batch(&json!({"items": [item("a")], "notifications": [], "colour": "red"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_envelope(&error, 400, "/notifications/batch");
    let mut reported = details(&error);
    reported.sort();
    assert_eq!(
        reported,
        [
            (
                "colour".to_string(),
                vec!["property colour should not exist".to_string()]
            ),
            (
                "items".to_string(),
                vec!["property items should not exist".to_string()]
            ),
            (
                "notifications".to_string(),
                vec!["notifications must contain between 1 and 5000 items".to_string()]
            ),
        ]
    );
    assert_eq!(factory::count_where(app.pool(), "true").await, 0);
}

/// A key repeated inside one batch belongs to its first item, whatever order the database
/// inserts in: later repeats are replays (same request) or conflicts (another one), and
/// the first item's payload is stored. Checked on batches of 1,000 with repeats scattered
/// through them.
#[tokio::test]
async fn a_key_repeated_in_a_batch_belongs_to_its_first_item() {
    let app = TestApp::spawn().await;
    for round in 0..3u32 {
        let mut items = Vec::new();
        let mut expected = Vec::new();
        for i in 0..1000u32 {
            // Every seventh item repeats the key of the item 5 (+ round) places earlier,
            // half of them with a different payload.
            let (key, first) = if i % 7 == 6 {
                (format!("r{round}-k{}", i - 5 - round.min(1)), false)
            } else {
                (format!("r{round}-k{i}"), true)
            };
            let mut body = item(&key);
            if !first && i % 2 == 0 {
                body["payload"] = json!({"n": key, "later": i});
            }
            expected.push(match (first, i % 2 == 0) {
                (true, _) => 201,
                (false, false) => 200,
                (false, true) => 409,
            });
            items.push(body);
        }
        let (status, body) = app.create_batch(&json!({ "notifications": items })).await;
        assert_eq!(status, StatusCode::OK);
        let statuses: Vec<i64> = body["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| r["status"].as_i64().expect("status"))
            .collect();
        assert_eq!(statuses, expected, "round {round}");
        assert_eq!(
            app.db
                .count("SELECT count(*) FROM notifications WHERE payload ? 'later'")
                .await,
            0,
            "a later repeat's payload was stored"
        );
    }
}
