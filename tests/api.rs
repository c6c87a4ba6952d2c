//! The HTTP contract for create, get, list and cancel, against a real PostgreSQL.

mod common;

use std::collections::HashSet;

use common::{factory, spawn_api, test_db};
use futures::future::join_all;
use notify_shared::notification::Priority;
use notify_shared::queue;
use reqwest::StatusCode;
use serde_json::{Value, json};

fn body(key: &str) -> Value {
    json!({"recipient": "ada@example.com", "channel": "EMAIL", "payload": {"subject": "hi"},
           "priority": "HIGH", "idempotencyKey": key, "delaySeconds": 60})
}

async fn post(
    client: &reqwest::Client,
    base: &str,
    body: &Value,
) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let response = client
        .post(format!("{base}/notifications"))
        .json(body)
        .send()
        .await
        .expect("request");
    let status = response.status();
    let headers = response.headers().clone();
    (
        status,
        headers,
        response.json().await.unwrap_or(Value::Null),
    )
}

fn details(error: &Value) -> Vec<(String, Vec<String>)> {
    error["details"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|d| {
                    let errors = d["errors"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|e| e.as_str().map(String::from))
                        .collect();
                    (d["field"].as_str().unwrap_or_default().to_string(), errors)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn assert_envelope(error: &Value, status: u16, path: &str) {
    assert_eq!(error["statusCode"], status, "{error}");
    assert!(
        error["error"].is_string() && error["message"].is_string(),
        "{error}"
    );
    assert_eq!(error["path"], path);
    assert!(
        error["requestId"].as_str().is_some_and(|id| !id.is_empty()),
        "{error}"
    );
}

#[tokio::test]
async fn create_returns_201_and_get_returns_the_same_representation() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let (status, headers, created) = post(&client, &base, &body("k-1")).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(headers["idempotent-replayed"], "false");
    let expected_fields: HashSet<&str> = [
        "id",
        "idempotencyKey",
        "recipient",
        "channel",
        "priority",
        "status",
        "scheduledAt",
        "nextAttemptAt",
        "attemptCount",
        "maxAttempts",
        "lastError",
        "sentAt",
        "failedAt",
        "deadLetteredAt",
        "cancelledAt",
        "redriveCount",
        "lastRedrivenAt",
        "createdAt",
        "updatedAt",
    ]
    .into();
    let fields: HashSet<&str> = created
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        fields, expected_fields,
        "exactly the documented fields; never the payload"
    );
    assert_eq!(created["status"], "PENDING");
    assert_eq!(created["attemptCount"], 0);
    assert_eq!(created["maxAttempts"], 6);
    assert!(
        created["createdAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z') && t.len() == 24),
        "{created}"
    );

    let id = created["id"].as_str().expect("id");
    let fetched: Value = client
        .get(format!("{base}/notifications/{id}"))
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert_eq!(fetched, created);
}

#[tokio::test]
async fn get_and_cancel_answer_400_for_a_bad_id_and_404_for_an_unknown_one() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let response = client
            .request(method.clone(), format!("{base}/notifications/not-a-uuid"))
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let error: Value = response.json().await.expect("json");
        assert_envelope(&error, 400, "/notifications/not-a-uuid");

        let id = uuid::Uuid::new_v4();
        let response = client
            .request(method, format!("{base}/notifications/{id}"))
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        let error: Value = response.json().await.expect("json");
        assert_eq!(error["message"], format!("Notification {id} not found"));
    }
}

#[tokio::test]
async fn cancel_moves_pending_to_cancelled_once_and_refuses_other_statuses() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let (_, _, created) = post(&client, &base, &body("c-1")).await;
    let id = created["id"].as_str().expect("id");

    let first = client
        .delete(format!("{base}/notifications/{id}"))
        .send()
        .await
        .expect("cancel");
    assert_eq!(first.status(), StatusCode::OK);
    let cancelled: Value = first.json().await.expect("json");
    assert_eq!(cancelled["status"], "CANCELLED");
    assert!(cancelled["cancelledAt"].is_string());

    let again = client
        .delete(format!("{base}/notifications/{id}"))
        .send()
        .await
        .expect("cancel again");
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(
        again.json::<Value>().await.expect("json"),
        cancelled,
        "unchanged"
    );

    let sent = factory::create(&db.pool, factory::Spec::default()).await;
    db.pool
        .get()
        .await
        .expect("db")
        .execute(
            "UPDATE notifications SET status = 'SENT', sent_at = now() WHERE id = $1",
            &[&sent.id],
        )
        .await
        .expect("mark sent");
    let refused = client
        .delete(format!("{base}/notifications/{}", sent.id))
        .send()
        .await
        .expect("cancel sent");
    assert_eq!(refused.status(), StatusCode::CONFLICT);
    let error: Value = refused.json().await.expect("json");
    assert_eq!(
        error["message"],
        format!(
            "Notification {} is SENT; only PENDING jobs can be cancelled",
            sent.id
        )
    );
}

