//! Retention: finished notifications older than their window are deleted in bounded
//! statements, with their attempts, webhook events and reservations; open and young work
//! stays; delivered webhook events age out on their own window; the idempotency window
//! is the retention.

use std::time::Duration;

use notify_shared::config::RetentionConfig;
use notify_shared::provider::Provider;
use notify_shared::{queue, retention};
use notify_tests::worker::{simulated, sweep, sweeper};
use notify_tests::{TestApp, TestDb, factory};
use reqwest::StatusCode;
use serde_json::json;
use std::sync::Arc;
use uuid::Uuid;

/// Makes notifications look `days` old: created then, and finished then.
async fn age(db: &TestDb, ids: &[Uuid], days: i32) {
    db.execute(
        "UPDATE notifications
         SET created_at = now() - $2::int4 * interval '1 day',
             updated_at = now() - $2::int4 * interval '1 day'
         WHERE id = ANY($1)",
        &[&ids, &days],
    )
    .await;
}

/// Inserts `count` SENT notifications created and finished `days` ago, in one statement.
async fn old_sent(db: &TestDb, count: i32, days: i32) {
    db.execute(
        "INSERT INTO notifications (id, idempotency_key, fingerprint, recipient, channel,
                                    priority, payload, status, scheduled_at, next_attempt_at,
                                    attempt_count, max_attempts, sent_at, created_at, updated_at)
         SELECT gen_random_uuid(), 'old-' || g, repeat('0', 64), 'r' || g || '@example.com',
                'EMAIL', 1, '{}', 'SENT', now(), now(), 1, 6, now(),
                now() - $2::int4 * interval '1 day', now() - $2::int4 * interval '1 day'
         FROM generate_series(1, $1) AS g",
        &[&count, &days],
    )
    .await;
}

/// Writes attempt number `attempt` of notification `id`, as a delivered one.
async fn delivered_attempt(db: &TestDb, id: Uuid, attempt: i32) {
    db.execute(
        "INSERT INTO delivery_attempts (notification_id, attempt, worker, started_at,
                                        finished_at, outcome)
         VALUES ($1, $2, 'w', now(), now(), 'DELIVERED')",
        &[&id, &attempt],
    )
    .await;
}

/// Rows of `table` (one with a `notification_id` column) that name any of `ids`.
async fn rows_naming(db: &TestDb, table: &str, ids: &[Uuid]) -> i64 {
    db.scalar(
        &format!("SELECT count(*) FROM {table} WHERE notification_id = ANY($1)"),
        &[&ids],
    )
    .await
}

#[tokio::test]
async fn finished_work_past_its_window_goes_with_what_refers_to_it_and_nothing_else_does() {
    let db = TestDb::new().await;
    let make = |name: &str| factory::Spec::to(&format!("{name}@example.com"));
    let sent_old = factory::create(&db.pool, make("sent-old")).await.id;
    let sent_young = factory::create(&db.pool, make("sent-young")).await.id;
    let cancelled_old = factory::create(&db.pool, make("cancelled-old")).await.id;
    let failed_old = factory::create(&db.pool, make("failed-old")).await.id;
    let dead_40_days = factory::create(&db.pool, make("dead-40")).await.id;
    let dead_100_days = factory::create(&db.pool, make("dead-100")).await.id;
    // Created long ago, due in the future: open work is never deleted, however old.
    let pending_old = factory::create(&db.pool, make("pending-old").due_in_seconds(3600))
        .await
        .id;
    for id in [sent_old, sent_young] {
        db.execute(
            "UPDATE notifications SET status = 'SENT', sent_at = now(), attempt_count = 1
             WHERE id = $1",
            &[&id],
        )
        .await;
    }
    factory::mark_cancelled(&db.pool, cancelled_old).await;
    factory::fail(&db.pool, failed_old, "bounced").await;
    factory::dead_letter(&db.pool, dead_40_days, "down").await;
    factory::dead_letter(&db.pool, dead_100_days, "down").await;
    for id in [sent_old, sent_young, dead_100_days] {
        factory::insert_event(&db.pool, id, "SENT", 1, chrono::Utc::now()).await;
        delivered_attempt(&db, id, 1).await;
        db.execute(
            "INSERT INTO rate_limit_reservations (notification_id, recipient_key) VALUES ($1, 1)",
            &[&id],
        )
        .await;
        // The simulated provider's record of the delivery, keyed by the notification id.
        db.execute(
            "INSERT INTO simulated_deliveries (delivery_key, channel, recipient)
             VALUES ($1, 'EMAIL', 'r')",
            &[&id],
        )
        .await;
    }
    age(
        &db,
        &[sent_old, cancelled_old, failed_old, dead_40_days],
        40,
    )
    .await;
    age(&db, &[dead_100_days], 100).await;
    age(&db, &[pending_old], 400).await;
    // Young by its final transition although created long ago (a redrive, say).
    db.execute(
        "UPDATE notifications SET created_at = now() - interval '60 days' WHERE id = $1",
        &[&sent_young],
    )
    .await;

    let deleted = retention::step(&db.pool, &RetentionConfig::default())
        .await
        .expect("step");
    assert_eq!(deleted.notifications_deleted, 4, "{deleted:?}");

    let remaining: Vec<Uuid> = db
        .scalar("SELECT array_agg(id ORDER BY id) FROM notifications", &[])
        .await;
    let mut kept = vec![sent_young, dead_40_days, pending_old];
    kept.sort();
    assert_eq!(remaining, kept);
    for table in [
        "webhook_events",
        "delivery_attempts",
        "rate_limit_reservations",
    ] {
        let orphans = db
            .count(&format!(
                "SELECT count(*) FROM {table} t
                 WHERE NOT EXISTS (SELECT 1 FROM notifications n WHERE n.id = t.notification_id)"
            ))
            .await;
        assert_eq!(orphans, 0, "{table} keeps rows of deleted notifications");
        let of_the_young = rows_naming(&db, table, &[sent_young]).await;
        assert_eq!(of_the_young, 1, "{table} lost a row of a kept notification");
    }
    let simulated: Vec<Uuid> = db
        .scalar(
            "SELECT array_agg(delivery_key ORDER BY delivery_key) FROM simulated_deliveries",
            &[],
        )
        .await;
    assert_eq!(
        simulated,
        vec![sent_young],
        "the simulated provider forgets the deleted"
    );
    // The queue follows: the dead-lettered one left is still listed, nothing else is.
    assert_eq!(
        db.count("SELECT count(*) FROM queue").await,
        2,
        "the queue holds the kept dead letter and the pending one"
    );
    assert_eq!(
        retention::deleted_so_far(&db.pool.get().await.expect("connection"))
            .await
            .expect("counts")
            .notifications_deleted,
        4
    );
}

