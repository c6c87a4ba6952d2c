//! Chaos on real `notify-local` worker processes. Each scenario is bounded in time, runs
//! alone (they share the machine), writes every process's stderr to a file, and SIGKILLs
//! whatever it started when it ends, pass or fail.
//!
//! - SIGKILL a random worker every 2 s during a 20,000-notification drain, starting a
//!   replacement each time, with a flaky provider and a webhook receiver.
//! - Restart PostgreSQL (a private server) twice during a drain, once at once and once
//!   after 5 s down.
//! - Keep the webhook receiver down for a whole drain, then bring it back.
//!
//! Each prints one `chaos:` line with its figures and asserts on them: nothing lost,
//! nothing delivered twice, every webhook event delivered, no panic. They take about a
//! minute and a half together, so `cargo test` skips them; run them with
//! `cargo test --test chaos -- --ignored --nocapture` (docs/RELIABILITY.md).

mod common;

use std::collections::HashMap;
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use deadpool_postgres::Pool;
use notify_local::embedded::EmbeddedPostgres;
use notify_local::scratch;
use notify_shared::db;
use tempfile::TempDir;
use uuid::Uuid;

fn binary() -> std::path::PathBuf {
    notify_tests::notify_local_binary()
}

/// The scenarios share two cores with the database: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// ---------------------------------------------------------------------------------------
// Worker processes
// ---------------------------------------------------------------------------------------

struct Worker {
    child: Child,
    log: PathBuf,
}

impl Worker {
    fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid")
    }

    fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// Every worker a scenario started, and every log they wrote. Dropping it SIGKILLs the ones
