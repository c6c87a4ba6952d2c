//! Operator routes against a real PostgreSQL: single and bulk redrive, metrics as JSON and
//! as Prometheus text, and the worker role's reduced router.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::{TestDb, factory, spawn_api, test_db};
use futures::FutureExt;
use futures::future::{BoxFuture, join_all};
use notify_shared::backoff::ThreadRandom;
use notify_shared::config::{RetryPolicy, WorkerConfig};
use notify_shared::intake::{self, AppState, Routes};
use notify_shared::provider::{Delivery, Provider, ProviderOutcome};
use notify_shared::queue::{self, Disposition};
use notify_shared::stop::StopSignal;
use notify_shared::sweeper::Sweeper;
use prometheus_parse::{LineInfo, Scrape, Value as PromValue};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Answers every delivery with the same outcome.
struct ScriptedProvider(ProviderOutcome);

impl Provider for ScriptedProvider {
    fn send<'a>(&'a self, batch: &'a [Delivery<'a>]) -> BoxFuture<'a, Vec<ProviderOutcome>> {
        let outcomes = batch.iter().map(|_| self.0.clone()).collect();
        async move { outcomes }.boxed()
    }
}

fn sweeper(db: &TestDb, outcome: ProviderOutcome) -> Sweeper {
    Sweeper::new(
        db.pool.clone(),
        Arc::new(ScriptedProvider(outcome)),
        Arc::new(ThreadRandom),
        WorkerConfig {
            batch_size: 100,
            concurrency: 1,
            poll_interval: Duration::from_millis(20),
            visibility_timeout: Duration::from_secs(300),
            provider_timeout: Duration::from_secs(5),
        },
        RetryPolicy {
            max_retries: 5,
            base_delay_ms: 1000,
            max_delay_ms: 60_000,
        },
    )
}