#[tokio::test]
async fn several_invalid_fields_are_reported_together() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let (status, _, error) = post(
        &client,
        &base,
        &json!({"recipient": "x\u{0}y", "channel": "FAX", "payload": {"k\u{0}": "v"}, "priority": "URGENT",
                "idempotencyKey": "", "delaySeconds": 0, "colour": "red"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_envelope(&error, 400, "/notifications");
    assert_eq!(error["message"], "Validation failed");
    let fields: Vec<String> = details(&error).into_iter().map(|(f, _)| f).collect();
    for field in [
        "colour",
        "recipient",
        "channel",
        "payload",
        "priority",
        "idempotencyKey",
        "delaySeconds",
    ] {
        assert!(
            fields.iter().any(|f| f == field),
            "{field} not reported: {error}"
        );
    }
    assert!(
        details(&error)
            .iter()
            .any(|(f, e)| f == "colour" && e == &["property colour should not exist"])
    );
}

#[tokio::test]
async fn null_schedule_fields_are_400_never_500() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    for field in ["delaySeconds", "sendAt"] {
        let mut request = body(&format!("null-{field}"));
        request
            .as_object_mut()
            .expect("object")
            .remove("delaySeconds");
        request[field] = Value::Null;
        let (status, _, error) = post(&client, &base, &request).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{field}: {error}");
    }
    let mut neither = body("neither");
    neither
        .as_object_mut()
        .expect("object")
        .remove("delaySeconds");
    let (status, _, error) = post(&client, &base, &neither).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        details(&error),
        [(
            "sendAt".to_string(),
            vec!["Provide exactly one of sendAt or delaySeconds".to_string()]
        )]
    );
}

#[tokio::test]
async fn malformed_and_oversized_bodies_get_clean_errors() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();

    let truncated = client
        .post(format!("{base}/notifications"))
        .header("content-type", "application/json")
        .body(r#"{"recipient": "a@b.c", "chan"#)
        .send()
        .await
        .expect("request");
    assert_eq!(truncated.status(), StatusCode::BAD_REQUEST);
    let text = truncated.text().await.expect("text");
    let error: Value = serde_json::from_str(&text).expect("envelope");
    assert_envelope(&error, 400, "/notifications");
    for leak in ["panicked", "src/", "backtrace", "serde"] {
        assert!(!text.contains(leak), "{leak} leaked: {text}");
    }

    let mut big = body("big");
    big["payload"] = json!({"blob": "x".repeat(70 * 1024)});
    let (status, _, error) = post(&client, &base, &big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_envelope(&error, 413, "/notifications");

    let form = client
        .post(format!("{base}/notifications"))
        .body("recipient=a")
        .header("content-type", "text/plain")
        .send()
        .await
        .expect("request");
    assert_eq!(form.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

#[tokio::test]
async fn request_ids_are_kept_when_safe_and_replaced_otherwise() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let kept = client
        .get(format!("{base}/health"))
        .header("x-request-id", "trace-1.2:3_4")
        .send()
        .await
        .expect("request");
    assert_eq!(kept.headers()["x-request-id"], "trace-1.2:3_4");
    for unsafe_id in ["has space", "<script>", &"a".repeat(129)] {
        let response = client
            .get(format!("{base}/notifications/nope"))
            .header("x-request-id", unsafe_id)
            .send()
            .await
            .expect("request");
        let echoed = response.headers()["x-request-id"]
            .to_str()
            .expect("ascii")
            .to_string();
        assert_ne!(echoed, unsafe_id);
        assert!(uuid::Uuid::try_parse(&echoed).is_ok(), "{echoed}");
        let error: Value = response.json().await.expect("json");
        assert_eq!(error["requestId"], echoed.as_str());
    }
}

#[tokio::test]
async fn every_response_carries_the_security_headers_and_no_server_banner() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    for path in [
        "/health",
        "/notifications",
        "/missing",
        "/api/docs-json",
        "/api/docs",
    ] {
        let response = client
            .get(format!("{base}{path}"))
            .send()
            .await
            .expect("request");
        let headers = response.headers();
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(headers["x-frame-options"], "SAMEORIGIN", "{path}");
        assert!(headers.get("server").is_none(), "{path}");
        assert!(headers.get("content-security-policy").is_some(), "{path}");
    }
    let missing: Value = client
        .get(format!("{base}/missing"))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    assert_envelope(&missing, 404, "/missing");
    let docs: Value = client
        .get(format!("{base}/api/docs-json"))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    assert_eq!(docs["info"]["title"], "Notify Queue API");
}

#[tokio::test]
async fn twenty_five_simultaneous_identical_posts_create_one_row() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let request = body("same-key");
    let responses = join_all((0..25).map(|_| post(&client, &base, &request))).await;
    let created = responses
        .iter()
        .filter(|(s, _, _)| *s == StatusCode::CREATED)
        .count();
    let replayed: Vec<_> = responses
        .iter()
        .filter(|(s, _, _)| *s == StatusCode::OK)
        .collect();
    assert_eq!(created, 1);
    assert_eq!(replayed.len(), 24);
    assert!(
        replayed
            .iter()
            .all(|(_, h, _)| h["idempotent-replayed"] == "true")
    );
    let ids: HashSet<&str> = responses
        .iter()
        .filter_map(|(_, _, b)| b["id"].as_str())
        .collect();
    assert_eq!(ids.len(), 1);
    assert_eq!(factory::count_where(&db.pool, "true").await, 1);
}

