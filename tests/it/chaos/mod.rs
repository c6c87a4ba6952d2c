//! Chaos on real `notify-local` worker processes. Each scenario is bounded in time, runs
//! alone (they share the machine), writes every process's stderr to a file, and SIGKILLs
//! whatever it started when it ends, pass or fail.
//!
//! - SIGKILL a random worker every 2 s during a 20,000-notification drain, starting a
//!   replacement each time, with a flaky provider and a webhook receiver.
//! - Restart PostgreSQL (a private server) twice during a drain, once at once and once
//!   after 5 s down.
//! - Keep the webhook receiver down for a whole drain, then bring it back.
//!
//! Each prints one `chaos:` line with its figures and asserts on them: nothing lost,
//! nothing delivered twice, every webhook event delivered, no panic. They take a couple of
//! minutes together, so `cargo test` skips them; run them with
//! `cargo test -p notify-tests --test it -- --ignored chaos --nocapture`
//! (docs/RELIABILITY.md).

mod scenarios;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use notify_tests::process::Fleet;
use uuid::Uuid;

/// The scenarios share two cores with the database: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What every scenario checks in the logs: panics, and lines naming a recipient or an
/// idempotency key (the bulk factory's both start with "bulk-").
fn log_figures(fleet: &Fleet) -> LogFigures {
    LogFigures {
        panics: fleet.lines_containing("panicked"),
        personal: fleet.lines_containing("bulk-"),
    }
}

struct LogFigures {
    panics: Vec<String>,
    personal: Vec<String>,
}

impl LogFigures {
    fn assert_clean(&self) {
        assert!(
            self.panics.is_empty(),
            "panics:\n{}",
            self.panics.join("\n")
        );
        assert!(
            self.personal.is_empty(),
            "logs name recipients or keys:\n{}",
            self.personal[..self.personal.len().min(5)].join("\n")
        );
    }
}

/// The settings every scenario shares: a fast, flaky simulated provider, a 3 s claim lease
/// and short backoffs, so that crashes and retries resolve within seconds.
fn worker_env(webhook_url: Option<&str>) -> Vec<(&'static str, String)> {
    let mut env: Vec<(&'static str, String)> = [
        ("RUST_LOG", "info"),
        ("MOCK_LATENCY_MS", "5"),
        ("MOCK_FAILURE_RATE", "0.1"),
        ("JOB_VISIBILITY_TIMEOUT_SECONDS", "3"),
        ("PROVIDER_TIMEOUT_MS", "1000"),
        ("WORKER_POLL_INTERVAL_MS", "100"),
        ("WORKER_BATCH_SIZE", "100"),
        ("BASE_RETRY_DELAY_MS", "100"),
        ("MAX_RETRY_DELAY_MS", "1000"),
        ("WEBHOOK_TIMEOUT_MS", "1000"),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_string()))
    .collect();
    if let Some(url) = webhook_url {
        env.push(("WEBHOOK_URL", url.to_string()));
    }
    env
}

/// A count; `None` while the database cannot answer (it may be restarting).
async fn try_count(pool: &Pool, sql: &str) -> Option<i64> {
    let db = pool.get().await.ok()?;
    db.query_one(sql, &[]).await.ok()?.try_get(0).ok()
}

async fn count(pool: &Pool, sql: &str) -> i64 {
    try_count(pool, sql)
        .await
        .unwrap_or_else(|| panic!("{sql} failed"))
}