/// Sends a request and returns its status, headers and body as JSON (`Null` if not JSON).
async fn send(request: reqwest::RequestBuilder) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let response = request.send().await.expect("request");
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.expect("body");
    (
        status,
        headers,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

/// `POST /notifications/retry` with a JSON body.
async fn retry_bulk(client: &reqwest::Client, base: &str, body: Value) -> (StatusCode, Value) {
    let (status, _, body) = send(
        client
            .post(format!("{base}/notifications/retry"))
            .json(&body),
    )
    .await;
    (status, body)
}

/// `POST /notifications/{id}/retry`.
async fn retry_one(client: &reqwest::Client, base: &str, id: &str) -> (StatusCode, Value) {
    let (status, _, body) = send(client.post(format!("{base}/notifications/{id}/retry"))).await;
    (status, body)
}

async fn metrics(client: &reqwest::Client, base: &str) -> Value {
    let (status, _, body) = send(client.get(format!("{base}/metrics"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

fn assert_envelope(error: &Value, status: u16, path: &str) {
    assert_eq!(error["statusCode"], status, "{error}");
    assert!(
        error["error"].is_string() && error["message"].is_string(),
        "{error}"
    );
    assert_eq!(error["path"], path, "{error}");
    assert!(
        error["requestId"].as_str().is_some_and(|id| !id.is_empty()),
        "{error}"
    );
}

/// The fields named in an error's `details`.
fn detail_fields(error: &Value) -> Vec<String> {
    error["details"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["field"].as_str().map(String::from))
        .collect()
}

async fn execute(db: &TestDb, sql: &str, params: &[&(dyn tokio_postgres::types::ToSql + Sync)]) {
    db.pool
        .get()
        .await
        .expect("connection")
        .execute(sql, params)
        .await
        .expect("statement");
}

/// Creates `count` PENDING notifications (max_attempts 3, so a redrive's fresh 6 shows) and
/// dead-letters them with `last_error`.
async fn dead_lettered(
    db: &TestDb,
    count: usize,
    recipient: Option<&str>,
    error: &str,
) -> Vec<Uuid> {
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count {
        let spec = match recipient {
            Some(r) => factory::Spec::to(r),
            None => factory::Spec::default(),
        };
        let n = factory::create(&db.pool, spec.max_attempts(3)).await;
        factory::dead_letter(&db.pool, n.id, error).await;
        ids.push(n.id);
    }
    ids
}

async fn failed(db: &TestDb, count: usize, error: &str) -> Vec<Uuid> {
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count {
        let n = factory::create(&db.pool, factory::Spec::default().max_attempts(3)).await;
        factory::fail(&db.pool, n.id, error).await;
        ids.push(n.id);
    }
    ids
}

/// Asserts the database shows `id` redriven exactly once, with the effect of a redrive.
async fn assert_redriven_once(db: &TestDb, id: Uuid, last_error: &str) {
    let n = factory::load(&db.pool, id).await;
    assert_eq!(n.status, "PENDING", "{n:?}");
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

async fn status_of(db: &TestDb, id: Uuid) -> (&'static str, i32) {
    let n = factory::load(&db.pool, id).await;
    (n.status, n.redrive_count)
}

// ---------------------------------------------------------------------------------------
// Bulk redrive
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn bulk_retry_with_an_empty_object_redrives_every_dead_lettered_one_and_nothing_else() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let dead = dead_lettered(&db, 3, None, "provider down").await;
    let failed = failed(&db, 1, "no such address").await;
    let future = factory::create(&db.pool, factory::Spec::default().due_in_seconds(3600)).await;

    let (status, body) = retry_bulk(&client, &base, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 3, "remaining": 0}));
    for id in &dead {
        assert_redriven_once(&db, *id, "provider down").await;
    }
    assert_eq!(
        status_of(&db, failed[0]).await,
        ("FAILED", 0),
        "FAILED is not the default"
    );
    assert_eq!(
        factory::load(&db.pool, future.id).await,
        future,
        "a PENDING notification is untouched"
    );

    let (status, body) = retry_bulk(&client, &base, json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        json!({"retried": 0, "remaining": 0}),
        "nothing is redriven twice"
    );
}

#[tokio::test]
async fn bulk_retry_with_a_limit_takes_the_oldest_first_by_created_at_then_id() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    // The smallest id is made the youngest (and, updated first, comes first in the heap);
    // the other two share one timestamp, so the id decides between them.
    let mut ids = dead_lettered(&db, 3, None, "boom").await;
    ids.sort();
    let (young, first_tied, second_tied) = (ids[0], ids[1], ids[2]);
    execute(
        &db,
        "UPDATE notifications SET created_at = '2026-01-01T00:00:02Z' WHERE id = $1",
        &[&young],
    )
    .await;
    for id in [second_tied, first_tied] {
        execute(
            &db,
            "UPDATE notifications SET created_at = '2026-01-01T00:00:01Z' WHERE id = $1",
            &[&id],
        )
        .await;
    }

    let (status, body) = retry_bulk(&client, &base, json!({"limit": 1})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 1, "remaining": 2}));
    assert_eq!(
        status_of(&db, first_tied).await,
        ("PENDING", 1),
        "the smaller id of the oldest pair"
    );
    assert_eq!(status_of(&db, second_tied).await, ("DEAD_LETTERED", 0));
    assert_eq!(status_of(&db, young).await, ("DEAD_LETTERED", 0));

    // Dead-letter it again, so that two-then-one runs over three dead ones.
    factory::dead_letter(&db.pool, first_tied, "boom").await;

    let (status, body) = retry_bulk(&client, &base, json!({"limit": 2})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 2, "remaining": 1}));
    assert_eq!(status_of(&db, first_tied).await, ("PENDING", 2));
    assert_eq!(status_of(&db, second_tied).await, ("PENDING", 1));
    assert_eq!(
        status_of(&db, young).await,
        ("DEAD_LETTERED", 0),
        "the youngest waits although it was inserted first"
    );

    let (status, body) = retry_bulk(&client, &base, json!({"limit": 2})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 1, "remaining": 0}));
    assert_redriven_once(&db, young, "boom").await;
}

#[tokio::test]
async fn bulk_retry_of_failed_takes_only_failed_ones_and_counts_only_failed_ones_remaining() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let failed = failed(&db, 3, "no such address").await;
    let dead = dead_lettered(&db, 2, None, "provider down").await;

    let (status, body) = retry_bulk(&client, &base, json!({"status": "FAILED", "limit": 2})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 2, "remaining": 1}));
    let (status, body) = retry_bulk(&client, &base, json!({"status": "FAILED"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 1, "remaining": 0}));

    for id in &failed {
        assert_redriven_once(&db, *id, "no such address").await;
    }
    for id in &dead {
        assert_eq!(status_of(&db, *id).await, ("DEAD_LETTERED", 0));
    }
    let (status, body) = retry_bulk(&client, &base, json!({"status": "DEAD_LETTERED"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 2, "remaining": 0}));
}

