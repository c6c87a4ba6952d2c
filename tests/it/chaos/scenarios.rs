//! The three scenarios.

use std::time::{Duration, Instant};

use notify_local::embedded::{EmbeddedPostgres, default_base_dir};
use notify_shared::db;
use notify_tests::db::execute;
use notify_tests::process::{Fleet, Worker};
use notify_tests::receiver::Receiver;
use notify_tests::{TestDb, factory};

use super::{
    OPEN, SERIAL, count, delivery_figures, log_figures, unused_port, wait_for, webhook_figures,
    worker_env,
};

#[tokio::test]
#[ignore = "chaos suite: cargo test -p notify-tests --test it -- --ignored chaos --nocapture"]
async fn sigkill_a_random_worker_every_two_seconds_during_a_20000_notification_drain() {
    let _serial = SERIAL.lock().await;
    const TOTAL: i64 = 20_000;
    const WORKERS: usize = 4;
    let db = TestDb::new().await;
    factory::create_due_bulk(&db.pool, TOTAL).await;
    let receiver = Receiver::accepting_on(0).await;
    let mut env = worker_env(Some(&receiver.url));
    // Two lanes of 10 per worker: small batches make the drain last about 20 s on two
    // cores, long enough for ten kills, each of which strands up to 20 claims.
    env.extend([
        ("WORKER_CONCURRENCY", "2".to_string()),
        ("WORKER_BATCH_SIZE", "10".to_string()),
    ]);
    let mut fleet = Fleet::new(&db.url, env);
    for _ in 0..WORKERS {
        fleet.spawn();
    }

    let started = Instant::now();
    let deadline = started + Duration::from_secs(150);
    let mut kills = 0u32;
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        if count(&db.pool, OPEN).await == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the drain did not finish within 150 s ({kills} kills)\n{}",
            fleet.tails()
        );
        fleet.assert_all_running();
        fleet.kill_random();
        kills += 1;
        fleet.spawn();
    }
    let drained = started.elapsed();

    // Events a killed drainer held come back when their lease expires (about 37 s here).
    wait_for(
        &db.pool,
        "SELECT count(*) FROM webhook_events WHERE dispatch_state <> 'DELIVERED'",
        Duration::from_secs(120),
        |left| left == 0,
        || fleet.tails(),
    )
    .await;
    let webhooks_done = started.elapsed();
    fleet.assert_all_running();
    fleet.stop_all(Duration::from_secs(30)).await;

    let figures = delivery_figures(&db.pool, TOTAL).await;
    let seen = receiver.deliveries_per_event();
    let (events, events_lost, redelivered) = webhook_figures(&db.pool, &seen).await;
    let logs = log_figures(&fleet);
    let panics = logs.panics.len();
    eprintln!(
        "chaos: sigkill: {TOTAL} notifications, {WORKERS} workers, {kills} kills survived, \
         {} lost, {} duplicate deliveries ({} resends answered \"already delivered\"), \
         {} sent, {} dead-lettered, {events} webhook events delivered, {events_lost} lost, \
         {redelivered} redelivered, {panics} panics; drained in {:.1} s, webhooks done in {:.1} s",
        figures.lost,
        figures.duplicates,
        figures.resends,
        figures.sent,
        figures.dead_lettered,
        drained.as_secs_f64(),
        webhooks_done.as_secs_f64(),
    );
    assert!(kills >= 3, "only {kills} kills landed during the drain");
    figures.assert_sound();
    logs.assert_clean();
    assert_eq!(figures.sent + figures.dead_lettered, TOTAL);
    assert_eq!(events, TOTAL, "one delivered event per final notification");
    assert_eq!(events_lost, 0);
    drop(receiver);
}

#[tokio::test]
#[ignore = "chaos suite: cargo test -p notify-tests --test it -- --ignored chaos --nocapture"]
async fn restart_postgres_twice_during_a_drain_and_the_workers_reconnect_by_themselves() {
    let _serial = SERIAL.lock().await;
    const TOTAL: i64 = 5_000;
    const WORKERS: usize = 2;
    // A private server: the restarts must not touch anything else.
    let mut server = tokio::task::spawn_blocking(|| EmbeddedPostgres::start(&default_base_dir()))
        .await
        .expect("start task")
        .expect("start a private PostgreSQL");
    let url = server.url();
    db::migrate(&url).await.expect("migrate");
    let pool = db::create_pool(&url, 2).expect("pool");
    factory::create_due_bulk(&pool, TOTAL).await;
    // The simulated provider fails 10 % of calls, and a delivery caught by a restart costs
    // an attempt too: with six attempts, one of 5,000 notifications now and then uses them
    // all and is dead-lettered, as it should be. This test is about the restarts, so the
    // retry budget is made large enough not to run out.
    execute(&pool, "UPDATE notifications SET max_attempts = 20", &[]).await;

    let mut fleet = Fleet::new(&url, worker_env(None));
    let pids: Vec<i32> = (0..WORKERS).map(|_| fleet.spawn()).collect();
    let started = Instant::now();
    let sent = "SELECT count(*) FROM notifications WHERE status = 'SENT'";
    let mut sent_at_restarts = Vec::new();
    let mut outage = Duration::ZERO;
    // First a quick restart, then an outage longer than the claim lease.
    for (share, down_for) in [(0.2, Duration::ZERO), (0.6, Duration::from_secs(5))] {
        let reached = wait_for(
            &pool,
            sent,
            Duration::from_secs(120),
            |n| n as f64 >= share * TOTAL as f64,
            || fleet.tails(),
        )
        .await;
        if reached == TOTAL {
            break;
        }
        let restart_started = Instant::now();
        server = tokio::task::spawn_blocking(move || {
            server.restart(down_for).expect("restart PostgreSQL");
            server
        })
        .await
        .expect("restart task");
        outage += restart_started.elapsed();
        sent_at_restarts.push(reached);
    }
    let restarts = sent_at_restarts.len();

    wait_for(
        &pool,
        OPEN,
        Duration::from_secs(120),
        |open| open == 0,
        || fleet.tails(),
    )
    .await;
    let drained = started.elapsed();
    // The same processes did the rest: none exited, none was added.
    fleet.assert_all_running();
    let running: Vec<i32> = fleet.running.iter().map(Worker::pid).collect();
    assert_eq!(running, pids);
    let step_errors = fleet.lines_containing("sweep step failed").len();
    fleet.stop_all(Duration::from_secs(30)).await;

    let figures = delivery_figures(&pool, TOTAL).await;
    let logs = log_figures(&fleet);
    let panics = logs.panics.len();
    eprintln!(
        "chaos: postgres restart: {TOTAL} notifications, {WORKERS} workers, {restarts} restarts \
         survived (down {:.1} s in all; {step_errors} failed steps logged), {} lost, \
         {} duplicate deliveries ({} resends answered \"already delivered\"), {} sent \
         ({sent_at_restarts:?} when it restarted), {} dead-lettered, {panics} panics; \
         drained in {:.1} s",
        outage.as_secs_f64(),
        figures.lost,
        figures.duplicates,
        figures.resends,
        figures.sent,
        figures.dead_lettered,
        drained.as_secs_f64(),
    );
    assert_eq!(restarts, 2, "the drain ended before the restarts");
    figures.assert_sound();
    logs.assert_clean();
    assert_eq!(figures.sent, TOTAL, "every notification SENT");
    pool.close();
    drop(server);
}

