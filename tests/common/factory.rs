//! Small factories for notifications in a known state.

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use notify_shared::notification::{Channel, Notification, Priority};
use notify_shared::queue::{self, Due, InsertOutcome, NewNotification};
use serde_json::json;
use uuid::Uuid;

#[derive(Debug, Clone)]
pub struct Spec {
    pub recipient: String,
    pub channel: Channel,
    pub priority: Priority,
    pub due: Due,
    pub max_attempts: i32,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            recipient: format!("user-{}@example.com", Uuid::new_v4().simple()),
            channel: Channel::Email,
            priority: Priority::Normal,
            // Due a moment ago.
            due: Due::At(Utc::now() - chrono::TimeDelta::seconds(1)),
            max_attempts: 6,
        }
    }
}

impl Spec {
    pub fn to(recipient: &str) -> Self {
        Spec {
            recipient: recipient.to_string(),
            ..Spec::default()
        }
    }
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }
    pub fn due_at(mut self, at: DateTime<Utc>) -> Self {
        self.due = Due::At(at);
        self
    }
    pub fn due_in_seconds(mut self, seconds: i32) -> Self {
        self.due = Due::AfterSeconds(seconds);
        self
    }
    pub fn max_attempts(mut self, attempts: i32) -> Self {
        self.max_attempts = attempts;
        self
    }
}

/// Inserts one notification through the real insert statement.
pub async fn create(pool: &Pool, spec: Spec) -> Notification {
    let db = pool.get().await.expect("connection");
    let id = Uuid::new_v4();
    let new = NewNotification {
        id,
        idempotency_key: format!("key-{id}"),
        fingerprint: "0".repeat(64),
        recipient: spec.recipient,
        channel: spec.channel,
        priority: spec.priority,
        payload: json!({"subject": "hello"}),
        due: spec.due,
        max_attempts: spec.max_attempts,
        owner_key_id: None,
    };
    match queue::insert(&db, &new).await.expect("insert") {
        InsertOutcome::Created(notification) => notification,
        other => panic!("expected a new notification, got {other:?}"),
    }
}

pub async fn create_many(
    pool: &Pool,
    count: usize,
    spec: impl Fn(usize) -> Spec,
) -> Vec<Notification> {
    let mut created = Vec::with_capacity(count);
    for i in 0..count {
        created.push(create(pool, spec(i)).await);
    }
    created
}

/// Reads a notification as the API would show it.
pub async fn load(pool: &Pool, id: Uuid) -> Notification {
    let db = pool.get().await.expect("connection");
    queue::find(&db, id, None)
        .await
        .expect("find")
        .expect("exists")
}

/// Count of rows matching a SQL condition on `notifications`.
pub async fn count_where(pool: &Pool, condition: &str) -> i64 {
    let db = pool.get().await.expect("connection");
    db.query_one(
        &format!("SELECT count(*) FROM notifications WHERE {condition}"),
        &[],
    )
    .await
    .expect("count")
    .get(0)
}

/// Inserts `count` notifications due a second ago in one statement, each to its own
/// recipient (so no per-recipient limit applies), NORMAL priority, `max_attempts` 6.
/// Returns their ids. No wake-up is sent: start sweepers after this.
pub async fn create_due_bulk(pool: &Pool, count: i64) -> Vec<Uuid> {
    let db = pool.get().await.expect("connection");
    db.query(
        "INSERT INTO notifications (id, idempotency_key, fingerprint, recipient, channel,
                                    priority, payload, scheduled_at, next_attempt_at, max_attempts)
         SELECT id, 'bulk-' || id, repeat('0', 64), 'bulk-' || g || '@example.com', 'EMAIL',
                1, '{\"subject\": \"hello\"}'::jsonb, now() - interval '1 second',
                now() - interval '1 second', 6
         FROM (SELECT g, gen_random_uuid() AS id FROM generate_series(1, $1::int8) AS g) AS s
         RETURNING id",
        &[&count],
    )
    .await
    .expect("bulk insert")
    .iter()
    .map(|row| row.get(0))
    .collect()
}

/// Moves a PENDING notification to DEAD_LETTERED (attempts used up) with `last_error`, as
/// the CHECK constraints require (`dead_lettered_at` set). No webhook event is written.
pub async fn dead_letter(pool: &Pool, id: Uuid, last_error: &str) {
    dead_letter_many(pool, &[id], last_error).await;
}

/// [`dead_letter`] for many notifications in one statement.
pub async fn dead_letter_many(pool: &Pool, ids: &[Uuid], last_error: &str) {
    finish(
        pool,
        ids,
        "status = 'DEAD_LETTERED', dead_lettered_at = now(), attempt_count = max_attempts",
        last_error,
    )
    .await;
}

/// Moves a PENDING notification to FAILED (one attempt used) with `last_error`, as the
/// CHECK constraints require (`failed_at` set). No webhook event is written.
pub async fn fail(pool: &Pool, id: Uuid, last_error: &str) {
    finish(
        pool,
        &[id],
        "status = 'FAILED', failed_at = now(), attempt_count = 1",
        last_error,
    )
    .await;
}

async fn finish(pool: &Pool, ids: &[Uuid], set: &str, last_error: &str) {
    let db = pool.get().await.expect("connection");
    let changed = db
        .execute(
            &format!(
                "UPDATE notifications SET {set}, last_error = $2, updated_at = now()
                 WHERE id = ANY($1) AND status = 'PENDING'"
            ),
            &[&ids, &last_error],
        )
        .await
        .expect("finish notifications");
    assert_eq!(changed, ids.len() as u64, "not all of {ids:?} were PENDING");
}
