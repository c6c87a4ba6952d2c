//! B4 and B5, the latency scenarios: notifications due now posted at a fixed rate, to an
//! idle worker (B4) and, as HIGH, while a LOW backlog drains (B5); latency is
//! `sent_at − scheduled_at` from the database.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::task::JoinError;

use super::intake::load_bulk;
use super::queries::{self, any_open, finished, latencies_ms, wait_for_count};
use super::{Ctx, STOP_GRACE, short_id, stop_all};
use crate::load::{self, When};
use crate::procs::Role;
use crate::stats::{self, Latency, Progress};

/// A stream of single notifications due now, posted at a fixed rate.
struct Arrivals {
    http: reqwest::Client,
    url: String,
    prefix: String,
    priority: &'static str,
    per_second: u32,
    limit: Option<u64>,
}

/// Posts notifications due now at `per_second` until `stop` is set (or `limit` is
/// reached); returns how many were accepted.
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
            accepted(done)?;
        }
    }
    while let Some(done) = calls.join_next().await {
        accepted(done)?;
    }
    Ok(i)
}

/// One finished arrival: it must have been accepted (201).
fn accepted(done: Result<anyhow::Result<(u16, Duration)>, JoinError>) -> anyhow::Result<()> {
    let (status, _) = done.context("arrival task")??;
    ensure!(status == 201, "POST /notifications answered {status}");
    Ok(())
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
    let timeout = Duration::from_secs(n / u64::from(RATE) + 60);
    wait_for_count(&client, queries::SENT, n, timeout, &mut progress).await?;
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
        load::payload,
    )
    .await?;
    let workers = ctx.workers(1, &db, &tag).await?;

    let (_, released_at, _) = queries::release(&mut client).await?;
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
    let low_drain_s = queries::seconds_between(released_at, last_low);
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
