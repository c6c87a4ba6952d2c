//! Redrive over HTTP: bulk (`POST /notifications/retry`) and single
//! (`POST /notifications/{id}/retry`).

use std::sync::Arc;

use deadpool_postgres::Pool;
use futures::future::join_all;
use notify_shared::notification::{Channel, Status};
use notify_shared::provider::ProviderOutcome;
use notify_tests::app::{assert_envelope, detail_fields};
use notify_tests::doubles::Scripted;
use notify_tests::{TestApp, factory};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

/// Asserts the database shows `id` redriven exactly once, with the effect of a redrive.
async fn assert_redriven_once(pool: &Pool, id: Uuid, last_error: &str) {
    let n = factory::load(pool, id).await;
    assert_eq!(n.status, Status::Pending, "{n:?}");
    assert_eq!(n.attempt_count, 0, "{n:?}");
    assert_eq!(
        n.max_attempts, 6,
        "maxAttempts from the current config: {n:?}"
    );
    assert_eq!(n.redrive_count, 1, "{n:?}");
    assert!(n.last_redriven_at.is_some(), "{n:?}");
    assert_eq!(n.dead_lettered_at, None, "{n:?}");
    assert_eq!(n.failed_at, None, "{n:?}");
    assert_eq!(
        n.last_error.as_deref(),
        Some(last_error),
        "kept until the next attempt"
    );
    assert!(n.next_attempt_at <= chrono::Utc::now(), "due now: {n:?}");
}

#[tokio::test]
async fn bulk_retry_with_an_empty_object_redrives_every_dead_lettered_one_and_nothing_else() {
    let app = TestApp::spawn().await;
    let db = &app.db;
    let dead = factory::dead_lettered(&db.pool, 3, None, "provider down").await;
    let failed = factory::failed(&db.pool, 1, "no such address").await;
    let future = factory::create(&db.pool, factory::Spec::default().due_in_seconds(3600)).await;

    let (status, body) = app.retry_bulk(&json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 3, "remaining": 0}));
    for id in &dead {
        assert_redriven_once(&db.pool, *id, "provider down").await;
    }
    assert_eq!(
        factory::status_of(&db.pool, failed[0]).await,
        (Status::Failed, 0),
        "FAILED is not the default"
    );
    assert_eq!(
        factory::load(&db.pool, future.id).await,
        future,
        "a PENDING notification is untouched"
    );

    let (status, body) = app.retry_bulk(&json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"retried": 0, "remaining": 0}),
        "nothing is redriven twice"
    );
}

#[tokio::test]
async fn bulk_retry_with_a_limit_takes_the_oldest_first_by_created_at_then_id() {
    let app = TestApp::spawn().await;
    let db = &app.db;
    // The smallest id is made the youngest (and, updated first, comes first in the heap);
    // the other two share one timestamp, so the id decides between them.
    let mut ids = factory::dead_lettered(&db.pool, 3, None, "boom").await;
    ids.sort();
    let (young, first_tied, second_tied) = (ids[0], ids[1], ids[2]);
    db.execute(
        "UPDATE notifications SET created_at = '2026-01-01T00:00:02Z' WHERE id = $1",
        &[&young],
    )
    .await;
    for id in [second_tied, first_tied] {
        db.execute(
            "UPDATE notifications SET created_at = '2026-01-01T00:00:01Z' WHERE id = $1",
            &[&id],
        )
        .await;
    }

    let (status, body) = app.retry_bulk(&json!({"limit": 1})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 1, "remaining": 2}));
    assert_eq!(
        factory::status_of(&db.pool, first_tied).await,
        (Status::Pending, 1),
        "the smaller id of the oldest pair"
    );
    assert_eq!(
        factory::status_of(&db.pool, second_tied).await,
        (Status::DeadLettered, 0)
    );
    assert_eq!(
        factory::status_of(&db.pool, young).await,
        (Status::DeadLettered, 0)
    );

    // Dead-letter it again, so that two-then-one runs over three dead ones.
    factory::dead_letter(&db.pool, first_tied, "boom").await;

    let (status, body) = app.retry_bulk(&json!({"limit": 2})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 2, "remaining": 1}));
    assert_eq!(
        factory::status_of(&db.pool, first_tied).await,
        (Status::Pending, 2)
    );
    assert_eq!(
        factory::status_of(&db.pool, second_tied).await,
        (Status::Pending, 1)
    );
    assert_eq!(
        factory::status_of(&db.pool, young).await,
        (Status::DeadLettered, 0),
        "the youngest waits although it was inserted first"
    );

    let (status, body) = app.retry_bulk(&json!({"limit": 2})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 1, "remaining": 0}));
    assert_redriven_once(&db.pool, young, "boom").await;
}

