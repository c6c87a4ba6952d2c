//! B9, campaign isolation with pacing: a campaign of N recipients (a template on EMAIL,
//! expanded by the sweeper) drains through the SES provider (the stand-in, 5 ms) with
//! `EMAIL_RATE_PER_SECOND=2000`, 500 of it reserved for transactional traffic, while
//! TRANSACTIONAL HIGH email arrives at 50 /s. Measured: how long expansion takes, the
//! campaign's busiest second at the provider, and the transactional latency
//! (`sentAt` − due).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use chrono::{DateTime, Utc};
use notify_local::aws_stub::AwsStub;
use serde::Serialize;
use serde_json::{Value, json};

use super::real::STUB_LATENCY;
use super::{Ctx, STOP_GRACE, stop_all};
use crate::procs::Role;
use crate::stats::{self, Latency, Progress};

pub const RATE_PER_SECOND: f64 = 2000.0;
pub const TRANSACTIONAL_RESERVED: f64 = 500.0;
pub const TRANSACTIONAL_PER_SECOND: f64 = 50.0;
/// How often the campaign's state is read while it drains.
const POLL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Serialize)]
pub struct CampaignIsolation {
    pub recipients: u64,
    pub rate_per_s: f64,
    pub transactional_reserved_per_s: f64,
    /// From the campaign's creation to its last chunk committed (every recipient expanded).
    pub expansion_s: f64,
    /// From `POST /campaigns` to its last notification sent.
    pub campaign_drain_s: f64,
    /// The campaign's `SendEmail` calls in its busiest second at the stand-in.
    pub busiest_campaign_second: u64,
    pub campaign_calls: u64,
    /// Transactional notifications sent during the campaign, and their `sentAt` − due.
    pub transactional: Latency,
}

