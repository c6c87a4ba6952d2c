//! The `dlq-redrive` function's event: a filter, pacing and an optional start time.

use serde::Serialize;

use super::MAX_BATCH;
use crate::domain::RECIPIENT_MAX;
use crate::domain::names;
use crate::notification::{Channel, Status};
use crate::problems::Problems;
use crate::queue::RedriveFilter;

/// The longest error text a redrive filters on.
pub const ERROR_TEXT_MAX: usize = 1000;

/// The `dlq-redrive` function's event.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RedriveRequest {
    #[serde(default = "dead_lettered")]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipient: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_contains: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_before: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_after: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(default = "default_batch_size")]
    pub batch_size: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_second: Option<u32>,
    /// Run at this time instead of now (a one-time schedule is created).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<chrono::DateTime<chrono::Utc>>,
    /// Set by this function on the input of the schedules it creates, so the invocation
    /// they trigger can delete its schedule when done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_name: Option<String>,
}

fn dead_lettered() -> String {
    Status::DeadLettered.as_str().to_string()
}

fn default_batch_size() -> i64 {
    100
}

impl RedriveRequest {
    /// Checks every field; all problems are reported together.
    pub fn filter(&self) -> Result<RedriveFilter, Problems> {
        let mut problems = Problems::new();
        let status = problems.one_of(
            "status",
            Some(&self.status),
            |s| Status::parse(s).filter(|s| matches!(s, Status::DeadLettered | Status::Failed)),
            "DEAD_LETTERED, FAILED",
        );
        let channel = self.channel.as_deref().and_then(|channel| {
            problems.one_of(
                "channel",
                Some(channel),
                Channel::parse,
                &names(&Channel::ALL, Channel::as_str),
            )
        });
        problems.integer_in("batchSize", Some(self.batch_size), 1..=MAX_BATCH);
        if self.per_second == Some(0) {
            problems.add("perSecond", "perSecond must be at least 1");
        }
        if let Some(recipient) = &self.recipient {
            problems.text("recipient", recipient, RECIPIENT_MAX);
        }
        if let Some(text) = &self.error_contains {
            problems.text("errorContains", text, ERROR_TEXT_MAX);
        }
        problems.or(RedriveFilter {
            status,
            recipient: self.recipient.clone(),
            channel,
            error_contains: self.error_contains.clone(),
            created_before: self.created_before,
            created_after: self.created_after,
        })
    }
}