#[tokio::test]
async fn bulk_retry_of_failed_takes_only_failed_ones_and_counts_only_failed_ones_remaining() {
    let app = TestApp::spawn().await;
    let db = &app.db;
    let failed = factory::failed(&db.pool, 3, "no such address").await;
    let dead = factory::dead_lettered(&db.pool, 2, None, "provider down").await;

    let (status, body) = app
        .retry_bulk(&json!({"status": "FAILED", "limit": 2}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 2, "remaining": 1}));
    let (status, body) = app.retry_bulk(&json!({"status": "FAILED"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 1, "remaining": 0}));

    for id in &failed {
        assert_redriven_once(&db.pool, *id, "no such address").await;
    }
    for id in &dead {
        assert_eq!(
            factory::status_of(&db.pool, *id).await,
            (Status::DeadLettered, 0)
        );
    }
    let (status, body) = app.retry_bulk(&json!({"status": "DEAD_LETTERED"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 2, "remaining": 0}));
}

#[tokio::test]
async fn bulk_retry_with_a_recipient_takes_only_that_recipients_notifications() {
    let app = TestApp::spawn().await;
    let db = &app.db;
    let mine = factory::dead_lettered(&db.pool, 2, Some("x@example.com"), "boom").await;
    let others = factory::dead_lettered(&db.pool, 3, None, "boom").await;
    // A near miss: exact match only.
    let prefixed = factory::dead_lettered(&db.pool, 1, Some("x@example.com.au"), "boom").await;

    let (status, body) = app.retry_bulk(&json!({"recipient": "x@example.com"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 2, "remaining": 0}));
    for id in &mine {
        assert_redriven_once(&db.pool, *id, "boom").await;
    }
    for id in others.iter().chain(&prefixed) {
        assert_eq!(
            factory::status_of(&db.pool, *id).await,
            (Status::DeadLettered, 0)
        );
    }

    let (status, body) = app
        .retry_bulk(&json!({"recipient": "nobody@example.com"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 0, "remaining": 0}));
}

#[tokio::test]
async fn bulk_retry_filters_by_channel_error_text_and_creation_time() {
    let app = TestApp::spawn().await;
    let db = &app.db;
    let pool = &db.pool;
    let dead = |spec: factory::Spec, error: &'static str| async move {
        let n = factory::create(pool, spec.max_attempts(3)).await;
        factory::dead_letter(pool, n.id, error).await;
        n.id
    };
    let sms_timeout = dead(
        factory::Spec::default().channel(Channel::Sms),
        "Provider TIMEOUT after 10 s",
    )
    .await;
    let sms_other = dead(
        factory::Spec::default().channel(Channel::Sms),
        "invalid number",
    )
    .await;
    let email_timeout = dead(factory::Spec::default(), "timeout").await;
    let old_sms_timeout = dead(factory::Spec::default().channel(Channel::Sms), "timeout").await;
    db.execute(
        "UPDATE notifications SET created_at = '2020-01-01T00:00:00Z' WHERE id = $1",
        &[&old_sms_timeout],
    )
    .await;

    // SMS, "timeout" in any case, created since 2021: one of the four.
    let body = json!({"channel": "SMS", "errorContains": "timeout",
                      "createdAfter": "2021-01-01T00:00:00Z", "createdBefore": "2100-01-01T00:00:00Z"});
    let (status, reply) = app.retry_bulk(&body).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(reply, json!({"retried": 1, "remaining": 0}));
    assert_redriven_once(pool, sms_timeout, "Provider TIMEOUT after 10 s").await;
    for id in [sms_other, email_timeout, old_sms_timeout] {
        assert_eq!(
            factory::status_of(pool, id).await,
            (Status::DeadLettered, 0),
            "{id}"
        );
    }
    // Created before 2021: the old one only.
    let (_, reply) = app
        .retry_bulk(&json!({"createdBefore": "2021-01-01T00:00:00Z"}))
        .await;
    assert_eq!(reply, json!({"retried": 1, "remaining": 0}));
    assert_eq!(
        factory::status_of(pool, old_sms_timeout).await.0,
        Status::Pending
    );
}

#[tokio::test]
async fn bulk_retry_with_an_empty_body_and_no_content_type_works_as_an_empty_object() {
    let app = TestApp::spawn().await;
    let db = &app.db;
    let dead = factory::dead_lettered(&db.pool, 2, None, "boom").await;
    factory::failed(&db.pool, 1, "no such address").await;

    let request = app.request(Method::POST, "/notifications/retry");
    let (status, body) = app.send(request).await.pair();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 2, "remaining": 0}));
    for id in &dead {
        assert_redriven_once(&db.pool, *id, "boom").await;
    }
    assert_eq!(factory::count_where(&db.pool, "status = 'FAILED'").await, 1);
}

