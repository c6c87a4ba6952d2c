//! Aggregates over `notifications` for metrics. Each is one statement that reads an index
//! or the table once; nothing is counted per notification in application code.

use deadpool_postgres::GenericClient;

/// Rows per (status, channel, priority rank), with their summed attempts and deferrals.
#[derive(Debug, Clone, PartialEq)]
pub struct Breakdown {
    pub status: String,
    pub channel: String,
    pub priority: i16,
    pub count: i64,
    pub attempts: i64,
    pub deferrals: i64,
}

pub async fn breakdown(db: &impl GenericClient) -> Result<Vec<Breakdown>, tokio_postgres::Error> {
    let statement = db
        .prepare_cached(
            "SELECT status, channel, priority, count(*), coalesce(sum(attempt_count), 0)::int8,
                    coalesce(sum(rate_limit_deferrals), 0)::int8
             FROM notifications GROUP BY status, channel, priority",
        )
        .await?;
    db.query(&statement, &[])
        .await?
        .iter()
        .map(|row| {
            Ok(Breakdown {
                status: row.try_get(0)?,
                channel: row.try_get(1)?,
                priority: row.try_get(2)?,
                count: row.try_get(3)?,
                attempts: row.try_get(4)?,
                deferrals: row.try_get(5)?,
            })
        })
        .collect()
}

/// Age in seconds of the oldest due PENDING notification; 0 when none is due. One index
/// probe per priority on the claim index.
pub async fn queue_lag_seconds(db: &impl GenericClient) -> Result<f64, tokio_postgres::Error> {
    let statement = db
        .prepare_cached(
            "SELECT coalesce(extract(epoch FROM now() - least(
                (SELECT min(next_attempt_at) FROM notifications WHERE status = 'PENDING' AND priority = 0),
                (SELECT min(next_attempt_at) FROM notifications WHERE status = 'PENDING' AND priority = 1),
                (SELECT min(next_attempt_at) FROM notifications WHERE status = 'PENDING' AND priority = 2)
             ))::float8, 0)",
        )
        .await?;
    let lag: f64 = db.query_one(&statement, &[]).await?.try_get(0)?;
    Ok((lag.max(0.0) * 1000.0).round() / 1000.0)
}

/// Upper bounds (seconds) of the delivery-latency histogram buckets.
pub const LATENCY_BUCKETS: [f64; 11] =
    [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];

/// Delivery latency (`sent_at` − `scheduled_at`, floored at 0) of every SENT notification:
/// count per bucket (the last is +Inf), sum and count.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyHistogram {
    pub buckets: Vec<(f64, u64)>,
    pub sum: f64,
    pub count: u64,
}

pub async fn delivery_latency(
    db: &impl GenericClient,
) -> Result<LatencyHistogram, tokio_postgres::Error> {
    let statement = db
        .prepare_cached(
            // Prometheus buckets are "less than or equal": a value's bucket is the number of
            // bounds strictly below it, which width_bucket gives on negated values.
            "SELECT $2::int4 - width_bucket(-latency, $1::float8[]) AS bucket, count(*), sum(latency)
             FROM (SELECT greatest(extract(epoch FROM sent_at - scheduled_at)::float8, 0) AS latency
                   FROM notifications WHERE status = 'SENT') AS sent
             GROUP BY bucket",
        )
        .await?;
    let negated: Vec<f64> = LATENCY_BUCKETS.iter().rev().map(|b| -b).collect();
    let bucket_count = LATENCY_BUCKETS.len() as i32;
    let rows = db.query(&statement, &[&negated, &bucket_count]).await?;
    let mut counts = vec![0u64; LATENCY_BUCKETS.len() + 1];
    let (mut sum, mut count) = (0.0, 0u64);
    for row in rows {
        let bucket: i32 = row.try_get(0)?;
        let n = u64::try_from(row.try_get::<_, i64>(1)?).unwrap_or(0);
        counts[usize::try_from(bucket)
            .unwrap_or(0)
            .min(LATENCY_BUCKETS.len())] += n;
        sum += row.try_get::<_, Option<f64>>(2)?.unwrap_or(0.0);
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
