//! Campaigns: submission (idempotent, also when raced), expansion by sweepers into
//! exactly one notification per recipient (also through SIGKILLs mid-chunk), completion,
//! and cancel in the middle of a drain.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use notify_shared::content::campaigns;
use notify_shared::stop::StopSignal;
use notify_shared::sweeper;
use notify_shared::wake::Wake;
use notify_tests::app::detail_fields;
use notify_tests::doubles::Slow;
use notify_tests::process::{Children, worker_command};
use notify_tests::worker;
use notify_tests::{TestApp, TestDb};
use reqwest::Method;
use serde_json::{Value, json};

use super::{call, publish, welcome};

/// `count` profiles `r00001`… of the anonymous owner, with email addresses.
async fn profiles(db: &TestDb, count: i32) {
    db.execute(
        "INSERT INTO recipients (owner, recipient_id, email, locale)
         SELECT '00000000-0000-0000-0000-000000000000', 'r' || lpad(i::text, 5, '0'),
                'r' || i || '@example.com', CASE WHEN i % 2 = 0 THEN 'pt-BR' ELSE 'en' END
         FROM generate_series(1, $1) AS i",
        &[&count],
    )
    .await;
}

fn campaign(key: &str, audience: Value) -> Value {
    json!({"idempotencyKey": key, "name": "Spring", "channel": "EMAIL",
           "template": {"id": "welcome", "data": {"name": "friend"}}, "audience": audience})
}

async fn submit(app: &TestApp, body: &Value) -> (u16, Value) {
    let reply = call(app, Method::POST, "/campaigns", Some(body)).await;
    (reply.status.as_u16(), reply.body)
}