#[tokio::test]
async fn one_key_with_two_bodies_keeps_one_row_and_the_loser_gets_409() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let a = body("contested");
    let mut b = body("contested");
    b["recipient"] = json!("grace@example.com");
    let responses = join_all((0..25).map(|i| {
        let request = if i % 2 == 0 { a.clone() } else { b.clone() };
        let client = client.clone();
        let base = base.clone();
        async move {
            (
                request["recipient"].clone(),
                post(&client, &base, &request).await,
            )
        }
    }))
    .await;
    assert_eq!(factory::count_where(&db.pool, "true").await, 1);
    let winner = responses
        .iter()
        .find(|(_, (s, _, _))| *s == StatusCode::CREATED)
        .map(|(r, _)| r.clone())
        .expect("one created");
    for (recipient, (status, _, response)) in &responses {
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
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let first = json!({"recipient": "r@example.com", "channel": "SMS", "priority": "LOW", "idempotencyKey": "tz",
                       "payload": {"a": 1, "b": {"c": 2, "d": 3}}, "sendAt": "2026-12-01T09:30:00+01:00"});
    let second = json!({"sendAt": "2026-12-01T08:30:00.000Z", "payload": {"b": {"d": 3, "c": 2}, "a": 1},
                        "idempotencyKey": "tz", "priority": "LOW", "channel": "SMS", "recipient": "r@example.com"});
    let (status, _, created) = post(&client, &base, &first).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, headers, replayed) = post(&client, &base, &second).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["idempotent-replayed"], "true");
    assert_eq!(replayed, created);
}

#[tokio::test]
async fn paging_rows_that_share_one_created_at_skips_and_repeats_nothing() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    {
        let mut connection = db.pool.get().await.expect("db");
        let transaction = connection.transaction().await.expect("tx");
        for i in 0..23 {
            let new = queue::NewNotification {
                id: uuid::Uuid::new_v4(),
                idempotency_key: format!("same-time-{i}"),
                fingerprint: "0".repeat(64),
                recipient: "pager@example.com".into(),
                channel: notify_shared::notification::Channel::Push,
                priority: Priority::Low,
                payload: json!({}),
                due: queue::Due::AfterSeconds(3600),
                max_attempts: 6,
                owner_key_id: None,
            };
            queue::insert(&transaction, &new).await.expect("insert");
        }
        transaction.commit().await.expect("commit");
    }
    assert_eq!(
        factory::count_where(
            &db.pool,
            "created_at = (SELECT min(created_at) FROM notifications)"
        )
        .await,
        23
    );

    let client = reqwest::Client::new();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut url = format!("{base}/notifications?limit=5&recipient=pager%40example.com");
        if let Some(cursor) = &cursor {
            url.push_str(&format!("&cursor={cursor}"));
        }
        let page: Value = client
            .get(url)
            .send()
            .await
            .expect("list")
            .json()
            .await
            .expect("json");
        pages += 1;
        for item in page["items"].as_array().expect("items") {
            seen.push(item["id"].as_str().expect("id").to_string());
        }
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(pages, 5);
    assert_eq!(seen.len(), 23);
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 23);
}

#[tokio::test]
async fn list_rejects_unknown_parameters_bad_limits_and_foreign_cursors() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    for query in [
        "limit=0",
        "limit=101",
        "limit=ten",
        "status=DONE",
        "cursor=abc",
        "sort=asc",
        "limit=5&limit=6",
    ] {
        let response = client
            .get(format!("{base}/notifications?{query}"))
            .send()
            .await
            .expect("list");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{query}");
    }
    let error: Value = client
        .get(format!("{base}/notifications?cursor=abc"))
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    assert_eq!(
        details(&error)[0].1,
        ["cursor is not valid; use the nextCursor from a previous page"]
    );
    let ok = client
        .get(format!(
            "{base}/notifications?status=DEAD_LETTERED&limit=100"
        ))
        .send()
        .await
        .expect("list");
    assert_eq!(ok.status(), StatusCode::OK);
    assert_eq!(
        ok.json::<Value>().await.expect("json"),
        json!({"items": [], "nextCursor": null})
    );
}

