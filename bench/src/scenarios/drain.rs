//! B2, B6 and B7, the drain scenarios: one B1 load, then its release drained by N worker
//! processes (B2), the workers' memory (B6) and the tables' size right after (B7); and
//! the processes' start → ready times (B6).

use std::time::{Duration, Instant};

use anyhow::{bail, ensure};
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::intake::load_bulk;
use super::queries::{self, any_open, finished};
use super::{Ctx, STOP_GRACE, short_id, stop_all};
use crate::procs::{Memory, Role};
use crate::stats::{self, Progress};
use crate::sys::{self, CpuUse};

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
        crate::load::payload,
    )
    .await?;
    api.stop(STOP_GRACE).await;
    let stored = queries::count(&client, "SELECT count(*) FROM notifications").await?;
    ensure!(stored == n, "stored {stored} notifications, expected {n}");

    let processes = ctx.workers(workers, &db, &tag).await?;
    let idle_memory = processes[0].memory();
    let pids: Vec<u32> = processes.iter().map(|p| p.pid).collect();

    let (release_took, released_at, released) = queries::release(&mut client).await?;
    ensure!(released == n, "released {released}, expected {n}");
    // CPU is counted from the release's commit: the UPDATE itself is not the drain's work.
    let before = sys::snapshot(&pids, ctx.postmaster);
    let mut progress = Progress::new(
        format!("B2 run {run} drain, {workers} worker(s)"),
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
            "SELECT max(sent_at), count(*) FILTER (WHERE status = 'SENT') FROM notifications",
            &[],
        )
        .await?;
    let last: DateTime<Utc> = row.try_get(0)?;
    let sent = u64::try_from(row.try_get::<_, i64>(1)?).unwrap_or(0);
    ensure!(sent == n, "only {sent} of {n} were SENT");
    let drain_s = queries::seconds_between(released_at, last);
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

/// How a drain's progress is counted.
#[derive(Debug, Clone, Copy)]
pub(super) enum Progressed {
    /// Webhook events written: one per finished notification.
    Outbox,
    /// Notifications that left the queue (the soak's retention deletes outbox rows).
    LeftQueue,
}

/// Waits until no notification is PENDING or PROCESSING: completion is polled every
/// 250 ms, progress every second; fails after the drain timeout.
pub(super) async fn wait_drained(
    ctx: &Ctx,
    client: &tokio_postgres::Client,
    n: u64,
    progress: &mut Progress,
    progressed: Progressed,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + ctx.drain_timeout(n);
    let mut polls = 0u64;
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        polls += 1;
        if polls.is_multiple_of(4) {
            let done = match progressed {
                Progressed::Outbox => finished(client).await?,
                Progressed::LeftQueue => {
                    let open = queries::count(client, "SELECT count(*) FROM queue").await?;
                    n.saturating_sub(open)
                }
            };
            progress.update(done);
        }
        if !any_open(client, "true").await? {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the drain did not finish within {:?}", ctx.drain_timeout(n));
        }
    }
}

/// B7: the size of the tables (with their indexes) right after a drain.
/// Every table a notification's life writes to.
pub const STORED_TABLES: [&str; 6] = notify_shared::retention::NOTIFICATION_TABLES;

#[derive(Debug, Clone, Serialize)]
pub struct Storage {
    pub notifications: u64,
    /// `pg_total_relation_size` (heap, TOAST and indexes) of each of [`STORED_TABLES`].
    pub tables: Vec<(String, i64)>,
    pub bytes_per_notification: f64,
    /// Of the `notifications` table: the heap (main fork) and each index.
    pub notifications_heap_bytes: i64,
    pub notifications_indexes: Vec<(String, i64)>,
    /// Every table of [`STORED_TABLES`] split into its heap (with TOAST and the free-space
    /// and visibility maps) and each of its indexes, largest first within a table.
    pub relations: Vec<RelationBytes>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RelationBytes {
    pub table: String,
    /// `None` for the heap, else the index's name.
    pub index: Option<String>,
    pub bytes: i64,
}

async fn storage(client: &tokio_postgres::Client) -> anyhow::Result<Storage> {
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
    let n: i64 = client
        .query_one("SELECT count(*) FROM notifications", &[])
        .await?
        .try_get(0)?;
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
    let mut relations = Vec::new();
    for table in STORED_TABLES {
        let rows = client
            .query(
                "SELECT NULL::text, pg_table_size(t.oid) FROM pg_class t WHERE t.oid = $1::text::regclass
                 UNION ALL
                 (SELECT c.relname::text, pg_relation_size(c.oid) FROM pg_index i
                  JOIN pg_class c ON c.oid = i.indexrelid
                  WHERE i.indrelid = $1::text::regclass ORDER BY 2 DESC)",
                &[&table],
            )
            .await?;
        for row in rows {
            relations.push(RelationBytes {
                table: table.to_string(),
                index: row.try_get(0)?,
                bytes: row.try_get(1)?,
            });
        }
    }
    Ok(Storage {
        relations,
        notifications_heap_bytes: heap,
        notifications_indexes: indexes,
        notifications: u64::try_from(n).unwrap_or(0),
        bytes_per_notification: tables.iter().map(|(_, b)| b).sum::<i64>() as f64 / n.max(1) as f64,
        tables,
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
    let median = |ms: &[f64]| stats::ms(stats::percentile(&stats::sorted(ms.to_vec()), 0.5));
    progress.finish(&format!(
        "api median {}, worker median {}",
        median(&times.api_ms),
        median(&times.worker_ms)
    ));
    db.drop_now().await?;
    Ok(times)
}
