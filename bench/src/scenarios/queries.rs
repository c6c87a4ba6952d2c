//! The SQL the scenarios use on their database: releasing the stored notifications,
//! watching the queue drain, and reading counts and latencies back.

use std::time::{Duration, Instant};

use anyhow::bail;
use chrono::{DateTime, Utc};

use crate::stats::{self, Progress};

/// Makes every PENDING notification due now.
pub const RELEASE: &str =
    "UPDATE notifications SET scheduled_at = now(), next_attempt_at = now(), updated_at = now()
             WHERE id IN (SELECT id FROM queue WHERE status = 'PENDING')";

/// How many notifications were SENT.
pub const SENT: &str = "SELECT count(*) FROM notifications WHERE status = 'SENT'";

/// Makes every PENDING notification due now with one UPDATE, and wakes the workers in
/// the same transaction (as intake does for a notification due now). Returns how long
/// the statement took and the database clock right after it committed.
pub async fn release(
    client: &mut tokio_postgres::Client,
) -> anyhow::Result<(Duration, DateTime<Utc>, u64)> {
    let started = Instant::now();
    let tx = client.transaction().await?;
    let released = tx.execute(RELEASE, &[]).await?;
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

/// Seconds from `from` to `to` on the database clock, at least a millisecond.
pub fn seconds_between(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    ((to - from).num_microseconds().unwrap_or(0) as f64 / 1e6).max(1e-3)
}

/// Whether any notification matching `filter` is still PENDING or PROCESSING. Only the
/// queue table's open rows are looked at (it shrinks as the drain goes) and the probe stops
/// at the first match, so polling costs the drain almost nothing (a `count(*)` over the
/// churned table cost ~100 ms of PostgreSQL CPU per poll).
pub async fn any_open(client: &tokio_postgres::Client, filter: &str) -> anyhow::Result<bool> {
    let sql = format!(
        "SELECT EXISTS (SELECT 1 FROM notifications
                        WHERE id IN (SELECT id FROM queue WHERE status IN ('PENDING', 'PROCESSING'))
                          AND {filter})"
    );
    Ok(client.query_one(&sql, &[]).await?.try_get(0)?)
}

/// Final outcomes so far, from the narrow outbox (one event per SENT notification here).
pub async fn finished(client: &tokio_postgres::Client) -> anyhow::Result<u64> {
    count(client, "SELECT count(*) FROM webhook_events").await
}

pub async fn count(client: &tokio_postgres::Client, sql: &str) -> anyhow::Result<u64> {
    let n: i64 = client.query_one(sql, &[]).await?.try_get(0)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Waits until `sql` (a count) reaches `target`, with progress; fails after `timeout`.
pub async fn wait_for_count(
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

/// `(sent_at − scheduled_at)` in ms of the SENT rows matching `filter`.
pub async fn latencies_ms(
    client: &tokio_postgres::Client,
    filter: &str,
) -> anyhow::Result<Vec<f64>> {
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