/// Polls `sql` until `until(value)`; panics after `limit` with `context()`.
async fn wait_for(
    pool: &Pool,
    sql: &str,
    limit: Duration,
    until: impl Fn(i64) -> bool,
    context: impl Fn() -> String,
) -> i64 {
    let deadline = Instant::now() + limit;
    loop {
        let value = try_count(pool, sql).await;
        if let Some(value) = value
            && until(value)
        {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "{sql} is still {value:?} after {limit:?}\n{}",
            context()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

const OPEN: &str = "SELECT count(*) FROM notifications WHERE status IN ('PENDING', 'PROCESSING')";

/// The delivery figures of a finished drain of `total` notifications.
#[derive(Debug)]
struct Delivery {
    sent: i64,
    dead_lettered: i64,
    /// Missing rows, unfinished rows, and SENT rows the provider never delivered.
    lost: i64,
    /// Provider deliveries beyond one per key.
    duplicates: i64,
    /// Provider calls answered "already delivered" (recovered claims resent).
    resends: i64,
    /// Anything else that contradicts the delivery semantics.
    inconsistencies: Vec<String>,
}

impl Delivery {
    /// Nothing lost, nothing delivered twice, every state consistent.
    fn assert_sound(&self) {
        assert_eq!(self.lost, 0, "notifications lost");
        assert_eq!(self.duplicates, 0, "duplicate deliveries");
        assert!(
            self.inconsistencies.is_empty(),
            "{}",
            self.inconsistencies.join("\n")
        );
    }
}

async fn delivery_figures(pool: &Pool, total: i64) -> Delivery {
    let rows = count(pool, "SELECT count(*) FROM notifications").await;
    let open = count(pool, OPEN).await;
    let sent = count(
        pool,
        "SELECT count(*) FROM notifications WHERE status = 'SENT'",
    )
    .await;
    let dead_lettered = count(
        pool,
        "SELECT count(*) FROM notifications WHERE status = 'DEAD_LETTERED'",
    )
    .await;
    let sent_not_delivered = count(
        pool,
        "SELECT count(*) FROM notifications n WHERE status = 'SENT'
         AND NOT EXISTS (SELECT 1 FROM simulated_deliveries d WHERE d.delivery_key = n.id)",
    )
    .await;
    let deliveries = count(pool, "SELECT count(*) FROM simulated_deliveries").await;
    let distinct_keys = count(
        pool,
        "SELECT count(DISTINCT delivery_key) FROM simulated_deliveries",
    )
    .await;
    let resends = count(
        pool,
        "SELECT coalesce(sum(calls - 1), 0)::int8 FROM simulated_deliveries",
    )
    .await;
    let delivered_not_sent = count(
        pool,
        "SELECT count(*) FROM simulated_deliveries d JOIN notifications n ON n.id = d.delivery_key
         WHERE n.status <> 'SENT'",
    )
    .await;
    let dead_lettered_early = count(
        pool,
        "SELECT count(*) FROM notifications WHERE status = 'DEAD_LETTERED'
         AND attempt_count < max_attempts",
    )
    .await;
    let other_states = count(
        pool,
        "SELECT count(*) FROM notifications WHERE status NOT IN ('SENT', 'DEAD_LETTERED')",
    )
    .await
        - open;
    let inconsistencies = [
        (delivered_not_sent, "delivered by the provider but not SENT"),
        (dead_lettered_early, "dead-lettered with attempts left"),
        (other_states, "neither SENT, DEAD_LETTERED nor open"),
    ]
    .into_iter()
    .filter(|(n, _)| *n != 0)
    .map(|(n, what)| format!("{n} notifications {what}"))
    .collect();
    Delivery {
        sent,
        dead_lettered,
        lost: (total - rows) + open + sent_not_delivered,
        duplicates: deliveries - distinct_keys + (deliveries - sent).max(0),
        resends,
        inconsistencies,
    }
}

/// Webhook figures once the outbox is drained: events lost (a final notification without a
/// delivered event, or a delivered event the receiver never saw) and redeliveries.
async fn webhook_figures(pool: &Pool, seen: &HashMap<Uuid, u32>) -> (i64, i64, u32) {
    let db = pool.get().await.expect("connection");
    let delivered: Vec<Uuid> = db
        .query(
            "SELECT id FROM webhook_events WHERE dispatch_state = 'DELIVERED'",
            &[],
        )
        .await
        .expect("delivered events")
        .iter()
        .map(|row| row.get(0))
        .collect();
    let without_event = count(
        pool,
        "SELECT count(*) FROM notifications n WHERE status IN ('SENT', 'DEAD_LETTERED')
         AND NOT EXISTS (SELECT 1 FROM webhook_events e WHERE e.notification_id = n.id
                         AND e.status = n.status AND e.dispatch_state = 'DELIVERED')",
    )
    .await;
    let unseen = delivered.iter().filter(|id| !seen.contains_key(id)).count() as i64;
    let redelivered = seen.values().map(|n| n - 1).sum();
    (delivered.len() as i64, without_event + unseen, redelivered)
}

/// A port nothing listens on (yet): bound once by the OS's choice, then released.
fn unused_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}
