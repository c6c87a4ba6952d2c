//! The sweeper loop and its gate: wake-ups by LISTEN/NOTIFY, a stop in the middle of a
//! batch, and the bound on deliveries in flight.

use std::sync::Arc;
use std::time::{Duration, Instant};

use notify_shared::config::MockProviderConfig;
use notify_shared::notification::{Priority, Status};
use notify_shared::provider::simulated::SimulatedProvider;
use notify_shared::queue::Due;
use notify_shared::stop::StopSignal;
use notify_shared::sweeper;
use notify_shared::wake::{self, Wake};
use notify_shared::{db, queue};
use notify_tests::TestDb;
use notify_tests::doubles::{Fixed, Slow};
use notify_tests::factory::{self, Spec};
use notify_tests::worker::{self, WorkerConfigBuilder, simulated, worker_config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inserted_due_notification_wakes_an_idle_sweeper_long_before_its_next_poll() {
    let db = TestDb::new().await;
    let (handle, stop) = StopSignal::new();
    let wake = wake::listen(
        db::Database::from_url(&db.url).expect("url"),
        queue::WAKE_CHANNEL,
        stop.clone(),
    );
    // The listener bumps once when its LISTEN is in place.
    let mut connected = wake.clone();
    tokio::time::timeout(Duration::from_secs(10), connected.notified())
        .await
        .expect("the listener connects");

    let sweeper = worker::sweeper(&db.pool, Arc::new(simulated(db.pool.clone())))
        .random(Fixed(0.0))
        .config(
            worker_config()
                .concurrency(1)
                .poll_interval(Duration::from_secs(10)),
        )
        .build();
    let running = tokio::spawn(sweeper::run(Arc::new(sweeper), wake, stop.clone()));
    // Let the loop finish its first steps and settle into waiting. This can only make the
    // test stricter: if the insert were picked up by a start-up step, it would pass anyway.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let inserted_at = Instant::now();
    // Due now as intake stores it: the default spec's past due time is written by a second
    // statement after the insert, which a claim woken by the insert could find locked.
    let n = factory::create(
        &db.pool,
        Spec {
            due: Due::AfterSeconds(0),
            ..Spec::default()
        },
    )
    .await;
    let mut status = Status::Pending;
    while inserted_at.elapsed() < Duration::from_secs(1) {
        status = factory::load(&db.pool, n.id).await.status;
        if status == Status::Sent {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let waited = inserted_at.elapsed();
    handle.stop();
    let total = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the loop stops")
        .expect("the loop ends cleanly");
    assert_eq!(status, Status::Sent, "not sent {waited:?} after insertion");
    assert_eq!(total.sent, 1, "{total:?}");
}

/// With one place at the gate, the batch's deliveries go one after the other; a stop while
/// the first is at the provider hands the others back untried at once (PENDING, due now,
/// their attempt refunded, no event), and lets the first finish and be recorded.
#[tokio::test]
async fn a_stop_in_the_middle_of_a_batch_records_what_started_and_releases_the_rest_untried() {
    let db = TestDb::new().await;
    let created = factory::create_many(&db.pool, 3, |_| Spec::default()).await;
    let call = Duration::from_secs(2);
    let provider = Arc::new(Slow::new(call));
    let sweeper = worker::sweeper(&db.pool, provider.clone())
        .config(worker_config().concurrency(1))
        .build();

    let (handle, stop) = StopSignal::new();
    let step = tokio::spawn(async move { sweeper.sweep_once(&stop).await });
    provider.wait_started(1).await;
    let stopped_at = Instant::now();
    handle.stop();
    // The two that never started go back while the first is still at the provider.
    loop {
        let back =
            factory::count_where(&db.pool, "status = 'PENDING' AND claim_token IS NULL").await;
        if back == 2 {
            break;
        }
        assert!(
            stopped_at.elapsed() < call / 2,
            "the untried claims were not released while the call ran"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        factory::count_where(&db.pool, "status = 'PROCESSING'").await,
        1
    );
    let outcome = tokio::time::timeout(Duration::from_secs(10), step)
        .await
        .expect("the step ends in time")
        .expect("task")
        .expect("step");
    assert_eq!(
        (outcome.claimed, outcome.sent, outcome.released),
        (3, 1, 2),
        "{outcome:?}"
    );
    assert_eq!(provider.started(), 1, "nothing started after the stop");

    let mut states = Vec::new();
    for n in &created {
        let stored = factory::load(&db.pool, n.id).await;
        states.push((stored.status, stored.attempt_count));
    }
    states.sort_by_key(|(status, _)| status.as_str());
    assert_eq!(
        states,
        [
            (Status::Pending, 0),
            (Status::Pending, 0),
            (Status::Sent, 1)
        ]
    );
    assert_eq!(
        factory::count_where(
            &db.pool,
            "status = 'PENDING' AND next_attempt_at <= now() AND claim_token IS NULL
             AND lease_expires_at IS NULL"
        )
        .await,
        2,
        "released claims are due now and unclaimed"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM webhook_events").await,
        1,
        "one event, for the one sent"
    );
}

/// The simulated provider's calls each end when it takes the message: with one place at
/// the gate the three calls of a batch follow one another, and none is said to have lasted
/// until the batch's last one ended.
#[tokio::test]
async fn each_simulated_call_ends_when_its_message_is_taken() {
    let db = TestDb::new().await;
    factory::create_many(&db.pool, 3, |_| Spec::default()).await;
    let latency = Duration::from_millis(200);
    let provider = SimulatedProvider::new(
        db.pool.clone(),
        MockProviderConfig {
            failure_rate: 0.0,
            latency,
        },
        Arc::new(Fixed(0.0)),
    );
    let sweeper = worker::sweeper(&db.pool, Arc::new(provider))
        .config(worker_config().concurrency(1))
        .build();
    let outcome = sweeper
        .sweep_once(&StopSignal::never())
        .await
        .expect("step");
    assert_eq!(outcome.sent, 3, "{outcome:?}");
    let conn = db.pool.get().await.expect("connection");
    let spans: Vec<f64> = conn
        .query(
            "SELECT extract(epoch FROM finished_at - started_at)::float8 FROM delivery_attempts
             ORDER BY started_at",
            &[],
        )
        .await
        .expect("attempts")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(spans.len(), 3);
    for span in spans {
        assert!(
            (0.19..0.39).contains(&span),
            "a call of {latency:?} lasted {span} s"
        );
    }
}

/// Runs the sweeper loop with `config` over `count` due notifications and a provider
/// that takes 50 ms a call, until every one is SENT; returns the loop's total and the
/// provider (which counted its calls and the most in flight at once).
async fn drain_through_a_slow_provider(
    config: WorkerConfigBuilder,
    count: i64,
) -> (sweeper::SweepOutcome, Arc<Slow>) {
    let db = TestDb::new().await;
    factory::create_due_bulk(&db.pool, count).await;
    let provider = Arc::new(Slow::new(Duration::from_millis(50)));
    let sweeper = worker::sweeper(&db.pool, provider.clone())
        .config(config.poll_interval(Duration::from_millis(20)))
        .build();
    let (handle, stop) = StopSignal::new();
    let (_keep_open, wake) = Wake::none();
    let running = tokio::spawn(sweeper::run(Arc::new(sweeper), wake, stop));

    let deadline = Instant::now() + Duration::from_secs(20);
    while factory::count_where(&db.pool, "status = 'SENT'").await < count {
        assert!(Instant::now() < deadline, "not drained in time");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    handle.stop();
    let total = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the loop stops")
        .expect("the loop ends cleanly");
    (total, provider)
}

/// `WORKER_CONCURRENCY` bounds the deliveries in flight in the process, however many lanes
/// claim batches: three lanes of batches of five never have more than three deliveries at
/// the provider, and do reach three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_more_deliveries_are_in_flight_than_the_worker_concurrency_across_all_lanes() {
    let config = worker_config().concurrency(3).batch_size(5);
    let (total, provider) = drain_through_a_slow_provider(config, 40).await;
    assert_eq!((total.sent, total.released), (40, 0), "{total:?}");
    assert_eq!(provider.started(), 40);
    assert_eq!(provider.peak(), 3, "deliveries in flight at most");
}

/// `WORKER_LANES` bounds the batches between claim and record: two lanes of batches of one
/// never have more than two deliveries at the provider, though ten places and nine spare
/// connections would allow nine, and do reach two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_more_batches_are_in_flight_than_the_worker_lanes() {
    let config = worker_config().concurrency(10).lanes(2).batch_size(1);
    let (total, provider) = drain_through_a_slow_provider(config, 20).await;
    assert_eq!((total.sent, total.released), (20, 0), "{total:?}");
    assert_eq!(provider.peak(), 2, "deliveries in flight at most");
}

/// A backlog of bulk work waits in the queue, not in the sweeper: the process holds no
/// more bulk notifications than twice its bulk places (six of eight here), so a
/// transactional notification that arrives behind 400 of them is claimed by the next
/// claim and sent before nearly all of the backlog. (Claiming whole batches of bulk work,
/// every lane would hold a hundred, and the transactional one would wait for a lane to
/// get through its hundred.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_backlog_waits_in_the_queue_and_a_transactional_notification_passes_it() {
    let db = TestDb::new().await;
    factory::create_many(&db.pool, 400, |_| Spec::default().bulk()).await;
    // Deliveries much slower than recording a batch (see the first assertion).
    let provider = Arc::new(Slow::new(Duration::from_millis(200)));
    let sweeper = worker::sweeper(&db.pool, provider.clone())
        .config(
            worker_config()
                .concurrency(8)
                .batch_size(100)
                .poll_interval(Duration::from_secs(10)),
        )
        .build();
    let (handle, stop) = StopSignal::new();
    let (_keep_open, wake) = Wake::none();
    let running = tokio::spawn(sweeper::run(Arc::new(sweeper), wake, stop));
    provider.wait_started(6).await;

    // What the sweeper holds, sampled while the backlog drains.
    let sampling = {
        let pool = db.pool.clone();
        tokio::spawn(async move {
            let mut peak = 0i64;
            for _ in 0..50 {
                peak = peak.max(factory::count_where(&pool, "status = 'PROCESSING'").await);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            peak
        })
    };
    let urgent = factory::create(
        &db.pool,
        Spec {
            due: Due::AfterSeconds(0),
            ..Spec::default()
        },
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while factory::load(&db.pool, urgent.id).await.status != Status::Sent {
        assert!(
            Instant::now() < deadline,
            "the transactional one was not sent"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let peak = sampling.await.expect("sampler");
    handle.stop();
    running.abort();

    // A ticket is free again when its delivery ends, while the notification stays
    // PROCESSING until its batch is recorded, well before the next delivery on that
    // ticket ends: each of the 12 tickets counts at most twice.
    assert!(
        peak <= 2 * 12 + 1,
        "at most 24 bulk and the transactional one held at once, saw {peak}"
    );
    let bulk_sent_first = factory::count_where(
        &db.pool,
        &format!(
            "class = 'BULK' AND sent_at <= (SELECT sent_at FROM notifications WHERE id = '{}')",
            urgent.id
        ),
    )
    .await;
    assert!(
        bulk_sent_first <= 60,
        "{bulk_sent_first} of the 400 bulk were sent before the transactional one"
    );
}

/// A process holds only what its places can start within about a second: with four
/// places and 100 ms a call, one round of places and a second's worth of calls (44), not
/// a batch of 40 for each of its lanes. What it holds is started in the order claimed, so
/// a HIGH notification that arrives behind a backlog waits for that much, not for every
/// lane's batch. Without the budget the process held 80 once its first batch ended and
/// more after, and the HIGH one waited behind them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_holds_what_it_can_start_soon_so_a_later_high_notification_waits_little() {
    let db = TestDb::new().await;
    let count = 200;
    factory::create_many(&db.pool, count, |_| Spec::default()).await;
    let provider = Arc::new(Slow::new(Duration::from_millis(100)));
    let sweeper = worker::sweeper(&db.pool, provider.clone())
        .config(
            worker_config()
                .concurrency(4)
                .batch_size(40)
                .poll_interval(Duration::from_millis(20)),
        )
        .build();
    let (handle, stop) = StopSignal::new();
    let (_keep_open, wake) = Wake::none();
    let running = tokio::spawn(sweeper::run(Arc::new(sweeper), wake, stop));
    // What the process holds past its first batch.
    provider.wait_started(1).await;
    let mut peak = 0;
    for _ in 0..75 {
        peak = peak.max(factory::count_where(&db.pool, "status = 'PROCESSING'").await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let urgent = factory::create(&db.pool, Spec::default().priority(Priority::High)).await;
    let arrived = Instant::now();
    while factory::load(&db.pool, urgent.id).await.status != Status::Sent {
        assert!(
            arrived.elapsed() < Duration::from_secs(10),
            "the HIGH one was not sent"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let waited = arrived.elapsed();
    let backlog_left = factory::count_where(&db.pool, "status <> 'SENT'").await;
    handle.stop();
    running.abort();
    assert!(peak <= 44, "the process held {peak} claims");
    // 44 held at 40 calls a second, and the HIGH one's own call and records.
    assert!(
        waited < Duration::from_millis(1_800),
        "the HIGH one waited {waited:?}"
    );
    assert!(backlog_left > 0, "the backlog was not still there");
}

/// A dead process's expired claim is recovered while every lane of the living one is busy
/// with a long batch: housekeeping runs beside the lanes, not only when a step starts.
/// Here the one lane is 6 s into 20 calls of 300 ms; before, the claim waited for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_claim_is_recovered_while_every_lane_is_busy_with_a_long_batch() {
    let db = TestDb::new().await;
    factory::create_many(&db.pool, 20, |_| Spec::default()).await;
    let provider = Arc::new(Slow::new(Duration::from_millis(300)));
    let sweeper = worker::sweeper(&db.pool, provider.clone())
        .config(
            worker_config()
                .concurrency(1)
                .batch_size(20)
                .poll_interval(Duration::from_millis(20)),
        )
        .build();
    let (handle, stop) = StopSignal::new();
    let (_keep_open, wake) = Wake::none();
    let running = tokio::spawn(sweeper::run(Arc::new(sweeper), wake, stop));
    provider.wait_started(1).await;

    // A process that claimed one notification and died: its lease ran out at once.
    let orphan = factory::create(&db.pool, Spec::default()).await;
    let dead = super::claim(&db.pool, "dead", 1).await;
    assert_eq!(dead.len(), 1, "the orphan was claimed");
    assert_eq!(dead[0].id, orphan.id);
    let db_conn = db.pool.get().await.expect("connection");
    db_conn
        .execute(
            "UPDATE notifications SET lease_expires_at = now() - interval '1 second'
             WHERE id = $1",
            &[&orphan.id],
        )
        .await
        .expect("expire the orphan's lease");
    let expired = Instant::now();
    while factory::load(&db.pool, orphan.id).await.status == Status::Processing {
        assert!(
            expired.elapsed() < Duration::from_secs(5),
            "the expired claim was not recovered"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let calls_started = provider.started();
    handle.stop();
    running.abort();
    assert!(
        calls_started < 20,
        "recovered only after the busy lane's batch ({calls_started} calls started)"
    );
}

/// A batch that takes longer than its lease keeps its claims. One sweeper claims 40
/// notifications in one batch; its provider takes 200 ms a call and it has two places, so
/// the batch takes 4 s, four of its 1 s leases (500 ms provider limit). A second sweeper
/// beside it recovers expired claims on every step: were the first one's leases not
/// renewed while it delivers, the second would take its claims over and call the provider
/// again. Every notification is sent by exactly one call, on its first attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_slower_than_its_lease_keeps_its_claims_and_calls_the_provider_once_each() {
    let db = TestDb::new().await;
    let count = 40;
    factory::create_due_bulk(&db.pool, count).await;
    let provider = Arc::new(Slow::new(Duration::from_millis(200)));
    let config = worker_config()
        .concurrency(2)
        .batch_size(count)
        .visibility_timeout(Duration::from_secs(1))
        .provider_timeout(Duration::from_millis(500))
        .poll_interval(Duration::from_millis(20));
    let (handle, stop) = StopSignal::new();
    let start = |pool: &deadpool_postgres::Pool| {
        let sweeper = worker::sweeper(pool, provider.clone())
            .config(config.clone())
            .recover_on_every_step()
            .build();
        let (_keep_open, wake) = Wake::none();
        tokio::spawn(sweeper::run(Arc::new(sweeper), wake, stop.clone()))
    };
    let holding = start(&db.pool);
    provider.wait_started(1).await;
    let recovering = start(&db.pool);

    let deadline = Instant::now() + Duration::from_secs(30);
    while factory::count_where(&db.pool, "status IN ('SENT', 'DEAD_LETTERED')").await < count {
        assert!(Instant::now() < deadline, "not drained in time");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    handle.stop();
    let mut total = sweeper::SweepOutcome::default();
    for sweeper in [holding, recovering] {
        total += tokio::time::timeout(Duration::from_secs(10), sweeper)
            .await
            .expect("the loop stops")
            .expect("the loop ends cleanly");
    }
    assert_eq!(
        factory::count_where(&db.pool, "status = 'SENT' AND attempt_count = 1").await,
        count,
        "{total:?}"
    );
    assert_eq!(provider.started(), count as usize, "provider calls");
    assert_eq!(
        (total.sent, total.lost, total.recovered),
        (count as u64, 0, 0),
        "no claim expired: {total:?}"
    );
}

/// A claim taken over by another sweeper while its batch is out is not called, and is
/// counted as lost. One sweeper claims 10 notifications in one batch and sends them one at a
/// time, 200 ms each; once the first call is out, every claim is taken over (a new token,
/// a lease of an hour). The next renewal finds them gone: the calls not yet started never
/// start, and each of them is counted in `lost`, not silently dropped. The calls already
/// out end, but their results are fenced out of the record: they are lost too, not sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_taken_over_while_their_batch_is_out_are_not_called_and_are_counted_lost() {
    let db = TestDb::new().await;
    let count = 10;
    factory::create_due_bulk(&db.pool, count).await;
    let provider = Arc::new(Slow::new(Duration::from_millis(200)));
    let config = worker_config()
        .concurrency(1)
        .batch_size(count)
        .visibility_timeout(Duration::from_secs(1))
        .provider_timeout(Duration::from_millis(500))
        .poll_interval(Duration::from_millis(20));
    let sweeper = worker::sweeper(&db.pool, provider.clone())
        .config(config)
        .build();
    let (handle, stop) = StopSignal::new();
    let (_keep_open, wake) = Wake::none();
    let running = tokio::spawn(sweeper::run(Arc::new(sweeper), wake, stop));
    provider.wait_started(1).await;
    let taken = db
        .pool
        .get()
        .await
        .expect("connection")
        .execute(
            "UPDATE notifications
             SET claim_token = gen_random_uuid(), claimed_by = 'another sweeper',
                 lease_expires_at = now() + interval '1 hour'
             WHERE status = 'PROCESSING'",
            &[],
        )
        .await
        .expect("take the claims over");
    assert!(taken > 0, "nothing was held");
    // Long enough for the whole batch, had its calls gone on.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    handle.stop();
    let total = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the loop stops")
        .expect("the loop ends cleanly");
    let called = provider.started() as u64;
    assert!(called < count as u64, "the calls went on: {called}");
    assert!(called > 0);
    // Only what the database holds as SENT counts as sent; every other claim is lost,
    // whether its call never started or its result was fenced out.
    let sent = factory::count_where(&db.pool, "status = 'SENT'").await as u64;
    assert_eq!(total.sent, sent, "{total:?}");
    assert_eq!(total.lost, count as u64 - sent, "{total:?}");
    assert_eq!(total.released, 0, "{total:?}");
}

/// A long batch of a per-message provider is recorded in parts as its calls end, so a
/// crash repeats only the calls not yet recorded, not the whole batch: one place and
/// 100 ms a call make a batch of 20 last 2 s. The sweeper is killed (its task dropped) as
/// soon as five are SENT, with the batch still out; a second sweeper recovers the rest
/// and calls the provider once for each of them, and for none recorded before the crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_batch_is_recorded_as_its_calls_end_and_a_crash_repeats_only_the_unrecorded() {
    let db = TestDb::new().await;
    let count = 20;
    factory::create_due_bulk(&db.pool, count).await;
    let provider = Arc::new(Slow::new(Duration::from_millis(100)));
    let config = worker_config().concurrency(1).batch_size(count);
    let crashing = worker::sweeper(&db.pool, provider.clone())
        .config(config.clone())
        .build();
    let (_handle, stop) = StopSignal::new();
    let (_keep_open, wake) = Wake::none();
    let running = tokio::spawn(sweeper::run(Arc::new(crashing), wake, stop));
    let deadline = Instant::now() + Duration::from_secs(10);
    while factory::count_where(&db.pool, "status = 'SENT'").await < 5 {
        assert!(
            Instant::now() < deadline,
            "nothing recorded while the batch is out"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.abort();
    let _ = running.await;
    let sent = factory::count_where(&db.pool, "status = 'SENT'").await;
    let held = factory::count_where(&db.pool, "status = 'PROCESSING'").await;
    let calls_before = provider.started();
    assert!(
        held > 0,
        "the batch was still out: {sent} sent, {held} held"
    );
    assert_eq!(sent + held, count);

    super::expire_leases(&db.pool).await;
    let recovering = worker::sweeper(&db.pool, provider.clone())
        .config(config)
        .recover_on_every_step()
        .build();
    worker::sweep_until_idle(&recovering).await;
    assert_eq!(
        factory::count_where(&db.pool, "status = 'SENT'").await,
        count
    );
    assert_eq!(
        provider.started(),
        calls_before + held as usize,
        "one more call for each claim not recorded, none for those recorded"
    );
}
