//! A create request that passed validation, its fingerprint, and the row it becomes.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::fingerprint;
use crate::notification::{Channel, Priority};
use crate::queue::{Due, NewNotification};

#[derive(Debug, Clone, PartialEq)]
pub struct CreateRequest {
    pub recipient: String,
    pub channel: Channel,
    pub payload: Value,
    pub priority: Priority,
    pub idempotency_key: String,
    pub due: Due,
    /// `sendAt` as given, normalised to UTC (part of the fingerprint).
    pub send_at: Option<DateTime<Utc>>,
    pub delay_seconds: Option<i32>,
}

impl CreateRequest {
    /// What tells a replay from a conflicting reuse of the key: the digest of
    /// `{recipient, channel, payload, priority, sendAt, delaySeconds}`, absent members
    /// omitted and `sendAt` in UTC (so `09:30+01:00` ≡ `08:30Z`). The key is not part of it.
    pub fn fingerprint(&self) -> String {
        let mut members = serde_json::Map::new();
        members.insert("channel".into(), Value::from(self.channel.as_str()));
        members.insert("payload".into(), self.payload.clone());
        members.insert("priority".into(), Value::from(self.priority.as_str()));
        members.insert("recipient".into(), Value::from(self.recipient.as_str()));
        if let Some(at) = self.send_at {
            let at = at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
            members.insert("sendAt".into(), Value::from(at));
        }
        if let Some(seconds) = self.delay_seconds {
            members.insert("delaySeconds".into(), Value::from(seconds));
        }
        fingerprint::digest(&Value::Object(members))
    }

    /// The row to insert: a fresh id, the request's fingerprint, and who created it.
    pub fn into_new(self, max_attempts: i32, owner_key_id: Option<Uuid>) -> NewNotification {
        NewNotification {
            id: Uuid::new_v4(),
            fingerprint: self.fingerprint(),
            idempotency_key: self.idempotency_key,
            recipient: self.recipient,
            channel: self.channel,
            priority: self.priority,
            payload: self.payload,
            due: self.due,
            max_attempts,
            owner_key_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::validation::validate_create;
    use serde_json::{Value, json};

    fn fingerprint_of(body: &str) -> String {
        let value: Value = serde_json::from_str(body).expect("json");
        validate_create(&value, chrono::Utc::now())
            .expect("valid")
            .fingerprint()
    }

    #[test]
    fn key_order_and_offsets_do_not_matter() {
        let a = fingerprint_of(
            r#"{"recipient":"r","channel":"SMS","priority":"LOW","idempotencyKey":"k",
            "payload":{"b":1,"a":{"y":2,"x":[{"q":1,"p":2}]}},"sendAt":"2026-01-01T09:30:00+01:00"}"#,
        );
        let b = fingerprint_of(
            r#"{"idempotencyKey":"k","sendAt":"2026-01-01T08:30:00.000Z","priority":"LOW",
            "payload":{"a":{"x":[{"p":2,"q":1}],"y":2},"b":1},"channel":"SMS","recipient":"r"}"#,
        );
        assert_eq!(a, b);
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn any_difference_in_content_changes_it() {
        let base = json!({"recipient":"r","channel":"SMS","priority":"LOW","idempotencyKey":"k","payload":{},"delaySeconds":5});
        let mut other = base.clone();
        other["delaySeconds"] = json!(6);
        let fp = |v: &Value| {
            validate_create(v, chrono::Utc::now())
                .expect("valid")
                .fingerprint()
        };
        assert_ne!(fp(&base), fp(&other));
        // The key itself is not part of the fingerprint.
        let mut same = base.clone();
        same["idempotencyKey"] = json!("another");
        assert_eq!(fp(&base), fp(&same));
    }
}
