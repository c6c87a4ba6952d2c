//! B1–B7: the scenarios that drive real `notify-local` processes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::args::Options;
use crate::load::{self, When};
use crate::procs::{Launcher, Memory, Process, Role};
use crate::server::{FreshDb, Server};
use crate::stats::{self, Progress};
use crate::sys::{self, CpuUse};

const STOP_GRACE: Duration = Duration::from_secs(10);
/// A worker is left alone this long after it is ready before it is measured or fed.
const SETTLE: Duration = Duration::from_secs(1);

pub struct Ctx {
    pub server: Server,
    pub launcher: Launcher,
    pub options: Options,
    pub http: reqwest::Client,
    pub postmaster: Option<u32>,
}

impl Ctx {
    async fn workers(&self, n: usize, db: &FreshDb, tag: &str) -> anyhow::Result<Vec<Process>> {
        let mut workers = Vec::with_capacity(n);
        for _ in 0..n {
            workers.push(self.launcher.start(Role::Worker, &db.url, tag).await?);
        }
        Ok(workers)
    }

    fn drain_timeout(&self, n: u64) -> Duration {
        Duration::from_secs((n / 300).max(60))
    }
}

async fn stop_all(processes: Vec<Process>) {
    futures::future::join_all(processes.into_iter().map(|p| p.stop(STOP_GRACE))).await;
}

fn short_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

/// Loads `n` notifications due tomorrow through `POST /notifications/batch`.
async fn load_bulk(
    ctx: &Ctx,
    api: &Process,
    label: &str,
    prefix: &str,
    n: u64,
    priority: &str,
) -> anyhow::Result<Duration> {
    let bodies = load::batch_bodies(prefix, n, priority)?;
    let mut progress = Progress::new(label, n, "stored");
    let took = load::post_batches(
        &ctx.http,
        &api.base_url,
        bodies,
        ctx.options.b1_inflight,
        &mut progress,
    )
    .await?;
    progress.finish(&format!("{} /s", stats::int(n as f64 / took.as_secs_f64())));
    Ok(took)
}

/// Makes every PENDING notification due now with one UPDATE, and wakes the workers in
/// the same transaction (as intake does for a notification due now). Returns how long
/// the statement took and the database clock right after it committed.
async fn release(
    client: &mut tokio_postgres::Client,
) -> anyhow::Result<(Duration, DateTime<Utc>, u64)> {
    let started = Instant::now();
    let tx = client.transaction().await?;
    let released = tx
        .execute(
            "UPDATE notifications SET scheduled_at = now(), next_attempt_at = now(), updated_at = now()
             WHERE status = 'PENDING'",
            &[],
        )
        .await?;
    tx.execute(
        &format!(
            "SELECT pg_notify('{}', '')",
            notify_shared::queue::WAKE_CHANNEL
        ),
        &[],
    )
    .await?;
    tx.commit().await?;
    let took = started.elapsed();
    let at: DateTime<Utc> = client
        .query_one("SELECT clock_timestamp()", &[])
        .await?
        .try_get(0)?;
    Ok((took, at, released))
}

/// Whether any notification matching `filter` is still PENDING or PROCESSING. Each status
/// is probed through its partial index (claim order, lease expiry) and stops at the first
/// row, so polling costs the drain almost nothing (a `count(*)` over the churned table
/// cost ~100 ms of PostgreSQL CPU per poll).
async fn any_open(client: &tokio_postgres::Client, filter: &str) -> anyhow::Result<bool> {
    let sql = format!(
        "SELECT EXISTS (SELECT 1 FROM notifications WHERE status = 'PENDING' AND {filter})
             OR EXISTS (SELECT 1 FROM notifications WHERE status = 'PROCESSING' AND {filter})"
    );
    Ok(client.query_one(&sql, &[]).await?.try_get(0)?)
}

/// Final outcomes so far, from the narrow outbox (one event per SENT notification here).
async fn finished(client: &tokio_postgres::Client) -> anyhow::Result<u64> {
    count(client, "SELECT count(*) FROM webhook_events").await
}