#[tokio::test]
async fn bulk_retry_with_a_recipient_takes_only_that_recipients_notifications() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let mine = dead_lettered(&db, 2, Some("x@example.com"), "boom").await;
    let others = dead_lettered(&db, 3, None, "boom").await;
    // A near miss: exact match only.
    let prefixed = dead_lettered(&db, 1, Some("x@example.com.au"), "boom").await;

    let (status, body) = retry_bulk(&client, &base, json!({"recipient": "x@example.com"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 2, "remaining": 0}));
    for id in &mine {
        assert_redriven_once(&db, *id, "boom").await;
    }
    for id in others.iter().chain(&prefixed) {
        assert_eq!(status_of(&db, *id).await, ("DEAD_LETTERED", 0));
    }

    let (status, body) =
        retry_bulk(&client, &base, json!({"recipient": "nobody@example.com"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 0, "remaining": 0}));
}

#[tokio::test]
async fn bulk_retry_with_an_empty_body_and_no_content_type_works_as_an_empty_object() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let dead = dead_lettered(&db, 2, None, "boom").await;
    failed(&db, 1, "no such address").await;

    let request = client.post(format!("{base}/notifications/retry"));
    let (status, _, body) = send(request).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 2, "remaining": 0}));
    for id in &dead {
        assert_redriven_once(&db, *id, "boom").await;
    }
    assert_eq!(factory::count_where(&db.pool, "status = 'FAILED'").await, 1);
}

#[tokio::test]
async fn concurrent_bulk_retries_never_redrive_one_notification_twice() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let ids = factory::create_due_bulk(&db.pool, 50).await;
    factory::dead_letter_many(&db.pool, &ids, "boom").await;

    let calls = (0..5).map(|_| retry_bulk(&client, &base, json!({"limit": 20})));
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
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let dead = dead_lettered(&db, 1, None, "boom").await;

    for (body, field) in [
        (json!({"status": "SENT"}), "status"),
        (json!({"status": "dead_lettered"}), "status"),
        (json!({"limit": 0}), "limit"),
        (json!({"limit": 1001}), "limit"),
        (json!({"limit": "5"}), "limit"),
        (json!({"limit": 2.5}), "limit"),
        (json!({"recipient": ""}), "recipient"),
        (json!({"colour": "red"}), "colour"),
    ] {
        let (status, error) = retry_bulk(&client, &base, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body} → {error}");
        assert_envelope(&error, 400, "/notifications/retry");
        assert_eq!(error["message"], "Validation failed", "{body} → {error}");
        assert_eq!(
            detail_fields(&error),
            vec![field.to_string()],
            "{body} → {error}"
        );
    }
    let (_, error) = retry_bulk(&client, &base, json!({"colour": "red"})).await;
    assert_eq!(
        error["details"],
        json!([{"field": "colour", "errors": ["property colour should not exist"]}])
    );
    // Every failing field at once.
    let (status, error) = retry_bulk(&client, &base, json!({"limit": 0, "colour": "red"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let mut fields = detail_fields(&error);
    fields.sort();
    assert_eq!(fields, ["colour", "limit"], "{error}");

    // The largest allowed limit is fine.
    assert_eq!(status_of(&db, dead[0]).await, ("DEAD_LETTERED", 0));
    let (status, body) = retry_bulk(&client, &base, json!({"limit": 1000})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 1, "remaining": 0}));
}

// ---------------------------------------------------------------------------------------
// Single redrive
// ---------------------------------------------------------------------------------------