#[tokio::test]
#[ignore = "chaos suite: cargo test -p notify-tests --test it -- --ignored chaos --nocapture"]
async fn a_webhook_receiver_down_for_the_whole_drain_gets_every_event_once_it_is_back() {
    let _serial = SERIAL.lock().await;
    const TOTAL: i64 = 3_000;
    const WORKERS: usize = 2;
    let db = TestDb::new().await;
    factory::create_due_bulk(&db.pool, TOTAL).await;
    let port = unused_port();
    let mut env = worker_env(Some(&format!("http://127.0.0.1:{port}/hooks")));
    // Attempts enough, with backoff capped at 2 s, to outlast the outage (about 15 s) with
    // a wide margin: 50 attempts span more than a minute.
    env.extend([
        ("WEBHOOK_MAX_ATTEMPTS", "50".to_string()),
        ("BASE_RETRY_DELAY_MS", "200".to_string()),
        ("MAX_RETRY_DELAY_MS", "2000".to_string()),
    ]);
    let mut fleet = Fleet::new(&db.url, env);
    for _ in 0..WORKERS {
        fleet.spawn();
    }
    let started = Instant::now();

    wait_for(
        &db.pool,
        OPEN,
        Duration::from_secs(120),
        |open| open == 0,
        || fleet.tails(),
    )
    .await;
    let drained = started.elapsed();
    // Every event has been tried, and refused, at least twice while the receiver was down.
    wait_for(
        &db.pool,
        "SELECT count(*) FROM webhook_events WHERE dispatch_attempts < 2",
        Duration::from_secs(60),
        |untried| untried == 0,
        || fleet.tails(),
    )
    .await;
    let events = count(&db.pool, "SELECT count(*) FROM webhook_events").await;
    let delivered_while_down = count(
        &db.pool,
        "SELECT count(*) FROM webhook_events WHERE dispatch_state = 'DELIVERED'",
    )
    .await;
    assert_eq!(delivered_while_down, 0, "nothing listens on port {port}");
    // Down for the whole drain, and at least 15 s, so events go through several retries.
    tokio::time::sleep(Duration::from_secs(15).saturating_sub(started.elapsed())).await;
    let down_for = started.elapsed();

    let receiver = Receiver::accepting_on(port).await;
    wait_for(
        &db.pool,
        "SELECT count(*) FROM webhook_events WHERE dispatch_state <> 'DELIVERED'",
        Duration::from_secs(60),
        |left| left == 0,
        || fleet.tails(),
    )
    .await;
    let recovered_in = started.elapsed() - down_for;
    fleet.assert_all_running();
    fleet.stop_all(Duration::from_secs(30)).await;

    let figures = delivery_figures(&db.pool, TOTAL).await;
    let seen = receiver.deliveries_per_event();
    let (delivered, events_lost, redelivered) = webhook_figures(&db.pool, &seen).await;
    let given_up = count(
        &db.pool,
        "SELECT count(*) FROM webhook_events WHERE dispatch_state = 'GIVEN_UP'",
    )
    .await;
    let max_attempts = count(
        &db.pool,
        "SELECT max(dispatch_attempts)::int8 FROM webhook_events",
    )
    .await;
    let logs = log_figures(&fleet);
    let panics = logs.panics.len();
    eprintln!(
        "chaos: webhook outage: {TOTAL} notifications ({} sent, {} dead-lettered, {} lost), \
         receiver down {:.1} s (drain done in {:.1} s), {events} events, {delivered} delivered \
         {:.1} s after it came back, {events_lost} lost, {given_up} given up, {redelivered} \
         redelivered, up to {max_attempts} attempts per event, {panics} panics",
        figures.sent,
        figures.dead_lettered,
        figures.lost,
        down_for.as_secs_f64(),
        drained.as_secs_f64(),
        recovered_in.as_secs_f64(),
    );
    figures.assert_sound();
    logs.assert_clean();
    assert_eq!(events, TOTAL);
    assert_eq!(delivered, TOTAL);
    assert_eq!(events_lost, 0);
    assert_eq!(given_up, 0);
    drop(receiver);
}
