//! Delivery providers. The worker sees one trait and one classification of outcomes, by
//! what it must do next: done, give up, or try again later.
//!
//! - [`gate`]: the bound on deliveries in flight, the stop, the per-delivery time limit.
//! - [`simulated`]: the provider of every channel until a real one is configured.

pub mod gate;
pub mod simulated;

use futures::future::BoxFuture;
use serde_json::Value;
use uuid::Uuid;

pub use gate::Gate;

use crate::notification::Channel;

/// One message to hand to a provider. `key` is the notification id: every attempt at the
/// same notification uses it, so a provider that saw it already does not deliver twice.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    pub key: Uuid,
    pub channel: Channel,
    pub recipient: &'a str,
    pub payload: &'a Value,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderOutcome {
    /// Accepted; `already` when the key had been delivered before (a confirmation).
    Delivered { already: bool },
    /// Retrying cannot help (for example, the address does not exist).
    Permanent(String),
    /// Retrying later may help (outage, throttling, timeout).
    Temporary(String),
}

/// What became of one delivery of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// The sweeper stopped before the delivery passed the gate: the provider never saw
    /// it, and its claim goes back untried.
    NotStarted,
    Finished(ProviderOutcome),
}

/// A provider takes a claimed batch and answers one [`Attempt`] per delivery, in order.
/// Every delivery passes the `gate` before it starts: a per-message provider sends each
/// through [`Gate::each`]; one with a true batch API takes a place per message it carries.
pub trait Provider: Send + Sync {
    fn send<'a>(&'a self, batch: &'a [Delivery<'a>], gate: &'a Gate)
    -> BoxFuture<'a, Vec<Attempt>>;
}