/// Attempts and webhook events name their notification without a foreign key; a
/// statement trigger deletes them with it, whatever statement deletes it (the previous
/// release's retention relied on the foreign key's cascade and deletes only notifications).
#[tokio::test]
async fn any_delete_of_notifications_takes_their_attempts_and_events_with_them() {
    let db = TestDb::new().await;
    let mut ids = Vec::new();
    for name in ["gone-1", "gone-2", "kept"] {
        let id = factory::create(&db.pool, factory::Spec::to(&format!("{name}@example.com")))
            .await
            .id;
        factory::insert_event(&db.pool, id, "SENT", 1, chrono::Utc::now()).await;
        for attempt in 1..=2 {
            delivered_attempt(&db, id, attempt).await;
        }
        ids.push(id);
    }
    let (gone, kept) = (&ids[..2], ids[2]);
    db.execute("DELETE FROM notifications WHERE id = ANY($1)", &[&gone])
        .await;

    for (table, per_notification) in [("delivery_attempts", 2), ("webhook_events", 1)] {
        let of_gone = rows_naming(&db, table, gone).await;
        assert_eq!(of_gone, 0, "{table} keeps rows of deleted notifications");
        let of_kept = rows_naming(&db, table, &[kept]).await;
        assert_eq!(
            of_kept, per_notification,
            "{table} lost rows of a kept notification"
        );
    }
}

#[tokio::test]
async fn deletes_are_bounded_per_statement_and_racing_steps_delete_each_row_once() {
    let db = TestDb::new().await;
    old_sent(&db, 12_000, 31).await;

    let conn = db.pool.get().await.expect("connection");
    let day = Duration::from_secs(86_400);
    let first = queue::purge(&conn, 30 * day, 90 * day, retention::BATCH)
        .await
        .expect("purge");
    assert_eq!(
        first.notifications, 5_000,
        "one statement deletes at most a batch"
    );
    assert_eq!(db.count("SELECT count(*) FROM notifications").await, 7_000);
    drop(conn);

    // Two sweepers' steps at once, on their own connections, until nothing is left.
    let config = RetentionConfig::default();
    let racer = |pool: deadpool_postgres::Pool| async move {
        let mut total = 0;
        loop {
            let deleted = retention::step(&pool, &config).await.expect("step");
            total += deleted.notifications_deleted;
            if deleted.notifications_deleted == 0 {
                return total;
            }
        }
    };
    let (a, b) = tokio::join!(racer(db.pool.clone()), racer(db.pool.clone()));
    assert_eq!(
        a + b,
        7_000,
        "each row deleted by exactly one step ({a} + {b})"
    );
    assert_eq!(db.count("SELECT count(*) FROM notifications").await, 0);
    let counted = retention::deleted_so_far(&db.pool.get().await.expect("connection"))
        .await
        .expect("counts");
    assert_eq!(counted.notifications_deleted, 12_000);
    // The maintained counts follow the deletes.
    assert_eq!(
        db.count("SELECT coalesce(sum(notifications), 0)::int8 FROM notification_counts")
            .await,
        0
    );
}

