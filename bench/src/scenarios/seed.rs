//! The statements that fill M1's database: a realistic history of `$1` notifications in
//! one `INSERT … SELECT` over `generate_series`, the webhook events of the final ones, and
//! the delivery-latency histogram the triggers would have kept had they been sent.

use std::time::Instant;

use crate::stats::{Progress, int};

/// `$1` notifications, spread over the last 30 days: EMAIL 4/7, SMS 2/7, PUSH 1/7; HIGH
/// 1/11, NORMAL 8/11, LOW 2/11 (bulk class); 90% SENT (a message id, one in 19 on its
/// second attempt), 3% FAILED, 2% DEAD_LETTERED (every attempt used), 1.5% CANCELLED and
/// 3.5% PENDING, due up to a day ahead (one in 17 waiting for a retry); one in 53 held
/// back by the rate limit 1 to 3 times. The moduli are coprime, so every combination
/// occurs. Each status sets exactly the timestamps its CHECK constraints require.
pub const NOTIFICATIONS: &str = "\
INSERT INTO notifications (id, idempotency_key, fingerprint, recipient, channel, priority, class,
                           payload, status, scheduled_at, next_attempt_at, attempt_count,
                           max_attempts, last_error, sent_at, failed_at, dead_lettered_at,
                           cancelled_at, provider_message_id, rate_limit_deferrals, created_at,
                           updated_at)
SELECT gen_random_uuid(), 'm1-' || g, md5('f' || g) || md5('p' || g),
       CASE channel
           WHEN 'EMAIL' THEN 'user' || g % 250000 || '@bench.example'
           WHEN 'SMS' THEN '+1555' || lpad((g % 250000)::text, 7, '0')
           ELSE 'arn:aws:sns:us-east-1:123456789012:endpoint/GCM/bench/' || md5('d' || g % 250000)
       END,
       channel, priority, CASE WHEN priority = 2 THEN 'BULK' ELSE 'TRANSACTIONAL' END,
       CASE channel
           WHEN 'EMAIL' THEN jsonb_build_object('subject', 'Your receipt ' || g,
                                                'text', 'Thank you for order ' || g || '.')
           WHEN 'SMS' THEN jsonb_build_object('text', 'Your code is ' || g % 1000000)
           ELSE jsonb_build_object('title', 'Order ' || g, 'body', 'Your order has shipped.')
       END,
       status, scheduled_at,
       CASE WHEN status = 'PENDING' AND attempts > 0 THEN now() + (g % 600) * interval '1 second'
            ELSE scheduled_at END,
       attempts, 6,
       CASE WHEN status = 'FAILED' THEN 'Provider answered HTTP 400 MessageRejected: Illegal address'
            WHEN status = 'DEAD_LETTERED' THEN 'Provider answered HTTP 503 ServiceUnavailable'
            WHEN attempts > 0 AND status = 'PENDING' THEN 'Provider timed out after 10000ms'
       END,
       CASE WHEN status = 'SENT' THEN finished_at END,
       CASE WHEN status = 'FAILED' THEN finished_at END,
       CASE WHEN status = 'DEAD_LETTERED' THEN finished_at END,
       CASE WHEN status = 'CANCELLED' THEN finished_at END,
       CASE WHEN status = 'SENT' THEN md5('m' || g) END,
       CASE WHEN g % 53 = 0 THEN 1 + g % 3 ELSE 0 END,
       created_at, coalesce(finished_at, created_at)
FROM (
    SELECT *,
           CASE status
               WHEN 'PENDING' THEN NULL
               WHEN 'CANCELLED' THEN created_at + (g % 3600) * interval '1 second'
               WHEN 'DEAD_LETTERED' THEN scheduled_at + interval '63 seconds'
               ELSE scheduled_at + (g % 3000 + 1000 * (attempts - 1)) * interval '1 millisecond'
           END AS finished_at
    FROM (
        SELECT *,
               CASE WHEN status = 'PENDING' AND attempts = 0
                        THEN now() + (60 + g % 86400) * interval '1 second'
                    WHEN status = 'CANCELLED' THEN created_at + interval '1 day'
                    ELSE created_at
               END AS scheduled_at
        FROM (
            SELECT g,
                   now() - interval '1 hour'
                       - interval '30 days' * (($1::int8 - g)::float8 / $1::int8) AS created_at,
                   CASE WHEN g % 7 < 4 THEN 'EMAIL' WHEN g % 7 < 6 THEN 'SMS' ELSE 'PUSH' END
                       AS channel,
                   (CASE WHEN g % 11 = 0 THEN 0 WHEN g % 11 < 9 THEN 1 ELSE 2 END)::int2
                       AS priority,
                   status,
                   CASE status
                       WHEN 'SENT' THEN CASE WHEN g % 19 = 0 THEN 2 ELSE 1 END
                       WHEN 'FAILED' THEN 1
                       WHEN 'DEAD_LETTERED' THEN 6
                       WHEN 'PENDING' THEN CASE WHEN g % 17 = 0 THEN 1 ELSE 0 END
                       ELSE 0
                   END AS attempts
            FROM (
                SELECT g, CASE WHEN g % 1000 < 900 THEN 'SENT'
                               WHEN g % 1000 < 930 THEN 'FAILED'
                               WHEN g % 1000 < 950 THEN 'DEAD_LETTERED'
                               WHEN g % 1000 < 965 THEN 'CANCELLED'
                               ELSE 'PENDING' END AS status
                FROM generate_series(1, $1::int8) AS g
            ) AS drawn
        ) AS mixed
    ) AS scheduled
) AS finished";

