//! Expiry and the re-check at send: a notification past its `expiresAt` is never handed to
//! the provider, whether the expiry step, the claim or the fence sees it first; and a
//! claim whose address or person changed since enqueue is stopped unsent.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use notify_shared::audience::address;
use notify_shared::audience::profiles::{self, Preference, ProfileInput};
use notify_shared::audience::suppressions::{self, ListReason};
use notify_shared::config::DEVELOPMENT_SECRET;
use notify_shared::domain::SuppressionReason;
use notify_shared::intake::recipients::parse_profile;
use notify_shared::notification::{Channel, Status};
use notify_shared::queue::{self, Claimed, Stopped};
use notify_tests::doubles::{Counting, Scripted, Slow};
use notify_tests::factory::{self, Spec};
use notify_tests::worker::{self, LEASE, worker_config};
use notify_tests::{TestApp, TestDb};
use reqwest::StatusCode;
use serde_json::json;
use uuid::Uuid;

use super::now_iso;

/// The keyed hash of each claim's address, as the sweeper computes them.
fn hashes(claims: &[&Claimed]) -> Vec<String> {
    claims
        .iter()
        .map(|c| address::hash(DEVELOPMENT_SECRET, c.channel, &c.recipient))
        .collect()
}

/// (status, suppressed reason, attempt count, claim token held) of one notification.
async fn state(db: &TestDb, id: Uuid) -> (String, Option<String>, i32, bool) {
    let conn = db.pool.get().await.expect("connection");
    let row = conn
        .query_one(
            "SELECT status, suppressed_reason, attempt_count, claim_token IS NOT NULL
             FROM notifications WHERE id = $1",
            &[&id],
        )
        .await
        .expect("state");
    (row.get(0), row.get(1), row.get(2), row.get(3))
}

#[tokio::test]
async fn a_notification_past_its_ttl_is_expired_unsent_when_the_worker_comes_back() {
    let app = TestApp::spawn().await;
    let body = json!({"recipient": "late@example.com", "channel": "EMAIL",
        "payload": {"subject": "otp"}, "priority": "HIGH", "idempotencyKey": "ttl-1",
        "sendAt": now_iso(), "ttlSeconds": 1});
    let (status, created) = app.create(&body).await;
    assert_eq!(
        (status, &created["status"]),
        (StatusCode::CREATED, &json!("PENDING"))
    );
    // The worker is stopped until the notification's time has passed.
    app.db
        .wait_for_count(
            "SELECT count(*) FROM notifications WHERE expires_at <= now()",
            Duration::from_secs(5),
            |n| n == 1,
            String::new,
        )
        .await;

    let provider = Arc::new(Counting::new(Arc::new(Scripted::delivering())));
    let outcome = app.sweep_until_idle(provider.clone()).await;
    assert_eq!(provider.log().keys(), Vec::<Uuid>::new(), "never sent late");
    assert_eq!((outcome.expired, outcome.claimed), (1, 0), "{outcome:?}");
    let (_, n) = app.get(created["id"].as_str().expect("id")).await;
    assert_eq!(
        (&n["status"], n["attemptCount"].as_i64()),
        (&json!("EXPIRED"), Some(0))
    );
    assert!(n["expiredAt"].is_string(), "{n}");
    let events = app
        .db
        .count(&format!(
            "SELECT count(*) FROM webhook_events WHERE type = 'notification.expired'
               AND status = 'EXPIRED' AND notification_id = '{}'",
            created["id"].as_str().expect("id")
        ))
        .await;
    assert_eq!(events, 1);
    let metrics = app.metrics().await;
    assert_eq!(
        (&metrics["expired"], &metrics["pending"]),
        (&json!(1), &json!(0)),
        "{metrics}"
    );
}

#[tokio::test]
async fn the_claim_never_hands_out_an_expired_notification() {
    let db = TestDb::new().await;
    let past = Utc::now() - TimeDelta::seconds(1);
    let expired = factory::create(&db.pool, Spec::default().expires_at(past)).await;
    let live = factory::create(&db.pool, Spec::default()).await;
    let conn = db.pool.get().await.expect("connection");
    // The expiry step has not run: only the claim's own condition keeps it out.
    let claimed = worker::claim(&conn, "w", 10, LEASE).await.expect("claim");
    let ids: Vec<Uuid> = claimed.iter().map(|c| c.id).collect();
    assert_eq!(ids, [live.id]);
    assert_eq!(
        state(&db, expired.id).await,
        ("PENDING".into(), None, 0, false)
    );
}

