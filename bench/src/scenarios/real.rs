//! B11, the real-provider path: the one-worker drain of B2, with email sent through the
//! SES provider (the AWS SDK over HTTP) to a stand-in for SES v2 that answers after 5 ms,
//! started inside the bench process.

use std::time::Duration;

use anyhow::{Context, ensure};
use chrono::{DateTime, Utc};
use notify_local::aws_stub::AwsStub;
use serde::Serialize;

use super::drain::{Progressed, wait_drained};
use super::intake::load_bulk;
use super::queries;
use super::{Ctx, STOP_GRACE, short_id, stop_all};
use crate::load;
use crate::procs::Role;
use crate::stats::{self, Progress};
use crate::sys::{self, CpuUse};

/// How long the stand-in for SES takes to answer each call.
pub const STUB_LATENCY: Duration = Duration::from_millis(5);

/// One B11 pass: load as B1, release as B2, drained by one worker sending through SES.
#[derive(Debug, Clone, Serialize)]
pub struct RealDrain {
    pub notifications: u64,
    /// `WORKER_CONCURRENCY` of the worker.
    pub worker_concurrency: usize,
    pub stub_latency_ms: f64,
    pub intake_s: f64,
    /// The release UPDATE (+ NOTIFY), before the drain clock starts.
    pub release_s: f64,
    /// From the release's commit to the last `sent_at`.
    pub drain_s: f64,
    pub drain_per_s: f64,
    pub sent: u64,
    /// SENT notifications that carry the stub's message id.
    pub with_message_id: u64,
    /// `SendEmail` calls the stub received (each notification exactly once).
    pub stub_calls: u64,
    /// Largest VmHWM of the worker after the drain.
    pub peak_rss: Option<u64>,
    /// notify-local = the worker; bench = this process, which also serves the stub.
    pub cpu: CpuUse,
}

/// `WORKER_LANES` of the B11 worker: with the stub answering in 5 ms a lane spends most of
/// its batch in database statements, so more lanes than the default four keep more SES
/// calls going (one run each on a 2-core host: 4 lanes 4,620 /s, 6 lanes 5,189 /s, 9 lanes
/// 5,592 /s).
pub const B11_LANES: usize = 9;

/// The worker's (and API's) environment: SES for email, pointed at the stub.
fn ses_env(stub: &AwsStub, concurrency: usize) -> Vec<(String, String)> {
    [
        ("EMAIL_PROVIDER", "ses".to_string()),
        ("SES_FROM_ADDRESS", "bench@example.com".to_string()),
        ("AWS_ENDPOINT_URL", stub.url()),
        ("AWS_REGION", "us-east-1".to_string()),
        ("AWS_ACCESS_KEY_ID", "bench".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "bench".to_string()),
        ("WORKER_CONCURRENCY", concurrency.to_string()),
        ("WORKER_LANES", B11_LANES.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

pub async fn real_drain(ctx: &Ctx, run: u32) -> anyhow::Result<RealDrain> {
    let n = ctx.options.bulk();
    let concurrency = ctx.options.b11_concurrency;
    let tag = format!("r{run}-b11");
    let stub = AwsStub::start()
        .await
        .context("cannot start the stand-in for SES")?;
    stub.set_latency(STUB_LATENCY);
    let env = ses_env(&stub, concurrency);
    let db = ctx.server.fresh_database().await?;
    let mut client = db.connect().await?;

    // The API runs with the same providers, so intake checks that SES can send each one.
    let api = ctx
        .launcher
        .start_with(Role::Api, &db.url, &tag, &env)
        .await?;
    let intake = load_bulk(
        ctx,
        &api,
        &format!("B11 run {run} intake"),
        &format!("b11-{}", short_id()),
        n,
        "NORMAL",
        load::email_payload,
    )
    .await?;
    api.stop(STOP_GRACE).await;
    let stored = queries::count(&client, "SELECT count(*) FROM notifications").await?;
    ensure!(stored == n, "stored {stored} notifications, expected {n}");

    let processes = ctx.workers_with(1, &db, &tag, &env).await?;
    let pids: Vec<u32> = processes.iter().map(|p| p.pid).collect();
    let (release_took, released_at, released) = queries::release(&mut client).await?;
    ensure!(released == n, "released {released}, expected {n}");
    let before = sys::snapshot(&pids, ctx.postmaster);
    let mut progress = Progress::new(
        format!("B11 run {run} drain through SES, 1 worker, concurrency {concurrency}"),
        n,
        "sent",
    );
    wait_drained(ctx, &client, n, &mut progress, Progressed::Outbox).await?;
    let after = sys::snapshot(&pids, ctx.postmaster);
    let peak_rss = processes
        .iter()
        .map(|p| p.memory().map(|m| m.hwm))
        .max()
        .flatten();
    let row = client
        .query_one(
            "SELECT max(sent_at), count(*) FILTER (WHERE status = 'SENT'),
                    count(*) FILTER (WHERE status = 'SENT' AND provider_message_id IS NOT NULL)
             FROM notifications",
            &[],
        )
        .await?;
    let last: DateTime<Utc> = row.try_get(0)?;
    let sent = u64::try_from(row.try_get::<_, i64>(1)?).unwrap_or(0);
    let with_message_id = u64::try_from(row.try_get::<_, i64>(2)?).unwrap_or(0);
    let stub_calls = stub.calls().len() as u64;
    let drain_s = queries::seconds_between(released_at, last);
    progress.finish(&format!(
        "{} /s; {} SendEmail calls",
        stats::int(n as f64 / drain_s),
        stats::int(stub_calls as f64)
    ));
    stop_all(processes).await;
    drop(client);
    db.drop_now().await?;
    ensure!(sent == n, "only {sent} of {n} were SENT");
    ensure!(
        with_message_id == n,
        "only {with_message_id} of {n} SENT notifications have a provider message id"
    );
    ensure!(
        stub_calls == n,
        "the stand-in for SES received {stub_calls} calls for {n} notifications"
    );
    Ok(RealDrain {
        notifications: n,
        worker_concurrency: concurrency,
        stub_latency_ms: STUB_LATENCY.as_secs_f64() * 1000.0,
        intake_s: intake.as_secs_f64(),
        release_s: release_took.as_secs_f64(),
        drain_s,
        drain_per_s: n as f64 / drain_s,
        sent,
        with_message_id,
        stub_calls,
        peak_rss,
        cpu: sys::cpu_use(before, after, drain_s),
    })
}