async fn webhook_events(db: &TestDb, id: Uuid) -> Vec<(String, i32)> {
    db.pool
        .get()
        .await
        .expect("connection")
        .query(
            "SELECT status, redrive_generation FROM webhook_events
             WHERE notification_id = $1 ORDER BY redrive_generation, status",
            &[&id],
        )
        .await
        .expect("events")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

#[tokio::test]
async fn a_dead_lettered_notification_is_redriven_delivered_and_gets_a_new_webhook_generation() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let created = factory::create(&db.pool, factory::Spec::default().max_attempts(1)).await;

    // The real path to the dead-letter queue: a temporary failure on the last attempt.
    let outcome = sweeper(&db, ProviderOutcome::Temporary("boom".into()))
        .sweep_once(&StopSignal::never())
        .await
        .expect("sweep");
    assert_eq!((outcome.claimed, outcome.dead_lettered), (1, 1));
    let dead = factory::load(&db.pool, created.id).await;
    assert_eq!(dead.status, "DEAD_LETTERED");
    assert_eq!(dead.last_error.as_deref(), Some("boom"));
    assert_eq!(
        webhook_events(&db, created.id).await,
        [("DEAD_LETTERED".to_string(), 0)]
    );

    let id = created.id.to_string();
    let (status, redriven) = retry_one(&client, &base, &id).await;
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
    let (_, _, fetched) = send(client.get(format!("{base}/notifications/{id}"))).await;
    assert_eq!(fetched, redriven, "GET shows what the redrive returned");

    let outcome = sweeper(&db, ProviderOutcome::Delivered { already: false })
        .sweep_once(&StopSignal::never())
        .await
        .expect("sweep");
    assert_eq!((outcome.claimed, outcome.sent), (1, 1));
    let sent = factory::load(&db.pool, created.id).await;
    assert_eq!(sent.status, "SENT");
    assert_eq!(sent.last_error, None, "cleared by the successful attempt");
    assert_eq!((sent.attempt_count, sent.redrive_count), (1, 1));
    assert_eq!(
        webhook_events(&db, created.id).await,
        [("DEAD_LETTERED".to_string(), 0), ("SENT".to_string(), 1)]
    );

    let (status, error) = retry_one(&client, &base, &id).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_envelope(&error, 409, &format!("/notifications/{id}/retry"));
    assert_eq!(
        error["message"],
        format!("Notification {id} is SENT; only DEAD_LETTERED or FAILED jobs can be retried")
    );
}

#[tokio::test]
async fn a_failed_notification_can_be_redriven_one_at_a_time_too() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let id = failed(&db, 1, "no such address").await[0];

    let (status, redriven) = retry_one(&client, &base, &id.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{redriven}");
    assert_eq!(redriven["status"], "PENDING");
    assert_eq!(redriven["failedAt"], Value::Null);
    assert_eq!(redriven["lastError"], "no such address");
    assert_redriven_once(&db, id, "no such address").await;

    // Now PENDING: a second redrive is refused and changes nothing.
    let (status, error) = retry_one(&client, &base, &id.to_string()).await;
    assert_eq!(status, StatusCode::CONFLICT, "{error}");
    assert_eq!(
        error["message"],
        format!("Notification {id} is PENDING; only DEAD_LETTERED or FAILED jobs can be retried")
    );
    assert_redriven_once(&db, id, "no such address").await;
}

#[tokio::test]
async fn single_retry_refuses_other_statuses_with_409_unknown_ids_with_404_and_bad_ids_with_400() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let pending = factory::create(&db.pool, factory::Spec::default()).await;
    let cancelled = factory::create(&db.pool, factory::Spec::default().due_in_seconds(60)).await;
    execute(
        &db,
        "UPDATE notifications SET status = 'CANCELLED', cancelled_at = now() WHERE id = $1",
        &[&cancelled.id],
    )
    .await;

    for (id, status_name) in [(pending.id, "PENDING"), (cancelled.id, "CANCELLED")] {
        let (status, error) = retry_one(&client, &base, &id.to_string()).await;
        assert_eq!(status, StatusCode::CONFLICT, "{error}");
        assert_envelope(&error, 409, &format!("/notifications/{id}/retry"));
        assert_eq!(
            error["message"],
            format!(
                "Notification {id} is {status_name}; only DEAD_LETTERED or FAILED jobs can be retried"
            )
        );
        assert_eq!(status_of(&db, id).await, (status_name, 0));
    }

    let unknown = Uuid::new_v4();
    let (status, error) = retry_one(&client, &base, &unknown.to_string()).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{error}");
    assert_envelope(&error, 404, &format!("/notifications/{unknown}/retry"));
    assert_eq!(
        error["message"],
        format!("Notification {unknown} not found")
    );

    let (status, error) = retry_one(&client, &base, "not-a-uuid").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_envelope(&error, 400, "/notifications/not-a-uuid/retry");
    assert_eq!(detail_fields(&error), ["id"]);
}