async fn count(client: &tokio_postgres::Client, sql: &str) -> anyhow::Result<u64> {
    let n: i64 = client.query_one(sql, &[]).await?.try_get(0)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// `(sent_at − scheduled_at)` in ms of the SENT rows matching `filter`.
async fn latencies_ms(client: &tokio_postgres::Client, filter: &str) -> anyhow::Result<Vec<f64>> {
    let rows = client
        .query(
            &format!(
                "SELECT (extract(epoch FROM sent_at - scheduled_at) * 1000)::float8
                 FROM notifications WHERE status = 'SENT' AND {filter}"
            ),
            &[],
        )
        .await?;
    let values = rows
        .iter()
        .map(|r| r.try_get::<_, f64>(0))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(stats::sorted(values))
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Latency {
    pub count: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    pub fn of(sorted: &[f64]) -> Latency {
        Latency {
            count: sorted.len(),
            p50_ms: stats::percentile(sorted, 0.5),
            p90_ms: stats::percentile(sorted, 0.9),
            p99_ms: stats::percentile(sorted, 0.99),
            max_ms: sorted.last().copied().unwrap_or(f64::NAN),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Storage {
    pub notifications: u64,
    pub notifications_bytes: i64,
    pub webhook_events_bytes: i64,
    pub rate_limit_reservations_bytes: i64,
    pub simulated_deliveries_bytes: i64,
    pub bytes_per_notification: f64,
    /// Of `notifications_bytes`: the heap (main fork) and each index.
    pub notifications_heap_bytes: i64,
    pub notifications_indexes: Vec<(String, i64)>,
}

async fn storage(client: &tokio_postgres::Client) -> anyhow::Result<Storage> {
    let row = client
        .query_one(
            "SELECT pg_total_relation_size('notifications'), pg_total_relation_size('webhook_events'),
                    pg_total_relation_size('rate_limit_reservations'),
                    pg_total_relation_size('simulated_deliveries'),
                    (SELECT count(*) FROM notifications)",
            &[],
        )
        .await?;
    let sizes: [i64; 4] = [
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
    ];
    let n: i64 = row.try_get(4)?;
    let heap: i64 = client
        .query_one("SELECT pg_relation_size('notifications')", &[])
        .await?
        .try_get(0)?;
    let indexes = client
        .query(
            "SELECT c.relname::text, pg_relation_size(c.oid) FROM pg_index i
             JOIN pg_class c ON c.oid = i.indexrelid
             WHERE i.indrelid = 'notifications'::regclass ORDER BY 2 DESC",
            &[],
        )
        .await?
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect::<Result<Vec<(String, i64)>, tokio_postgres::Error>>()?;
    Ok(Storage {
        notifications_heap_bytes: heap,
        notifications_indexes: indexes,
        notifications: u64::try_from(n).unwrap_or(0),
        notifications_bytes: sizes[0],
        webhook_events_bytes: sizes[1],
        rate_limit_reservations_bytes: sizes[2],
        simulated_deliveries_bytes: sizes[3],
        bytes_per_notification: sizes.iter().sum::<i64>() as f64 / n.max(1) as f64,
    })
}

/// One B1 load followed by one B2 drain with `workers` worker processes.
#[derive(Debug, Clone, Serialize)]
pub struct DrainPass {
    pub workers: usize,
    pub notifications: u64,
    /// B1: batch intake of all notifications.
    pub intake_s: f64,
    pub intake_per_s: f64,
    /// The release UPDATE (+ NOTIFY), before the drain clock starts.
    pub release_s: f64,
    /// From the release's commit to the last `sent_at`.
    pub drain_s: f64,
    pub drain_per_s: f64,
    pub sent: u64,
    /// First worker, after start-up and one idle second.
    pub idle_memory: Option<Memory>,
    /// Largest VmHWM of the workers after the drain.
    pub peak_rss: Option<u64>,
    pub cpu: CpuUse,
    /// B7, right after the drain.
    pub storage: Storage,
}

pub async fn drain_pass(ctx: &Ctx, run: u32, workers: usize) -> anyhow::Result<DrainPass> {
    let n = ctx.options.bulk();
    let tag = format!("r{run}-drain-w{workers}");
    let db = ctx.server.fresh_database().await?;
    let mut client = db.connect().await?;

    let api = ctx.launcher.start(Role::Api, &db.url, &tag).await?;
    let prefix = format!("b2-{}", short_id());
    let intake = load_bulk(
        ctx,
        &api,
        &format!("B1 run {run} intake for {workers} worker(s)"),
        &prefix,
        n,
        "NORMAL",
    )
    .await?;
    api.stop(STOP_GRACE).await;
    let stored = count(&client, "SELECT count(*) FROM notifications").await?;
    ensure!(stored == n, "stored {stored} notifications, expected {n}");

    let processes = ctx.workers(workers, &db, &tag).await?;
    tokio::time::sleep(SETTLE).await;
    let idle_memory = processes[0].memory();
    let pids: Vec<u32> = processes.iter().map(|p| p.pid).collect();

    let (release_took, released_at, released) = release(&mut client).await?;
    ensure!(released == n, "released {released}, expected {n}");
    // CPU is counted from the release's commit: the UPDATE itself is not the drain's work.
    let before = sys::snapshot(&pids, ctx.postmaster);
    let mut progress = Progress::new(
        format!("B2 run {run} drain, {workers} worker(s)"),
        n,
        "sent",
    );
    let deadline = Instant::now() + ctx.drain_timeout(n);
    let mut polls = 0u64;
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        polls += 1;
        if polls.is_multiple_of(4) {
            progress.update(finished(&client).await?);
        }
        if !any_open(&client, "true").await? {
            break;
        }
        if Instant::now() > deadline {
            bail!("the drain did not finish within {:?}", ctx.drain_timeout(n));
        }
    }
    let after = sys::snapshot(&pids, ctx.postmaster);
    let peak_rss = processes
        .iter()
        .map(|p| p.memory().map(|m| m.hwm))
        .max()
        .flatten();
    let row = client
        .query_one(
            "SELECT max(sent_at), count(*) FILTER (WHERE status = 'SENT') FROM notifications",
            &[],
        )
        .await?;
    let last: DateTime<Utc> = row.try_get(0)?;
    let sent = u64::try_from(row.try_get::<_, i64>(1)?).unwrap_or(0);
    ensure!(sent == n, "only {sent} of {n} were SENT");
    let drain_s = ((last - released_at).num_microseconds().unwrap_or(0) as f64 / 1e6).max(1e-3);
    let storage = storage(&client).await?;
    progress.finish(&format!("{} /s", stats::int(n as f64 / drain_s)));
    stop_all(processes).await;
    drop(client);
    db.drop_now().await?;
    Ok(DrainPass {
        workers,
        notifications: n,
        intake_s: intake.as_secs_f64(),
        intake_per_s: n as f64 / intake.as_secs_f64(),
        release_s: release_took.as_secs_f64(),
        drain_s,
        drain_per_s: n as f64 / drain_s,
        sent,
        idle_memory,
        peak_rss,
        cpu: sys::cpu_use(before, after, drain_s),
        storage,
    })
}

/// B3: `POST /notifications` from 8 clients, and the same insert statement from 8
/// connections with no HTTP in front (the floor).
#[derive(Debug, Clone, Serialize)]
pub struct Single {
    pub clients: usize,
    pub seconds: f64,
    pub http_requests: u64,
    pub http_per_s: f64,
    pub http_errors: u64,
    pub http_latency: Latency,
    /// Over the measured seconds; notify-local = the API process, bench = the clients.
    pub http_cpu: CpuUse,
    pub floor_inserts: u64,
    pub floor_per_s: f64,
    pub floor_latency: Latency,
    pub floor_cpu: CpuUse,
    pub ratio_to_floor: f64,
}

const CLIENTS: usize = 8;
const WARM_UP: Duration = Duration::from_secs(1);

/// Runs `CLIENTS` loops of `call` for warm-up + `measure`; returns the latencies (ms) of
/// the calls that started after the warm-up and ended before the end, and the errors.
async fn closed_loop<F, Fut>(
    label: &str,
    measure: Duration,
    watch: (Vec<u32>, Option<u32>),
    call: F,
) -> anyhow::Result<(Vec<f64>, u64, CpuUse)>
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<bool>> + Send,
{
    let call = Arc::new(call);
    let started = Instant::now();
    let measure_from = started + WARM_UP;
    let end = measure_from + measure;
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for client in 0..CLIENTS {
        let call = call.clone();
        let done = done.clone();
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0u64;
            let mut i = 0u64;
            loop {
                let at = Instant::now();
                if at >= end {
                    break;
                }
                let ok = call(client, i).await?;
                i += 1;
                let finished = Instant::now();
                if at >= measure_from && finished <= end {
                    if ok {
                        latencies.push((finished - at).as_secs_f64() * 1000.0);
                        done.fetch_add(1, Ordering::Relaxed);
                    } else {
                        errors += 1;
                    }
                }
            }
            anyhow::Ok((latencies, errors))
        });
    }
    let (pids, postmaster) = watch;
    let watched = pids.clone();
    let before = tokio::spawn(async move {
        tokio::time::sleep_until(measure_from.into()).await;
        sys::snapshot(&watched, postmaster)
    });
    let mut progress = Progress::new(label, 0, "requests");
    let mut latencies = Vec::new();
    let mut errors = 0;
    loop {
        tokio::select! {
            joined = tasks.join_next() => match joined {
                Some(result) => {
                    let (l, e) = result.context("a client task failed")??;
                    latencies.extend(l);
                    errors += e;
                }
                None => break,
            },
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                progress.update(done.load(Ordering::Relaxed));
            }
        }
    }
    let after = sys::snapshot(&pids, postmaster);
    let before = before.await.context("CPU snapshot task")?;
    progress.finish(&format!(
        "{} /s",
        stats::int(latencies.len() as f64 / measure.as_secs_f64())
    ));
    let cpu = sys::cpu_use(before, after, measure.as_secs_f64());
    Ok((stats::sorted(latencies), errors, cpu))
}

pub async fn single_intake(ctx: &Ctx, run: u32) -> anyhow::Result<Single> {
    let measure = ctx.options.single_duration();

    let db = ctx.server.fresh_database().await?;
    let api = ctx
        .launcher
        .start(Role::Api, &db.url, &format!("r{run}-b3"))
        .await?;
    let url = format!("{}/notifications", api.base_url);
    let prefix = format!("b3-{}", short_id());
    let http = ctx.http.clone();
    let (http_latencies, http_errors, http_cpu) = closed_loop(
        &format!("B3 run {run} POST /notifications x{CLIENTS}"),
        measure,
        (vec![api.pid], ctx.postmaster),
        move |client, i| {
            let http = http.clone();
            let url = url.clone();
            let body = serde_json::to_vec(&load::item(
                &format!("{prefix}-c{client}"),
                i,
                "NORMAL",
                When::Tomorrow,
            ));
            async move {
                let (status, _) = load::post_one(&http, &url, body?).await?;
                Ok(status == 201)
            }
        },
    )
    .await?;
    api.stop(STOP_GRACE).await;
    db.drop_now().await?;

    // The floor: the intake's own insert statement, 8 connections, no HTTP.
    let db = ctx.server.fresh_database().await?;
    let pool = db.pool(CLIENTS)?;
    let prefix = format!("b3f-{}", short_id());
    let (floor_latencies, _, floor_cpu) = closed_loop(
        &format!("B3 run {run} insert statement x{CLIENTS} (floor)"),
        measure,
        (Vec::new(), ctx.postmaster),
        move |client, i| {
            let pool = pool.clone();
            let key = format!("{prefix}-c{client}-{i}");
            async move {
                let db = pool.get().await?;
                let new = notify_shared::queue::NewNotification {
                    id: uuid::Uuid::new_v4(),
                    fingerprint: format!(
                        "{}{}",
                        uuid::Uuid::new_v4().simple(),
                        uuid::Uuid::new_v4().simple()
                    ),
                    recipient: format!("{key}@bench.example"),
                    idempotency_key: key,
                    channel: notify_shared::notification::Channel::Email,
                    priority: notify_shared::notification::Priority::Normal,
                    payload: serde_json::json!({"template": "welcome", "name": "Ada", "n": i}),
                    due: notify_shared::queue::Due::AfterSeconds(86_400),
                    max_attempts: 6,
                    owner_key_id: None,
                };
                let outcome = notify_shared::queue::insert(&db, &new).await?;
                Ok(matches!(
                    outcome,
                    notify_shared::queue::InsertOutcome::Created(_)
                ))
            }
        },
    )
    .await?;
    db.drop_now().await?;

    let seconds = measure.as_secs_f64();
    let http_per_s = http_latencies.len() as f64 / seconds;
    let floor_per_s = floor_latencies.len() as f64 / seconds;
    Ok(Single {
        clients: CLIENTS,
        seconds,
        http_requests: http_latencies.len() as u64,
        http_per_s,
        http_errors,
        http_latency: Latency::of(&http_latencies),
        http_cpu,
        floor_inserts: floor_latencies.len() as u64,
        floor_per_s,
        floor_latency: Latency::of(&floor_latencies),
        floor_cpu,
        ratio_to_floor: http_per_s / floor_per_s.max(1e-9),
    })
}

/// Posts notifications due now at `per_second` until `stop` is set (or `limit` is
/// reached); returns how many were accepted.
/// A stream of single notifications due now, posted at a fixed rate.
struct Arrivals {
    http: reqwest::Client,
    url: String,
    prefix: String,
    priority: &'static str,
    per_second: u32,
    limit: Option<u64>,
}

async fn paced_arrivals(
    arrivals: Arrivals,
    stop: Arc<AtomicBool>,
    posted: Arc<AtomicU64>,
) -> anyhow::Result<u64> {
    let Arrivals {
        http,
        url,
        prefix,
        priority,
        per_second,
        limit,
    } = arrivals;
    let mut ticks = tokio::time::interval(Duration::from_secs(1) / per_second);
    let mut calls = tokio::task::JoinSet::new();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) && limit.is_none_or(|l| i < l) {
        ticks.tick().await;
        let body = serde_json::to_vec(&load::item(&prefix, i, priority, When::Now))?;
        let http = http.clone();
        let url = url.clone();
        calls.spawn(async move { load::post_one(&http, &url, body).await });
        i += 1;
        posted.store(i, Ordering::Relaxed);
        while let Some(done) = calls.try_join_next() {
            let (status, _) = done.context("arrival task")??;
            ensure!(status == 201, "POST /notifications answered {status}");
        }
    }
    while let Some(done) = calls.join_next().await {
        let (status, _) = done.context("arrival task")??;
        ensure!(status == 201, "POST /notifications answered {status}");
    }
    Ok(i)
}

