//! Delivery providers. The worker sees one trait and one classification of outcomes, by
//! what it must do next: done, give up, or try again later.

pub mod simulated;

use futures::future::BoxFuture;
use serde_json::Value;
use uuid::Uuid;

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

/// A provider takes a batch and answers one outcome per delivery, in order. Providers
/// with per-message APIs fan out internally; the worker applies the time limit around
/// the whole call.
pub trait Provider: Send + Sync {
    fn send<'a>(&'a self, batch: &'a [Delivery<'a>]) -> BoxFuture<'a, Vec<ProviderOutcome>>;
}