/// One event per final notification (SENT, FAILED, DEAD_LETTERED), as the record statement
/// writes them: 97% delivered to the webhook, 1% given up, 2% still waiting.
pub const EVENTS: &str = "\
INSERT INTO webhook_events (id, type, notification_id, status, attempt_count, redrive_generation,
                            occurred_at, dispatch_state, dispatch_attempts, next_dispatch_at,
                            last_error, delivered_at, given_up_at, created_at)
SELECT gen_random_uuid(), 'notification.' || lower(status), id, status, attempt_count,
       redrive_count, occurred_at, state,
       CASE state WHEN 'DELIVERED' THEN 1 WHEN 'GIVEN_UP' THEN 10 ELSE 0 END,
       CASE state WHEN 'PENDING' THEN now() ELSE occurred_at END,
       CASE state WHEN 'GIVEN_UP' THEN 'Webhook answered HTTP 500' END,
       CASE state WHEN 'DELIVERED' THEN occurred_at + interval '150 milliseconds' END,
       CASE state WHEN 'GIVEN_UP' THEN occurred_at + interval '1 hour' END,
       occurred_at
FROM (
    SELECT id, status, attempt_count, redrive_count,
           coalesce(sent_at, failed_at, dead_lettered_at) AS occurred_at,
           CASE WHEN substr(idempotency_key, 4)::int8 % 101 < 98 THEN 'DELIVERED'
                WHEN substr(idempotency_key, 4)::int8 % 101 = 98 THEN 'GIVEN_UP'
                ELSE 'PENDING' END AS state
    FROM notifications
    WHERE status IN ('SENT', 'FAILED', 'DEAD_LETTERED')
) AS final";

/// The histogram of `sent_at − scheduled_at` the update trigger keeps (an insert does not
/// file deliveries), filled as migration V7 fills it for rows that existed before it.
pub const LATENCY: &str = "\
INSERT INTO delivery_latency_counts (bucket, shard, deliveries, seconds)
SELECT notification_latency_bucket(latency), 0, count(*), sum(latency)
FROM (SELECT greatest(extract(epoch FROM sent_at - scheduled_at)::float8, 0) AS latency
      FROM notifications WHERE status = 'SENT') AS sent
GROUP BY 1";

/// What seeding took, in seconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct SeedTimes {
    pub notifications_s: f64,
    pub events_s: f64,
    pub latency_s: f64,
    pub analyze_s: f64,
}

/// Runs the three statements and `ANALYZE`; returns how long each took and how many
/// events were written.
pub async fn seed(
    client: &tokio_postgres::Client,
    n: u64,
    label: &str,
) -> anyhow::Result<(SeedTimes, u64)> {
    let rows = i64::try_from(n)?;
    let progress = Progress::new(label, 0, "");
    let started = Instant::now();
    let inserted = client.execute(NOTIFICATIONS, &[&rows]).await?;
    anyhow::ensure!(inserted == n, "inserted {inserted} of {n} notifications");
    let notifications_s = started.elapsed().as_secs_f64();
    eprintln!("[{label}] {inserted} notifications in {notifications_s:.1} s");
    let started = Instant::now();
    let events = client.execute(EVENTS, &[]).await?;
    let events_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    client.execute(LATENCY, &[]).await?;
    let latency_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    client.batch_execute("ANALYZE").await?;
    let analyze_s = started.elapsed().as_secs_f64();
    progress.finish(&format!(
        "{} webhook events in {events_s:.1} s; histogram {latency_s:.1} s; ANALYZE {analyze_s:.1} s",
        int(events as f64)
    ));
    Ok((
        SeedTimes {
            notifications_s,
            events_s,
            latency_s,
            analyze_s,
        },
        events,
    ))
}
