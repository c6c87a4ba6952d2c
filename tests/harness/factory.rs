//! Notifications and outbox rows in a known state, written through the real insert
//! statement or, for states only a worker reaches, with the smallest update the CHECK
//! constraints allow.

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use notify_shared::domain::Class;
use notify_shared::notification::{Channel, Notification, Priority, Status};
use notify_shared::queue::{self, Due, Expiry, InsertOutcome, NewNotification};
use serde_json::{Value, json};
use uuid::Uuid;

#[derive(Debug, Clone)]
pub struct Spec {
    pub recipient: String,
    pub channel: Channel,
    pub priority: Priority,
    pub due: Due,
    pub max_attempts: i32,
    pub payload: Value,
    pub class: Class,
    pub category: String,
    /// The profile the notification names (stored as given: no profile lookup here).
    pub recipient_id: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
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
            payload: json!({"subject": "hello", "text": "hello"}),
            class: Class::Transactional,
            category: "general".to_string(),
            recipient_id: None,
            expires_at: None,
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
    pub fn channel(mut self, channel: Channel) -> Self {
        self.channel = channel;
        self
    }
    pub fn payload(mut self, payload: Value) -> Self {
        self.payload = payload;
        self
    }
    /// Bulk traffic (a campaign's).
    pub fn bulk(mut self) -> Self {
        self.class = Class::Bulk;
        self
    }
    pub fn category(mut self, category: &str) -> Self {
        self.category = category.to_string();
        self
    }
    pub fn recipient_id(mut self, id: &str) -> Self {
        self.recipient_id = Some(id.to_string());
        self
    }
    pub fn expires_at(mut self, at: DateTime<Utc>) -> Self {
        self.expires_at = Some(at);
        self
    }
}

/// Inserts one notification through the real insert statement.
pub async fn create(pool: &Pool, spec: Spec) -> Notification {
    let db = pool.get().await.expect("connection");
    let mut new = NewNotification::new(
        format!("key-{}", Uuid::new_v4()),
        "0".repeat(64),
        spec.recipient,
        spec.channel,
        spec.payload.clone(),
        spec.due,
        spec.max_attempts,
    );
    new.priority = spec.priority;
    new.class = spec.class;
    new.category = spec.category;
    new.recipient_id = spec.recipient_id;
    new.expiry = spec.expires_at.map(Expiry::At);
    let id = new.id;
    let created = match queue::insert(&db, &new).await.expect("insert") {
        InsertOutcome::Created(notification) => notification,
        other => panic!("expected a new notification, got {other:?}"),
    };
    // Intake stores a past sendAt as "due now"; a test that needs one due for a while
    // (a backlog, an order by due time) sets its due time as the queue would have aged it.
    match spec.due {
        Due::At(at) if at < created.next_attempt_at => {
            db.execute(
                "UPDATE notifications SET scheduled_at = $2, next_attempt_at = $2 WHERE id = $1",
                &[&id, &at],
            )
            .await
            .expect("age the due time");
            load(pool, id).await
        }
        _ => created,
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

/// A notification's status and redrive count.
pub async fn status_of(pool: &Pool, id: Uuid) -> (Status, i32) {
    let n = load(pool, id).await;
    (n.status, n.redrive_count)
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

/// Creates `count` notifications (to `recipient`, or each to its own) with `max_attempts`
/// 3, so a redrive's fresh 6 shows, and dead-letters them with `error`.
pub async fn dead_lettered(
    pool: &Pool,
    count: usize,
    recipient: Option<&str>,
    error: &str,
) -> Vec<Uuid> {
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count {
        let spec = match recipient {
            Some(r) => Spec::to(r),
            None => Spec::default(),
        };
        let n = create(pool, spec.max_attempts(3)).await;
        dead_letter(pool, n.id, error).await;
        ids.push(n.id);
    }
    ids
}

/// Creates `count` notifications with `max_attempts` 3 and fails them with `error`.
pub async fn failed(pool: &Pool, count: usize, error: &str) -> Vec<Uuid> {
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count {
        let n = create(pool, Spec::default().max_attempts(3)).await;
        fail(pool, n.id, error).await;
        ids.push(n.id);
    }
    ids
}

/// Moves a notification to CANCELLED (`cancelled_at` set), whatever its status.
pub async fn mark_cancelled(pool: &Pool, id: Uuid) {
    crate::db::execute(
        pool,
        "UPDATE notifications SET status = 'CANCELLED', cancelled_at = now() WHERE id = $1",
        &[&id],
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

// ---------------------------------------------------------------------------------------
// The outbox
// ---------------------------------------------------------------------------------------

/// Writes the outbox row a final transition would have written: `status` after
/// `attempt_count` attempts, at `occurred_at`, generation 0. Returns the event id.
pub async fn insert_event(
    pool: &Pool,
    notification_id: Uuid,
    status: &str,
    attempt_count: i32,
    occurred_at: DateTime<Utc>,
) -> Uuid {
    let db = pool.get().await.expect("connection");
    db.query_one(
        "INSERT INTO webhook_events (id, type, notification_id, status, attempt_count,
                                     redrive_generation, occurred_at)
         VALUES (gen_random_uuid(), 'notification.' || lower($2), $1, $2, $3, 0, $4)
         RETURNING id",
        &[&notification_id, &status, &attempt_count, &occurred_at],
    )
    .await
    .expect("insert event")
    .get(0)
}

/// One SENT event per notification, in one statement.
pub async fn insert_events(pool: &Pool, notifications: &[Notification]) -> Vec<Uuid> {
    let ids: Vec<Uuid> = notifications.iter().map(|n| n.id).collect();
    let db = pool.get().await.expect("connection");
    db.query(
        "INSERT INTO webhook_events (id, type, notification_id, status, attempt_count,
                                     redrive_generation, occurred_at)
         SELECT gen_random_uuid(), 'notification.sent', n, 'SENT', 1, 0, now()
         FROM unnest($1::uuid[]) AS n
         RETURNING id",
        &[&ids],
    )
    .await
    .expect("insert events")
    .iter()
    .map(|row| row.get(0))
    .collect()
}

/// The webhook events of one notification: (status, attempt count), oldest first.
pub async fn events(pool: &Pool, id: Uuid) -> Vec<(String, i32)> {
    pool.get()
        .await
        .expect("connection")
        .query(
            "SELECT status, attempt_count FROM webhook_events
             WHERE notification_id = $1 ORDER BY occurred_at, status",
            &[&id],
        )
        .await
        .expect("events")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

/// The webhook events of one notification: (status, redrive generation), by generation.
pub async fn event_generations(pool: &Pool, id: Uuid) -> Vec<(String, i32)> {
    pool.get()
        .await
        .expect("connection")
        .query(
            "SELECT status, redrive_generation FROM webhook_events
             WHERE notification_id = $1 ORDER BY redrive_generation, status",
            &[&id],
        )
        .await
        .expect("events")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

/// Moves a claimed (PROCESSING) notification to SENT as if the provider had accepted it
/// `latency` after its scheduled time: the transition the delivery-latency histogram
/// counts, with a latency the test chooses. No webhook event is written.
pub async fn sent_after(pool: &Pool, id: Uuid, latency: &str) {
    let db = pool.get().await.expect("connection");
    let changed = db
        .execute(
            &format!(
                "UPDATE notifications SET status = 'SENT',
                        sent_at = scheduled_at + interval '{latency} seconds',
                        claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL
                 WHERE id = $1 AND status = 'PROCESSING'"
            ),
            &[&id],
        )
        .await
        .expect("mark sent");
    assert_eq!(changed, 1, "{id} was not PROCESSING");
}
