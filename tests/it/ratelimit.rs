//! The per-recipient rolling-window limit, raced across real connections.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;
use futures::future::join_all;
use notify_shared::config::RateLimitConfig;
use notify_shared::ratelimit;
use notify_shared::stop::StopSignal;
use notify_shared::sweeper::{self, Sweeper};
use notify_shared::wake::Wake;
use notify_tests::doubles::Scripted;
use notify_tests::worker::{self, LEASE, worker_config};
use notify_tests::{TestDb, factory};

/// A sweeper delivering through `provider`, at most `max` per recipient in `window`,
/// claiming `batch` at a time.
fn limited(
    pool: &Pool,
    provider: Arc<Scripted>,
    max: i64,
    window: Duration,
    batch: i64,
) -> Sweeper {
    worker::sweeper(pool, provider)
        .config(
            worker_config()
                .batch_size(batch)
                .poll_interval(Duration::from_millis(20)),
        )
        .rate_limit(max, window)
        .build()
}

#[tokio::test]
async fn over_the_limit_waits_with_its_attempt_refunded_until_a_slot_frees() {
    let db = TestDb::new().await;
    let busy = "busy@example.com";
    for _ in 0..5 {
        factory::create(&db.pool, factory::Spec::to(busy)).await;
    }
    factory::create(&db.pool, factory::Spec::to("quiet@example.com")).await;
    let provider = Arc::new(Scripted::delivering());
    let window = Duration::from_secs(3600);
    let sweeper = limited(&db.pool, provider.clone(), 2, window, 100);

    let outcome = sweeper
        .sweep_once(&StopSignal::never())
        .await
        .expect("sweep");
    assert_eq!((outcome.claimed, outcome.sent, outcome.deferred), (6, 3, 3));
    assert_eq!(provider.calls().len(), 3);
    assert_eq!(factory::count_where(&db.pool, "status = 'SENT'").await, 3);
    assert_eq!(
        factory::count_where(
            &db.pool,
            &format!("status = 'PENDING' AND attempt_count = 0 AND recipient = '{busy}'")
        )
        .await,
        3
    );
    // Spread over the slots as they free: the k-th refused is due when the k-th oldest
    // admission leaves the window, and past the last one a window later again. Both
    // admissions of this batch were made at the same instant.
    let mut due_after = Vec::new();
    for windows in [1, 2] {
        let condition = format!(
            "status = 'PENDING' AND next_attempt_at = (SELECT min(reserved_at) FROM rate_limit_reservations
             WHERE recipient_key = hashtextextended('{busy}', 0)) + interval '{} seconds'",
            3600 * windows
        );
        due_after.push(factory::count_where(&db.pool, &condition).await);
    }
    assert_eq!(due_after, [2, 1]);
    // Nothing further is sent while the window holds.
    let again = sweeper
        .sweep_once(&StopSignal::never())
        .await
        .expect("sweep");
    assert_eq!(again.claimed, 0);
    let events = db
        .pool
        .get()
        .await
        .expect("db")
        .query_one("SELECT count(*) FROM webhook_events", &[])
        .await
        .expect("count");
    assert_eq!(
        events.get::<_, i64>(0),
        3,
        "deferrals write no webhook event"
    );
}

