//! Figures for metrics. Counts come from the tables the triggers of migration V7 keep up
//! to date with every statement (a few hundred rows, whatever the queue holds); the queue
//! lag is one probe of the claim index per priority. Nothing reads every notification.

use deadpool_postgres::GenericClient;

use super::count as row_count;
use crate::notification::{Channel, Priority, Status};
use crate::sql::{Statement, statement};

const BREAKDOWN: Statement = statement!("notifications/stats_breakdown");
const QUEUE_LAG: Statement = statement!("notifications/stats_queue_lag");
const DELIVERY_LATENCY: Statement = statement!("notifications/stats_delivery_latency");
const DIGEST_DEAD_LETTERS: Statement = statement!("notifications/digest_dead_letters");
const DIGEST_LAG_BY_LANE: Statement = statement!("notifications/digest_lag_by_lane");

/// Rows per (status, channel, priority rank), with their summed attempts and deferrals.
#[derive(Debug, Clone, PartialEq)]
pub struct Breakdown {
    pub status: Status,
    pub channel: Channel,
    pub priority: Priority,
    pub count: i64,
    pub attempts: i64,
    pub deferrals: i64,
}

pub async fn breakdown(db: &impl GenericClient) -> Result<Vec<Breakdown>, tokio_postgres::Error> {
    let statement = BREAKDOWN.prepare(db).await?;
    db.query(&statement, &[])
        .await?
        .iter()
        .map(|row| {
            Ok(Breakdown {
                status: row.try_get("status")?,
                channel: row.try_get("channel")?,
                priority: row.try_get("priority")?,
                count: row.try_get("count")?,
                attempts: row.try_get("attempts")?,
                deferrals: row.try_get("deferrals")?,
            })
        })
        .collect()
}

/// Age in seconds of the oldest due PENDING notification; 0 when none is due.
pub async fn queue_lag_seconds(db: &impl GenericClient) -> Result<f64, tokio_postgres::Error> {
    let statement = QUEUE_LAG.prepare(db).await?;
    let lag: f64 = db.query_one(&statement, &[]).await?.try_get("lag")?;
    Ok((lag.max(0.0) * 1000.0).round() / 1000.0)
}

/// Upper bounds (seconds) of the delivery-latency histogram buckets; the same list is in
/// `notification_latency_bucket` (migrations V7 and V20), which files each delivery.
pub const LATENCY_BUCKETS: [f64; 11] =
    [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];

/// Delivery latency (`sent_at` − `scheduled_at`, floored at 0) of every transition to
/// SENT so far: count per bucket (the last is +Inf), sum and count.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyHistogram {
    pub buckets: Vec<(f64, u64)>,
    pub sum: f64,
    pub count: u64,
}

pub async fn delivery_latency(
    db: &impl GenericClient,
) -> Result<LatencyHistogram, tokio_postgres::Error> {
    let statement = DELIVERY_LATENCY.prepare(db).await?;
    let rows = db.query(&statement, &[]).await?;
    let mut counts = vec![0u64; LATENCY_BUCKETS.len() + 1];
    let (mut sum, mut count) = (0.0, 0u64);
    for row in rows {
        let bucket: i16 = row.try_get("bucket")?;
        let n = row_count(&row, "count")?;
        counts[usize::try_from(bucket)
            .unwrap_or(0)
            .min(LATENCY_BUCKETS.len())] += n;
        sum += row.try_get::<_, Option<f64>>("sum")?.unwrap_or(0.0);
        count += n;
    }
    let mut buckets: Vec<(f64, u64)> = LATENCY_BUCKETS
        .iter()
        .copied()
        .zip(counts.iter().copied())
        .collect();
    buckets.push((f64::INFINITY, counts[LATENCY_BUCKETS.len()]));
    Ok(LatencyHistogram {
        buckets,
        sum,
        count,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_database_files_deliveries_under_the_same_bounds() {
        let migration = include_str!("../../../migrations/V7__maintained_counts.sql");
        let bounds: Vec<String> = super::LATENCY_BUCKETS
            .iter()
            .map(|b| format!("{b}"))
            .collect();
        let expected = format!("ARRAY[{}]::float8[]", bounds.join(", "));
        assert!(
            migration.contains(&expected),
            "{expected} not in migration V7"
        );
    }
}

/// Dead-lettering over a recent window, for the digest: how many in the window and in the
/// window before it, the most frequent errors and the channels (as `[{error|channel,
/// count}]`).
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetterGrowth {
    pub count: i64,
    pub previous: i64,
    pub top_errors: serde_json::Value,
    pub channels: serde_json::Value,
}

pub async fn dead_letter_growth(
    db: &impl GenericClient,
    window_seconds: i64,
) -> Result<DeadLetterGrowth, tokio_postgres::Error> {
    let statement = DIGEST_DEAD_LETTERS.prepare(db).await?;
    let row = db.query_one(&statement, &[&window_seconds]).await?;
    Ok(DeadLetterGrowth {
        count: row.try_get("count")?,
        previous: row.try_get("previous")?,
        top_errors: row.try_get("top_errors")?,
        channels: row.try_get("channels")?,
    })
}

/// A lane (channel and priority) with due work, and how late its oldest due one is.
#[derive(Debug, Clone, PartialEq)]
pub struct LaneLag {
    pub channel: Channel,
    pub priority: Priority,
    pub oldest_due: chrono::DateTime<chrono::Utc>,
    pub lag_seconds: f64,
}

/// Every lane with due PENDING work, by channel and priority.
pub async fn lag_by_lane(db: &impl GenericClient) -> Result<Vec<LaneLag>, tokio_postgres::Error> {
    let statement = DIGEST_LAG_BY_LANE.prepare(db).await?;
    db.query(&statement, &[])
        .await?
        .iter()
        .map(|row| {
            Ok(LaneLag {
                channel: row.try_get("channel")?,
                priority: row.try_get("priority")?,
                oldest_due: row.try_get("oldest_due")?,
                lag_seconds: row.try_get("lag_seconds")?,
            })
        })
        .collect()
}