#[tokio::test]
async fn concurrent_bulk_retries_never_redrive_one_notification_twice() {
    let app = TestApp::spawn().await;
    let db = &app.db;
    let ids = factory::create_due_bulk(&db.pool, 50).await;
    factory::dead_letter_many(&db.pool, &ids, "boom").await;

    let body = json!({"limit": 20});
    let calls = (0..5).map(|_| app.retry_bulk(&body));
    let answers = join_all(calls).await;
    let mut total = 0;
    for (status, body) in &answers {
        assert_eq!(*status, StatusCode::OK, "{body}");
        let retried = body["retried"].as_u64().expect("retried");
        assert!(retried <= 20, "{body}");
        assert!(body["remaining"].as_u64().is_some(), "{body}");
        total += retried;
    }
    assert_eq!(total, 50, "{answers:?}");
    assert_eq!(
        factory::count_where(&db.pool, "status = 'PENDING' AND redrive_count = 1").await,
        50,
        "every notification redriven exactly once"
    );
    assert_eq!(
        factory::count_where(&db.pool, "redrive_count <> 1").await,
        0
    );
}

#[tokio::test]
async fn bulk_retry_rejects_bad_bodies_with_400_naming_the_field_and_redrives_nothing() {
    let app = TestApp::spawn().await;
    let db = &app.db;
    let dead = factory::dead_lettered(&db.pool, 1, None, "boom").await;

    for (body, field) in [
        (json!({"status": "SENT"}), "status"),
        (json!({"status": "dead_lettered"}), "status"),
        (json!({"limit": 0}), "limit"),
        (json!({"limit": 1001}), "limit"),
        (json!({"limit": "5"}), "limit"),
        (json!({"limit": 2.5}), "limit"),
        (json!({"recipient": ""}), "recipient"),
        (json!({"colour": "red"}), "colour"),
        (json!({"channel": "FAX"}), "channel"),
        (json!({"channel": 1}), "channel"),
        (json!({"errorContains": ""}), "errorContains"),
        (json!({"errorContains": 5}), "errorContains"),
        (json!({"createdAfter": "yesterday"}), "createdAfter"),
        (
            json!({"createdBefore": "2026-01-01T00:00:00"}),
            "createdBefore",
        ),
        (json!({"createdBefore": 17}), "createdBefore"),
    ] {
        let (status, error) = app.retry_bulk(&body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body} → {error}");
        assert_envelope(&error, 400, "/notifications/retry");
        assert_eq!(error["message"], "Validation failed", "{body} → {error}");
        assert_eq!(
            detail_fields(&error),
            vec![field.to_string()],
            "{body} → {error}"
        );
    }
    let (_, error) = app.retry_bulk(&json!({"colour": "red"})).await;
    assert_eq!(
        error["details"],
        json!([{"field": "colour", "errors": ["property colour should not exist"]}])
    );
    // Every failing field at once.
    let (status, error) = app.retry_bulk(&json!({"limit": 0, "colour": "red"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let mut fields = detail_fields(&error);
    fields.sort();
    assert_eq!(fields, ["colour", "limit"], "{error}");

    // The largest allowed limit is fine.
    assert_eq!(
        factory::status_of(&db.pool, dead[0]).await,
        (Status::DeadLettered, 0)
    );
    let (status, body) = app.retry_bulk(&json!({"limit": 1000})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 1, "remaining": 0}));
}

#[tokio::test]
async fn a_dead_lettered_notification_is_redriven_delivered_and_gets_a_new_webhook_generation() {
    let app = TestApp::spawn().await;
    let db = &app.db;
    let created = factory::create(&db.pool, factory::Spec::default().max_attempts(1)).await;

    // The real path to the dead-letter queue: a temporary failure on the last attempt.
    let outcome = app
        .sweep_until_idle(Arc::new(Scripted::always(ProviderOutcome::Temporary(
            "boom".into(),
        ))))
        .await;
    assert_eq!((outcome.claimed, outcome.dead_lettered), (1, 1));
    let dead = factory::load(&db.pool, created.id).await;
    assert_eq!(dead.status, Status::DeadLettered);
    assert_eq!(dead.last_error.as_deref(), Some("boom"));
    assert_eq!(
        factory::event_generations(&db.pool, created.id).await,
        [("DEAD_LETTERED".to_string(), 0)]
    );

    let id = created.id.to_string();
    let (status, redriven) = app.retry(&id).await;
    assert_eq!(status, StatusCode::OK, "{redriven}");
    assert_eq!(redriven["id"], id.as_str());
    assert_eq!(redriven["status"], "PENDING");
    assert_eq!(redriven["attemptCount"], 0);
    assert_eq!(
        redriven["maxAttempts"], 6,
        "from the current config, not the old 1"
    );
    assert_eq!(redriven["redriveCount"], 1);
    assert_eq!(redriven["lastError"], "boom", "kept until the next attempt");
    assert_eq!(redriven["deadLetteredAt"], Value::Null);
    assert_eq!(redriven["failedAt"], Value::Null);
    let redriven_at = redriven["lastRedrivenAt"].as_str().expect("lastRedrivenAt");
    assert_eq!(
        redriven["nextAttemptAt"], redriven_at,
        "due at the moment of the redrive"
    );
    assert!(
        redriven["updatedAt"].as_str() == Some(redriven_at),
        "{redriven}"
    );
    assert_eq!(
        redriven["createdAt"],
        serde_json::to_value(&created).expect("json")["createdAt"]
    );
    let (_, fetched) = app.get(&id).await;
    assert_eq!(fetched, redriven, "GET shows what the redrive returned");

    let outcome = app.sweep_until_idle(Arc::new(Scripted::delivering())).await;
    assert_eq!((outcome.claimed, outcome.sent), (1, 1));
    let sent = factory::load(&db.pool, created.id).await;
    assert_eq!(sent.status, Status::Sent);
    assert_eq!(sent.last_error, None, "cleared by the successful attempt");
    assert_eq!((sent.attempt_count, sent.redrive_count), (1, 1));
    assert_eq!(
        factory::event_generations(&db.pool, created.id).await,
        [("DEAD_LETTERED".to_string(), 0), ("SENT".to_string(), 1)]
    );

    let (status, error) = app.retry(&id).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_envelope(&error, 409, &format!("/notifications/{id}/retry"));
    assert_eq!(
        error["message"],
        format!("Notification {id} is SENT; only DEAD_LETTERED or FAILED jobs can be retried")
    );
}

#[tokio::test]
async fn a_failed_notification_can_be_redriven_one_at_a_time_too() {
    let app = TestApp::spawn().await;
    let db = &app.db;
    let id = factory::failed(&db.pool, 1, "no such address").await[0];

    let (status, redriven) = app.retry(id).await;
    assert_eq!(status, StatusCode::OK, "{redriven}");
    assert_eq!(redriven["status"], "PENDING");
    assert_eq!(redriven["failedAt"], Value::Null);
    assert_eq!(redriven["lastError"], "no such address");
    assert_redriven_once(&db.pool, id, "no such address").await;

    // Now PENDING: a second redrive is refused and changes nothing.
    let (status, error) = app.retry(id).await;
    assert_eq!(status, StatusCode::CONFLICT, "{error}");
    assert_eq!(
        error["message"],
        format!("Notification {id} is PENDING; only DEAD_LETTERED or FAILED jobs can be retried")
    );
    assert_redriven_once(&db.pool, id, "no such address").await;
}

#[tokio::test]
async fn single_retry_refuses_other_statuses_with_409_unknown_ids_with_404_and_bad_ids_with_400() {
    let app = TestApp::spawn().await;
    let db = &app.db;
    let pending = factory::create(&db.pool, factory::Spec::default()).await;
    let cancelled = factory::create(&db.pool, factory::Spec::default().due_in_seconds(60)).await;
    factory::mark_cancelled(&db.pool, cancelled.id).await;

    for (id, status) in [
        (pending.id, Status::Pending),
        (cancelled.id, Status::Cancelled),
    ] {
        let status_name = status.as_str();
        let (answer, error) = app.retry(id).await;
        assert_eq!(answer, StatusCode::CONFLICT, "{error}");
        assert_envelope(&error, 409, &format!("/notifications/{id}/retry"));
        assert_eq!(
            error["message"],
            format!(
                "Notification {id} is {status_name}; only DEAD_LETTERED or FAILED jobs can be retried"
            )
        );
        assert_eq!(factory::status_of(&db.pool, id).await, (status, 0));
    }

    let unknown = Uuid::new_v4();
    let (status, error) = app.retry(unknown).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{error}");
    assert_envelope(&error, 404, &format!("/notifications/{unknown}/retry"));
    assert_eq!(
        error["message"],
        format!("Notification {unknown} not found")
    );

    let (status, error) = app.retry("not-a-uuid").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_envelope(&error, 400, "/notifications/not-a-uuid/retry");
    assert_eq!(detail_fields(&error), ["id"]);
}

#[tokio::test]
async fn a_body_of_only_whitespace_is_malformed_json_not_an_absent_body() {
    let app = TestApp::spawn().await;
    let malformed = app
        .request(Method::POST, "/notifications/retry")
        .header("content-type", "application/json")
        .body("\r\n ")
        .send()
        .await
        .expect("request");
    assert_eq!(malformed.status(), StatusCode::BAD_REQUEST);
    let not_json = app
        .request(Method::POST, "/notifications/retry")
        .header("content-type", "text/plain")
        .body(" ")
        .send()
        .await
        .expect("request");
    assert_eq!(not_json.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
}