#[tokio::test]
async fn the_window_slides_instead_of_resetting() {
    let db = TestDb::new().await;
    let recipient = "slider@example.com";
    let first = factory::create(&db.pool, factory::Spec::to(recipient)).await;
    let later: Vec<_> = factory::create_many(&db.pool, 3, |_| {
        factory::Spec::to(recipient).due_in_seconds(3600)
    })
    .await;
    let provider = Arc::new(Scripted::delivering());
    let sweeper = limited(&db.pool, provider.clone(), 3, Duration::from_secs(2), 100);
    let make_due = |ids: Vec<uuid::Uuid>| {
        let pool = db.pool.clone();
        async move {
            pool.get()
                .await
                .expect("db")
                .execute("UPDATE notifications SET next_attempt_at = now() WHERE id = ANY($1) AND status = 'PENDING'", &[&ids])
                .await
                .expect("make due")
        }
    };

    // t = 0: the first admission.
    assert_eq!(
        sweeper
            .sweep_once(&StopSignal::never())
            .await
            .expect("sweep")
            .sent,
        1
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // t ≈ 1 s: two more fit, the fourth is refused until t ≈ 2 s (first + window).
    make_due(later.iter().map(|n| n.id).collect()).await;
    let outcome = sweeper
        .sweep_once(&StopSignal::never())
        .await
        .expect("sweep");
    assert_eq!((outcome.sent, outcome.deferred), (2, 1));
    let waiting = db
        .pool
        .get()
        .await
        .expect("db")
        .query_one(
            "SELECT id, extract(epoch FROM next_attempt_at - (SELECT reserved_at FROM rate_limit_reservations WHERE notification_id = $1))::float8
             FROM notifications WHERE status = 'PENDING'",
            &[&first.id],
        )
        .await
        .expect("the refused one");
    let waiting_id: uuid::Uuid = waiting.get(0);
    assert!(
        (waiting.get::<_, f64>(1) - 2.0).abs() < 0.001,
        "due when the first admission leaves the window"
    );

    // A fixed hourly bucket would refuse until the next bucket; a sliding window admits
    // exactly one as soon as the first admission is 2 s old.
    let due_in = db
        .pool
        .get()
        .await
        .expect("db")
        .query_one("SELECT extract(epoch FROM next_attempt_at - now())::float8 FROM notifications WHERE id = $1", &[&waiting_id])
        .await
        .expect("due")
        .get::<_, f64>(0);
    tokio::time::sleep(Duration::from_secs_f64(due_in.max(0.0) + 0.05)).await;
    let outcome = sweeper
        .sweep_once(&StopSignal::never())
        .await
        .expect("sweep");
    assert_eq!((outcome.claimed, outcome.sent, outcome.deferred), (1, 1, 0));
    assert_eq!(provider.calls().len(), 4);
}

#[tokio::test]
async fn twenty_simultaneous_admissions_from_separate_pools_take_exactly_the_limit() {
    let db = TestDb::new().await;
    factory::create_many(&db.pool, 20, |_| factory::Spec::to("crowded@example.com")).await;
    let claimed = {
        let connection = db.pool.get().await.expect("db");
        notify_tests::worker::claim(&connection, "setup", 20, LEASE)
            .await
            .expect("claim")
    };
    assert_eq!(claimed.len(), 20);
    let limit = RateLimitConfig {
        max_notifications: 3,
        window: Duration::from_secs(3600),
    };
    let barrier = Arc::new(tokio::sync::Barrier::new(20));
    let admitted = join_all(claimed.into_iter().map(|claim| {
        let pool = db.new_pool(1);
        let barrier = barrier.clone();
        tokio::spawn(async move {
            let mut connection = pool.get().await.expect("db");
            let tx = connection.transaction().await.expect("begin");
            barrier.wait().await;
            let reservations =
                ratelimit::lock_and_read(&tx, &[claim.recipient.as_str()], limit.window)
                    .await
                    .expect("lock and read");
            let admission = ratelimit::admit(&limit, reservations, &[&claim]);
            ratelimit::reserve(&tx, &admission.reserve)
                .await
                .expect("reserve");
            // Hold the transaction open a moment: without the recipient lock every
            // admission would overlap here and all twenty would see free slots.
            tokio::time::sleep(Duration::from_millis(30)).await;
            let count = admission.admitted.len();
            tx.commit().await.expect("commit");
            count
        })
    }))
    .await;
    let admitted: usize = admitted.into_iter().map(|r| r.expect("task")).sum();
    assert_eq!(admitted, 3);
    let reservations = db
        .pool
        .get()
        .await
        .expect("db")
        .query_one("SELECT count(*) FROM rate_limit_reservations", &[])
        .await
        .expect("count");
    assert_eq!(reservations.get::<_, i64>(0), 3);
}

#[tokio::test]
async fn ten_sweepers_send_five_of_forty_and_refund_the_rest() {
    let db = TestDb::new().await;
    factory::create_many(&db.pool, 40, |_| factory::Spec::to("popular@example.com")).await;
    let provider = Arc::new(Scripted::delivering());
    let sweepers: Vec<Sweeper> = (0..10)
        .map(|_| {
            limited(
                &db.new_pool(2),
                provider.clone(),
                5,
                Duration::from_secs(3600),
                4,
            )
        })
        .collect();
    join_all(sweepers.iter().map(|s| async move {
        while s
            .sweep_once(&StopSignal::never())
            .await
            .expect("sweep")
            .claimed
            > 0
        {}
    }))
    .await;
    assert_eq!(provider.calls().len(), 5);
    assert_eq!(factory::count_where(&db.pool, "status = 'SENT'").await, 5);
    assert_eq!(
        factory::count_where(&db.pool, "status = 'PENDING' AND attempt_count = 0").await,
        35
    );
}

#[tokio::test]
async fn continuous_sweepers_never_admit_more_than_the_limit_in_any_window() {
    let db = TestDb::new().await;
    // Every admission is logged with its database time, including re-admissions.
    db.pool
        .get()
        .await
        .expect("db")
        .batch_execute(
            "CREATE TABLE admission_log (notification_id uuid, reserved_at timestamptz);
             CREATE FUNCTION log_admission() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN INSERT INTO admission_log VALUES (NEW.notification_id, NEW.reserved_at); RETURN NEW; END $$;
             CREATE TRIGGER log_admission AFTER INSERT OR UPDATE ON rate_limit_reservations
             FOR EACH ROW EXECUTE FUNCTION log_admission();",
        )
        .await
        .expect("admission log");
    factory::create_many(&db.pool, 12, |_| factory::Spec::to("steady@example.com")).await;
    let provider = Arc::new(Scripted::delivering());
    let (handle, stop) = StopSignal::new();
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let sweeper = Arc::new(limited(
                &db.new_pool(2),
                provider.clone(),
                3,
                Duration::from_secs(2),
                2,
            ));
            let (_sender, wake) = Wake::none();
            let stop = stop.clone();
            tokio::spawn(async move {
                let _keep_wake_open = _sender;
                sweeper::run(sweeper, wake, stop).await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(5500)).await;
    handle.stop();
    for run in runs {
        run.await.expect("sweeper run");
    }
    let admissions: Vec<f64> = db
        .pool
        .get()
        .await
        .expect("db")
        .query("SELECT extract(epoch FROM reserved_at)::float8 FROM admission_log ORDER BY reserved_at", &[])
        .await
        .expect("log")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        admissions.len() >= 6,
        "the limit should admit about 3 per 2 s: {admissions:?}"
    );
    for (i, start) in admissions.iter().enumerate() {
        let inside = admissions[i..]
            .iter()
            .take_while(|t| **t < start + 2.0)
            .count();
        assert!(
            inside <= 3,
            "{inside} admissions within 2 s of {start}: {admissions:?}"
        );
    }
    assert_eq!(provider.calls().len(), admissions.len());
}
