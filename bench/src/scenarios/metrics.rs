//! M1, metrics at scale: a database holding 1,000,000 notifications of every status (and
//! their webhook events) written straight by SQL, then sequential `GET /metrics` scrapes,
//! JSON and Prometheus, against one API process; then `GET /digest` on the same database.

use std::time::Instant;

use anyhow::{Context, ensure};
use serde::Serialize;

use super::seed::{self, SeedTimes};
use super::{Ctx, STOP_GRACE, queries};
use crate::procs::Role;
use crate::stats::{self, Progress};

const WARM_UP: usize = 3;
const SCRAPES: usize = 30;

/// The timed scrapes of one format (client-side, ms).
#[derive(Debug, Clone, Serialize)]
pub struct Scrapes {
    pub calls: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub max_ms: f64,
    /// Size of the last answer's body.
    pub bytes: usize,
    pub samples_ms: Vec<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MetricsScale {
    /// What the scenario asked for (1,000,000 at the full size).
    pub target_rows: u64,
    /// `count(*)` of `notifications` after seeding.
    pub rows: u64,
    pub webhook_events: u64,
    pub seed: SeedTimes,
    pub json: Scrapes,
    pub prometheus: Scrapes,
    /// `GET /digest` (the ranked findings) on the same database.
    pub digest: Scrapes,
}

/// `WARM_UP` untimed then `SCRAPES` timed sequential calls of `url`; each must answer 200
/// and pass `check`.
async fn scrape(
    http: &reqwest::Client,
    url: &str,
    label: &str,
    check: impl Fn(&[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<Scrapes> {
    let mut progress = Progress::new(label, SCRAPES as u64, "scrapes");
    let mut samples = Vec::with_capacity(SCRAPES);
    let mut bytes = 0;
    for i in 0..WARM_UP + SCRAPES {
        let started = Instant::now();
        let response = http
            .get(url)
            .send()
            .await
            .with_context(|| format!("GET {url} failed"))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .with_context(|| format!("GET {url}: the answer"))?;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        ensure!(status.is_success(), "GET {url} answered {status}");
        check(&body)?;
        bytes = body.len();
        if i >= WARM_UP {
            samples.push(ms);
            progress.update(samples.len() as u64);
        }
    }
    let samples = stats::sorted(samples);
    let scrapes = Scrapes {
        calls: samples.len(),
        p50_ms: stats::percentile(&samples, 0.5),
        p95_ms: stats::percentile(&samples, 0.95),
        max_ms: samples.last().copied().unwrap_or(f64::NAN),
        bytes,
        samples_ms: samples,
    };
    progress.finish(&format!(
        "p50 {}, p95 {}",
        stats::ms(scrapes.p50_ms),
        stats::ms(scrapes.p95_ms)
    ));
    Ok(scrapes)
}

/// The JSON summary must count every notification stored.
fn counts_all(body: &[u8], rows: u64) -> anyhow::Result<()> {
    let summary: serde_json::Value =
        serde_json::from_slice(body).context("GET /metrics is not JSON")?;
    let counted: i64 = [
        "pending",
        "processing",
        "sent",
        "failed",
        "deadLettered",
        "cancelled",
    ]
    .iter()
    .map(|field| summary[field].as_i64().unwrap_or(0))
    .sum();
    ensure!(
        u64::try_from(counted).is_ok_and(|c| c == rows),
        "GET /metrics counts {counted} notifications, the table holds {rows}"
    );
    Ok(())
}

pub async fn metrics_scale(ctx: &Ctx, run: u32) -> anyhow::Result<MetricsScale> {
    let n = ctx.options.metrics_rows();
    let db = ctx.server.fresh_database().await?;
    let client = db.connect().await?;
    let (seed, webhook_events) = seed::seed(
        &client,
        n,
        &format!("M1 run {run} seed {} notifications", stats::int(n as f64)),
    )
    .await?;
    let rows = queries::count(&client, "SELECT count(*) FROM notifications").await?;
    ensure!(
        rows == n,
        "the table holds {rows} notifications, expected {n}"
    );

    let api = ctx
        .launcher
        .start(Role::Api, &db.url, &format!("r{run}-m1"))
        .await?;
    let url = format!("{}/metrics", api.base_url);
    let json = scrape(
        &ctx.http,
        &url,
        &format!("M1 run {run} GET /metrics"),
        |body| counts_all(body, rows),
    )
    .await?;
    let prometheus = scrape(
        &ctx.http,
        &format!("{url}?format=prometheus"),
        &format!("M1 run {run} GET /metrics?format=prometheus"),
        |body| {
            let name = b"notify_notifications_by_status";
            ensure!(
                body.windows(name.len()).any(|w| w == name),
                "GET /metrics?format=prometheus has no notify_notifications_by_status"
            );
            Ok(())
        },
    )
    .await?;
    // The seed dead-letters 2% over 30 days and gives up 1% of the webhook events: every
    // aggregate the digest runs has rows to read.
    let digest = scrape(
        &ctx.http,
        &format!("{}/digest", api.base_url),
        &format!("M1 run {run} GET /digest"),
        |body| {
            let digest: serde_json::Value =
                serde_json::from_slice(body).context("GET /digest is not JSON")?;
            ensure!(
                digest["findings"].is_array(),
                "GET /digest has no findings array: {digest}"
            );
            Ok(())
        },
    )
    .await?;
    api.stop(STOP_GRACE).await;
    drop(client);
    db.drop_now().await?;
    Ok(MetricsScale {
        target_rows: n,
        rows,
        webhook_events,
        seed,
        json,
        prometheus,
        digest,
    })
}