#[tokio::test]
async fn delivered_and_given_up_webhook_events_age_out_and_undelivered_ones_stay() {
    let db = TestDb::new().await;
    let notification = factory::create(&db.pool, factory::Spec::to("w@example.com")).await;
    let now = chrono::Utc::now();
    let mut events = Vec::new();
    for _ in 0..4 {
        events.push(factory::insert_event(&db.pool, notification.id, "SENT", 1, now).await);
        // One event per (notification, status, generation): vary the generation.
        db.execute(
            "UPDATE webhook_events SET redrive_generation = (SELECT count(*) FROM webhook_events)
             WHERE id = $1",
            &[&events[events.len() - 1]],
        )
        .await;
    }
    let [delivered_old, given_up_old, pending_old, delivered_young] = events[..] else {
        panic!("four events");
    };
    db.execute(
        "UPDATE webhook_events SET dispatch_state = 'DELIVERED', delivered_at = now()
         WHERE id = ANY($1)",
        &[&vec![delivered_old, delivered_young]],
    )
    .await;
    db.execute(
        "UPDATE webhook_events SET dispatch_state = 'GIVEN_UP', given_up_at = now() WHERE id = $1",
        &[&given_up_old],
    )
    .await;
    db.execute(
        "UPDATE webhook_events SET created_at = now() - interval '8 days' WHERE id = ANY($1)",
        &[&vec![delivered_old, given_up_old, pending_old]],
    )
    .await;

    let deleted = retention::step(&db.pool, &RetentionConfig::default())
        .await
        .expect("step");
    assert_eq!(deleted.webhook_events_deleted, 2);
    assert_eq!(deleted.notifications_deleted, 0);
    let left: Vec<Uuid> = db
        .scalar("SELECT array_agg(id ORDER BY id) FROM webhook_events", &[])
        .await;
    let mut expected = vec![pending_old, delivered_young];
    expected.sort();
    assert_eq!(left, expected);
}

#[tokio::test]
async fn the_sweeper_runs_retention_and_metrics_report_the_deleted_rows() {
    let app = TestApp::spawn().await;
    old_sent(&app.db, 30, 31).await;
    // Three of them still have their outcome event: it goes with its notification, and
    // is counted as a webhook event deleted.
    let with_events: Vec<Uuid> = app
        .db
        .scalar(
            "SELECT array_agg(id) FROM (SELECT id FROM notifications LIMIT 3) n",
            &[],
        )
        .await;
    for id in &with_events {
        factory::insert_event(&app.db.pool, *id, "SENT", 1, chrono::Utc::now()).await;
    }
    let provider: Arc<dyn Provider> = Arc::new(simulated(app.db.pool.clone()));
    let sweeper = sweeper(&app.db.pool, provider).build();
    let outcome = sweep(&sweeper).await;
    assert_eq!(outcome.purged, 30, "{outcome:?}");
    assert_eq!(outcome.webhook_events_purged, 3, "{outcome:?}");
    assert_eq!(app.db.count("SELECT count(*) FROM webhook_events").await, 0);

    let metrics = app.metrics().await;
    assert_eq!(
        metrics["retention"],
        json!({"notificationsDeleted": 30, "webhookEventsDeleted": 3}),
        "{metrics}"
    );
    let text = app
        .send(
            app.request(reqwest::Method::GET, "/metrics")
                .header("accept", "text/plain"),
        )
        .await;
    let text = text.body.as_str().expect("text").to_string();
    assert!(
        text.contains("notify_retention_deleted_rows{table=\"notifications\"} 30"),
        "{text}"
    );
    assert!(
        text.contains("notify_retention_deleted_rows{table=\"webhook_events\"} 3"),
        "{text}"
    );
    // The 0.0.4 text format: the TYPE line names the samples exactly.
    assert!(
        text.contains("# TYPE notify_retention_deleted_rows gauge"),
        "{text}"
    );
}

#[tokio::test]
async fn an_idempotency_key_is_remembered_for_as_long_as_its_notification_exists() {
    let app = TestApp::spawn().await;
    let body = |text: &str| {
        json!({"recipient": "k@example.com", "channel": "EMAIL", "priority": "NORMAL",
               "payload": {"subject": "s", "body": text}, "delaySeconds": 1,
               "idempotencyKey": "once"})
    };
    let post = |body: serde_json::Value| {
        app.send(
            app.request(reqwest::Method::POST, "/notifications")
                .json(&body),
        )
    };
    let first = post(body("first")).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let again = post(body("second")).await;
    assert_eq!(
        again.status,
        StatusCode::CONFLICT,
        "a different body, same key"
    );

    let id: Uuid = first.body["id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .expect("id");
    app.db
        .execute(
            "UPDATE notifications SET status = 'SENT', sent_at = now(), attempt_count = 1
             WHERE id = $1",
            &[&id],
        )
        .await;
    age(&app.db, &[id], 31).await;
    retention::step(&app.db.pool, &RetentionConfig::default())
        .await
        .expect("step");
    let after = post(body("second")).await;
    assert_eq!(
        after.status,
        StatusCode::CREATED,
        "past the retention the key is free again: {}",
        after.body
    );
}
