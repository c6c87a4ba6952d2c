//! The notification: its channel, priority and status, the row as stored, and the JSON
//! representation clients see (never the payload, fingerprint or claim).

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use uuid::Uuid;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Channel {
    Email,
    Sms,
    Push,
}

impl Channel {
    pub const ALL: [Channel; 3] = [Channel::Email, Channel::Sms, Channel::Push];

    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Email => "EMAIL",
            Channel::Sms => "SMS",
            Channel::Push => "PUSH",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == text)
    }
}

/// Stored as a small integer so that ascending order is claim order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    High = 0,
    Normal = 1,
    Low = 2,
}

impl Priority {
    pub const ALL: [Priority; 3] = [Priority::High, Priority::Normal, Priority::Low];

    pub fn as_str(self) -> &'static str {
        match self {
            Priority::High => "HIGH",
            Priority::Normal => "NORMAL",
            Priority::Low => "LOW",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == text)
    }

    pub fn rank(self) -> i16 {
        self as i16
    }

    pub fn from_rank(rank: i16) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.rank() == rank)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    Pending,
    Processing,
    Sent,
    Failed,
    DeadLettered,
    Cancelled,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Pending,
        Status::Processing,
        Status::Sent,
        Status::Failed,
        Status::DeadLettered,
        Status::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "PENDING",
            Status::Processing => "PROCESSING",
            Status::Sent => "SENT",
            Status::Failed => "FAILED",
            Status::DeadLettered => "DEAD_LETTERED",
            Status::Cancelled => "CANCELLED",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Nothing automatic leaves a final status.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Status::Sent | Status::Failed | Status::DeadLettered | Status::Cancelled
        )
    }
}

/// A notification as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Notification {
    pub id: Uuid,
    pub idempotency_key: String,
    pub recipient: String,
    pub channel: &'static str,
    pub priority: &'static str,
    pub status: &'static str,
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
}

impl Notification {
    pub fn status(&self) -> Option<Status> {
        Status::parse(self.status)
    }
}

/// `2026-09-24T12:01:00.000Z`: UTC with milliseconds, as the contract fixes.
pub fn format_time(time: &DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Millis, true)
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
    fn names_round_trip() {
        for status in Status::ALL {
            assert_eq!(Status::parse(status.as_str()), Some(status));
        }
        for priority in Priority::ALL {
            assert_eq!(Priority::from_rank(priority.rank()), Some(priority));
            assert_eq!(Priority::parse(priority.as_str()), Some(priority));
        }
        for channel in Channel::ALL {
            assert_eq!(Channel::parse(channel.as_str()), Some(channel));
        }
        assert_eq!(Status::parse("pending"), None);
    }

    #[test]
    fn priority_order_is_claim_order() {
        assert!(Priority::High < Priority::Normal && Priority::Normal < Priority::Low);
    }

    #[test]
    fn times_have_milliseconds_and_z() {
        let time = DateTime::parse_from_rfc3339("2026-09-24T13:01:00.123456+01:00")
            .expect("valid")
            .with_timezone(&Utc);
        assert_eq!(format_time(&time), "2026-09-24T12:01:00.123Z");
    }
}
