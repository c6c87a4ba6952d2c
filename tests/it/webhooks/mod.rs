//! The webhook drainer against a real PostgreSQL and a real HTTP receiver on 127.0.0.1:
//! retries, giving up, exactly-once claims across drainers, lease takeover after a crash,
//! the body contract and Standard Webhooks signatures; endpoints per client, their SSRF
//! rules, secret rotation and replay.

mod delivery;
mod endpoints;
mod guard;
mod races;
mod signing;

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use notify_shared::notification::Notification;
use notify_shared::webhook::outbox::{self, OutboxCounts};
use notify_tests::db::execute;
use notify_tests::factory;
use uuid::Uuid;

/// Skips the backoff: every PENDING event is due now.
async fn make_due(pool: &Pool) {
    execute(
        pool,
        "UPDATE webhook_events SET next_dispatch_at = now() WHERE dispatch_state = 'PENDING'",
        &[],
    )
    .await;
}

#[derive(Debug, Clone, PartialEq)]
struct EventRow {
    state: String,
    attempts: i32,
    leased: bool,
    last_error: Option<String>,
    next_dispatch_at: DateTime<Utc>,
    delivered_at: Option<DateTime<Utc>>,
    given_up_at: Option<DateTime<Utc>>,
}

async fn event_row(pool: &Pool, id: Uuid) -> EventRow {
    let db = pool.get().await.expect("connection");
    let row = db
        .query_one(
            "SELECT dispatch_state, dispatch_attempts, lease_expires_at IS NOT NULL, last_error,
                    next_dispatch_at, delivered_at, given_up_at
             FROM webhook_events WHERE id = $1",
            &[&id],
        )
        .await
        .expect("event row");
    EventRow {
        state: row.get(0),
        attempts: row.get(1),
        leased: row.get(2),
        last_error: row.get(3),
        next_dispatch_at: row.get(4),
        delivered_at: row.get(5),
        given_up_at: row.get(6),
    }
}

async fn counts(pool: &Pool) -> OutboxCounts {
    let db = pool.get().await.expect("connection");
    outbox::counts(&db).await.expect("counts")
}

/// Writes the SENT/FAILED/DEAD_LETTERED event a final transition of `notification` would
/// have written, after one attempt, now.
async fn insert_event(pool: &Pool, notification: &Notification, status: &str) -> Uuid {
    factory::insert_event(pool, notification.id, status, 1, Utc::now()).await
}