#[tokio::test]
async fn a_claim_that_expires_before_its_send_is_fenced() {
    let db = TestDb::new().await;
    let soon = Utc::now() + TimeDelta::hours(1);
    let n = factory::create(&db.pool, Spec::default().expires_at(soon)).await;
    let conn = db.pool.get().await.expect("connection");
    let claimed = worker::claim(&conn, "w", 10, LEASE).await.expect("claim");
    assert_eq!(claimed.len(), 1);
    assert_eq!(state(&db, n.id).await, ("PROCESSING".into(), None, 1, true));
    db.execute(
        "UPDATE notifications SET expires_at = now() - interval '1 second' WHERE id = $1",
        &[&n.id],
    )
    .await;

    let batch: Vec<&Claimed> = claimed.iter().collect();
    let stopped = queue::recheck(&conn, &batch, &hashes(&batch))
        .await
        .expect("recheck");
    assert_eq!(stopped, [(n.id, Stopped::Expired)]);
    assert_eq!(state(&db, n.id).await, ("EXPIRED".into(), None, 0, false));
    assert!(factory::load(&db.pool, n.id).await.expired_at.is_some());
    assert_eq!(
        factory::events(&db.pool, n.id).await,
        [("EXPIRED".to_string(), 0)]
    );
}

#[tokio::test]
async fn an_address_suppressed_after_the_claim_is_not_sent() {
    let db = TestDb::new().await;
    let n = factory::create(&db.pool, Spec::to("gone@example.com")).await;
    let other = factory::create(&db.pool, Spec::to("here@example.com")).await;
    let conn = db.pool.get().await.expect("connection");
    let claimed = worker::claim(&conn, "w", 10, LEASE).await.expect("claim");
    assert_eq!(claimed.len(), 2);
    // Listed in another case: email compares case-insensitively.
    let secret = DEVELOPMENT_SECRET;
    suppressions::add(
        &conn,
        secret,
        Channel::Email,
        "Gone@Example.com",
        ListReason::Bounced,
    )
    .await
    .expect("suppress");

    let batch: Vec<&Claimed> = claimed.iter().collect();
    let stopped = queue::recheck(&conn, &batch, &hashes(&batch))
        .await
        .expect("recheck");
    let reason = Stopped::Suppressed(SuppressionReason::SuppressedAddress);
    assert_eq!(stopped, [(n.id, reason)]);
    let suppressed = (
        "SUPPRESSED".into(),
        Some("SUPPRESSED_ADDRESS".into()),
        0,
        false,
    );
    assert_eq!(state(&db, n.id).await, suppressed);
    assert_eq!(
        factory::events(&db.pool, n.id).await,
        [("SUPPRESSED".to_string(), 0)]
    );
    assert_eq!(
        state(&db, other.id).await,
        ("PROCESSING".into(), None, 1, true)
    );
}

#[tokio::test]
async fn a_person_who_unsubscribes_or_opts_out_after_the_claim_is_not_sent_bulk() {
    let db = TestDb::new().await;
    let conn = db.pool.get().await.expect("connection");
    let owner = Uuid::nil();
    let mut profile: ProfileInput =
        parse_profile(Some(&json!({"email": "ada@example.com"}))).expect("profile");
    profiles::upsert(&conn, owner, "ada", &profile)
        .await
        .expect("profile");
    let ada = || Spec::to("ada@example.com").recipient_id("ada");
    let bulk = factory::create(&db.pool, ada().bulk()).await;
    let transactional = factory::create(&db.pool, ada()).await;
    let news = factory::create(&db.pool, ada().category("news")).await;
    let claimed = worker::claim(&conn, "w", 10, LEASE).await.expect("claim");
    assert_eq!(claimed.len(), 3);

    // Mid-drain: unsubscribed from everything, and out of "news" on email.
    profile.unsubscribed_all = true;
    profiles::upsert(&conn, owner, "ada", &profile)
        .await
        .expect("profile");
    let opt_out = Preference {
        category: "news".into(),
        channel: Channel::Email,
        opted_in: false,
    };
    profiles::merge_preferences(&conn, owner, "ada", &[opt_out])
        .await
        .expect("preferences");

    let batch: Vec<&Claimed> = claimed.iter().collect();
    let mut stopped = queue::recheck(&conn, &batch, &hashes(&batch))
        .await
        .expect("recheck");
    stopped.sort_by_key(|(id, _)| *id != bulk.id);
    assert_eq!(
        stopped,
        [
            (
                bulk.id,
                Stopped::Suppressed(SuppressionReason::Unsubscribed)
            ),
            (
                news.id,
                Stopped::Suppressed(SuppressionReason::CategoryOptOut)
            ),
        ]
    );
    let reason = |r: &str| ("SUPPRESSED".to_string(), Some(r.to_string()), 0, false);
    assert_eq!(state(&db, bulk.id).await, reason("UNSUBSCRIBED"));
    assert_eq!(state(&db, news.id).await, reason("CATEGORY_OPT_OUT"));
    // Transactional traffic is not marketing: it still goes.
    assert_eq!(
        state(&db, transactional.id).await,
        ("PROCESSING".into(), None, 1, true)
    );
    assert_eq!(
        factory::load(&db.pool, transactional.id).await.status,
        Status::Processing
    );
}

