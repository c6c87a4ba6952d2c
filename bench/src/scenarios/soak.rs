//! B10, the soak with retention: one API and one worker process with retention windows of
//! a few seconds (a compressed clock); ten rounds of N notifications, each loaded as in B1,
//! released as in B2 and drained, while retention deletes the rounds before it. Measured
//! per round: the drain rate, the bytes of every table a notification writes to (B7's
//! list) and the rows left; at the end, once retention has aged out the last round, the
//! final bytes. The claim: the tables stay flat (final ≤ 1.2 × after round 1) and the
//! drain does not slow down (last round ≥ 0.9 × the first).

use std::time::{Duration, Instant};

use anyhow::{bail, ensure};
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::drain::{Progressed, STORED_TABLES, wait_drained};
use super::intake::load_bulk;
use super::queries;
use super::{Ctx, STOP_GRACE, short_id, stop_all};
use crate::procs::Role;
use crate::stats::{Progress, int, mb};

/// Rounds of a soak.
pub const ROUNDS: u64 = 10;
/// `RETENTION_SECONDS` and `WEBHOOK_RETENTION_SECONDS` of the soak's processes.
pub const RETENTION_SECONDS: u64 = 5;
/// The targets: final bytes ÷ bytes after round 1, last round's rate ÷ the first's.
pub const MAX_GROWTH: f64 = 1.2;
pub const MIN_RATE_RATIO: f64 = 0.9;
/// How long the end waits for retention to delete the last round.
const AGE_OUT_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Serialize)]
pub struct Round {
    pub round: u64,
    pub notifications: u64,
    pub intake_s: f64,
    /// From the release's commit to the last `sent_at`.
    pub drain_s: f64,
    pub drain_per_s: f64,
    /// `pg_total_relation_size` of [`STORED_TABLES`] right after the drain.
    pub tables: Vec<(String, i64)>,
    pub total_bytes: i64,
    /// Rows still there: notifications (of this round and earlier ones) and webhook events.
    pub notifications_left: u64,
    pub webhook_events_left: u64,
    /// Notifications retention had deleted so far.
    pub deleted_so_far: u64,
    /// Vacuums of those tables so far (autovacuum and any other).
    pub vacuums_so_far: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Soak {
    pub round_size: u64,
    pub retention_s: u64,
    pub rounds: Vec<Round>,
    /// After the last round, once retention deleted everything.
    pub final_tables: Vec<(String, i64)>,
    pub final_bytes: i64,
    /// From the last round's drain until nothing was left.
    pub age_out_s: f64,
    pub final_vacuums: i64,
    pub growth: f64,
    pub rate_ratio: f64,
    pub elapsed_s: f64,
}

fn env() -> Vec<(String, String)> {
    ["RETENTION_SECONDS", "WEBHOOK_RETENTION_SECONDS"]
        .iter()
        .map(|k| (k.to_string(), RETENTION_SECONDS.to_string()))
        .collect()
}

pub async fn soak(ctx: &Ctx, run: u32) -> anyhow::Result<Soak> {
    let started = Instant::now();
    let n = ctx.options.soak_round();
    let tag = format!("r{run}-b10");
    let env = env();
    let db = ctx.server.fresh_database().await?;
    let mut client = db.connect().await?;
    let api = ctx
        .launcher
        .start_with(Role::Api, &db.url, &tag, &env)
        .await?;
    let workers = ctx.workers_with(1, &db, &tag, &env).await?;
    let prefix = format!("b10-{}", short_id());
    let mut rounds = Vec::new();
    for round in 1..=ROUNDS {
        let intake = load_bulk(
            ctx,
            &api,
            &format!("B10 run {run} round {round}/{ROUNDS} intake"),
            &format!("{prefix}-{round}"),
            n,
            "NORMAL",
            crate::load::payload,
        )
        .await?;
        let (_, released_at, released) = queries::release(&mut client).await?;
        ensure!(
            released == n,
            "round {round}: released {released}, expected {n}"
        );
        let mut progress = Progress::new(
            format!("B10 run {run} round {round}/{ROUNDS} drain"),
            n,
            "sent",
        );
        wait_drained(ctx, &client, n, &mut progress, Progressed::LeftQueue).await?;
        let last: Option<DateTime<Utc>> = client
            .query_one("SELECT max(sent_at) FROM notifications", &[])
            .await?
            .try_get(0)?;
        let Some(last) = last else {
            bail!("round {round}: no SENT notification left to time the drain by");
        };
        let not_sent = queries::count(
            &client,
            "SELECT count(*) FROM notifications WHERE status <> 'SENT'",
        )
        .await?;
        ensure!(
            not_sent == 0,
            "round {round}: {not_sent} notifications not SENT"
        );
        let drain_s = queries::seconds_between(released_at, last);
        let (tables, total_bytes) = sizes(&client).await?;
        let r = Round {
            round,
            notifications: n,
            intake_s: intake.as_secs_f64(),
            drain_s,
            drain_per_s: n as f64 / drain_s,
            total_bytes,
            tables,
            notifications_left: queries::count(&client, "SELECT count(*) FROM notifications")
                .await?,
            webhook_events_left: queries::count(&client, "SELECT count(*) FROM webhook_events")
                .await?,
            deleted_so_far: deleted_so_far(&client).await?,
            vacuums_so_far: vacuums(&client).await?,
        };
        let first_bytes = rounds
            .first()
            .map_or(r.total_bytes, |f: &Round| f.total_bytes);
        progress.finish(&format!(
            "{} /s; tables {} ({:.2} x round 1); {} notifications left, {} deleted so far",
            int(r.drain_per_s),
            mb(r.total_bytes as f64),
            r.total_bytes as f64 / first_bytes.max(1) as f64,
            int(r.notifications_left as f64),
            int(r.deleted_so_far as f64),
        ));
        rounds.push(r);
    }
    api.stop(STOP_GRACE).await;

    // The last round ages out: retention deletes it RETENTION_SECONDS after it was sent.
    let aging = Instant::now();
    let total = n * ROUNDS;
    let mut progress = Progress::new(format!("B10 run {run} aging out"), total, "deleted");
    loop {
        let deleted = deleted_so_far(&client).await?;
        progress.update(deleted);
        let left = queries::count(&client, "SELECT count(*) FROM notifications").await?
            + queries::count(&client, "SELECT count(*) FROM webhook_events").await?;
        if left == 0 {
            break;
        }
        if aging.elapsed() > AGE_OUT_TIMEOUT {
            bail!("{left} rows still there {AGE_OUT_TIMEOUT:?} after the last round");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let age_out_s = aging.elapsed().as_secs_f64();
    let deleted = deleted_so_far(&client).await?;
    ensure!(
        deleted == total,
        "retention deleted {deleted} notifications, expected {total}"
    );
    let (final_tables, final_bytes) = sizes(&client).await?;
    let final_vacuums = vacuums(&client).await?;
    stop_all(workers).await;
    drop(client);
    db.drop_now().await?;

    let first = &rounds[0];
    let last = &rounds[rounds.len() - 1];
    let soak = Soak {
        round_size: n,
        retention_s: RETENTION_SECONDS,
        growth: final_bytes as f64 / first.total_bytes.max(1) as f64,
        rate_ratio: last.drain_per_s / first.drain_per_s,
        rounds,
        final_tables,
        final_bytes,
        age_out_s,
        final_vacuums,
        elapsed_s: started.elapsed().as_secs_f64(),
    };
    progress.finish(&format!(
        "final {} = {:.2} x round 1 (target <= {MAX_GROWTH}); last round {:.2} x the first's rate (target >= {MIN_RATE_RATIO})",
        mb(soak.final_bytes as f64),
        soak.growth,
        soak.rate_ratio
    ));
    Ok(soak)
}

/// Each of [`STORED_TABLES`] with its indexes and TOAST, and their sum.
async fn sizes(client: &tokio_postgres::Client) -> anyhow::Result<(Vec<(String, i64)>, i64)> {
    let mut tables = Vec::new();
    for table in STORED_TABLES {
        let bytes: i64 = client
            .query_one(
                "SELECT pg_total_relation_size($1::text::regclass)",
                &[&table],
            )
            .await?
            .try_get(0)?;
        tables.push((table.to_string(), bytes));
    }
    let total = tables.iter().map(|(_, b)| b).sum();
    Ok((tables, total))
}

/// Notifications retention deleted so far (its maintained count).
async fn deleted_so_far(client: &tokio_postgres::Client) -> anyhow::Result<u64> {
    queries::count(
        client,
        "SELECT coalesce(sum(deleted), 0)::int8 FROM retention_counts WHERE kind = 'notifications'",
    )
    .await
}

/// Vacuums (manual and automatic) of [`STORED_TABLES`] so far.
async fn vacuums(client: &tokio_postgres::Client) -> anyhow::Result<i64> {
    let tables: Vec<&str> = STORED_TABLES.to_vec();
    Ok(client
        .query_one(
            "SELECT coalesce(sum(vacuum_count + autovacuum_count), 0)::int8
             FROM pg_stat_user_tables WHERE relname = ANY($1)",
            &[&tables],
        )
        .await?
        .try_get(0)?)
}