#[tokio::test]
async fn cancel_racing_claims_never_leaves_a_notification_both_cancelled_and_claimed() {
    let db = test_db().await;
    let created = factory::create_many(&db.pool, 200, |_| factory::Spec::default()).await;
    let cancel_pool = db.new_pool(1);
    let canceller = tokio::spawn(async move {
        let connection = cancel_pool.get().await.expect("db");
        let mut cancelled = HashSet::new();
        for notification in &created {
            if let Some(after) = queue::cancel(&connection, notification.id, None)
                .await
                .expect("cancel")
                && after.status == "CANCELLED"
            {
                cancelled.insert(after.id);
            }
        }
        cancelled
    });
    let claimers = (0..5).map(|i| {
        let pool = db.new_pool(1);
        tokio::spawn(async move {
            let connection = pool.get().await.expect("db");
            let mut claimed = HashSet::new();
            for _ in 0..40 {
                let batch = queue::claim(
                    &connection,
                    &format!("racer-{i}"),
                    5,
                    std::time::Duration::from_secs(300),
                )
                .await
                .expect("claim");
                claimed.extend(batch.iter().map(|c| c.id));
            }
            claimed
        })
    });
    let claimed: Vec<HashSet<uuid::Uuid>> = join_all(claimers)
        .await
        .into_iter()
        .map(|r| r.expect("claimer"))
        .collect();
    let cancelled = canceller.await.expect("canceller");
    let all_claimed: HashSet<uuid::Uuid> = claimed.iter().flatten().copied().collect();
    assert_eq!(
        all_claimed.len(),
        claimed.iter().map(HashSet::len).sum::<usize>(),
        "claimed twice"
    );
    assert!(
        all_claimed.is_disjoint(&cancelled),
        "a notification was both cancelled and claimed"
    );
    assert_eq!(all_claimed.len() + cancelled.len(), 200);
    assert_eq!(
        factory::count_where(&db.pool, "status = 'CANCELLED'").await as usize,
        cancelled.len()
    );
    assert_eq!(
        factory::count_where(&db.pool, "status = 'PROCESSING'").await as usize,
        all_claimed.len()
    );
}

/// A sweep of hostile inputs: whatever a client sends, the answer is never a 5xx.
#[tokio::test]
async fn no_client_input_produces_a_server_error() {
    let db = test_db().await;
    let base = spawn_api(&db).await;
    let client = reqwest::Client::new();
    let bodies: Vec<String> = vec![
        "".into(), "null".into(), "[]".into(), "42".into(), "\"text\"".into(), "{".into(), "{}".into(),
        r#"{"recipient": "\ud800"}"#.into(), r#"{"payload": {"n": 1e999}}"#.into(),
        format!("{}{}", "[".repeat(200), "]".repeat(200)),
        format!(r#"{{"recipient":"a","channel":"SMS","priority":"LOW","idempotencyKey":"deep","delaySeconds":5,"payload":{}1{}}}"#, r#"{"a":"#.repeat(100), "}".repeat(100)),
        r#"{"recipient":"a","channel":"SMS","priority":"LOW","idempotencyKey":"big","delaySeconds":9223372036854775808,"payload":{}}"#.into(),
        r#"{"recipient":"a","channel":"SMS","priority":"LOW","idempotencyKey":"far","sendAt":"+275760-09-13T00:00:00Z","payload":{}}"#.into(),
        r#"{"recipient":"a","channel":"SMS","priority":"LOW","idempotencyKey":"neg","sendAt":"0000-01-01T00:00:00Z","payload":{}}"#.into(),
        r#"{"recipient":"a","channel":"SMS","priority":"LOW","idempotencyKey":"nul","delaySeconds":5,"payload":{"x":"\u0000"}}"#.into(),
    ];
    for body in &bodies {
        let response = client
            .post(format!("{base}/notifications"))
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .expect("request");
        assert!(
            response.status().is_client_error() || response.status().is_success(),
            "{} for {body:.80}",
            response.status()
        );
    }
    for path in [
        "/notifications/%00",
        "/notifications/..%2F..",
        "/notifications?status=%FF",
        "/notifications?cursor=%00",
        "/notifications?limit=-1",
        "/notifications?recipient=",
    ] {
        let response = client
            .get(format!("{base}{path}"))
            .send()
            .await
            .expect("request");
        assert!(
            response.status().is_client_error() || response.status().is_success(),
            "{} for {path}",
            response.status()
        );
    }
    let response = client
        .put(format!("{base}/notifications"))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
}
