//! The audience fields of `POST /notifications`: validation, the idempotency fingerprint,
//! the representation, the status filter, and SUPPRESSED and EXPIRED as final statuses.

use chrono::{TimeDelta, Utc};
use notify_shared::queue;
use notify_tests::app::detail_fields;
use notify_tests::{TestApp, factory};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{put, suppress, time};
/// A valid create body to `ada@example.com`, due in a minute.
fn create_body(key: &str) -> Value {
    json!({"recipient": "ada@example.com", "channel": "EMAIL", "payload": {"subject": "hi"},
           "priority": "NORMAL", "idempotencyKey": key, "delaySeconds": 60})
}

#[tokio::test]
async fn the_audience_fields_of_a_create_are_validated() {
    let app = TestApp::spawn().await;
    let due_in_a_minute = Utc::now() + TimeDelta::seconds(60);
    // (change to the valid body, field named)
    let cases: Vec<(Value, &str)> = vec![
        (json!({"recipientId": "ada-1"}), "recipient"),
        (json!({"recipient": null, "recipientId": null}), "recipient"),
        (
            json!({"expiresAt": due_in_a_minute.to_rfc3339(), "ttlSeconds": 60}),
            "expiresAt",
        ),
        (
            json!({"expiresAt": (due_in_a_minute - TimeDelta::seconds(30)).to_rfc3339()}),
            "expiresAt",
        ),
        (json!({"ttlSeconds": 0}), "ttlSeconds"),
        (json!({"ttlSeconds": 2_592_001}), "ttlSeconds"),
        (json!({"category": "News"}), "category"),
        (json!({"class": "PROMO"}), "class"),
    ];
    for (i, (change, field)) in cases.into_iter().enumerate() {
        let mut body = create_body(&format!("invalid-{i}"));
        for (name, value) in change.as_object().expect("object") {
            body[name] = value.clone();
        }
        // `null` in the change means "leave the member out".
        body.as_object_mut()
            .expect("object")
            .retain(|_, v| !v.is_null());
        let (status, error) = app.create(&body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {error}");
        assert!(
            detail_fields(&error).iter().any(|f| f == field),
            "{field} not named: {error}"
        );
    }
    assert_eq!(factory::count_where(app.pool(), "true").await, 0);
}

/// Only an `expiresAt` before the due time is refused: one at the due time itself is
/// taken (and expires as it falls due: a claim takes only what has not expired).
#[tokio::test]
async fn an_expiry_at_the_due_time_is_accepted() {
    let app = TestApp::spawn().await;
    let due = (Utc::now() + TimeDelta::days(30))
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string();
    let mut body = create_body("expires-when-due");
    body.as_object_mut().expect("object").remove("delaySeconds");
    body["sendAt"] = json!(due);
    body["expiresAt"] = json!(due);
    let created = app.post_notification(&body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(
        (&created.body["scheduledAt"], &created.body["expiresAt"]),
        (&json!(due), &json!(due))
    );
}

#[tokio::test]
async fn explicit_defaults_replay_and_the_representation_has_the_audience_fields() {
    let app = TestApp::spawn().await;
    let mut plain = create_body("defaults");
    plain["ttlSeconds"] = json!(600);
    let first = app.post_notification(&plain).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let n = &first.body;
    assert_eq!(
        (&n["class"], &n["category"]),
        (&json!("TRANSACTIONAL"), &json!("general"))
    );
    assert_eq!(n["recipientId"], Value::Null);
    // ttlSeconds counts from the due time, not from now.
    assert_eq!(
        time(&n["expiresAt"]),
        time(&n["scheduledAt"]) + TimeDelta::seconds(600)
    );

    let mut explicit = plain.clone();
    explicit["class"] = json!("TRANSACTIONAL");
    explicit["category"] = json!("general");
    let replay = app.post_notification(&explicit).await;
    assert_eq!(replay.status, StatusCode::OK, "{}", replay.body);
    assert_eq!(replay.headers["idempotent-replayed"], "true");
    assert_eq!(replay.body["id"], n["id"]);

    assert_eq!(
        put(&app, "ada-4", None, json!({"email": "ada4@example.com"}))
            .await
            .0,
        StatusCode::OK
    );
    let expires = Utc::now() + TimeDelta::hours(2);
    let mut bulk = create_body("bulk");
    bulk.as_object_mut().expect("object").remove("recipient");
    bulk["recipientId"] = json!("ada-4");
    bulk["class"] = json!("BULK");
    bulk["category"] = json!("news");
    bulk["expiresAt"] = json!(expires.to_rfc3339());
    let (status, n) = app.create(&bulk).await;
    assert_eq!(status, StatusCode::CREATED, "{n}");
    assert_eq!(
        (
            &n["class"],
            &n["category"],
            &n["recipientId"],
            &n["recipient"],
            &n["status"]
        ),
        (
            &json!("BULK"),
            &json!("news"),
            &json!("ada-4"),
            &json!("ada4@example.com"),
            &json!("PENDING")
        )
    );
    assert_eq!(
        time(&n["expiresAt"]).timestamp_millis(),
        expires.timestamp_millis()
    );
    for field in [
        "suppressedAt",
        "suppressedReason",
        "expiredAt",
        "quietHoursDeferredFrom",
    ] {
        assert_eq!(n.get(field), Some(&Value::Null), "{field} in {n}");
    }
}

#[tokio::test]
async fn suppressed_and_expired_notifications_are_listed_and_final() {
    let app = TestApp::spawn().await;
    assert_eq!(
        suppress(&app, "EMAIL", "blocked@example.com").await.0,
        StatusCode::CREATED
    );
    let mut blocked = create_body("blocked");
    blocked["recipient"] = json!("blocked@example.com");
    let (status, suppressed) = app.create(&blocked).await;
    assert_eq!(status, StatusCode::CREATED, "{suppressed}");
    assert_eq!(
        (&suppressed["status"], &suppressed["suppressedReason"]),
        (&json!("SUPPRESSED"), &json!("SUPPRESSED_ADDRESS"))
    );
    assert!(suppressed["suppressedAt"].is_string(), "{suppressed}");
    assert_eq!(
        app.create(&create_body("other")).await.0,
        StatusCode::CREATED
    );

    let (status, page) = app.list("status=SUPPRESSED").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let ids: Vec<&Value> = page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|n| &n["id"])
        .collect();
    assert_eq!(ids, [&suppressed["id"]]);

    let id = suppressed["id"].as_str().expect("id").to_string();
    assert_eq!(app.retry(&id).await.0, StatusCode::CONFLICT);
    assert_eq!(app.cancel(&id).await.0, StatusCode::CONFLICT);
    assert_eq!(app.get(&id).await.1, suppressed, "unchanged");

    let spec = factory::Spec::default().expires_at(Utc::now() - TimeDelta::seconds(1));
    let expired = factory::create(app.pool(), spec).await;
    let db = app.pool().get().await.expect("connection");
    assert_eq!(queue::expire(&db, 10).await.expect("expire"), 1);
    assert_eq!(app.retry(expired.id).await.0, StatusCode::CONFLICT);
    let (status, page) = app.list("status=EXPIRED").await;
    assert_eq!(
        (status, page["items"][0]["id"].clone()),
        (StatusCode::OK, json!(expired.id))
    );
    assert_eq!(app.get(expired.id).await.1["status"], "EXPIRED");
}
