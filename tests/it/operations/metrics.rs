//! Metrics as JSON and as Prometheus text, and the worker role's reduced router.

use std::collections::HashMap;

use notify_shared::notification::Status;
use notify_shared::queue::Disposition;
use notify_tests::app::{assert_envelope, detail_fields};
use notify_tests::worker::LEASE;
use notify_tests::{Reply, TestApp, factory};
use prometheus_parse::{LineInfo, Scrape, Value as PromValue};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

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
    [
        pending,
        processing,
        sent,
        failed,
        dead_lettered,
        cancelled,
        suppressed,
        expired,
    ]: [i64; 8],
    [webhooks_pending, delivered, given_up]: [i64; 3],
) -> Value {
    json!({
        "pending": pending, "processing": processing, "sent": sent, "failed": failed,
        "deadLettered": dead_lettered, "cancelled": cancelled, "suppressed": suppressed,
        "expired": expired,
        "webhooks": {"pending": webhooks_pending, "delivered": delivered, "givenUp": given_up},
        "retention": {"notificationsDeleted": 0, "webhookEventsDeleted": 0},
    })
}

#[tokio::test]
async fn metrics_count_every_status_exactly_and_measure_the_lag_of_the_oldest_due_one() {
    let app = TestApp::spawn().await;
    let db = &app.db;

    let empty = app.metrics().await;
    let (rest, lag) = split_lag(empty);
    assert_eq!(
        rest,
        counts([0; 8], [0; 3]),
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
    let (rest, lag) = split_lag(app.metrics().await);
    assert_eq!(rest, counts([13, 0, 0, 0, 0, 0, 0, 0], [0; 3]));
    assert!(
        (3.0..10.0).contains(&lag),
        "the oldest due one is 3 s old: {lag}"
    );

    // A worker claims the four due ones and records three as SENT.
    let conn = db.pool.get().await.expect("connection");
    let claimed = notify_tests::worker::claim(&conn, "test-worker", 10, LEASE)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 4);
    let (rest, lag) = split_lag(app.metrics().await);
    assert_eq!(rest, counts([9, 4, 0, 0, 0, 0, 0, 0], [0; 3]));
    assert_eq!(lag, 0.0, "only future PENDING rows remain");
    let results: Vec<_> = claimed[..3]
        .iter()
        .map(|c| (c, Disposition::sent()))
        .collect();
    let recorded = notify_tests::worker::record(&conn, &results)
        .await
        .expect("record");
    assert_eq!((recorded.recorded, recorded.events), (3, 3));
    drop(conn);
    db.execute(
        "UPDATE webhook_events SET dispatch_state = 'DELIVERED', delivered_at = now()
         WHERE id = (SELECT id FROM webhook_events ORDER BY id LIMIT 1)",
        &[],
    )
    .await;

    // Six cancelled through the API, four FAILED and five DEAD_LETTERED.
    for n in &future[..6] {
        let (status, body) = app.cancel(n.id).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    factory::failed(&db.pool, 4, "no such address").await;
    factory::dead_lettered(&db.pool, 5, None, "provider down").await;
    // Two SUPPRESSED (an address on the list) and one EXPIRED, each with its event.
    let (status, body) = app
        .send(
            app.request(Method::POST, "/suppressions")
                .json(&json!({"channel": "SMS", "address": "+15555550123"})),
        )
        .await
        .pair();
    assert_eq!(status, StatusCode::CREATED, "{body}");
    for key in ["suppressed-1", "suppressed-2"] {
        let (status, body) = app
            .create(&json!({"recipient": "+15555550123", "channel": "SMS",
                            "payload": {"text": "hi"}, "idempotencyKey": key,
                            "priority": "NORMAL", "delaySeconds": 3600}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        assert_eq!(body["suppressedReason"], "SUPPRESSED_ADDRESS");
    }
    let lapsed = factory::Spec::default()
        .due_in_seconds(3600)
        .expires_at(chrono::Utc::now() - chrono::TimeDelta::seconds(1));
    factory::create(&db.pool, lapsed).await;
    let conn = db.pool.get().await.expect("connection");
    assert_eq!(
        notify_shared::queue::expire(&conn, 100)
            .await
            .expect("expire"),
        1
    );
    drop(conn);

    let (rest, lag) = split_lag(app.metrics().await);
    assert_eq!(rest, counts([3, 1, 3, 4, 5, 6, 2, 1], [5, 1, 0]));
    assert_eq!(lag, 0.0, "nothing is due: exactly 0, never negative");

    // One of the future ones becomes due 5 s ago.
    db.execute(
        "UPDATE notifications SET next_attempt_at = now() - interval '5 seconds' WHERE id = $1",
        &[&future[8].id],
    )
    .await;
    let (rest, lag) = split_lag(app.metrics().await);
    assert_eq!(rest, counts([3, 1, 3, 4, 5, 6, 2, 1], [5, 1, 0]));
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
    let app = TestApp::spawn().await;
    let db = &app.db;

    // Two SENT with known latencies (0.7 s and 20 s), one PROCESSING, one due PENDING with
    // three rate-limit deferrals, one FAILED, two DEAD_LETTERED, one CANCELLED.
    factory::create_many(&db.pool, 3, |_| factory::Spec::default()).await;
    let conn = db.pool.get().await.expect("connection");
    let claimed = notify_tests::worker::claim(&conn, "test-worker", 10, LEASE)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 3);
    drop(conn);
    // The histogram counts each transition to SENT as it happens.
    let mut sent = Vec::new();
    for (claim, latency) in claimed[..2].iter().zip(["0.7", "20"]) {
        factory::sent_after(&db.pool, claim.id, latency).await;
        sent.push(factory::load(&db.pool, claim.id).await);
    }
    // Their webhook events, waiting in the outbox.
    factory::insert_events(&db.pool, &sent).await;
    let deferred = factory::create(&db.pool, factory::Spec::default()).await;
    db.execute(
        "UPDATE notifications SET rate_limit_deferrals = 3,
                next_attempt_at = now() - interval '2 seconds' WHERE id = $1",
        &[&deferred.id],
    )
    .await;
    factory::failed(&db.pool, 1, "no such address").await;
    factory::dead_lettered(&db.pool, 2, None, "provider down").await;
    let cancelled = factory::create(&db.pool, factory::Spec::default().due_in_seconds(60)).await;
    factory::mark_cancelled(&db.pool, cancelled.id).await;

    let attempts_in_db = db
        .count("SELECT sum(attempt_count)::int8 FROM notifications")
        .await;
    assert!(attempts_in_db > 0);

    let by_accept = prometheus_text(
        app.request(Method::GET, "/metrics")
            .header(reqwest::header::ACCEPT, "text/plain"),
    )
    .await;
    let by_format = prometheus_text(app.request(Method::GET, "/metrics?format=prometheus")).await;

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
            ("SUPPRESSED", 0.0),
            ("EXPIRED", 0.0),
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
        app.request(Method::GET, "/metrics?format=json"),
        app.request(Method::GET, "/metrics")
            .header(reqwest::header::ACCEPT, "application/json"),
    ] {
        let Reply {
            status,
            headers,
            body,
        } = app.send(request).await;
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
    let app = TestApp::spawn().await;
    let db = &app.db;
    factory::create(&db.pool, factory::Spec::default()).await;
    let conn = db.pool.get().await.expect("connection");
    let claimed = notify_tests::worker::claim(&conn, "test-worker", 10, LEASE)
        .await
        .expect("claim");
    drop(conn);
    factory::sent_after(&db.pool, claimed[0].id, "1").await;

    let text = prometheus_text(app.request(Method::GET, "/metrics?format=prometheus")).await;
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
    let app = TestApp::spawn().await;
    for (query, field) in [("format=xml", "format"), ("foo=1", "foo")] {
        let (status, error) = app
            .send(app.request(Method::GET, &format!("/metrics?{query}")))
            .await
            .pair();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {error}");
        assert_envelope(&error, 400, "/metrics");
        assert_eq!(detail_fields(&error), [field], "{query}: {error}");
    }
}

#[tokio::test]
async fn the_worker_role_answers_health_and_metrics_but_not_the_notification_routes() {
    let app = TestApp::spawn_worker_role().await;
    let db = &app.db;
    let dead = factory::dead_lettered(&db.pool, 1, None, "boom").await[0];

    let (status, health) = app.send(app.request(Method::GET, "/health")).await.pair();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        health,
        json!({"status": "ok", "info": {"database": {"status": "up"}}})
    );
    let (rest, _) = split_lag(app.metrics().await);
    assert_eq!(rest, counts([0, 0, 0, 0, 1, 0, 0, 0], [0; 3]));

    let routes = [
        (Method::GET, "/notifications".to_string()),
        (Method::POST, "/notifications".to_string()),
        (Method::POST, "/notifications/retry".to_string()),
        (Method::GET, format!("/notifications/{dead}")),
        (Method::POST, format!("/notifications/{dead}/retry")),
        (Method::GET, "/api/docs-json".to_string()),
    ];
    for (method, path) in routes {
        let (status, error) = app.send(app.request(method.clone(), &path)).await.pair();
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {error}");
        assert_envelope(&error, 404, &path);
        assert_eq!(error["error"], "Not Found");
        assert_eq!(error["message"], format!("Cannot find {path}"));
    }
    assert_eq!(
        factory::status_of(&db.pool, dead).await,
        (Status::DeadLettered, 0),
        "no redrive through a worker"
    );
}

/// The database files each delivery into the bucket of the first bound of
/// `LATENCY_BUCKETS` it does not exceed (the one past the last above them all): on
/// every bound, just above it, at zero, far above the last and for a missing latency.
#[tokio::test]
async fn the_database_files_latencies_into_the_codes_buckets() {
    use notify_shared::queue::stats::LATENCY_BUCKETS;
    let db = notify_tests::TestDb::new().await;
    let conn = db.pool.get().await.expect("connection");
    let mut cases: Vec<(Option<f64>, i16)> = vec![(Some(0.0), 0), (Some(1e9), 11), (None, 0)];
    for (index, bound) in (0_i16..).zip(LATENCY_BUCKETS) {
        cases.push((Some(bound), index));
        cases.push((Some(bound * (1.0 + 1e-9)), index + 1));
    }
    for (latency, expected) in cases {
        let bucket: i16 = conn
            .query_one("SELECT notification_latency_bucket($1)", &[&latency])
            .await
            .expect("bucket")
            .get(0);
        assert_eq!(bucket, expected, "latency {latency:?}");
    }
}

/// Prometheus carries what `GET /providers` shows of each channel: the circuit's state and
/// since when, the window's failure ratio, and until when the channel is paused.
#[tokio::test]
async fn prometheus_carries_each_channels_circuit_since_failure_ratio_and_pause() {
    let app = TestApp::spawn().await;
    let db = &app.db;
    db.execute(
        "UPDATE channel_health
         SET circuit = 'OPEN', circuit_since = '2026-01-02T03:04:05Z',
             circuit_until = now() + interval '1 hour'
         WHERE channel = 'EMAIL'",
        &[],
    )
    .await;
    db.execute(
        "UPDATE channel_health
         SET paused_until = '2999-01-01T00:00:00Z', pause_reason = 'throttled'
         WHERE channel = 'SMS'",
        &[],
    )
    .await;
    db.execute(
        "INSERT INTO channel_calls (channel, second, calls, temporary)
         VALUES ('SMS', date_trunc('second', now()), 8, 2)",
        &[],
    )
    .await;
    db.execute(
        "INSERT INTO provider_refusal_counts (channel, outcome, calls)
         VALUES ('SMS', 'THROTTLED', 7), ('PUSH', 'PROVIDER_MISCONFIGURED', 3)",
        &[],
    )
    .await;

    let text = prometheus_text(app.request(Method::GET, "/metrics?format=prometheus")).await;
    let scrape = parse_exposition(&text);
    let since = by_label(&scrape, "notify_channel_circuit_since_seconds", "channel");
    assert_eq!(since["EMAIL"], 1_767_323_045.0, "{text}");
    let paused = by_label(&scrape, "notify_channel_paused_until_seconds", "channel");
    assert_eq!(
        (paused["SMS"], paused["EMAIL"]),
        (32_472_144_000.0, 0.0),
        "{text}"
    );
    let ratio = by_label(&scrape, "notify_channel_failure_ratio", "channel");
    assert_eq!((ratio["SMS"], ratio["PUSH"]), (0.25, 0.0), "{text}");
    let state = by_label(&scrape, "notify_channel_circuit_state", "channel");
    assert_eq!(state["EMAIL"], 2.0, "{text}");
    let refused: HashMap<(String, String), f64> = samples(&scrape, "notify_provider_refused_calls")
        .into_iter()
        .map(|s| {
            let label = |name| s.labels.get(name).unwrap_or_default().to_string();
            ((label("channel"), label("outcome")), value(s))
        })
        .collect();
    assert_eq!(refused.len(), 6, "every channel and outcome: {text}");
    assert_eq!(refused[&("SMS".into(), "THROTTLED".into())], 7.0, "{text}");
    assert_eq!(
        refused[&("PUSH".into(), "PROVIDER_MISCONFIGURED".into())],
        3.0,
        "{text}"
    );
    assert_eq!(
        refused[&("EMAIL".into(), "THROTTLED".into())],
        0.0,
        "{text}"
    );
}
