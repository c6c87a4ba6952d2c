//! The sweeper against a real PostgreSQL: exclusive claims under contention, claim order,
//! what each provider answer leads to, backoff on the database clock, recovery of dead
//! workers, release, the outbox, the delivery gate and wake-ups by LISTEN/NOTIFY.

mod claim;
mod recovery;
mod retries;
mod run;

use deadpool_postgres::Pool;
use notify_shared::queue::Claimed;
use notify_tests::db::{execute, scalar};
use notify_tests::worker::LEASE;
use uuid::Uuid;

/// Claims up to `limit` for `worker` with the default lease.
async fn claim(pool: &Pool, worker: &str, limit: i64) -> Vec<Claimed> {
    let db = pool.get().await.expect("connection");
    notify_tests::worker::claim(&db, worker, limit, LEASE)
        .await
        .expect("claim")
}

/// Moves a retried notification's next attempt to the database's `now()`. The backoff put
/// it up to seconds ahead *on the database clock*, and the claim compares with that clock;
/// waiting it out in the test would be slow and timing-dependent, so time is fast-forwarded
/// instead. Nothing else about the row changes.
async fn make_due_now(pool: &Pool, id: Uuid) {
    let changed = execute(
        pool,
        "UPDATE notifications SET next_attempt_at = now() WHERE id = $1 AND status = 'PENDING'",
        &[&id],
    )
    .await;
    assert_eq!(changed, 1, "{id} is not PENDING");
}

/// Makes every current claim look abandoned: its lease ended a second ago.
async fn expire_leases(pool: &Pool) -> u64 {
    execute(
        pool,
        "UPDATE notifications SET lease_expires_at = now() - interval '1 second'
         WHERE status = 'PROCESSING'",
        &[],
    )
    .await
}

/// Delay between the record statement and the next attempt, both stamped with the same
/// statement's `now()`, in milliseconds on the database clock.
async fn scheduled_delay_ms(pool: &Pool, id: Uuid) -> i64 {
    scalar(
        pool,
        "SELECT (extract(epoch FROM next_attempt_at - updated_at) * 1000)::int8
         FROM notifications WHERE id = $1",
        &[&id],
    )
    .await
}