// ---------------------------------------------------------------------------------------
// Metrics
// ---------------------------------------------------------------------------------------

/// The JSON metrics with `queueLagSeconds` checked to be a number of at most 3 decimals
/// and taken out; returns (rest, lag).
fn split_lag(mut metrics: Value) -> (Value, f64) {
    let lag = metrics
        .as_object_mut()
        .expect("object")
        .remove("queueLagSeconds")
        .unwrap_or_else(|| panic!("queueLagSeconds missing: {metrics}"));
    let lag = lag
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {lag}"));
    assert!(
        ((lag * 1000.0).round() - lag * 1000.0).abs() < 1e-6,
        "3 decimals: {lag}"
    );
    (metrics, lag)
}

fn counts(
    [pending, processing, sent, failed, dead_lettered, cancelled]: [i64; 6],
    [webhooks_pending, delivered, given_up]: [i64; 3],
) -> Value {
    json!({
        "pending": pending, "processing": processing, "sent": sent, "failed": failed,
        "deadLettered": dead_lettered, "cancelled": cancelled,
        "webhooks": {"pending": webhooks_pending, "delivered": delivered, "givenUp": given_up},
    })
}

#[tokio::test]
async fn metrics_count_every_status_exactly_and_measure_the_lag_of_the_oldest_due_one() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();

    let empty = metrics(&client, &base).await;
    let (rest, lag) = split_lag(empty);
    assert_eq!(
        rest,
        counts([0; 6], [0; 3]),
        "every key present even at zero"
    );
    assert_eq!(lag, 0.0);

    // Four due (3 s, 2.5 s, 2 s and 1.5 s ago) and nine in the future.
    let now = chrono::Utc::now();
    let mut due = Vec::new();
    for millis in [3000, 2500, 2000, 1500] {
        let spec = factory::Spec::default().due_at(now - chrono::TimeDelta::milliseconds(millis));
        due.push(factory::create(&db.pool, spec).await);
    }
    let future: Vec<_> = factory::create_many(&db.pool, 9, |_| {
        factory::Spec::default().due_in_seconds(3600)
    })
    .await;
    let (rest, lag) = split_lag(metrics(&client, &base).await);
    assert_eq!(rest, counts([13, 0, 0, 0, 0, 0], [0; 3]));
    assert!(
        (3.0..10.0).contains(&lag),
        "the oldest due one is 3 s old: {lag}"
    );

    // A worker claims the four due ones and records three as SENT.
    let conn = db.pool.get().await.expect("connection");
    let claimed = queue::claim(&conn, "test-worker", 10, Duration::from_secs(300))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 4);
    let (rest, lag) = split_lag(metrics(&client, &base).await);
    assert_eq!(rest, counts([9, 4, 0, 0, 0, 0], [0; 3]));
    assert_eq!(lag, 0.0, "only future PENDING rows remain");
    let results: Vec<_> = claimed[..3]
        .iter()
        .map(|c| (c, Disposition::Sent))
        .collect();
    let recorded = queue::record(&conn, &results).await.expect("record");
    assert_eq!((recorded.recorded, recorded.events), (3, 3));
    drop(conn);
    execute(
        &db,
        "UPDATE webhook_events SET dispatch_state = 'DELIVERED', delivered_at = now()
         WHERE id = (SELECT id FROM webhook_events ORDER BY id LIMIT 1)",
        &[],
    )
    .await;

    // Six cancelled through the API, four FAILED and five DEAD_LETTERED.
    for n in &future[..6] {
        let (status, _, body) = send(client.delete(format!("{base}/notifications/{}", n.id))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    failed(&db, 4, "no such address").await;
    dead_lettered(&db, 5, None, "provider down").await;

    let (rest, lag) = split_lag(metrics(&client, &base).await);
    assert_eq!(rest, counts([3, 1, 3, 4, 5, 6], [2, 1, 0]));
    assert_eq!(lag, 0.0, "nothing is due: exactly 0, never negative");

    // One of the future ones becomes due 5 s ago.
    execute(
        &db,
        "UPDATE notifications SET next_attempt_at = now() - interval '5 seconds' WHERE id = $1",
        &[&future[8].id],
    )
    .await;
    let (rest, lag) = split_lag(metrics(&client, &base).await);
    assert_eq!(rest, counts([3, 1, 3, 4, 5, 6], [2, 1, 0]));
    assert!((5.0..=6.0).contains(&lag), "{lag}");
}

/// Fetches the Prometheus text and checks its content type.
async fn prometheus_text(request: reqwest::RequestBuilder) -> String {
    let response = request.send().await.expect("request");
    assert_eq!(response.status(), StatusCode::OK);
    let content_type = response.headers()[reqwest::header::CONTENT_TYPE]
        .to_str()
        .expect("content type")
        .to_string();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    response.text().await.expect("body")
}

/// Parses with prometheus-parse, after checking that the parser recognised every line
/// (it skips lines it cannot read rather than failing).
fn parse_exposition(text: &str) -> Scrape {
    for line in text.lines() {
        let known = match LineInfo::parse(line) {
            LineInfo::Ignored => line == "# EOF",
            _ => true,
        };
        assert!(
            known,
            "line the parser does not understand: {line:?}\n{text}"
        );
    }
    Scrape::parse(text.lines().map(|line| Ok(line.to_string()))).expect("parse")
}

fn value(sample: &prometheus_parse::Sample) -> f64 {
    match sample.value {
        PromValue::Counter(v) | PromValue::Gauge(v) | PromValue::Untyped(v) => v,
        _ => panic!("not a single value: {sample:?}"),
    }
}

fn samples<'a>(scrape: &'a Scrape, name: &str) -> Vec<&'a prometheus_parse::Sample> {
    scrape.samples.iter().filter(|s| s.metric == name).collect()
}

