//! A create request that passed validation, its fingerprint, and the row it becomes.

use chrono::{DateTime, Utc};
use serde_json::Value;

use std::sync::Arc;

use uuid::Uuid;

use super::fingerprint;
use crate::content::Version;
use crate::notification::{Channel, Class, Priority};
use crate::queue::{Due, Expiry};

/// Who a request is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestTarget {
    /// `recipient`: an address.
    Address(String),
    /// `recipientId`: a recipient profile of the caller.
    Profile(String),
}

/// A notification's template: what the request named, and the version pinned for it.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateUse {
    pub id: String,
    /// As asked; `None` for the latest at enqueue.
    pub version: Option<i32>,
    /// `locale` as asked.
    pub locale: Option<String>,
    /// The campaign enqueuing it, if any.
    pub campaign: Option<Uuid>,
    /// The version read at enqueue (set before admission).
    pub pinned: Option<Arc<Version>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateRequest {
    pub target: RequestTarget,
    pub channel: Channel,
    pub payload: Value,
    pub priority: Priority,
    pub idempotency_key: String,
    pub due: Due,
    /// `sendAt` as given, normalised to UTC (part of the fingerprint).
    pub send_at: Option<DateTime<Utc>>,
    pub delay_seconds: Option<i32>,
    pub class: Class,
    pub category: String,
    pub expiry: Option<Expiry>,
    /// With a template, `payload` holds its data.
    pub template: Option<TemplateUse>,
}

impl CreateRequest {
    /// What tells a replay from a conflicting reuse of the key: the digest of
    /// `{recipient | recipientId, channel, payload | template (and locale), priority, sendAt, delaySeconds, class,
    /// category, expiresAt, ttlSeconds}`, absent members and defaults (`TRANSACTIONAL`,
    /// `general`) omitted and times in UTC (so `09:30+01:00` ≡ `08:30Z`, and a request
    /// written before these members existed keeps its fingerprint). The key is not part
    /// of it.
    pub fn fingerprint(&self) -> String {
        let mut members = serde_json::Map::new();
        members.insert("channel".into(), Value::from(self.channel.as_str()));
        match &self.template {
            None => {
                members.insert("payload".into(), self.payload.clone());
            }
            Some(template) => {
                let mut named = serde_json::Map::new();
                named.insert("id".into(), Value::from(template.id.as_str()));
                if let Some(version) = template.version {
                    named.insert("version".into(), Value::from(version));
                }
                named.insert("data".into(), self.payload.clone());
                members.insert("template".into(), Value::Object(named));
                if let Some(locale) = &template.locale {
                    members.insert("locale".into(), Value::from(locale.as_str()));
                }
            }
        }
        members.insert("priority".into(), Value::from(self.priority.as_str()));
        match &self.target {
            RequestTarget::Address(address) => {
                members.insert("recipient".into(), Value::from(address.as_str()));
            }
            RequestTarget::Profile(id) => {
                members.insert("recipientId".into(), Value::from(id.as_str()));
            }
        }
        if self.class != Class::Transactional {
            members.insert("class".into(), Value::from(self.class.as_str()));
        }
        if self.category != "general" {
            members.insert("category".into(), Value::from(self.category.as_str()));
        }
        match self.expiry {
            Some(Expiry::At(at)) => {
                let at = at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
                members.insert("expiresAt".into(), Value::from(at));
            }
            Some(Expiry::AfterSeconds(seconds)) => {
                members.insert("ttlSeconds".into(), Value::from(seconds));
            }
            None => {}
        }
        if let Some(at) = self.send_at {
            let at = at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
            members.insert("sendAt".into(), Value::from(at));
        }
        if let Some(seconds) = self.delay_seconds {
            members.insert("delaySeconds".into(), Value::from(seconds));
        }
        fingerprint::digest(&Value::Object(members))
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
    fn defaults_given_explicitly_are_the_same_request_as_left_out() {
        let base = json!({"recipient":"r","channel":"SMS","priority":"LOW","idempotencyKey":"k","payload":{},"delaySeconds":5});
        let mut explicit = base.clone();
        explicit["class"] = json!("TRANSACTIONAL");
        explicit["category"] = json!("general");
        let fp = |v: &Value| {
            validate_create(v, chrono::Utc::now())
                .expect("valid")
                .fingerprint()
        };
        assert_eq!(fp(&base), fp(&explicit));
        let mut bulk = base.clone();
        bulk["class"] = json!("BULK");
        assert_ne!(fp(&base), fp(&bulk));
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