#[tokio::test]
async fn the_expiry_step_works_in_bounded_sets() {
    let db = TestDb::new().await;
    factory::create_due_bulk(&db.pool, 2500).await;
    db.execute(
        "UPDATE notifications SET expires_at = now() - interval '1 second'",
        &[],
    )
    .await;
    let conn = db.pool.get().await.expect("connection");
    let mut steps = Vec::new();
    for _ in 0..4 {
        steps.push(queue::expire(&conn, 1000).await.expect("expire"));
    }
    assert_eq!(steps, [1000, 1000, 500, 0]);
    assert_eq!(
        factory::count_where(&db.pool, "status = 'EXPIRED' AND expired_at IS NOT NULL").await,
        2500
    );
    let events = db
        .count("SELECT count(*) FROM webhook_events WHERE type = 'notification.expired'")
        .await;
    assert_eq!(events, 2500);
}

#[tokio::test]
async fn an_insert_given_the_address_hash_looks_it_up_on_the_suppression_list() {
    let db = TestDb::new().await;
    let conn = db.pool.get().await.expect("connection");
    let secret = DEVELOPMENT_SECRET;
    suppressions::add(
        &conn,
        secret,
        Channel::Email,
        "Listed@Example.com",
        ListReason::Manual,
    )
    .await
    .expect("suppress");
    let new = |key: &str, to: &str| {
        let mut new = queue::NewNotification::new(
            key.into(),
            "f".repeat(64),
            to.into(),
            Channel::Email,
            json!({"subject": "s", "text": "t"}),
            queue::Due::AfterSeconds(0),
            3,
        );
        new.listed_hash = Some(address::hash(secret, Channel::Email, to));
        new
    };

    // One at a time (a single POST): listed in another case, and not listed.
    let listed = match queue::insert(&conn, &new("one-listed", "listed@example.com"))
        .await
        .expect("insert")
    {
        queue::InsertOutcome::Created(n) => n,
        other => panic!("{other:?}"),
    };
    let free = new("one-free", "free@example.com");
    queue::insert(&conn, &free).await.expect("insert");
    let suppressed = (
        "SUPPRESSED".into(),
        Some("SUPPRESSED_ADDRESS".into()),
        0,
        false,
    );
    assert_eq!(state(&db, listed.id).await, suppressed);
    assert_eq!(
        state(&db, free.id).await,
        ("PENDING".into(), None, 0, false)
    );

    // A batch: the same look-up per row, and a row without a hash is taken as decided.
    let batch = [
        new("many-listed", "LISTED@example.com"),
        new("many-free", "free@example.com"),
        {
            let mut decided = new("many-decided", "listed@example.com");
            decided.listed_hash = None;
            decided
        },
    ];
    queue::insert_batch(&conn, &batch).await.expect("batch");
    assert_eq!(state(&db, batch[0].id).await, suppressed);
    assert_eq!(
        state(&db, batch[1].id).await,
        ("PENDING".into(), None, 0, false)
    );
    assert_eq!(
        state(&db, batch[2].id).await,
        ("PENDING".into(), None, 0, false)
    );

    // Each suppressed one has its webhook event, written by the same statement.
    let events: i64 = conn
        .query_one(
            "SELECT count(*) FROM webhook_events WHERE type = 'notification.suppressed'
             AND notification_id = ANY($1)",
            &[&vec![listed.id, batch[0].id]],
        )
        .await
        .expect("events")
        .get(0);
    assert_eq!(events, 2);
}

/// A claim still waiting for a place at the gate when it expires is never called: with one
/// place and 500 ms a call, a batch of ten that expires 3 s after it was made due cannot
/// all start in time. Those that would start late go back untried (attempt refunded) and
/// the expiry step marks them EXPIRED; no call starts after its notification's expiry
/// (allowing 100 ms for the time between the gate's check and the call's first stamp on a
/// busy machine, a fifth of the time between two calls).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_still_waiting_for_a_place_when_it_expires_is_never_called() {
    let db = TestDb::new().await;
    let count = 10;
    factory::create_due_bulk(&db.pool, count).await;
    db.execute(
        "UPDATE notifications SET expires_at = now() + interval '3 seconds'",
        &[],
    )
    .await;
    let provider = Arc::new(Slow::new(Duration::from_millis(500)));
    let sweeper = worker::sweeper(&db.pool, provider.clone())
        .config(worker_config().concurrency(1).batch_size(count))
        .build();
    let outcome = worker::sweep(&sweeper).await;
    let called = provider.started() as i64;
    assert!(0 < called && called < count, "{called} called: {outcome:?}");
    assert_eq!(outcome.released as i64, count - called, "{outcome:?}");
    assert_eq!(
        db.count(
            "SELECT count(*) FROM delivery_attempts a
             JOIN notifications n ON n.id = a.notification_id
             WHERE a.started_at > n.expires_at + interval '100 milliseconds'"
        )
        .await,
        0,
        "a call started late"
    );

    tokio::time::sleep(Duration::from_millis(3100)).await;
    let conn = db.pool.get().await.expect("connection");
    queue::expire(&conn, 1000).await.expect("expiry step");
    assert_eq!(
        factory::count_where(&db.pool, "status = 'SENT'").await,
        called
    );
    assert_eq!(
        factory::count_where(&db.pool, "status = 'EXPIRED' AND attempt_count = 0").await,
        count - called
    );
}