fn by_label(scrape: &Scrape, name: &str, label: &str) -> HashMap<String, f64> {
    samples(scrape, name)
        .into_iter()
        .map(|s| {
            (
                s.labels.get(label).unwrap_or_default().to_string(),
                value(s),
            )
        })
        .collect()
}

#[tokio::test]
async fn prometheus_text_carries_statuses_lag_latency_histogram_webhooks_and_deferrals() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();

    // Two SENT with known latencies (0.7 s and 20 s), one PROCESSING, one due PENDING with
    // three rate-limit deferrals, one FAILED, two DEAD_LETTERED, one CANCELLED.
    factory::create_many(&db.pool, 3, |_| factory::Spec::default()).await;
    let conn = db.pool.get().await.expect("connection");
    let claimed = queue::claim(&conn, "test-worker", 10, Duration::from_secs(300))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 3);
    let results: Vec<_> = claimed[..2]
        .iter()
        .map(|c| (c, Disposition::Sent))
        .collect();
    queue::record(&conn, &results).await.expect("record");
    drop(conn);
    for (claim, latency) in claimed[..2].iter().zip(["0.7", "20"]) {
        execute(
            &db,
            &format!(
                "UPDATE notifications SET scheduled_at = sent_at - interval '{latency} seconds'
                 WHERE id = $1"
            ),
            &[&claim.id],
        )
        .await;
    }
    let deferred = factory::create(&db.pool, factory::Spec::default()).await;
    execute(
        &db,
        "UPDATE notifications SET rate_limit_deferrals = 3,
                next_attempt_at = now() - interval '2 seconds' WHERE id = $1",
        &[&deferred.id],
    )
    .await;
    failed(&db, 1, "no such address").await;
    dead_lettered(&db, 2, None, "provider down").await;
    let cancelled = factory::create(&db.pool, factory::Spec::default().due_in_seconds(60)).await;
    execute(
        &db,
        "UPDATE notifications SET status = 'CANCELLED', cancelled_at = now() WHERE id = $1",
        &[&cancelled.id],
    )
    .await;

    let attempts_in_db: i64 = db
        .pool
        .get()
        .await
        .expect("connection")
        .query_one("SELECT sum(attempt_count)::int8 FROM notifications", &[])
        .await
        .expect("sum")
        .get(0);
    assert!(attempts_in_db > 0);

    let by_accept = prometheus_text(
        client
            .get(format!("{base}/metrics"))
            .header(reqwest::header::ACCEPT, "text/plain"),
    )
    .await;
    let by_format = prometheus_text(client.get(format!("{base}/metrics?format=prometheus"))).await;

    for text in [&by_accept, &by_format] {
        let scrape = parse_exposition(text);

        let statuses = by_label(&scrape, "notify_notifications_by_status", "status");
        let expected: HashMap<String, f64> = [
            ("PENDING", 1.0),
            ("PROCESSING", 1.0),
            ("SENT", 2.0),
            ("FAILED", 1.0),
            ("DEAD_LETTERED", 2.0),
            ("CANCELLED", 1.0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(statuses, expected, "{text}");

        let lag = samples(&scrape, "notify_queue_lag_seconds");
        assert_eq!(lag.len(), 1, "{text}");
        assert!((2.0..=5.0).contains(&value(lag[0])), "{text}");

        let histogram = samples(&scrape, "notify_delivery_latency_seconds");
        assert_eq!(histogram.len(), 1, "{text}");
        let PromValue::Histogram(buckets) = &histogram[0].value else {
            panic!("not a histogram: {:?}", histogram[0]);
        };
        let cumulative: Vec<(f64, f64)> = buckets.iter().map(|b| (b.less_than, b.count)).collect();
        let at = |bound: f64| {
            cumulative
                .iter()
                .find(|(le, _)| *le == bound)
                .map(|(_, count)| *count)
                .unwrap_or_else(|| panic!("no bucket le={bound}: {text}"))
        };
        assert_eq!(at(f64::INFINITY), 2.0, "+Inf counts every SENT: {text}");
        assert_eq!(at(0.5), 0.0, "{text}");
        assert_eq!(at(1.0), 1.0, "the 0.7 s one: {text}");
        assert_eq!(at(10.0), 1.0, "{text}");
        assert_eq!(at(30.0), 2.0, "the 20 s one: {text}");
        assert!(
            cumulative
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
            "buckets ascend and are cumulative: {text}"
        );
        let count = samples(&scrape, "notify_delivery_latency_seconds_count");
        assert_eq!(count.len(), 1, "{text}");
        assert_eq!(value(count[0]), 2.0, "count equals the SENT notifications");
        let sum = samples(&scrape, "notify_delivery_latency_seconds_sum");
        assert!((value(sum[0]) - 20.7).abs() < 0.01, "{text}");

        let webhooks = by_label(&scrape, "notify_webhook_events", "state");
        let expected: HashMap<String, f64> =
            [("pending", 2.0), ("delivered", 0.0), ("given_up", 0.0)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
        assert_eq!(webhooks, expected, "{text}");

        // Per status, channel and priority: the rows and their attempts add up.
        let notifications = samples(&scrape, "notify_notifications");
        assert!(
            notifications
                .iter()
                .all(|s| ["status", "channel", "priority"]
                    .iter()
                    .all(|l| s.labels.get(l).is_some())),
            "{text}"
        );
        assert_eq!(
            notifications.iter().map(|s| value(s)).sum::<f64>(),
            8.0,
            "{text}"
        );
        let sent_email_normal = notifications
            .iter()
            .find(|s| {
                s.labels.get("status") == Some("SENT")
                    && s.labels.get("channel") == Some("EMAIL")
                    && s.labels.get("priority") == Some("NORMAL")
            })
            .unwrap_or_else(|| panic!("no SENT/EMAIL/NORMAL series: {text}"));
        assert_eq!(value(sent_email_normal), 2.0, "{text}");
        let attempts = samples(&scrape, "notify_attempts");
        assert_eq!(
            attempts.iter().map(|s| value(s)).sum::<f64>(),
            attempts_in_db as f64,
            "{text}"
        );

        let deferrals = samples(&scrape, "notify_rate_limit_deferrals");
        assert!(!deferrals.is_empty(), "{text}");
        assert_eq!(
            deferrals.iter().map(|s| value(s)).sum::<f64>(),
            3.0,
            "{text}"
        );
    }

    // JSON stays the default, and can be asked for by name.
    for request in [
        client.get(format!("{base}/metrics?format=json")),
        client
            .get(format!("{base}/metrics"))
            .header(reqwest::header::ACCEPT, "application/json"),
    ] {
        let (status, headers, body) = send(request).await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            headers[reqwest::header::CONTENT_TYPE]
                .to_str()
                .is_ok_and(|t| t.starts_with("application/json"))
        );
        assert_eq!(body["sent"], 2, "{body}");
    }
}

/// Prometheus buckets are "less than or equal": a latency exactly on a bound belongs to
/// that bound's bucket.
#[tokio::test]
async fn a_latency_exactly_on_a_bucket_bound_is_counted_in_that_bucket() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    factory::create(&db.pool, factory::Spec::default()).await;
    let conn = db.pool.get().await.expect("connection");
    let claimed = queue::claim(&conn, "test-worker", 10, Duration::from_secs(300))
        .await
        .expect("claim");
    let results: Vec<_> = claimed.iter().map(|c| (c, Disposition::Sent)).collect();
    queue::record(&conn, &results).await.expect("record");
    conn.execute(
        "UPDATE notifications SET scheduled_at = sent_at - interval '1 second'",
        &[],
    )
    .await
    .expect("exact latency");
    drop(conn);

    let text = prometheus_text(client.get(format!("{base}/metrics?format=prometheus"))).await;
    let scrape = parse_exposition(&text);
    let histogram = samples(&scrape, "notify_delivery_latency_seconds");
    let PromValue::Histogram(buckets) = &histogram[0].value else {
        panic!("not a histogram: {text}");
    };
    let le_1 = buckets.iter().find(|b| b.less_than == 1.0).expect("le=1");
    assert_eq!(le_1.count, 1.0, "a 1.000 s delivery is <= 1: {text}");
}

