//! 10,000 recipients with profiles, 40 % of them opted out of the category, sent as two
//! batches of 5,000: only the 60 % are queued, and a drain calls the provider for exactly
//! those.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use notify_tests::TestApp;
use notify_tests::doubles::{Counting, Scripted};
use notify_tests::worker::{self, worker_config};
use serde_json::json;
use uuid::Uuid;

use super::notification;

const RECIPIENTS: i64 = 10_000;
const BATCH: usize = 5_000;

#[tokio::test]
async fn a_10000_recipient_campaign_with_40_percent_opted_out_sends_only_to_the_60_percent() {
    let app = TestApp::spawn().await;
    // Profiles and preferences written in bulk: what is under test is the decision.
    app.db
        .execute(
            "INSERT INTO recipients (owner, recipient_id, email, timezone)
             SELECT '00000000-0000-0000-0000-000000000000', 'r' || i, 'r' || i || '@example.com',
                    'Europe/Paris'
             FROM generate_series(1, $1::int8) AS i",
            &[&RECIPIENTS],
        )
        .await;
    // Two in five opted out of the digest by email; every one has some other preference.
    app.db
        .execute(
            "INSERT INTO recipient_preferences (owner, recipient_id, category, channel, opted_in)
             SELECT '00000000-0000-0000-0000-000000000000', 'r' || i, c.category, 'EMAIL',
                    c.category <> 'digest'
             FROM generate_series(1, $1::int8) AS i,
                  (VALUES ('digest'), ('news')) AS c(category)
             WHERE c.category = 'news' OR i % 5 < 2",
            &[&RECIPIENTS],
        )
        .await;

    for part in 0..(RECIPIENTS as usize / BATCH) {
        let items: Vec<_> = (0..BATCH)
            .map(|i| {
                let n = part * BATCH + i + 1;
                notification(
                    &format!("digest-{n}"),
                    json!({"recipientId": format!("r{n}")}),
                    "EMAIL",
                    "BULK",
                    "digest",
                    0,
                )
            })
            .collect();
        let started = Instant::now();
        let (status, body) = app.create_batch(&json!({ "notifications": items })).await;
        assert_eq!(status, 200, "{body}");
        println!("batch {part}: {BATCH} items in {:?}", started.elapsed());
        let results = body["results"].as_array().expect("results");
        assert!(
            results.iter().all(|r| r["status"] == 201),
            "every item accepted"
        );
    }

    let by_status = |status: &str, reason: Option<&str>| {
        let status = status.to_string();
        let reason = reason.map(str::to_string);
        let db = &app.db;
        async move {
            db.scalar::<i64>(
                "SELECT count(*) FROM notifications
                 WHERE status = $1 AND suppressed_reason IS NOT DISTINCT FROM $2",
                &[&status, &reason],
            )
            .await
        }
    };
    assert_eq!(by_status("PENDING", None).await, 6_000);
    assert_eq!(
        by_status("SUPPRESSED", Some("CATEGORY_OPT_OUT")).await,
        4_000
    );
    // The suppressed ones went to the opted-out people, and only to them.
    let misplaced = app
        .db
        .count(
            "SELECT count(*) FROM notifications
             WHERE (status = 'SUPPRESSED') <> (substr(recipient_id, 2)::int % 5 < 2)",
        )
        .await;
    assert_eq!(misplaced, 0);

    let provider = Arc::new(Counting::new(Arc::new(Scripted::delivering())));
    let sweeper = worker::sweeper(app.pool(), provider.clone())
        .config(worker_config().batch_size(500).concurrency(50))
        .build();
    let started = Instant::now();
    let outcome = worker::sweep_until_idle(&sweeper).await;
    println!("drained in {:?}: {outcome:?}", started.elapsed());

    let called: HashSet<Uuid> = provider.log().keys().into_iter().collect();
    assert_eq!(
        provider.log().keys().len(),
        6_000,
        "one call per queued notification"
    );
    let queued: HashSet<Uuid> = app
        .db
        .pool
        .get()
        .await
        .expect("connection")
        .query("SELECT id FROM notifications WHERE status = 'SENT'", &[])
        .await
        .expect("sent ids")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(called, queued);
    assert_eq!(
        by_status("SUPPRESSED", Some("CATEGORY_OPT_OUT")).await,
        4_000
    );
    assert_eq!(outcome.suppressed, 0, "nothing changed since enqueue");
}
