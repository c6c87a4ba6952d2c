//! `WORKER_CONCURRENCY` bounds deliveries in flight, not batches, in a real `notify-local`
//! worker: the simulated provider's latency applies to each delivery, at most
//! `WORKER_CONCURRENCY` run at once, and a SIGTERM releases every claim whose delivery has
//! not started.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use notify_tests::process::{Children, worker_command};
use notify_tests::{TestDb, factory};

const SENT: &str = "SELECT count(*) FROM notifications WHERE status = 'SENT'";

/// When the simulated provider took each message, oldest first.
async fn delivery_times(db: &TestDb) -> Vec<DateTime<Utc>> {
    let conn = db.pool.get().await.expect("connection");
    conn.query(
        "SELECT first_delivered_at FROM simulated_deliveries ORDER BY first_delivered_at",
        &[],
    )
    .await
    .expect("ledger")
    .iter()
    .map(|row| row.get(0))
    .collect()
}

#[tokio::test]
async fn two_deliveries_at_most_are_in_flight_and_each_waits_the_latency() {
    let db = TestDb::new().await;
    factory::create_due_bulk(&db.pool, 12).await;
    let mut children = Children::default();
    let started = Instant::now();
    let index = children.start(&mut worker_command(
        &db.url,
        &[
            ("WORKER_CONCURRENCY", "2"),
            ("WORKER_BATCH_SIZE", "5"),
            ("MOCK_LATENCY_MS", "600"),
            ("MOCK_FAILURE_RATE", "0"),
            ("WORKER_POLL_INTERVAL_MS", "100"),
        ],
    ));
    let process = &children.0[index];
    db.wait_for_count(SENT, Duration::from_secs(60), |n| n == 12, || process.log())
        .await;
    let elapsed = started.elapsed();

    // Six rounds of two deliveries of 600 ms each.
    assert!(
        elapsed >= Duration::from_millis(3200),
        "drained in {elapsed:?}"
    );
    let times = delivery_times(&db).await;
    assert_eq!(times.len(), 12);
    let span = times[11] - times[0];
    assert!(
        span >= chrono::TimeDelta::milliseconds(2900),
        "first to last delivery took {span}"
    );
    // Within any 550 ms (less than one latency) at most two deliveries completed.
    for (i, at) in times.iter().enumerate() {
        let together = times[i..]
            .iter()
            .take_while(|t| **t - *at < chrono::TimeDelta::milliseconds(550))
            .count();
        assert!(
            together <= 2,
            "{together} deliveries within 550 ms: {times:?}"
        );
    }
}

#[tokio::test]
async fn sigterm_sends_the_deliveries_in_flight_and_releases_the_claims_not_started() {
    let db = TestDb::new().await;
    factory::create_due_bulk(&db.pool, 12).await;
    let mut children = Children::default();
    let index = children.start(&mut worker_command(
        &db.url,
        &[
            ("WORKER_CONCURRENCY", "2"),
            ("WORKER_BATCH_SIZE", "5"),
            ("MOCK_LATENCY_MS", "2000"),
            ("MOCK_FAILURE_RATE", "0"),
            ("WORKER_POLL_INTERVAL_MS", "100"),
        ],
    ));
    let process = &mut children.0[index];
    // A batch is claimed and its first two deliveries are at the provider.
    let held = db
        .wait_for_count(
            "SELECT count(*) FROM notifications WHERE status = 'PROCESSING'",
            Duration::from_secs(30),
            |held| held >= 3,
            || process.log(),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    process.signal(libc::SIGTERM);
    let status = process.wait_exit(Duration::from_secs(30)).await;
    assert!(status.success(), "exit {status}:\n{}", process.log());

    let sent = db.count(SENT).await;
    let untried = db
        .count("SELECT count(*) FROM notifications WHERE status = 'PENDING' AND attempt_count = 0")
        .await;
    eprintln!("claimed {held}; after SIGTERM: {sent} SENT, {untried} untried");
    assert_eq!(sent, 2, "only the two deliveries in flight went out");
    assert_eq!(delivery_times(&db).await.len(), 2, "the provider saw two");
    assert_eq!(untried, 10, "everything else is back, attempt refunded");
    assert_eq!(
        db.count("SELECT count(*) FROM notifications WHERE status = 'PROCESSING'")
            .await,
        0
    );
}

#[tokio::test]
async fn a_slow_provider_makes_a_drain_long_enough_to_watch() {
    const TOTAL: i64 = 200;
    let db = TestDb::new().await;
    factory::create_due_bulk(&db.pool, TOTAL).await;
    let mut children = Children::default();
    let index = children.start(&mut worker_command(
        &db.url,
        &[
            ("WORKER_CONCURRENCY", "10"),
            ("WORKER_BATCH_SIZE", "20"),
            ("MOCK_LATENCY_MS", "300"),
            ("MOCK_FAILURE_RATE", "0"),
        ],
    ));
    let process = &children.0[index];
    // 200 deliveries, 10 at a time, 300 ms each: about 6 s, recorded a batch of 20 at a
    // time. A second after the first batch is recorded the drain is under way and far
    // from over.
    db.wait_for_count(SENT, Duration::from_secs(30), |n| n > 0, || process.log())
        .await;
    let first_seen = Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let midway = db.count(SENT).await;
    assert!(
        (10..=100).contains(&midway),
        "{midway} of {TOTAL} sent a second into the drain"
    );
    db.wait_for_count(
        SENT,
        Duration::from_secs(60),
        |n| n == TOTAL,
        || process.log(),
    )
    .await;
    let rest = first_seen.elapsed();
    assert!(rest >= Duration::from_secs(4), "the rest took {rest:?}");
    assert_eq!(
        db.count("SELECT count(*) FROM simulated_deliveries WHERE calls <> 1")
            .await,
        0,
        "each delivered once"
    );
}