#[tokio::test]
async fn metrics_reject_an_unknown_format_and_unknown_query_parameters_with_400() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    for (query, field) in [("format=xml", "format"), ("foo=1", "foo")] {
        let (status, _, error) = send(client.get(format!("{base}/metrics?{query}"))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {error}");
        assert_envelope(&error, 400, "/metrics");
        assert_eq!(detail_fields(&error), [field], "{query}: {error}");
    }
}

// ---------------------------------------------------------------------------------------
// Worker role
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn the_worker_role_answers_health_and_metrics_but_not_the_notification_routes() {
    let db = test_db().await;
    let state = AppState {
        pool: db.pool.clone(),
        max_attempts: 6,
        auth: notify_shared::auth::Authenticator::anonymous(),
    };
    let app = intake::router(state, Routes::HealthOnly);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client = reqwest::Client::new();
    let dead = dead_lettered(&db, 1, None, "boom").await[0];

    let (status, _, health) = send(client.get(format!("{base}/health"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        health,
        json!({"status": "ok", "info": {"database": {"status": "up"}}})
    );
    let (rest, _) = split_lag(metrics(&client, &base).await);
    assert_eq!(rest, counts([0, 0, 0, 0, 1, 0], [0; 3]));

    let routes = [
        (reqwest::Method::GET, "/notifications".to_string()),
        (reqwest::Method::POST, "/notifications".to_string()),
        (reqwest::Method::POST, "/notifications/retry".to_string()),
        (reqwest::Method::GET, format!("/notifications/{dead}")),
        (
            reqwest::Method::POST,
            format!("/notifications/{dead}/retry"),
        ),
        (reqwest::Method::GET, "/api/docs-json".to_string()),
    ];
    for (method, path) in routes {
        let (status, _, error) =
            send(client.request(method.clone(), format!("{base}{path}"))).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {error}");
        assert_envelope(&error, 404, &path);
        assert_eq!(error["error"], "Not Found");
        assert_eq!(error["message"], format!("Cannot find {path}"));
    }
    assert_eq!(
        status_of(&db, dead).await,
        ("DEAD_LETTERED", 0),
        "no redrive through a worker"
    );
}

#[tokio::test]
async fn a_body_of_only_whitespace_is_malformed_json_not_an_absent_body() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let malformed = client
        .post(format!("{base}/notifications/retry"))
        .header("content-type", "application/json")
        .body("\r\n ")
        .send()
        .await
        .expect("request");
    assert_eq!(malformed.status(), StatusCode::BAD_REQUEST);
    let not_json = client
        .post(format!("{base}/notifications/retry"))
        .header("content-type", "text/plain")
        .body(" ")
        .send()
        .await
        .expect("request");
    assert_eq!(not_json.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
}
