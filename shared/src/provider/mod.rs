//! Delivery providers. The worker sees one trait and one classification of outcomes, by
//! what it must do next (send on, give up, wait, suppress, pause), decided here and
//! nowhere else.
//!
//! - [`gate`]: the bound on deliveries in flight, the stop, the per-delivery time limit.
//! - [`simulated`]: the provider of every channel until a real one is configured.
//! - [`channels`]: which provider sends each channel, and the routing of a batch to them.
//! - [`ses`], [`sns`]: email through Amazon SES v2, SMS and push through Amazon SNS;
//!   [`aws`]: their SDK configuration and the classification of AWS errors;
//!   [`aws_http`]: the HTTP client every AWS SDK client sends through.

pub mod aws;
pub mod aws_http;
pub mod channels;
pub mod gate;
pub mod ses;
pub mod simulated;
pub mod sns;

use futures::future::BoxFuture;
use serde_json::Value;
use uuid::Uuid;

pub use gate::{BulkTickets, Gate, Holding, Places};

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::domain::Class;
use crate::notification::Channel;

/// One message to hand to a provider. `key` is the notification id: every attempt at the
/// same notification uses it, so a provider that saw it already does not deliver twice.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    pub key: Uuid,
    pub channel: Channel,
    pub class: Class,
    pub recipient: &'a str,
    pub payload: &'a Value,
    /// `payload` was rendered from a template (the simulated provider records it).
    pub rendered: bool,
    /// The one-click unsubscribe link of a bulk email: sent as `List-Unsubscribe` with
    /// `List-Unsubscribe-Post: List-Unsubscribe=One-Click` (RFC 8058).
    pub unsubscribe_url: Option<&'a str>,
}

/// What a provider's answer means for the worker. Every provider error is classified
/// into one of these once, where the provider is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderOutcome {
    /// Accepted (SENT). `already` when the key had been delivered before (a confirmation);
    /// `message_id` is the provider's id of the message, when it gives one.
    Delivered {
        already: bool,
        message_id: Option<String>,
    },
    /// The provider is refusing work for now (HTTP 429, a throttling error): back to
    /// PENDING with the attempt refunded, due after `retry_after` (1 s when not given),
    /// and the channel pauses that long.
    Throttled {
        retry_after: Option<Duration>,
        reason: String,
    },
    /// Retrying later may help (5xx, timeout, connection error): retry with backoff; counts
    /// toward the channel's circuit breaker.
    Temporary(String),
    /// Retrying cannot help this message (rejected content, bad parameter): FAILED.
    Permanent(String),
    /// The address cannot receive (disabled endpoint, invalid number, hard bounce at
    /// send): FAILED, and the address joins the suppression list.
    InvalidRecipient(String),
    /// The provider cannot send anything for us (identity not verified, access denied,
    /// sending paused): back to PENDING with the attempt refunded, and the channel pauses
    /// 60 s. An operator's problem, not the notification's.
    Misconfigured(String),
}

impl ProviderOutcome {
    /// A delivery the simulated provider (or a test double) accepted.
    pub fn delivered() -> Self {
        ProviderOutcome::Delivered {
            already: false,
            message_id: None,
        }
    }
}

impl ProviderOutcome {
    /// The attempt's outcome as attempt history stores it.
    pub fn class(&self) -> &'static str {
        match self {
            ProviderOutcome::Delivered { .. } => "DELIVERED",
            ProviderOutcome::Throttled { .. } => "THROTTLED",
            ProviderOutcome::Temporary(_) => "TEMPORARY",
            ProviderOutcome::Permanent(_) => "PERMANENT",
            ProviderOutcome::InvalidRecipient(_) => "INVALID_RECIPIENT",
            ProviderOutcome::Misconfigured(_) => "PROVIDER_MISCONFIGURED",
        }
    }
}

/// One provider call: its answer, and when it started and finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub outcome: ProviderOutcome,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
}

/// What became of one delivery of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// The sweeper stopped before the delivery passed the gate: the provider never saw
    /// it, and its claim goes back untried.
    NotStarted,
    Finished(Call),
}

impl Attempt {
    /// A call that started and finished now (answers that took no time).
    pub fn now(outcome: ProviderOutcome) -> Self {
        let now = Utc::now();
        Attempt::Finished(Call {
            outcome,
            started_at: now,
            finished_at: now,
        })
    }

    /// The provider's answer, when it was called.
    pub fn outcome(&self) -> Option<&ProviderOutcome> {
        match self {
            Attempt::NotStarted => None,
            Attempt::Finished(call) => Some(&call.outcome),
        }
    }
}

/// A provider takes a claimed batch and answers one [`Attempt`] per delivery, in order.
/// Every delivery passes the `gate` before it starts: a per-message provider sends each
/// through [`Gate::each`]; one with a true batch API takes a place per message it carries.
pub trait Provider: Send + Sync {
    fn send<'a>(&'a self, batch: &'a [Delivery<'a>], gate: &'a Gate)
    -> BoxFuture<'a, Vec<Attempt>>;

    /// `simulated`, `ses`, `sns`: how `GET /providers` names it.
    fn name(&self) -> &'static str;

    /// Real providers are paced, paused and guarded by a circuit breaker; the simulated
    /// provider (and a test double, unless it says otherwise) is exempt.
    fn is_real(&self) -> bool {
        false
    }

    /// Whether `channel` is sent by a real provider (a router answers per channel).
    fn is_real_for(&self, _channel: Channel) -> bool {
        self.is_real()
    }
}
