//! The notification as clients see it: exactly the fields of the API contract (never the
//! payload, fingerprint or claim), and the one time format of every response.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use uuid::Uuid;

pub use crate::domain::{Channel, Class, Priority, Status, SuppressionReason};

/// A notification as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Notification {
    pub id: Uuid,
    pub idempotency_key: String,
    pub recipient: String,
    pub channel: Channel,
    pub priority: Priority,
    pub status: Status,
    #[serde(serialize_with = "iso")]
    pub scheduled_at: DateTime<Utc>,
    #[serde(serialize_with = "iso")]
    pub next_attempt_at: DateTime<Utc>,
    pub attempt_count: i32,
    pub max_attempts: i32,
    pub last_error: Option<String>,
    #[serde(serialize_with = "iso_opt")]
    pub sent_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "iso_opt")]
    pub failed_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "iso_opt")]
    pub dead_lettered_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "iso_opt")]
    pub cancelled_at: Option<DateTime<Utc>>,
    pub redrive_count: i32,
    #[serde(serialize_with = "iso_opt")]
    pub last_redriven_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "iso")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "iso")]
    pub updated_at: DateTime<Utc>,
    /// The provider's id of the message that was delivered, when it gives one.
    pub provider_message_id: Option<String>,
    pub class: Class,
    pub category: String,
    /// The recipient profile it was addressed through, if any.
    pub recipient_id: Option<String>,
    #[serde(serialize_with = "iso_opt")]
    pub expires_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "iso_opt")]
    pub suppressed_at: Option<DateTime<Utc>>,
    pub suppressed_reason: Option<SuppressionReason>,
    #[serde(serialize_with = "iso_opt")]
    pub expired_at: Option<DateTime<Utc>>,
    /// The due time quiet hours moved it from (`scheduledAt` shows the moved time).
    #[serde(serialize_with = "iso_opt")]
    pub quiet_hours_deferred_from: Option<DateTime<Utc>>,
    /// The template (id and pinned version) of a template notification; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<crate::content::reference::Shown>,
    /// The locale a template notification is rendered in (resolved at enqueue).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
}

impl Notification {
    /// Shows the template `payload` names, if it is a template notification's.
    pub fn show_template(&mut self, payload: &serde_json::Value) {
        if let Some((reference, _)) = crate::content::Reference::of_payload(payload) {
            self.template = Some(reference.shown());
            self.locale = Some(reference.locale);
        }
    }
}

/// `2026-09-24T12:01:00.000Z`: UTC with milliseconds, as the contract fixes.
pub fn format_time(time: &DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Serializes a time as [`format_time`] writes it (for `#[serde(serialize_with)]`).
pub fn serialize_time<S: serde::Serializer>(time: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    iso(time, s)
}

fn iso<S: serde::Serializer>(time: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_time(time))
}

fn iso_opt<S: serde::Serializer>(time: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match time {
        Some(time) => iso(time, s),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_have_milliseconds_and_z() {
        let time = DateTime::parse_from_rfc3339("2026-09-24T13:01:00.123456+01:00")
            .expect("valid")
            .with_timezone(&Utc);
        assert_eq!(format_time(&time), "2026-09-24T12:01:00.123Z");
    }
}
