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
    queue::find(&db, id).await.expect("find").expect("exists")
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