async fn campaign_state(app: &TestApp, id: &str) -> Value {
    let reply = call(app, Method::GET, &format!("/campaigns/{id}"), None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.body
}

/// Expands every chunk of every expanding campaign, as sweepers would.
async fn expand_all(app: &TestApp) -> usize {
    let mut total = 0;
    let mut db = app.pool().get().await.expect("a connection");
    let mut expander = campaigns::Expander::new(b"dev", 6);
    while let Some(chunk) = expander
        .expand_chunk(&mut db, app.pool())
        .await
        .expect("a chunk expands")
    {
        total += chunk;
    }
    total
}

#[tokio::test]
async fn a_campaign_fans_out_once_per_recipient_applies_the_audience_rules_and_finishes() {
    let app = TestApp::spawn().await;
    publish(&app, "welcome", &welcome("Hi")).await;
    profiles(&app.db, 2500).await;
    app.db
        .execute(
            "UPDATE recipients SET unsubscribed_all = true WHERE recipient_id IN ('r00007', 'r00008')",
            &[],
        )
        .await;
    let mut ids: Vec<String> = (1..=2500).map(|i| format!("r{i:05}")).collect();
    ids.push("nobody".into());
    ids.push("r00001".into()); // listed twice, counted once
    let (status, created) = submit(&app, &campaign("spring", json!({"recipientIds": ids}))).await;
    assert_eq!(status, 202, "{created}");
    assert_eq!(created["status"], "EXPANDING");
    assert_eq!(created["audienceSize"], 2501);
    assert_eq!(created["template"], json!({"id": "welcome", "version": 1}));
    let id = created["id"].as_str().expect("id").to_string();

    // A running sweeper expands it (beside its delivery lanes) and sends it.
    let sweeper = worker::sweeper(app.pool(), Arc::new(worker::simulated(app.pool().clone())))
        .config(worker::worker_config().batch_size(500))
        .build();
    let (stopping, stop) = StopSignal::new();
    let (_keep_open, wake) = Wake::none();
    let running = tokio::spawn(sweeper::run(Arc::new(sweeper), wake, stop));
    let deadline = Instant::now() + Duration::from_secs(120);
    let done = loop {
        let state = campaign_state(&app, &id).await;
        if state["status"] == "DONE" {
            break state;
        }
        assert!(Instant::now() < deadline, "not done: {state}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    stopping.stop();
    running.await.expect("the sweeper stops");
    assert_eq!(done["expanded"], 2501);
    assert_eq!(done["counts"]["sent"], 2498);
    assert_eq!(
        done["counts"]["suppressed"], 3,
        "two unsubscribed, one without a profile"
    );
    assert_eq!(done["counts"]["pending"], 0);
    assert!(done["finishedAt"].is_string());
    // Cancelling a finished campaign has nothing left to stop: it is answered as it is.
    let reply = call(&app, Method::DELETE, &format!("/campaigns/{id}"), None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body, campaign_state(&app, &id).await);
    assert_eq!(reply.body["status"], "DONE");

    let keys = app
        .db
        .count(&format!(
            "SELECT count(DISTINCT idempotency_key) FROM notifications
             WHERE idempotency_key LIKE 'campaign:{id}:%' AND class = 'BULK' AND priority = 2"
        ))
        .await;
    assert_eq!(keys, 2501);
    // The recipient's profile is merged into the data, and its locale chosen.
    let content: Value = app
        .db
        .scalar(
            "SELECT d.content FROM simulated_deliveries d JOIN notifications n ON n.id = d.delivery_key
             WHERE n.recipient_id = 'r00002'",
            &[],
        )
        .await;
    assert_eq!(content["subject"], "Hi (pt) friend");
    let payload: Value = app
        .db
        .scalar(
            "SELECT payload FROM notifications WHERE recipient_id = 'r00002'",
            &[],
        )
        .await;
    assert_eq!(payload["data"]["recipient"]["id"], "r00002");
    assert_eq!(
        (
            &payload["data"]["recipient"]["email"],
            &payload["data"]["recipient"]["phone"]
        ),
        (&json!("r2@example.com"), &Value::Null),
        "{payload}"
    );
    let events = app
        .db
        .count(&format!(
            "SELECT count(*) FROM webhook_events WHERE type = 'campaign.done'
             AND body ->> 'campaignId' = '{id}' AND (body -> 'counts' ->> 'SENT')::int = 2498"
        ))
        .await;
    assert_eq!(events, 1);

    let listed = call(&app, Method::GET, "/campaigns?limit=1", None).await;
    assert_eq!(listed.body["items"][0]["id"], id.as_str());
    assert!(listed.body["nextCursor"].is_null());
}

#[tokio::test]
async fn every_profile_of_the_caller_is_walked_in_chunks() {
    let app = TestApp::spawn().await;
    publish(&app, "welcome", &welcome("Hi")).await;
    profiles(&app.db, 2300).await;
    let (status, created) = submit(&app, &campaign("all", json!({"allRecipients": true}))).await;
    assert_eq!(status, 202, "{created}");
    assert_eq!(created["audienceSize"], 2300);
    assert_eq!(expand_all(&app).await, 2300);
    let state = campaign_state(&app, created["id"].as_str().expect("id")).await;
    assert_eq!(state["status"], "QUEUED");
    assert_eq!(state["expanded"], 2300);
    assert_eq!(state["counts"]["pending"], 2300);
}

/// A chunk prepared ahead is used only from the checkpoint it was prepared for: with two
/// expanders taking turns, each finds the campaign moved on by the other and reads afresh.
#[tokio::test]
async fn a_chunk_prepared_ahead_is_dropped_when_another_worker_moved_the_campaign_on() {
    let app = TestApp::spawn().await;
    publish(&app, "welcome", &welcome("Hi")).await;
    profiles(&app.db, 3500).await;
    for (key, audience) in [
        ("every", json!({"allRecipients": true})),
        (
            "listed",
            json!({"recipientIds": (1..=3500).map(|i| format!("r{i:05}")).collect::<Vec<_>>()}),
        ),
    ] {
        let (status, created) = submit(&app, &campaign(key, audience)).await;
        assert_eq!(status, 202, "{created}");
        let id = created["id"].as_str().expect("id").to_string();
        let (mut first, mut second) = (
            app.pool().get().await.expect("a connection"),
            app.pool().get().await.expect("a connection"),
        );
        let mut one = campaigns::Expander::new(b"dev", 6);
        let mut other = campaigns::Expander::new(b"dev", 6);
        let mut turns = 0;
        loop {
            // Alternate: each expander prepared the chunk the other then expands.
            let (expander, db) = if turns % 2 == 0 {
                (&mut one, &mut first)
            } else {
                (&mut other, &mut second)
            };
            match expander
                .expand_chunk(db, app.pool())
                .await
                .expect("a chunk expands")
            {
                Some(_) => turns += 1,
                None => break,
            }
            assert!(turns < 10, "the campaign never finished expanding");
        }
        let state = campaign_state(&app, &id).await;
        assert_eq!(state["status"], "QUEUED", "{state}");
        assert_eq!(state["expanded"], 3500, "{state}");
        assert_eq!(state["counts"]["pending"], 3500, "{state}");
        let distinct: i64 = app
            .db
            .scalar(
                "SELECT count(DISTINCT recipient_id) FROM notifications
                 WHERE payload #>> '{$template,campaign}' = $1",
                &[&id],
            )
            .await;
        assert_eq!(distinct, 3500);
    }
}

/// Expansion runs beside the delivery lanes: with every lane held by a delivery that will
/// not answer for a minute, the whole audience is still expanded.
#[tokio::test]
async fn a_campaign_expands_while_every_lane_waits_on_a_slow_provider() {
    let app = TestApp::spawn().await;
    publish(&app, "welcome", &welcome("Hi")).await;
    profiles(&app.db, 20_000).await;
    let (status, created) = submit(&app, &campaign("slow", json!({"allRecipients": true}))).await;
    assert_eq!(status, 202, "{created}");
    let id = created["id"].as_str().expect("id").to_string();

    let provider = Arc::new(Slow::new(Duration::from_secs(60)));
    let sweeper = worker::sweeper(app.pool(), provider.clone())
        .config(
            worker::worker_config()
                .concurrency(2)
                .batch_size(2)
                .provider_timeout(Duration::from_secs(120))
                .visibility_timeout(Duration::from_secs(300)),
        )
        .build();
    let (_stopping, stop) = StopSignal::new();
    let (_keep_open, wake) = Wake::none();
    let running = tokio::spawn(sweeper::run(Arc::new(sweeper), wake, stop));
    provider.wait_started(2).await;
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        let state = campaign_state(&app, &id).await;
        if state["expanded"] == 20_000 {
            break;
        }
        assert!(Instant::now() < deadline, "expansion stalled: {state}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(provider.started(), 2, "both places were held throughout");
    // The deliveries in flight would take a minute to answer; nothing here needs them.
    running.abort();
}

#[tokio::test]
async fn a_listing_shows_each_campaign_with_its_own_counts() {
    let app = TestApp::spawn().await;
    publish(&app, "welcome", &welcome("Hi")).await;
    profiles(&app.db, 5).await;
    let ids = |range: std::ops::RangeInclusive<i32>| -> Vec<String> {
        range.map(|i| format!("r{i:05}")).collect()
    };
    let (_, first) = submit(
        &app,
        &campaign("first", json!({"recipientIds": ids(1..=3)})),
    )
    .await;
    let (_, second) = submit(
        &app,
        &campaign("second", json!({"recipientIds": ids(4..=5)})),
    )
    .await;
    assert_eq!(expand_all(&app).await, 5);
    // Not yet expanded: no notifications at all.
    let (_, third) = submit(
        &app,
        &campaign("third", json!({"recipientIds": ids(1..=1)})),
    )
    .await;
    let first = first["id"].as_str().expect("id").to_string();
    let second = second["id"].as_str().expect("id").to_string();
    let third = third["id"].as_str().expect("id").to_string();
    // The campaigns' notifications end differently: one of the first is sent.
    app.db
        .execute(
            "UPDATE notifications SET status = 'SENT', sent_at = now(), attempt_count = 1
             WHERE payload #>> '{$template,campaign}' = $1 AND recipient_id = 'r00001'",
            &[&first],
        )
        .await;

    let listed = call(&app, Method::GET, "/campaigns?limit=10", None).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let items = listed.body["items"].as_array().expect("items");
    let order: Vec<&str> = items.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(order, [third.as_str(), second.as_str(), first.as_str()]);
    for item in items {
        let one = campaign_state(&app, item["id"].as_str().unwrap()).await;
        assert_eq!(item, &one, "a listed campaign reads as it does alone");
    }
    assert_eq!(
        items[2]["counts"],
        json!({"pending": 2, "sent": 1, "failed": 0, "deadLettered": 0, "suppressed": 0,
               "expired": 0, "cancelled": 0})
    );
    assert_eq!(items[1]["counts"]["pending"], 2);
    assert_eq!(items[0]["counts"]["pending"], 0);
}

#[tokio::test]
async fn a_campaign_submitted_twice_at_once_is_one_campaign() {
    let app = TestApp::spawn().await;
    publish(&app, "welcome", &welcome("Hi")).await;
    profiles(&app.db, 10).await;
    let body = campaign("twice", json!({"allRecipients": true}));
    let replies = join_all((0..8).map(|_| submit(&app, &body))).await;
    let mut statuses: Vec<u16> = replies.iter().map(|(status, _)| *status).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 200, 200, 202]);
    let ids: std::collections::HashSet<&str> = replies
        .iter()
        .map(|(_, body)| body["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids.len(), 1);
    assert_eq!(app.db.count("SELECT count(*) FROM campaigns").await, 1);

    let mut other = body.clone();
    other["name"] = json!("Autumn");
    assert_eq!(submit(&app, &other).await.0, 409);
    // Checked like any body.
    let (status, error) = submit(
        &app,
        &json!({"idempotencyKey": "x", "name": "", "channel": "SMS", "priority": "URGENT",
                "template": {"id": "nothing"}, "audience": {"recipientIds": []}}),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        detail_fields(&error),
        ["name", "priority", "audience.recipientIds"]
    );
    let (status, error) = submit(
        &app,
        &campaign("y", json!({"allRecipients": true, "recipientIds": ["a"]})),
    )
    .await;
    assert_eq!(
        (status, detail_fields(&error)),
        (400, vec!["audience".to_string()])
    );
    // Every invalid id is named (up to 100; the rest are counted).
    let (status, error) = submit(
        &app,
        &campaign("bad-ids", json!({"recipientIds": ["ok", "bad id", "", 7]})),
    )
    .await;
    assert_eq!(
        (status, detail_fields(&error)),
        (
            400,
            vec![
                "audience.recipientIds.1".to_string(),
                "audience.recipientIds.2".to_string(),
                "audience.recipientIds.3".to_string()
            ]
        )
    );
    let many: Vec<String> = (0..250).map(|i| format!("bad id {i}")).collect();
    let (status, error) = submit(&app, &campaign("many-bad", json!({"recipientIds": many}))).await;
    let fields = detail_fields(&error);
    assert_eq!((status, fields.len()), (400, 101));
    assert_eq!(fields[100], "audience.recipientIds");
    assert!(
        error
            .to_string()
            .contains("150 more recipient ids are invalid"),
        "{error}"
    );
    let mut too_late = campaign("far", json!({"allRecipients": true}));
    too_late["sendAt"] = json!("2099-01-01T00:00:00Z");
    let (status, error) = submit(&app, &too_late).await;
    assert_eq!(
        (status, detail_fields(&error)),
        (400, vec!["sendAt".to_string()])
    );
    let mut unknown = campaign("z", json!({"allRecipients": true}));
    unknown["template"]["version"] = json!(7);
    let (status, error) = submit(&app, &unknown).await;
    assert_eq!(
        (status, detail_fields(&error)),
        (400, vec!["template.version".to_string()])
    );
}

#[tokio::test]
async fn nothing_pending_of_a_cancelled_campaign_is_sent_after_the_cancel_returned() {
    let app = TestApp::spawn().await;
    publish(&app, "welcome", &welcome("Hi")).await;
    profiles(&app.db, 10_000).await;
    let (_, created) = submit(&app, &campaign("cancel", json!({"allRecipients": true}))).await;
    let id = created["id"].as_str().expect("id").to_string();
    assert_eq!(expand_all(&app).await, 10_000);

    // A sweeper drains it, slowly, while the cancel arrives.
    let provider = worker::simulated(app.pool().clone());
    let sweeper = Arc::new(
        worker::sweeper(app.pool(), Arc::new(provider))
            .config(worker::worker_config().batch_size(50))
            .build(),
    );
    let (handle, stop) = StopSignal::new();
    let draining = {
        let sweeper = sweeper.clone();
        tokio::spawn(async move {
            while !stop.is_stopped() {
                let _ = sweeper.sweep_once(&StopSignal::never()).await;
            }
        })
    };
    let sent_query = format!(
        "SELECT count(*) FROM notifications WHERE payload #>> '{{$template,campaign}}' = '{id}' AND status = 'SENT'"
    );
    app.db
        .wait_for_count(
            &sent_query,
            Duration::from_secs(60),
            |n| n >= 200,
            String::new,
        )
        .await;
    let reply = call(&app, Method::DELETE, &format!("/campaigns/{id}"), None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["status"], "CANCELLED");
    // At this instant nothing of it is PENDING; what is not cancelled was sent or claimed.
    let in_hand: Vec<uuid::Uuid> = {
        let db = app.pool().get().await.expect("connection");
        db.query(
            "SELECT id FROM notifications WHERE payload #>> '{$template,campaign}' = $1
             AND status <> 'CANCELLED'",
            &[&id],
        )
        .await
        .expect("rows")
        .iter()
        .map(|row| row.get(0))
        .collect()
    };
    assert!(in_hand.len() < 10_000, "nothing was cancelled");
    tokio::time::sleep(Duration::from_millis(500)).await;
    handle.stop();
    draining.await.expect("sweeper task");
    worker::sweep_until_idle(&sweeper).await;

    let db = app.pool().get().await.expect("connection");
    let sent_late = db
        .query_one(
            "SELECT count(*) FROM notifications WHERE payload #>> '{$template,campaign}' = $1
             AND status = 'SENT' AND NOT (id = ANY($2))",
            &[&id, &in_hand],
        )
        .await
        .expect("count")
        .get::<_, i64>(0);
    assert_eq!(
        sent_late, 0,
        "a notification PENDING at the cancel was sent"
    );
    let state = campaign_state(&app, &id).await;
    assert_eq!(state["counts"]["pending"], 0);
    assert_eq!(
        state["counts"]["cancelled"].as_i64().expect("n")
            + state["counts"]["sent"].as_i64().expect("n"),
        10_000
    );
    // Cancelling again answers the same; a finished campaign cannot be cancelled.
    let again = call(&app, Method::DELETE, &format!("/campaigns/{id}"), None).await;
    assert_eq!(again.status, 200);
}

#[tokio::test]
async fn a_worker_sigkilled_twice_mid_chunk_leaves_exactly_one_notification_per_recipient() {
    const TOTAL: i64 = 20_000;
    let app = TestApp::spawn().await;
    publish(&app, "welcome", &welcome("Hi")).await;
    profiles(&app.db, TOTAL as i32).await;
    // Due in an hour: the workers only expand until the test makes them due.
    let later = (chrono::Utc::now() + chrono::TimeDelta::hours(1)).to_rfc3339();
    let mut body = campaign("kill", json!({"allRecipients": true}));
    body["sendAt"] = json!(later);
    let (status, created) = submit(&app, &body).await;
    assert_eq!(status, 202, "{created}");
    let id = created["id"].as_str().expect("id").to_string();

    let env = [
        ("MOCK_LATENCY_MS", "0"),
        ("MOCK_FAILURE_RATE", "0"),
        ("JOB_VISIBILITY_TIMEOUT_SECONDS", "3"),
        ("PROVIDER_TIMEOUT_MS", "1000"),
        ("WORKER_POLL_INTERVAL_MS", "100"),
        ("WORKER_BATCH_SIZE", "500"),
        ("WORKER_CONCURRENCY", "50"),
    ];
    let expanded = format!("SELECT expanded::int8 FROM campaigns WHERE id = '{id}'");
    // Locked by a worker's chunk transaction: the row is skipped by SKIP LOCKED.
    let mid_chunk = format!(
        "SELECT count(*) FROM campaigns WHERE id = '{id}' AND status = 'EXPANDING'
         AND id NOT IN (SELECT id FROM campaigns WHERE id = '{id}' FOR UPDATE SKIP LOCKED)"
    );
    let mut children = Children::default();
    for (round, threshold) in [(0usize, 3000), (1, 9000)] {
        children.start(&mut worker_command(&app.db.url, &env));
        app.db
            .wait_for_count(
                &expanded,
                Duration::from_secs(120),
                |n| n >= threshold,
                || children.logs(),
            )
            .await;
        let victim = &mut children.0[round];
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            victim.signal(libc::SIGSTOP);
            if app.db.count(&mid_chunk).await == 1 {
                victim.signal(libc::SIGKILL);
                break;
            }
            victim.signal(libc::SIGCONT);
            assert!(
                Instant::now() < deadline,
                "never caught mid-chunk:\n{}",
                victim.log()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let status = victim.wait_exit(Duration::from_secs(10)).await;
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
        let at_kill = app.db.count(&expanded).await;
        assert!(at_kill < TOTAL, "expansion finished before the kill");
    }
    children.start(&mut worker_command(&app.db.url, &env));
    app.db
        .wait_for_count(
            &format!("SELECT count(*) FROM campaigns WHERE id = '{id}' AND status = 'QUEUED'"),
            Duration::from_secs(120),
            |n| n == 1,
            || children.logs(),
        )
        .await;
    let campaign_rows =
        format!("FROM notifications WHERE payload #>> '{{$template,campaign}}' = '{id}'");
    assert_eq!(
        app.db
            .count(&format!("SELECT count(*) {campaign_rows}"))
            .await,
        TOTAL
    );
    assert_eq!(
        app.db
            .count(&format!(
                "SELECT count(DISTINCT idempotency_key) {campaign_rows}"
            ))
            .await,
        TOTAL
    );
    assert_eq!(
        app.db
            .count(&format!(
                "SELECT count(DISTINCT recipient_id) {campaign_rows}"
            ))
            .await,
        TOTAL
    );
    // Now due: the surviving worker sends it and the campaign is DONE.
    app.db
        .execute(
            "UPDATE notifications SET next_attempt_at = now() WHERE status = 'PENDING'",
            &[],
        )
        .await;
    app.db
        .wait_for_count(
            &format!("SELECT count(*) FROM campaigns WHERE id = '{id}' AND status = 'DONE'"),
            Duration::from_secs(240),
            |n| n == 1,
            || children.logs(),
        )
        .await;
    let state = campaign_state(&app, &id).await;
    assert_eq!(state["counts"]["sent"], TOTAL);
    assert_eq!(state["expanded"], TOTAL);
}

#[tokio::test]
async fn erasing_a_recipient_keeps_the_campaigns_counts_whole() {
    let app = TestApp::spawn().await;
    publish(&app, "welcome", &welcome("Hi")).await;
    profiles(&app.db, 3).await;
    let ids: Vec<String> = (1..=3).map(|i| format!("r{i:05}")).collect();
    let (_, created) = submit(&app, &campaign("erase", json!({"recipientIds": ids}))).await;
    let id = created["id"].as_str().expect("id").to_string();
    assert_eq!(expand_all(&app).await, 3);
    app.db
        .execute(
            "UPDATE notifications SET status = 'SENT', sent_at = now(), attempt_count = 1
             WHERE payload #>> '{$template,campaign}' = $1 AND recipient_id = 'r00001'",
            &[&id],
        )
        .await;
    // One erased after it was sent, one while still PENDING.
    for person in ["r00001", "r00002"] {
        let reply = call(&app, Method::DELETE, &format!("/recipients/{person}"), None).await;
        assert_eq!(reply.status, 204, "{}", reply.body);
    }
    let state = campaign_state(&app, &id).await;
    assert_eq!(
        state["counts"],
        json!({"pending": 1, "sent": 1, "failed": 0, "deadLettered": 0, "suppressed": 0,
               "expired": 0, "cancelled": 1}),
        "{state}"
    );
    // What the erased notifications keep of their campaign is its id, nothing of the person.
    let kept: Vec<Value> = app
        .db
        .scalar(
            "SELECT array_agg(payload) FROM notifications WHERE recipient = '[erased]'",
            &[],
        )
        .await;
    assert_eq!(kept.len(), 2);
    for payload in kept {
        assert_eq!(payload, json!({"$template": {"campaign": id}}));
    }
    // Nor does any key or audience name them (the id may be an address).
    let named = app
        .db
        .count(
            "SELECT (SELECT count(*) FROM notifications
                     WHERE recipient_id IN ('r00001', 'r00002')
                        OR idempotency_key LIKE '%r00001%' OR idempotency_key LIKE '%r00002%')
                  + (SELECT count(*) FROM campaigns
                     WHERE recipient_ids && ARRAY['r00001', 'r00002'])",
        )
        .await;
    assert_eq!(named, 0);
    assert_eq!(
        app.db
            .count("SELECT count(*) FROM campaigns WHERE 'r00003' = ANY (recipient_ids)")
            .await,
        1
    );
}

/// A person erased while their campaign expands is written by no chunk: not by the chunk
/// being inserted at that moment, nor by one prepared ahead of it, nor by one still to
/// come. Whoever was already expanded keeps a redacted notification; whoever was not
/// leaves the audience. Erasures race a real expansion on their own connections.
#[tokio::test]
async fn a_person_erased_while_the_campaign_expands_is_written_by_no_chunk() {
    let app = TestApp::spawn().await;
    publish(&app, "welcome", &welcome("Hi")).await;
    profiles(&app.db, 4000).await;
    let listed: Vec<String> = (1..=4000).map(|i| format!("r{i:05}")).collect();
    let mut campaign_ids = Vec::new();
    for (key, audience) in [
        ("listed", json!({"recipientIds": listed})),
        ("every", json!({"allRecipients": true})),
    ] {
        let (status, created) = submit(&app, &campaign(key, audience)).await;
        assert_eq!(status, 202, "{created}");
        campaign_ids.push(created["id"].as_str().expect("id").to_string());
    }

    // The listed campaign's first chunk goes in, and its second is prepared ahead on a
    // spare connection; then someone of that second chunk is erased.
    let mut db = app.pool().get().await.expect("a connection");
    let mut expander = campaigns::Expander::new(b"dev", 6);
    let first = expander
        .expand_chunk(&mut db, app.pool())
        .await
        .expect("a chunk expands");
    assert_eq!(first, Some(1000));
    let mut erased = vec!["r01500".to_string()];
    let reply = call(&app, Method::DELETE, "/recipients/r01500", None).await;
    assert_eq!(reply.status, 204, "{}", reply.body);
    let second = expander
        .expand_chunk(&mut db, app.pool())
        .await
        .expect("a chunk expands");
    assert_eq!(second, Some(1000));

    // The rest expands while people all over the audience are erased.
    let racing: Vec<String> = (0..40).map(|k| format!("r{:05}", 50 + k * 97)).collect();
    let erasing_done = std::cell::Cell::new(false);
    let expanding = async {
        let mut chunks = 2;
        loop {
            match expander
                .expand_chunk(&mut db, app.pool())
                .await
                .expect("a chunk expands")
            {
                Some(_) => chunks += 1,
                // Nothing to expand: finished, or skipped while an erasure holds it.
                None if erasing_done.get() => break,
                None => tokio::time::sleep(Duration::from_millis(5)).await,
            }
            assert!(chunks < 20, "the campaigns never finished expanding");
        }
    };
    let erasing = async {
        for person in &racing {
            let reply = call(&app, Method::DELETE, &format!("/recipients/{person}"), None).await;
            assert_eq!(reply.status, 204, "{}", reply.body);
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
        erasing_done.set(true);
    };
    tokio::join!(expanding, erasing);
    erased.extend(racing);
    let addresses: Vec<String> = erased
        .iter()
        .map(|id| {
            format!(
                "{}@example.com",
                id.trim_start_matches('r').trim_start_matches('0')
            )
        })
        .map(|number| format!("r{number}"))
        .collect();
    assert_eq!(addresses[0], "r1500@example.com");

    // Nothing names them: no notification, key or audience.
    let named: i64 = app
        .db
        .scalar(
            "SELECT (SELECT count(*) FROM notifications
                     WHERE recipient_id = ANY($1) OR recipient = ANY($2)
                        OR EXISTS (SELECT 1 FROM unnest($1::text[]) AS p(id)
                                   WHERE notifications.idempotency_key LIKE '%:' || p.id)
                        OR payload::text LIKE ANY (SELECT '%' || a || '%' FROM unnest($2::text[]) AS a))
                  + (SELECT count(*) FROM campaigns WHERE recipient_ids && $1)",
            &[&erased, &addresses],
        )
        .await;
    assert_eq!(named, 0, "an erased person is still named");

    // Everyone else has exactly one notification of each campaign, and each campaign's
    // counts add up to what it expanded.
    for id in &campaign_ids {
        let state = campaign_state(&app, id).await;
        assert_eq!(state["status"], "QUEUED", "{state}");
        let counted: i64 = state["counts"]
            .as_object()
            .expect("counts")
            .values()
            .map(|n| n.as_i64().expect("a count"))
            .sum();
        assert_eq!(
            counted,
            state["expanded"].as_i64().expect("expanded"),
            "{state}"
        );
        let (people, rows): (i64, i64) = (
            app.db
                .scalar(
                    "SELECT count(DISTINCT recipient_id) FROM notifications
                     WHERE payload #>> '{$template,campaign}' = $1",
                    &[id],
                )
                .await,
            app.db
                .scalar(
                    "SELECT count(*) FROM notifications
                     WHERE payload #>> '{$template,campaign}' = $1 AND recipient_id IS NOT NULL",
                    &[id],
                )
                .await,
        );
        assert_eq!((people, rows), (4000 - 41, 4000 - 41), "{state}");
    }
    // Both audiences end as large as what was expanded: the list lost who was erased
    // before being reached, the walk counts who it found.
    for id in &campaign_ids {
        let state = campaign_state(&app, id).await;
        assert_eq!(state["expanded"], state["audienceSize"], "{state}");
    }
}

/// Three notifications of a campaign are claimed, then the campaign is cancelled: whichever
/// way each claim ends (a retry recorded, handed back untried, an expired lease), it ends
/// CANCELLED, never PENDING again, so nothing of the campaign is sent after the cancel but
/// what was already on its way to the provider.
#[tokio::test]
async fn a_claim_of_a_campaign_cancelled_meanwhile_is_cancelled_not_retried() {
    let app = TestApp::spawn().await;
    publish(&app, "welcome", &welcome("Hi")).await;
    profiles(&app.db, 3).await;
    let ids: Vec<String> = (1..=3).map(|i| format!("r{i:05}")).collect();
    let (_, created) = submit(&app, &campaign("in-flight", json!({"recipientIds": ids}))).await;
    let id = created["id"].as_str().expect("id").to_string();
    assert_eq!(expand_all(&app).await, 3);
    let conn = app.pool().get().await.expect("connection");
    let claimed = worker::claim(&conn, "test-worker", 10, worker::LEASE)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 3);
    let reply = call(&app, Method::DELETE, &format!("/campaigns/{id}"), None).await;
    assert_eq!(reply.status, 200, "{}", reply.body);

    let failure = notify_shared::queue::Disposition::Retry {
        error: "try again".into(),
        delay: Duration::ZERO,
    };
    worker::record(&conn, &[(&claimed[0], failure)])
        .await
        .expect("record");
    notify_shared::queue::release(&conn, &[(&claimed[1], None)])
        .await
        .expect("release");
    app.db
        .execute(
            "UPDATE notifications SET lease_expires_at = now() - interval '1 second'
             WHERE id = $1",
            &[&claimed[2].id],
        )
        .await;
    notify_shared::queue::recover_expired(&conn, worker::LEASE, 10)
        .await
        .expect("recover");

    let state = campaign_state(&app, &id).await;
    assert_eq!(state["counts"]["pending"], 0, "{state}");
    assert_eq!(state["counts"]["cancelled"], 3, "{state}");
    assert!(
        worker::claim(&conn, "test-worker", 10, worker::LEASE)
            .await
            .expect("claim")
            .is_empty(),
        "a cancelled campaign's notification is claimable again"
    );
}
