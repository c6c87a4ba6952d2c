//! `GET /digest`: each finding appears when its condition holds and not just below it,
//! with its evidence and action, and the findings come ranked.

use notify_shared::auth::{self, Scope};
use notify_shared::content::campaigns;
use notify_shared::notification::{Channel, Priority};
use notify_tests::{TestApp, factory};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

async fn digest(app: &TestApp) -> Vec<Value> {
    let reply = app.send(app.request(Method::GET, "/digest")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert!(
        reply.body["generatedAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    reply.body["findings"].as_array().expect("findings").clone()
}

/// (severity, code) of every finding, in the order served.
fn order(findings: &[Value]) -> Vec<(String, String)> {
    findings
        .iter()
        .map(|f| {
            (
                f["severity"].as_str().unwrap_or_default().to_string(),
                f["code"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_quiet_system_has_no_findings() {
    let app = TestApp::spawn().await;
    // Work that is fine: due in the future, due a moment ago, sent.
    factory::create(&app.db.pool, factory::Spec::default().due_in_seconds(3600)).await;
    factory::create(&app.db.pool, factory::Spec::default()).await;
    assert_eq!(digest(&app).await, Vec::<Value>::new());
}

#[tokio::test]
async fn dead_letter_growth_counts_the_last_hour_groups_errors_and_offers_the_redrive() {
    let app = TestApp::spawn().await;
    let pool = &app.db.pool;
    let boom = factory::create_many(pool, 3, |_| factory::Spec::default()).await;
    let ids: Vec<Uuid> = boom.iter().map(|n| n.id).collect();
    factory::dead_letter_many(pool, &ids, "provider said boom").await;
    let sms = factory::create(pool, factory::Spec::default().channel(Channel::Sms)).await;
    factory::dead_letter(pool, sms.id, "invalid number").await;
    // Dead-lettered 90 minutes ago: the hour before, not this one.
    let old = factory::create(pool, factory::Spec::default()).await;
    factory::dead_letter(pool, old.id, "old").await;
    app.db
        .execute(
            "UPDATE notifications SET dead_lettered_at = now() - interval '90 minutes' WHERE id = $1",
            &[&old.id],
        )
        .await;

    let findings = digest(&app).await;
    assert_eq!(order(&findings), [("warning".into(), "DLQ_GROWTH".into())]);
    let finding = &findings[0];
    assert_eq!(
        finding["title"],
        "4 notifications dead-lettered in the last hour"
    );
    assert_eq!(
        finding["evidence"],
        json!({
            "lastHour": 4, "previousHour": 1, "deadLetteredTotal": 5,
            "topErrors": [{"error": "provider said boom", "count": 3},
                          {"error": "invalid number", "count": 1}],
            "channels": [{"channel": "EMAIL", "count": 3}, {"channel": "SMS", "count": 1}],
        })
    );
    let body =
        json!({"status": "DEAD_LETTERED", "limit": 1000, "errorContains": "provider said boom"});
    assert_eq!(
        finding["request"],
        json!({"method": "POST", "path": "/notifications/retry", "body": body})
    );
    assert!(
        finding["action"]
            .as_str()
            .unwrap()
            .contains("POST /notifications/retry")
    );

    // The action does what it says: it redrives the three of the top error.
    let reply = app.retry_bulk(&body).await;
    assert_eq!(reply.1["retried"], 3, "{}", reply.1);

    // A hundred in the hour is critical.
    let many = factory::create_many(pool, 100, |_| factory::Spec::default()).await;
    let ids: Vec<Uuid> = many.iter().map(|n| n.id).collect();
    factory::dead_letter_many(pool, &ids, "timeout").await;
    let findings = digest(&app).await;
    assert_eq!(findings[0]["severity"], "critical");
    assert_eq!(findings[0]["evidence"]["lastHour"], 101);
}

#[tokio::test]
async fn an_open_circuit_is_critical_a_half_open_one_and_a_pause_are_warnings() {
    let app = TestApp::spawn().await;
    app.db
        .execute(
            "UPDATE channel_health SET circuit = 'OPEN', circuit_since = now() - interval '20 seconds',
                    circuit_until = now() + interval '10 seconds' WHERE channel = 'EMAIL'",
            &[],
        )
        .await;
    app.db
        .execute(
            "UPDATE channel_health SET circuit = 'HALF_OPEN', circuit_until = now() + interval '5 seconds',
                    paused_until = now() + interval '60 seconds', pause_reason = 'PROVIDER_MISCONFIGURED',
                    paused_since = '2026-01-02T03:04:05Z'
             WHERE channel = 'SMS'",
            &[],
        )
        .await;
    // A pause that has ended is no finding.
    app.db
        .execute(
            "UPDATE channel_health SET paused_until = now() - interval '1 second', pause_reason = 'THROTTLED'
             WHERE channel = 'PUSH'",
            &[],
        )
        .await;
    let findings = digest(&app).await;
    assert_eq!(
        order(&findings),
        [
            ("critical".into(), "CIRCUIT_OPEN".into()),
            ("warning".into(), "CHANNEL_PAUSED".into()),
            ("warning".into(), "CIRCUIT_OPEN".into()),
        ]
    );
    assert_eq!(findings[0]["evidence"]["channel"], "EMAIL");
    assert_eq!(findings[0]["evidence"]["circuit"], "OPEN");
    assert_eq!(findings[1]["evidence"]["reason"], "PROVIDER_MISCONFIGURED");
    assert_eq!(findings[1]["evidence"]["since"], "2026-01-02T03:04:05.000Z");
    assert_eq!(findings[1]["evidence"]["failureRatio"], 0.0);
    assert_eq!(findings[1]["evidence"]["misconfiguredTotal"], 0);
    assert_eq!(findings[2]["evidence"]["channel"], "SMS");
}

#[tokio::test]
async fn queue_lag_is_reported_per_channel_and_priority_above_the_threshold() {
    let app = TestApp::spawn().await;
    let pool = &app.db.pool;
    let ago = |seconds| chrono::Utc::now() - chrono::TimeDelta::seconds(seconds);
    // EMAIL HIGH: 2 minutes behind (warning); SMS LOW: 12 minutes (critical); PUSH NORMAL:
    // 50 s (below the threshold); EMAIL NORMAL due in the future.
    for _ in 0..2 {
        factory::create(
            pool,
            factory::Spec::default()
                .priority(Priority::High)
                .due_at(ago(120)),
        )
        .await;
    }
    factory::create(
        pool,
        factory::Spec::default()
            .channel(Channel::Sms)
            .priority(Priority::Low)
            .due_at(ago(720)),
    )
    .await;
    factory::create(
        pool,
        factory::Spec::default()
            .channel(Channel::Push)
            .due_at(ago(50)),
    )
    .await;
    factory::create(pool, factory::Spec::default().due_in_seconds(3600)).await;

    let findings = digest(&app).await;
    assert_eq!(
        order(&findings),
        [
            ("critical".into(), "QUEUE_LAG".into()),
            ("warning".into(), "QUEUE_LAG".into()),
        ]
    );
    let sms = &findings[0]["evidence"];
    assert_eq!(
        (&sms["channel"], &sms["priority"], &sms["pending"]),
        (&json!("SMS"), &json!("LOW"), &json!(1))
    );
    assert!(sms["lagSeconds"].as_f64().unwrap() >= 720.0);
    let email = &findings[1]["evidence"];
    assert_eq!(
        (&email["channel"], &email["priority"], &email["pending"]),
        (&json!("EMAIL"), &json!("HIGH"), &json!(2))
    );
    let lag = email["lagSeconds"].as_f64().unwrap();
    assert!((120.0..180.0).contains(&lag), "{lag}");
    assert_eq!(
        findings[1]["title"],
        format!("EMAIL HIGH is {} s behind", lag.floor())
    );
}

#[tokio::test]
async fn a_late_outbox_and_given_up_events_are_findings() {
    let app = TestApp::spawn().await;
    let pool = &app.db.pool;
    let sent = factory::create_many(pool, 3, |_| factory::Spec::default()).await;
    let now = chrono::Utc::now();
    let late = factory::insert_event(pool, sent[0].id, "SENT", 1, now).await;
    let recent = factory::insert_event(pool, sent[1].id, "SENT", 1, now).await;
    let gone = factory::insert_event(pool, sent[2].id, "SENT", 1, now).await;
    // Due 4 minutes ago: below the 5-minute threshold.
    app.db
        .execute(
            "UPDATE webhook_events SET next_dispatch_at = now() - interval '4 minutes' WHERE id = $1",
            &[&late],
        )
        .await;
    app.db
        .execute(
            "UPDATE webhook_events SET dispatch_state = 'GIVEN_UP', given_up_at = now(),
                    dispatch_attempts = 10, last_error = 'HTTP 500' WHERE id = $1",
            &[&gone],
        )
        .await;
    let findings = digest(&app).await;
    assert_eq!(
        order(&findings),
        [("warning".into(), "WEBHOOK_GIVEN_UP".into())]
    );
    let evidence = &findings[0]["evidence"];
    assert_eq!(
        (&evidence["endpointId"], &evidence["lastDay"]),
        (&Value::Null, &json!(1))
    );
    // A destination's finding holds its own figures only (the total of every destination,
    // deleted endpoints' included, is /metrics' webhooks.givenUp).
    assert!(evidence.get("givenUpTotal").is_none(), "{evidence}");
    assert_eq!(
        evidence["topErrors"],
        json!([{"error": "HTTP 500", "count": 1}])
    );
    // The API's time format: UTC with milliseconds.
    let since = evidence["since"].as_str().unwrap_or_default();
    assert!(since.len() == 24 && since.ends_with('Z'), "{evidence}");
    assert_eq!(findings[0]["request"]["body"]["since"], since);
    assert_eq!(findings[0]["request"]["path"], "/webhook-events/retry");
    assert!(findings[0]["request"]["body"].get("endpointId").is_none());

    app.db
        .execute(
            "UPDATE webhook_events SET next_dispatch_at = now() - interval '6 minutes' WHERE id = $1",
            &[&late],
        )
        .await;
    let findings = digest(&app).await;
    assert_eq!(
        order(&findings),
        [
            ("warning".into(), "WEBHOOK_BACKLOG".into()),
            ("warning".into(), "WEBHOOK_GIVEN_UP".into()),
        ]
    );
    // The late event has not been routed: its lateness points at the drainer.
    let evidence = &findings[0]["evidence"];
    assert_eq!(
        (
            &evidence["endpointId"],
            &evidence["routed"],
            &evidence["late"]
        ),
        (&Value::Null, &json!(false), &json!(1))
    );
    assert!(evidence["lagSeconds"].as_f64().unwrap() >= 360.0);
    assert!(
        findings[0]["title"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Webhook events wait to be routed"),
        "{}",
        findings[0]
    );
    let _ = recent;

    // Given up two days ago: outside the window.
    app.db
        .execute(
            "UPDATE webhook_events SET given_up_at = now() - interval '2 days' WHERE id = $1",
            &[&gone],
        )
        .await;
    let findings = digest(&app).await;
    assert_eq!(
        order(&findings),
        [("warning".into(), "WEBHOOK_BACKLOG".into())]
    );
}

/// A backlog is a finding per destination: the endpoint whose receiver holds its events
/// up is named apart from the default URL's late events, each with its own lag and count.
#[tokio::test]
async fn a_backlog_is_a_finding_per_endpoint() {
    let app = TestApp::spawn().await;
    let pool = &app.db.pool;
    let endpoint = Uuid::new_v4();
    let deleted = Uuid::new_v4();
    app.db
        .execute(
            "INSERT INTO webhook_endpoints (id, owner_key_id, operator, url, secret)
             VALUES ($1, '00000000-0000-0000-0000-000000000000', true,
                     'https://hooks.example.com/in', 'whsec_c2VjcmV0')",
            &[&endpoint],
        )
        .await;
    let sent = factory::create_many(pool, 6, |_| factory::Spec::default()).await;
    let now = chrono::Utc::now();
    let mut events = Vec::new();
    for notification in &sent {
        events.push(factory::insert_event(pool, notification.id, "SENT", 1, now).await);
    }
    // Three to the endpoint, two hours late; one to the default URL, ten minutes late; one
    // to an endpoint deleted since, three hours late; one to the endpoint, on time.
    let route = |event: Uuid, endpoint: Option<Uuid>, minutes: i32| {
        let db = &app.db;
        async move {
            db.execute(
                "UPDATE webhook_events SET endpoint_id = $2, routed_at = now(),
                        next_dispatch_at = now() - make_interval(mins => $3) WHERE id = $1",
                &[&event, &endpoint, &minutes],
            )
            .await;
        }
    };
    for &event in &events[..3] {
        route(event, Some(endpoint), 120).await;
    }
    route(events[3], None, 10).await;
    route(events[4], Some(deleted), 180).await;
    route(events[5], Some(endpoint), 0).await;

    let findings = digest(&app).await;
    assert_eq!(
        order(&findings),
        [
            ("critical".into(), "WEBHOOK_BACKLOG".into()),
            ("warning".into(), "WEBHOOK_BACKLOG".into()),
        ]
    );
    let to_endpoint = &findings[0]["evidence"];
    assert_eq!(
        (
            &to_endpoint["endpointId"],
            &to_endpoint["late"],
            &to_endpoint["routed"]
        ),
        (&json!(endpoint), &json!(3), &json!(true))
    );
    let lag = to_endpoint["lagSeconds"].as_f64().unwrap();
    assert!((7200.0..7260.0).contains(&lag), "{lag}");
    assert!(
        findings[0]["action"]
            .as_str()
            .unwrap_or_default()
            .contains("https://hooks.example.com/in"),
        "{}",
        findings[0]
    );
    let oldest = to_endpoint["oldestDue"].as_str().unwrap_or_default();
    assert!(oldest.len() == 24 && oldest.ends_with('Z'), "{to_endpoint}");
    let to_default = &findings[1]["evidence"];
    assert_eq!(
        (&to_default["endpointId"], &to_default["late"]),
        (&Value::Null, &json!(1))
    );
    assert_eq!(
        findings[1]["title"],
        format!(
            "Webhook events to WEBHOOK_URL are {} s behind",
            to_default["lagSeconds"].as_f64().unwrap().floor()
        )
    );
}

/// Given-up events are a finding per destination, each with the replay that sends them
/// again; carrying out the request replays that endpoint's events and no other's.
#[tokio::test]
async fn given_up_events_are_a_finding_per_endpoint_whose_request_replays_them() {
    let app = TestApp::spawn().await;
    let pool = &app.db.pool;
    let endpoint = Uuid::new_v4();
    app.db
        .execute(
            "INSERT INTO webhook_endpoints (id, owner_key_id, operator, url, secret)
             VALUES ($1, '00000000-0000-0000-0000-000000000000', true,
                     'https://hooks.example.com/in', 'whsec_c2VjcmV0')",
            &[&endpoint],
        )
        .await;
    let sent = factory::create_many(pool, 3, |_| factory::Spec::default()).await;
    let now = chrono::Utc::now();
    for (i, notification) in sent.iter().enumerate() {
        let event = factory::insert_event(pool, notification.id, "SENT", 1, now).await;
        let routed: Option<Uuid> = (i < 2).then_some(endpoint);
        app.db
            .execute(
                "UPDATE webhook_events SET dispatch_state = 'GIVEN_UP', given_up_at = now(),
                        dispatch_attempts = 10, last_error = 'HTTP 503', endpoint_id = $2
                 WHERE id = $1",
                &[&event, &routed],
            )
            .await;
    }
    let findings = digest(&app).await;
    assert_eq!(
        order(&findings),
        [
            ("warning".into(), "WEBHOOK_GIVEN_UP".into()),
            ("warning".into(), "WEBHOOK_GIVEN_UP".into()),
        ]
    );
    let to_endpoint = &findings[0];
    assert_eq!(to_endpoint["evidence"]["endpointId"], json!(endpoint));
    assert_eq!(to_endpoint["evidence"]["lastDay"], 2);
    assert!(
        to_endpoint["action"]
            .as_str()
            .is_some_and(|a| a.contains("https://hooks.example.com/in")),
        "{to_endpoint}"
    );
    assert_eq!(findings[1]["evidence"]["endpointId"], Value::Null);

    let request = &to_endpoint["request"];
    assert_eq!(request["method"], "POST");
    let path = request["path"].as_str().expect("path");
    let reply = app
        .send(app.request(Method::POST, path).json(&request["body"]))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(
        app.db
            .count("SELECT count(*) FROM webhook_events WHERE dispatch_state = 'GIVEN_UP' AND endpoint_id IS NULL")
            .await,
        1
    );
    assert_eq!(
        app.db
            .count("SELECT count(*) FROM webhook_events WHERE dispatch_state = 'PENDING' AND endpoint_id IS NOT NULL")
            .await,
        2
    );
}

/// Events given up because (or after) their endpoint was deleted have nowhere to go: they
/// are no finding, and a replay of everything leaves them given up.
#[tokio::test]
async fn given_up_events_of_a_deleted_endpoint_are_no_finding_and_are_not_replayed() {
    let app = TestApp::spawn().await;
    let pool = &app.db.pool;
    let endpoint = Uuid::new_v4();
    app.db
        .execute(
            "INSERT INTO webhook_endpoints (id, owner_key_id, operator, url, secret)
             VALUES ($1, '00000000-0000-0000-0000-000000000000', true,
                     'https://hooks.example.com/gone', 'whsec_c2VjcmV0')",
            &[&endpoint],
        )
        .await;
    let sent = factory::create_many(pool, 3, |_| factory::Spec::default()).await;
    for (i, notification) in sent.iter().enumerate() {
        let event =
            factory::insert_event(pool, notification.id, "SENT", 1, chrono::Utc::now()).await;
        let routed: Option<Uuid> = (i < 2).then_some(endpoint);
        app.db
            .execute(
                "UPDATE webhook_events SET dispatch_state = 'GIVEN_UP', given_up_at = now(),
                        dispatch_attempts = 10, last_error = 'HTTP 503', endpoint_id = $2
                 WHERE id = $1",
                &[&event, &routed],
            )
            .await;
    }
    assert_eq!(digest(&app).await.len(), 2, "one finding per destination");
    let reply = app
        .send(app.request(Method::DELETE, &format!("/webhook-endpoints/{endpoint}")))
        .await;
    assert_eq!(reply.status, StatusCode::NO_CONTENT, "{}", reply.body);

    let findings = digest(&app).await;
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0]["evidence"]["endpointId"], Value::Null);
    let reply = app
        .send(
            app.request(Method::POST, "/webhook-events/retry")
                .json(&json!({})),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(
        app.db
            .count(&format!(
                "SELECT count(*) FROM webhook_events
                 WHERE dispatch_state = 'GIVEN_UP' AND endpoint_id = '{endpoint}'"
            ))
            .await,
        2,
        "the deleted endpoint's events stay given up"
    );
    assert_eq!(
        app.db
            .count("SELECT count(*) FROM webhook_events WHERE dispatch_state = 'PENDING' AND endpoint_id IS NULL")
            .await,
        1,
        "the default URL's event is replayed"
    );
}

/// `count` suppressions of `channel` and `reason`, created `hours_ago` hours ago.
async fn suppress(app: &TestApp, channel: &str, reason: &str, count: i64, hours_ago: f64) {
    app.db
        .execute(
            "INSERT INTO suppressions (channel, address_hash, address, reason, created_at)
             SELECT $1, encode(sha256(gen_random_uuid()::text::bytea), 'hex'), NULL, $2,
                    now() - $4::float8 * interval '1 hour'
             FROM generate_series(1, $3::int8)",
            &[&channel, &reason, &count, &hours_ago],
        )
        .await;
}

#[tokio::test]
async fn a_suppression_spike_is_measured_against_the_weeks_hourly_average() {
    let app = TestApp::spawn().await;
    // EMAIL bounces: 12 in the last hour against 3 an hour all week (4×): warning.
    suppress(&app, "EMAIL", "BOUNCED", 12, 0.5).await;
    suppress(&app, "EMAIL", "BOUNCED", 3 * 168, 50.0).await;
    // SMS invalid recipients: 12 against 5 an hour (2.4×): no finding.
    suppress(&app, "SMS", "INVALID_RECIPIENT", 12, 0.5).await;
    suppress(&app, "SMS", "INVALID_RECIPIENT", 5 * 168, 50.0).await;
    // EMAIL complaints: 9 with no history: below the minimum.
    suppress(&app, "EMAIL", "COMPLAINED", 9, 0.2).await;
    // PUSH: 40 manual suppressions are an operator's doing, not a spike.
    suppress(&app, "PUSH", "MANUAL", 40, 0.2).await;

    let findings = digest(&app).await;
    assert_eq!(
        order(&findings),
        [("warning".into(), "SUPPRESSION_SPIKE".into())]
    );
    assert_eq!(
        findings[0]["evidence"],
        json!({"channel": "EMAIL", "reason": "BOUNCED", "lastHour": 12,
               "baselinePerHour": 3.0, "baselineHours": 168})
    );

    // One more complaint makes 10 with no history (10× the floor of one an hour): critical.
    suppress(&app, "EMAIL", "COMPLAINED", 1, 0.1).await;
    let findings = digest(&app).await;
    assert_eq!(
        order(&findings),
        [
            ("critical".into(), "SUPPRESSION_SPIKE".into()),
            ("warning".into(), "SUPPRESSION_SPIKE".into()),
        ]
    );
    assert_eq!(findings[0]["evidence"]["reason"], "COMPLAINED");
}

#[tokio::test]
async fn keys_unused_for_ninety_days_are_listed_and_using_a_key_records_it() {
    let app = TestApp::spawn_with_keys().await;
    let db = app.db.pool.get().await.expect("connection");
    let (operator_id, operator) = auth::create_key(&db, "ops", Scope::Operator).await.unwrap();
    let (stale_id, _) = auth::create_key(&db, "old-client", Scope::Client)
        .await
        .unwrap();
    let (revoked_id, _) = auth::create_key(&db, "gone", Scope::Client).await.unwrap();
    let (used_id, used) = auth::create_key(&db, "busy", Scope::Client).await.unwrap();
    app.db
        .execute(
            "UPDATE api_keys SET created_at = now() - interval '100 days'
             WHERE id = ANY($1)",
            &[&vec![operator_id, stale_id, revoked_id, used_id]],
        )
        .await;
    app.db
        .execute(
            "UPDATE api_keys SET revoked_at = now() WHERE id = $1",
            &[&revoked_id],
        )
        .await;
    // A client call records the key's use.
    let reply = app
        .send(
            app.request(Method::GET, "/notifications")
                .bearer_auth(&used),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let last_used: Option<chrono::DateTime<chrono::Utc>> = app
        .db
        .scalar(
            "SELECT last_used_at FROM api_keys WHERE id = $1",
            &[&used_id],
        )
        .await;
    assert!(last_used.is_some(), "the key's use was not recorded");

    let reply = app
        .send(app.request(Method::GET, "/digest").bearer_auth(&operator))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let findings = reply.body["findings"].as_array().unwrap().clone();
    // The operator key was used just now, by this very call.
    assert_eq!(order(&findings), [("info".into(), "UNUSED_KEY".into())]);
    assert_eq!(findings[0]["evidence"]["keyId"], json!(stale_id));
    assert_eq!(findings[0]["evidence"]["lastUsedAt"], Value::Null);
    assert_eq!(
        findings[0]["title"],
        "client key \"old-client\" unused for 100 days"
    );
    assert_eq!(
        findings[0]["action"],
        format!("Revoke it if nobody needs it: notify-local keys revoke {stale_id}")
    );

    // A client key may not read the digest.
    let reply = app
        .send(app.request(Method::GET, "/digest").bearer_auth(&used))
        .await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn findings_are_ranked_critical_then_warning_then_info_heaviest_first() {
    let app = TestApp::spawn().await;
    let pool = &app.db.pool;
    let ago = |seconds| chrono::Utc::now() - chrono::TimeDelta::seconds(seconds);
    // Warnings: lag of 2 and of 5 minutes, 2 dead-lettered; critical: an open circuit and
    // 15 minutes of lag; info: an unused key.
    factory::create(
        pool,
        factory::Spec::default()
            .priority(Priority::Low)
            .due_at(ago(120)),
    )
    .await;
    factory::create(
        pool,
        factory::Spec::default()
            .channel(Channel::Push)
            .due_at(ago(300)),
    )
    .await;
    factory::create(
        pool,
        factory::Spec::default()
            .channel(Channel::Sms)
            .due_at(ago(900)),
    )
    .await;
    let dead = factory::create_many(pool, 2, |_| factory::Spec::default()).await;
    factory::dead_letter_many(pool, &[dead[0].id, dead[1].id], "boom").await;
    app.db
        .execute(
            "UPDATE channel_health SET circuit = 'OPEN', circuit_until = now() + interval '30 seconds'
             WHERE channel = 'PUSH'",
            &[],
        )
        .await;
    let db = pool.get().await.unwrap();
    auth::create_key(&db, "old", Scope::Client).await.unwrap();
    app.db
        .execute(
            "UPDATE api_keys SET created_at = now() - interval '1 year'",
            &[],
        )
        .await;

    let findings = digest(&app).await;
    let ranked: Vec<(String, String, Value)> = findings
        .iter()
        .map(|f| {
            let detail = match f["code"].as_str().unwrap() {
                "QUEUE_LAG" => f["evidence"]["channel"].clone(),
                "CIRCUIT_OPEN" => f["evidence"]["channel"].clone(),
                _ => Value::Null,
            };
            (
                f["severity"].as_str().unwrap().to_string(),
                f["code"].as_str().unwrap().to_string(),
                detail,
            )
        })
        .collect();
    let expected = [
        // Critical: 900 s of lag outweighs the circuit.
        ("critical", "QUEUE_LAG", json!("SMS")),
        ("critical", "CIRCUIT_OPEN", json!("PUSH")),
        ("warning", "QUEUE_LAG", json!("PUSH")),
        ("warning", "QUEUE_LAG", json!("EMAIL")),
        ("warning", "DLQ_GROWTH", Value::Null),
        ("info", "UNUSED_KEY", Value::Null),
    ]
    .map(|(s, c, d)| (s.to_string(), c.to_string(), d));
    assert_eq!(ranked, expected);
}

/// Submits a campaign named `name` to `count` listed recipients (no profiles: expanding
/// them needs none); returns its id.
async fn submit_campaign(app: &TestApp, name: &str, count: usize) -> Uuid {
    let ids: Vec<String> = (1..=count).map(|i| format!("{name}-{i}")).collect();
    let reply = app
        .send(app.request(Method::POST, "/campaigns").json(&json!({
            "idempotencyKey": name, "name": name, "channel": "EMAIL",
            "template": {"id": "news", "data": {}},
            "audience": {"recipientIds": ids},
        })))
        .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.body);
    reply.body["id"]
        .as_str()
        .expect("id")
        .parse()
        .expect("uuid")
}

#[tokio::test]
async fn a_campaign_expanding_without_progress_for_five_minutes_is_stalled() {
    let app = TestApp::spawn().await;
    let reply = app
        .send(
            app.request(Method::POST, "/templates/news/versions")
                .json(&json!({
                    "channel": "EMAIL", "defaultLocale": "en",
                    "locales": {"en": {"subject": "News", "text": "News"}},
                })),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    // Created first, so the next chunk is its own; more than one chunk of recipients.
    let stalled = submit_campaign(&app, "stalled", 1001).await;
    let moving = submit_campaign(&app, "moving", 2).await;
    let queued = submit_campaign(&app, "queued", 2).await;
    let done = submit_campaign(&app, "done", 2).await;
    let set_back = |id: Uuid, minutes: i32| {
        let db = &app.db;
        async move {
            db.execute(
                "UPDATE campaigns SET progressed_at = now() - make_interval(mins => $2) WHERE id = $1",
                &[&id, &minutes],
            )
            .await
        }
    };
    set_back(stalled, 6).await;
    set_back(moving, 1).await;
    set_back(queued, 60).await;
    set_back(done, 60).await;
    app.db
        .execute(
            "UPDATE campaigns SET status = 'QUEUED' WHERE id = $1",
            &[&queued],
        )
        .await;
    app.db
        .execute(
            "UPDATE campaigns SET status = 'DONE', finished_at = now() WHERE id = $1",
            &[&done],
        )
        .await;

    let findings = digest(&app).await;
    assert_eq!(
        order(&findings),
        [("warning".into(), "CAMPAIGN_STALLED".into())]
    );
    let finding = &findings[0];
    let evidence = &finding["evidence"];
    let seconds = evidence["stalledSeconds"].as_f64().expect("stalledSeconds");
    assert!((360.0..420.0).contains(&seconds), "{evidence}");
    assert!(
        evidence["lastProgressAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    let mut fixed = evidence.clone();
    fixed["stalledSeconds"] = json!(null);
    fixed["lastProgressAt"] = json!(null);
    assert_eq!(
        fixed,
        json!({"campaignId": stalled, "name": "stalled", "expanded": 0, "audienceSize": 1001,
               "stalledSeconds": null, "lastProgressAt": null})
    );
    assert!(
        finding["title"]
            .as_str()
            .unwrap()
            .starts_with("Campaign \"stalled\" has not expanded for 3"),
        "{}",
        finding["title"]
    );
    let action = finding["action"].as_str().unwrap();
    assert!(action.contains("campaign expansion failed"), "{action}");
    assert!(
        action.contains(&format!("DELETE /campaigns/{stalled}")),
        "{action}"
    );
    assert!(finding.get("request").is_none());

    // Half an hour without progress is critical.
    set_back(stalled, 31).await;
    let findings = digest(&app).await;
    assert_eq!(
        order(&findings),
        [("critical".into(), "CAMPAIGN_STALLED".into())]
    );

    // A chunk that commits is progress: the finding goes while the campaign still expands.
    let mut db = app.pool().get().await.expect("a connection");
    let chunk = campaigns::Expander::new(b"dev", 6)
        .expand_chunk(&mut db, app.pool())
        .await
        .expect("a chunk expands");
    assert_eq!(chunk, Some(1000));
    let reply = app
        .send(app.request(Method::GET, &format!("/campaigns/{stalled}")))
        .await;
    assert_eq!(reply.body["status"], "EXPANDING", "{}", reply.body);
    assert_eq!(digest(&app).await, Vec::<Value>::new());
}