fn env(stub: &AwsStub) -> Vec<(String, String)> {
    [
        ("EMAIL_PROVIDER", "ses".to_string()),
        ("SES_FROM_ADDRESS", "bench@example.com".to_string()),
        ("AWS_ENDPOINT_URL", stub.url()),
        ("AWS_REGION", "us-east-1".to_string()),
        ("AWS_ACCESS_KEY_ID", "bench".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "bench".to_string()),
        ("EMAIL_RATE_PER_SECOND", RATE_PER_SECOND.to_string()),
        (
            "EMAIL_TRANSACTIONAL_RESERVED_PER_SECOND",
            TRANSACTIONAL_RESERVED.to_string(),
        ),
        ("WORKER_CONCURRENCY", "64".to_string()),
        ("WORKER_BATCH_SIZE", "100".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

async fn post(ctx: &Ctx, url: String, body: &Value) -> anyhow::Result<Value> {
    let response = ctx
        .http
        .post(&url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await?;
    let status = response.status();
    let body: Value = serde_json::from_slice(&response.bytes().await?)?;
    ensure!(status.is_success(), "POST {url}: {status} {body}");
    Ok(body)
}

/// The most calls in any one-second window starting at a call.
fn busiest_second(times: &mut [DateTime<Utc>]) -> u64 {
    times.sort_unstable();
    let mut best = 0;
    let mut start = 0;
    for end in 0..times.len() {
        while times[end] - times[start] >= chrono::TimeDelta::seconds(1) {
            start += 1;
        }
        best = best.max(end - start + 1);
    }
    best as u64
}

pub async fn campaign_isolation(ctx: &Ctx, run: u32) -> anyhow::Result<CampaignIsolation> {
    let n = ctx.options.bulk();
    let tag = format!("r{run}-b9");
    let stub = AwsStub::start()
        .await
        .context("cannot start the stand-in for SES")?;
    stub.set_latency(STUB_LATENCY);
    let env = env(&stub);
    let db = ctx.server.fresh_database().await?;
    let client = db.connect().await?;
    client
        .execute(
            "INSERT INTO recipients (owner, recipient_id, email)
             SELECT '00000000-0000-0000-0000-000000000000', 'r' || lpad(i::text, 7, '0'),
                    'r' || i || '@campaign.example.com'
             FROM generate_series(1, $1::int8) AS i",
            &[&i64::try_from(n)?],
        )
        .await?;

    let api = ctx
        .launcher
        .start_with(Role::Api, &db.url, &tag, &env)
        .await?;
    let workers = ctx.workers_with(1, &db, &tag, &env).await?;
    post(
        ctx,
        format!("{}/templates/spring/versions", api.base_url),
        &json!({"channel": "EMAIL", "defaultLocale": "en", "sampleData": {"name": "Ada", "recipient": {"id": "r1"}},
                "locales": {"en": {"subject": "Spring, {{ name }}",
                                   "text": "Hello {{ recipient.id }}, spring is here."}}}),
    )
    .await?;

    // Transactional traffic at 50 /s from before the campaign to after its drain.
    let feeding = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let feeder = {
        let (http, url, feeding) = (
            ctx.http.clone(),
            format!("{}/notifications", api.base_url),
            feeding.clone(),
        );
        tokio::spawn(async move {
            let mut tick =
                tokio::time::interval(Duration::from_secs_f64(1.0 / TRANSACTIONAL_PER_SECOND));
            let mut i = 0u64;
            let mut failures = 0u64;
            while feeding.load(std::sync::atomic::Ordering::Relaxed) {
                tick.tick().await;
                i += 1;
                let body = json!({"recipient": format!("t{i}@transactional.example.com"),
                    "channel": "EMAIL", "priority": "HIGH", "idempotencyKey": format!("t-{i}"),
                    "sendAt": Utc::now().to_rfc3339(),
                    "payload": {"subject": "Your receipt", "text": "Thank you."}});
                let ok = http
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.to_string())
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                failures += u64::from(!ok);
            }
            failures
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;

    let posted = Instant::now();
    let campaign = post(
        ctx,
        format!("{}/campaigns", api.base_url),
        &json!({"idempotencyKey": format!("b9-{run}"), "name": "Spring",
                "channel": "EMAIL", "template": {"id": "spring", "data": {"name": "friend"}},
                "audience": {"allRecipients": true}}),
    )
    .await?;
    let id = campaign["id"].as_str().context("campaign id")?.to_string();
    let mut progress = Progress::new(format!("B9 run {run} campaign of {n}"), n, "sent");
    let limit = Duration::from_secs((n / 100).max(120));
    let status_url = format!("{}/campaigns/{id}", api.base_url);
    loop {
        let state: Value =
            serde_json::from_slice(&ctx.http.get(&status_url).send().await?.bytes().await?)?;
        let status = state["status"].as_str().unwrap_or_default();
        progress.update(state["counts"]["sent"].as_u64().unwrap_or(0));
        if status == "DONE" {
            break;
        }
        if posted.elapsed() > limit {
            bail!("campaign not done after {limit:?}: {state}");
        }
        // Once a second, as a client would: each GET counts the campaign's notifications
        // by status, work the database would otherwise spend on the expansion and drain.
        tokio::time::sleep(POLL).await;
    }
    feeding.store(false, std::sync::atomic::Ordering::Relaxed);
    let feed_failures = feeder.await?;
    // The last transactional ones leave within a second.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let row = client
        .query_one(
            "SELECT max(sent_at) FROM notifications WHERE class = 'BULK'",
            &[],
        )
        .await?;
    let last: DateTime<Utc> = row.try_get(0)?;
    // The last chunk stamps progressed_at as it ends, just before it commits: the end of
    // the expansion on the same clock as created_at, rather than to the nearest poll.
    let row = client
        .query_one("SELECT created_at, progressed_at FROM campaigns", &[])
        .await?;
    let (created, expanded): (DateTime<Utc>, DateTime<Utc>) = (row.try_get(0)?, row.try_get(1)?);
    let expansion = (expanded - created).as_seconds_f64();
    let latencies: Vec<f64> = client
        .query(
            "SELECT extract(epoch FROM sent_at - scheduled_at)::float8 * 1000
             FROM notifications WHERE class = 'TRANSACTIONAL' AND status = 'SENT'",
            &[],
        )
        .await?
        .iter()
        .map(|r| r.get::<_, f64>(0))
        .collect();
    let unsent: i64 = client
        .query_one(
            "SELECT count(*) FROM notifications WHERE class = 'TRANSACTIONAL' AND status <> 'SENT'",
            &[],
        )
        .await?
        .get(0);
    let calls = stub.calls();
    let mut campaign_times: Vec<DateTime<Utc>> = calls
        .iter()
        .filter(|c| c.recipient.ends_with("@campaign.example.com"))
        .map(|c| c.at)
        .collect();
    let by_recipient: HashMap<&str, usize> = calls.iter().fold(HashMap::new(), |mut seen, c| {
        *seen.entry(c.recipient.as_str()).or_default() += 1;
        seen
    });
    let campaign_calls = campaign_times.len() as u64;
    let busiest = busiest_second(&mut campaign_times);
    let transactional = Latency::of(&stats::sorted(latencies));
    progress.finish(&format!(
        "expansion {:.1} s; campaign busiest second {busiest}; transactional p99 {}",
        expansion,
        stats::ms(transactional.p99_ms)
    ));
    api.stop(STOP_GRACE).await;
    stop_all(workers).await;
    drop(client);
    db.drop_now().await?;
    ensure!(
        feed_failures == 0,
        "{feed_failures} transactional POSTs failed"
    );
    ensure!(
        unsent == 0,
        "{unsent} transactional notifications were not sent"
    );
    ensure!(
        campaign_calls == n,
        "the stand-in received {campaign_calls} campaign calls for {n} recipients"
    );
    ensure!(
        by_recipient.values().all(|&calls| calls == 1),
        "a recipient received two calls"
    );
    Ok(CampaignIsolation {
        recipients: n,
        rate_per_s: RATE_PER_SECOND,
        transactional_reserved_per_s: TRANSACTIONAL_RESERVED,
        expansion_s: expansion,
        campaign_drain_s: (last - created).as_seconds_f64(),
        busiest_campaign_second: busiest,
        campaign_calls,
        transactional,
    })
}