/// Waits until `sql` (a count) reaches `target`, with progress; fails after `timeout`.
async fn wait_for_count(
    client: &tokio_postgres::Client,
    sql: &str,
    target: u64,
    timeout: Duration,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let done = count(client, sql).await?;
        progress.update(done);
        if done >= target {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("only {done} of {target} after {timeout:?} ({sql})");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// B4: notifications due now arriving at 100/s while one worker idles.
#[derive(Debug, Clone, Serialize)]
pub struct Idle {
    pub arrivals: u64,
    pub per_second: u32,
    pub latency: Latency,
    pub samples_ms: Vec<f64>,
}

pub async fn idle_latency(ctx: &Ctx, run: u32) -> anyhow::Result<Idle> {
    const RATE: u32 = 100;
    let n = ctx.options.idle_count();
    let tag = format!("r{run}-b4");
    let db = ctx.server.fresh_database().await?;
    let client = db.connect().await?;
    let api = ctx.launcher.start(Role::Api, &db.url, &tag).await?;
    let workers = ctx.workers(1, &db, &tag).await?;
    tokio::time::sleep(SETTLE).await;

    let mut progress = Progress::new(format!("B4 run {run} {n} arrivals at {RATE}/s"), n, "sent");
    let arrivals = tokio::spawn(paced_arrivals(
        Arrivals {
            http: ctx.http.clone(),
            url: format!("{}/notifications", api.base_url),
            prefix: format!("b4-{}", short_id()),
            priority: "NORMAL",
            per_second: RATE,
            limit: Some(n),
        },
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    ));
    let sent_sql = "SELECT count(*) FROM notifications WHERE status = 'SENT'";
    let timeout = Duration::from_secs(n / u64::from(RATE) + 60);
    wait_for_count(&client, sent_sql, n, timeout, &mut progress).await?;
    let posted = arrivals.await.context("arrivals task")??;
    ensure!(posted == n, "posted {posted} of {n}");
    let samples = latencies_ms(&client, "true").await?;
    let latency = Latency::of(&samples);
    progress.finish(&format!("p99 {}", stats::ms(latency.p99_ms)));
    stop_all(workers).await;
    api.stop(STOP_GRACE).await;
    drop(client);
    db.drop_now().await?;
    Ok(Idle {
        arrivals: n,
        per_second: RATE,
        latency,
        samples_ms: samples,
    })
}

/// B5: a LOW backlog drains while HIGH arrives at 50/s.
#[derive(Debug, Clone, Serialize)]
pub struct Isolation {
    pub low: u64,
    pub low_drain_s: f64,
    pub low_per_s: f64,
    pub high: u64,
    pub high_per_second: u32,
    pub high_latency: Latency,
    pub high_samples_ms: Vec<f64>,
}

pub async fn isolation(ctx: &Ctx, run: u32) -> anyhow::Result<Isolation> {
    const RATE: u32 = 50;
    const MIN_HIGH: u64 = 20;
    let n = ctx.options.bulk();
    let tag = format!("r{run}-b5");
    let db = ctx.server.fresh_database().await?;
    let mut client = db.connect().await?;
    let api = ctx.launcher.start(Role::Api, &db.url, &tag).await?;
    load_bulk(
        ctx,
        &api,
        &format!("B5 run {run} LOW backlog intake"),
        &format!("b5l-{}", short_id()),
        n,
        "LOW",
    )
    .await?;
    let workers = ctx.workers(1, &db, &tag).await?;
    tokio::time::sleep(SETTLE).await;

    let (_, released_at, _) = release(&mut client).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let posted = Arc::new(AtomicU64::new(0));
    let arrivals = tokio::spawn(paced_arrivals(
        Arrivals {
            http: ctx.http.clone(),
            url: format!("{}/notifications", api.base_url),
            prefix: format!("b5h-{}", short_id()),
            priority: "HIGH",
            per_second: RATE,
            limit: None,
        },
        stop.clone(),
        posted.clone(),
    ));
    let mut progress = Progress::new(
        format!("B5 run {run} LOW drain with HIGH at {RATE}/s"),
        n,
        "LOW sent",
    );
    let deadline = Instant::now() + ctx.drain_timeout(n);
    let result = async {
        let mut polls = 0u64;
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            polls += 1;
            if polls.is_multiple_of(4) {
                progress.update(finished(&client).await?.min(n));
            }
            let open = any_open(&client, "priority = 2").await?;
            if !open && posted.load(Ordering::Relaxed) >= MIN_HIGH {
                return anyhow::Ok(());
            }
            if Instant::now() > deadline {
                bail!("the LOW backlog did not drain in time");
            }
        }
    }
    .await;
    stop.store(true, Ordering::Relaxed);
    result?;
    let high = arrivals.await.context("arrivals task")??;
    let mut waiting = Progress::new(format!("B5 run {run} last HIGH"), high, "HIGH sent");
    wait_for_count(
        &client,
        "SELECT count(*) FROM notifications WHERE priority = 0 AND status = 'SENT'",
        high,
        Duration::from_secs(60),
        &mut waiting,
    )
    .await?;
    let last_low: DateTime<Utc> = client
        .query_one(
            "SELECT max(sent_at) FROM notifications WHERE priority = 2",
            &[],
        )
        .await?
        .try_get(0)?;
    let low_drain_s =
        ((last_low - released_at).num_microseconds().unwrap_or(0) as f64 / 1e6).max(1e-3);
    let samples = latencies_ms(&client, "priority = 0").await?;
    let latency = Latency::of(&samples);
    progress.finish(&format!(
        "LOW {} /s; HIGH p99 {} over {high}",
        stats::int(n as f64 / low_drain_s),
        stats::ms(latency.p99_ms)
    ));
    stop_all(workers).await;
    api.stop(STOP_GRACE).await;
    drop(client);
    db.drop_now().await?;
    Ok(Isolation {
        low: n,
        low_drain_s,
        low_per_s: n as f64 / low_drain_s,
        high,
        high_per_second: RATE,
        high_latency: latency,
        high_samples_ms: samples,
    })
}

/// B6: spawn → `/health` 200, with the database already running and migrated.
#[derive(Debug, Clone, Serialize)]
pub struct StartTimes {
    pub api_ms: Vec<f64>,
    pub worker_ms: Vec<f64>,
}

pub async fn start_times(ctx: &Ctx, run: u32) -> anyhow::Result<StartTimes> {
    const REPEAT: usize = 5;
    let db = ctx.server.fresh_database().await?;
    let mut times = StartTimes {
        api_ms: Vec::new(),
        worker_ms: Vec::new(),
    };
    let progress = Progress::new(format!("B6 run {run} start -> ready"), 0, "");
    for role in [Role::Api, Role::Worker] {
        for _ in 0..REPEAT {
            let process = ctx
                .launcher
                .start(role, &db.url, &format!("r{run}-b6"))
                .await?;
            let ms = process.ready_after.as_secs_f64() * 1000.0;
            process.stop(STOP_GRACE).await;
            match role {
                Role::Api => times.api_ms.push(ms),
                Role::Worker => times.worker_ms.push(ms),
            }
        }
    }
    progress.finish(&format!(
        "api median {}, worker median {}",
        stats::ms(stats::percentile(&stats::sorted(times.api_ms.clone()), 0.5)),
        stats::ms(stats::percentile(
            &stats::sorted(times.worker_ms.clone()),
            0.5
        ))
    ));
    db.drop_now().await?;
    Ok(times)
}