/// still running and removes the logs.
struct Fleet {
    url: String,
    env: Vec<(&'static str, String)>,
    running: Vec<Worker>,
    logs: Vec<PathBuf>,
    dir: TempDir,
}

impl Fleet {
    fn new(url: &str, env: Vec<(&'static str, String)>) -> Fleet {
        let dir = tempfile::Builder::new()
            .prefix("notify-queue-chaos-")
            .tempdir()
            .expect("a folder for the logs");
        Fleet {
            url: url.to_string(),
            env,
            running: Vec::new(),
            logs: Vec::new(),
            dir,
        }
    }

    /// Starts one more worker-only `notify-local`.
    fn spawn(&mut self) -> i32 {
        let log = self
            .dir
            .path()
            .join(format!("worker-{}.log", self.logs.len()));
        let stderr = fs::File::create(&log).expect("create a log file");
        let child = Command::new(binary())
            .env("APP_ROLE", "worker")
            .env("DATABASE_URL", &self.url)
            .env("PORT", "0")
            .envs(self.env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start notify-local");
        self.logs.push(log.clone());
        let worker = Worker { child, log };
        let pid = worker.pid();
        self.running.push(worker);
        pid
    }

    /// Panics (with the log) if a worker exited although nobody killed it.
    fn assert_all_running(&mut self) {
        for worker in &mut self.running {
            if !worker.is_running() {
                panic!(
                    "worker {} exited by itself ({:?}):\n{}",
                    worker.pid(),
                    worker.child.try_wait(),
                    tail(&worker.log, 40)
                );
            }
        }
    }

    /// SIGKILLs one running worker, chosen at random, and confirms the kill took it.
    fn kill_random(&mut self) {
        let index = (Uuid::new_v4().as_u128() % self.running.len() as u128) as usize;
        let mut worker = self.running.swap_remove(index);
        worker.child.kill().expect("SIGKILL");
        let status = worker.child.wait().expect("reap");
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "worker {} ended otherwise: {status}",
            worker.pid()
        );
    }

    /// SIGTERMs every running worker and waits for each to exit; panics unless all exit 0.
    async fn stop_all(&mut self, limit: Duration) {
        for worker in &self.running {
            // SAFETY: kill(2) on our own, not yet reaped child.
            unsafe { libc::kill(worker.pid(), libc::SIGTERM) };
        }
        let deadline = Instant::now() + limit;
        for worker in &mut self.running {
            loop {
                match worker.child.try_wait().expect("try_wait") {
                    Some(status) => {
                        assert!(
                            status.success(),
                            "worker {} stopped with {status}:\n{}",
                            worker.child.id(),
                            tail(&worker.log, 40)
                        );
                        break;
                    }
                    None if Instant::now() > deadline => {
                        panic!("worker {} ignored SIGTERM for {limit:?}", worker.child.id())
                    }
                    None => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        }
        self.running.clear();
    }

    /// Lines of every log, of every worker ever started, that contain `needle`.
    fn lines_containing(&self, needle: &str) -> Vec<String> {
        self.logs
            .iter()
            .flat_map(|log| {
                fs::read_to_string(log)
                    .unwrap_or_default()
                    .lines()
                    .filter(|line| line.contains(needle))
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The end of each running worker's log, for failure messages.
    fn tails(&self) -> String {
        self.running
            .iter()
            .map(|w| format!("--- worker {}:\n{}", w.child.id(), tail(&w.log, 15)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// What every scenario checks in the logs: panics, and lines naming a recipient or an
    /// idempotency key (the bulk factory's both start with "bulk-").
    fn log_figures(&self) -> LogFigures {
        LogFigures {
            panics: self.lines_containing("panicked"),
            personal: self.lines_containing("bulk-"),
        }
    }
}

struct LogFigures {
    panics: Vec<String>,
    personal: Vec<String>,
}

impl LogFigures {
    fn assert_clean(&self) {
        assert!(
            self.panics.is_empty(),
            "panics:\n{}",
            self.panics.join("\n")
        );
        assert!(
            self.personal.is_empty(),
            "logs name recipients or keys:\n{}",
            self.personal[..self.personal.len().min(5)].join("\n")
        );
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for worker in &mut self.running {
            if worker.is_running() {
                let _ = worker.child.kill();
            }
            let _ = worker.child.wait();
        }
    }
}

fn tail(log: &Path, lines: usize) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The settings every scenario shares: a fast, flaky simulated provider, a 3 s claim lease
/// and short backoffs, so that crashes and retries resolve within seconds.
fn worker_env(webhook_url: Option<&str>) -> Vec<(&'static str, String)> {
    let mut env: Vec<(&'static str, String)> = [
        ("RUST_LOG", "info"),
        ("MOCK_LATENCY_MS", "5"),
        ("MOCK_FAILURE_RATE", "0.1"),
        ("JOB_VISIBILITY_TIMEOUT_SECONDS", "3"),
        ("PROVIDER_TIMEOUT_MS", "1000"),
        ("WORKER_POLL_INTERVAL_MS", "100"),
        ("WORKER_BATCH_SIZE", "100"),
        ("BASE_RETRY_DELAY_MS", "100"),
        ("MAX_RETRY_DELAY_MS", "1000"),
        ("WEBHOOK_TIMEOUT_MS", "1000"),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_string()))
    .collect();
    if let Some(url) = webhook_url {
        env.push(("WEBHOOK_URL", url.to_string()));
    }
    env
}

// ---------------------------------------------------------------------------------------
// The webhook receiver
// ---------------------------------------------------------------------------------------

/// How many times each eventId was received.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<HashMap<Uuid, u32>>>);

impl Seen {
    fn snapshot(&self) -> HashMap<Uuid, u32> {
        self.0.lock().expect("receiver state").clone()
    }
}

async fn receive(State(seen): State<Seen>, body: axum::body::Bytes) -> StatusCode {
    let event_id = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| {
            v["eventId"]
                .as_str()
                .and_then(|id| Uuid::try_parse(id).ok())
        });
    match event_id {
        Some(id) => {
            *seen
                .0
                .lock()
                .expect("receiver state")
                .entry(id)
                .or_default() += 1;
            StatusCode::OK
        }
        None => StatusCode::BAD_REQUEST,
    }
}

/// A webhook receiver on 127.0.0.1 that records every eventId it is sent.
struct Receiver {
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    async fn start(port: u16, seen: Seen) -> Receiver {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind the webhook receiver");
        let port = listener.local_addr().expect("receiver address").port();
        let app = Router::new().route("/hook", post(receive)).with_state(seen);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { port, task }
    }

    fn url(&self) -> String {
        hook_url(self.port)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn hook_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}/hook")
}

/// A port nothing listens on (yet): bound once by the OS's choice, then released.
fn unused_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

// ---------------------------------------------------------------------------------------
// Database figures
// ---------------------------------------------------------------------------------------

/// A count; `None` while the database cannot answer (it may be restarting).
async fn try_count(pool: &Pool, sql: &str) -> Option<i64> {
    let db = pool.get().await.ok()?;
    db.query_one(sql, &[]).await.ok()?.try_get(0).ok()
}

async fn count(pool: &Pool, sql: &str) -> i64 {
    try_count(pool, sql)
        .await
        .unwrap_or_else(|| panic!("{sql} failed"))
}

/// Polls `sql` until `until(value)`; panics after `limit` with `context()`.
async fn wait_for(
    pool: &Pool,
    sql: &str,
    limit: Duration,
    until: impl Fn(i64) -> bool,
    context: impl Fn() -> String,
) -> i64 {
    let deadline = Instant::now() + limit;
    loop {
        let value = try_count(pool, sql).await;
        if let Some(value) = value
            && until(value)
        {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "{sql} is still {value:?} after {limit:?}\n{}",
            context()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

const OPEN: &str = "SELECT count(*) FROM notifications WHERE status IN ('PENDING', 'PROCESSING')";

/// The delivery figures of a finished drain of `total` notifications.
#[derive(Debug)]
struct Delivery {
    sent: i64,
    dead_lettered: i64,
    /// Missing rows, unfinished rows, and SENT rows the provider never delivered.
    lost: i64,
    /// Provider deliveries beyond one per key.
    duplicates: i64,
    /// Provider calls answered "already delivered" (recovered claims resent).
    resends: i64,
    /// Anything else that contradicts the delivery semantics.
    inconsistencies: Vec<String>,
}

impl Delivery {
    /// Nothing lost, nothing delivered twice, every state consistent.
    fn assert_sound(&self) {
        assert_eq!(self.lost, 0, "notifications lost");
        assert_eq!(self.duplicates, 0, "duplicate deliveries");
        assert!(
            self.inconsistencies.is_empty(),
            "{}",
            self.inconsistencies.join("\n")
        );
    }
}

async fn delivery_figures(pool: &Pool, total: i64) -> Delivery {
    let rows = count(pool, "SELECT count(*) FROM notifications").await;
    let open = count(pool, OPEN).await;
    let sent = count(
        pool,
        "SELECT count(*) FROM notifications WHERE status = 'SENT'",
    )
    .await;
    let dead_lettered = count(
        pool,
        "SELECT count(*) FROM notifications WHERE status = 'DEAD_LETTERED'",
    )
    .await;
    let sent_not_delivered = count(
        pool,
        "SELECT count(*) FROM notifications n WHERE status = 'SENT'
         AND NOT EXISTS (SELECT 1 FROM simulated_deliveries d WHERE d.delivery_key = n.id)",
    )
    .await;
    let deliveries = count(pool, "SELECT count(*) FROM simulated_deliveries").await;
    let distinct_keys = count(
        pool,
        "SELECT count(DISTINCT delivery_key) FROM simulated_deliveries",
    )
    .await;
    let resends = count(
        pool,
        "SELECT coalesce(sum(calls - 1), 0)::int8 FROM simulated_deliveries",
    )
    .await;
    let delivered_not_sent = count(
        pool,
        "SELECT count(*) FROM simulated_deliveries d JOIN notifications n ON n.id = d.delivery_key
         WHERE n.status <> 'SENT'",
    )
    .await;
    let dead_lettered_early = count(
        pool,
        "SELECT count(*) FROM notifications WHERE status = 'DEAD_LETTERED'
         AND attempt_count < max_attempts",
    )
    .await;
    let other_states = count(
        pool,
        "SELECT count(*) FROM notifications WHERE status NOT IN ('SENT', 'DEAD_LETTERED')",
    )
    .await
        - open;
    let inconsistencies = [
        (delivered_not_sent, "delivered by the provider but not SENT"),
        (dead_lettered_early, "dead-lettered with attempts left"),
        (other_states, "neither SENT, DEAD_LETTERED nor open"),
    ]
    .into_iter()
    .filter(|(n, _)| *n != 0)
    .map(|(n, what)| format!("{n} notifications {what}"))
    .collect();
    Delivery {
        sent,
        dead_lettered,
        lost: (total - rows) + open + sent_not_delivered,
        duplicates: deliveries - distinct_keys + (deliveries - sent).max(0),
        resends,
        inconsistencies,
    }
}

/// Webhook figures once the outbox is drained: events lost (a final notification without a
/// delivered event, or a delivered event the receiver never saw) and redeliveries.
async fn webhook_figures(pool: &Pool, seen: &Seen) -> (i64, i64, u32) {
    let db = pool.get().await.expect("connection");
    let delivered: Vec<Uuid> = db
        .query(
            "SELECT id FROM webhook_events WHERE dispatch_state = 'DELIVERED'",
            &[],
        )
        .await
        .expect("delivered events")
        .iter()
        .map(|row| row.get(0))
        .collect();
    let without_event = count(
        pool,
        "SELECT count(*) FROM notifications n WHERE status IN ('SENT', 'DEAD_LETTERED')
         AND NOT EXISTS (SELECT 1 FROM webhook_events e WHERE e.notification_id = n.id
                         AND e.status = n.status AND e.dispatch_state = 'DELIVERED')",
    )
    .await;
    let seen = seen.snapshot();
    let unseen = delivered.iter().filter(|id| !seen.contains_key(id)).count() as i64;
    let redelivered = seen.values().map(|n| n - 1).sum();
    (delivered.len() as i64, without_event + unseen, redelivered)
}

// ---------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------

#[tokio::test]
#[ignore = "chaos suite: cargo test --test chaos -- --ignored --nocapture"]
async fn sigkill_a_random_worker_every_two_seconds_during_a_20000_notification_drain() {
    let _serial = SERIAL.lock().await;
    const TOTAL: i64 = 20_000;
    const WORKERS: usize = 4;
    let db = common::test_db().await;
    common::factory::create_due_bulk(&db.pool, TOTAL).await;
    let seen = Seen::default();
    let receiver = Receiver::start(0, seen.clone()).await;
    let mut env = worker_env(Some(&receiver.url()));
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
    let (events, events_lost, redelivered) = webhook_figures(&db.pool, &seen).await;
    let logs = fleet.log_figures();
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
#[ignore = "chaos suite: cargo test --test chaos -- --ignored --nocapture"]
async fn restart_postgres_twice_during_a_drain_and_the_workers_reconnect_by_themselves() {
    let _serial = SERIAL.lock().await;
    const TOTAL: i64 = 5_000;
    const WORKERS: usize = 2;
    // A private server: the restarts must not touch anything else.
    let base = Path::new(notify_tests::WORKSPACE).join("target/embedded-postgres");
    let mut server = tokio::task::spawn_blocking(move || EmbeddedPostgres::start(&base))
        .await
        .expect("start task")
        .expect("start a private PostgreSQL");
    let url = server.url();
    db::migrate(&url).await.expect("migrate");
    let pool = db::create_pool(&url, 2).expect("pool");
    common::factory::create_due_bulk(&pool, TOTAL).await;

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
    let logs = fleet.log_figures();
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
#[ignore = "chaos suite: cargo test --test chaos -- --ignored --nocapture"]
async fn a_webhook_receiver_down_for_the_whole_drain_gets_every_event_once_it_is_back() {
    let _serial = SERIAL.lock().await;
    const TOTAL: i64 = 3_000;
    const WORKERS: usize = 2;
    let db = common::test_db().await;
    common::factory::create_due_bulk(&db.pool, TOTAL).await;
    let port = unused_port();
    let mut env = worker_env(Some(&hook_url(port)));
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

    let seen = Seen::default();
    let receiver = Receiver::start(port, seen.clone()).await;
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
    let logs = fleet.log_figures();
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
