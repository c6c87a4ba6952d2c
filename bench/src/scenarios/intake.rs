//! B1 and B3, the intake scenarios: the batch load through `POST /notifications/batch`
//! (B1, also the load before every drain) and single `POST /notifications` calls from 8
//! clients against the intake's own statements with no HTTP in front (B3).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use super::{Ctx, STOP_GRACE, short_id};
use crate::load::{self, When};
use crate::procs::{Process, Role};
use crate::stats::{self, Latency, Progress};
use crate::sys::{self, CpuUse};

/// The key the floor hashes addresses with (the API process hashes with its own; the
/// cost is the same).
const FLOOR_SECRET: &[u8] = b"notify-bench-floor";

/// Loads `n` notifications due tomorrow through `POST /notifications/batch`, each with
/// the payload `payload` makes.
pub(super) async fn load_bulk(
    ctx: &Ctx,
    api: &Process,
    label: &str,
    prefix: &str,
    n: u64,
    priority: &str,
    payload: fn(u64) -> serde_json::Value,
) -> anyhow::Result<Duration> {
    let bodies = load::batch_bodies(prefix, n, priority, payload)?;
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

/// B3: `POST /notifications` from 8 clients, and the same statements from 8
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

    // The floor: the intake's own statement for a request addressed to an address (the
    // insert, which checks the suppression list itself), 8 connections, no HTTP.
    let db = ctx.server.fresh_database().await?;
    let pool = db.pool(CLIENTS)?;
    let prefix = format!("b3f-{}", short_id());
    let (floor_latencies, _, floor_cpu) = closed_loop(
        &format!("B3 run {run} insert x{CLIENTS} (floor)"),
        measure,
        (Vec::new(), ctx.postmaster),
        move |client, i| {
            let pool = pool.clone();
            let key = format!("{prefix}-c{client}-{i}");
            async move {
                let db = pool.get().await?;
                let address = format!("{key}@bench.example");
                let channel = notify_shared::notification::Channel::Email;
                let hash = notify_shared::audience::address::hash(FLOOR_SECRET, channel, &address);
                let mut new = notify_shared::queue::NewNotification::new(
                    key.clone(),
                    format!(
                        "{}{}",
                        uuid::Uuid::new_v4().simple(),
                        uuid::Uuid::new_v4().simple()
                    ),
                    address,
                    channel,
                    load::payload(i),
                    notify_shared::queue::Due::AfterSeconds(86_400),
                    6,
                );
                new.listed_hash = Some(hash);
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
