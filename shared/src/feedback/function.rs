//! The `provider-events` function: its state, built once per container, and one
//! invocation (one EventBridge event).

use anyhow::Context;
use deadpool_postgres::{GenericClient, Pool};
use serde::Serialize;
use serde_json::Value;

use super::{Feedback, parse};
use crate::audience::suppressions;
use crate::cold_start::ColdStart;
use crate::queue;

/// What one event changed. An event that changed nothing (a transient bounce, a reject,
/// another type, a repeat, a delivery of a message no attempt sent) counts as `ignored`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FeedbackOutcome {
    /// Addresses added to the suppression list.
    pub suppressed: u64,
    /// Attempts that got their delivery time.
    pub delivered: u64,
    pub ignored: u64,
}

impl FeedbackOutcome {
    fn changed(suppressed: u64, delivered: u64) -> Self {
        FeedbackOutcome {
            suppressed,
            delivered,
            ignored: u64::from(suppressed == 0 && delivered == 0),
        }
    }
}

/// What `provider-events` needs, built once per container.
pub struct ProviderEventsFunction {
    pool: Pool,
    /// Keys the suppression list's address hashes.
    secret: Vec<u8>,
}

impl ProviderEventsFunction {
    /// Builds the pool (connections open lazily).
    pub fn new(start: &ColdStart) -> anyhow::Result<Self> {
        Ok(ProviderEventsFunction {
            pool: start.pool()?,
            secret: start.config.audience.secret.clone(),
        })
    }

    /// Applies one event. A malformed event is an error naming what is missing, and
    /// touches no connection.
    pub async fn invoke(&self, event: Value) -> anyhow::Result<FeedbackOutcome> {
        let feedback = parse(&event)?;
        if let Feedback::Ignored {
            event_type,
            message_id,
            why,
        } = &feedback
        {
            tracing::info!(
                event_type = %short(event_type),
                message_id = %message_id.as_deref().unwrap_or_default(),
                why,
                "provider event changes nothing"
            );
            return Ok(FeedbackOutcome::changed(0, 0));
        }
        let db = self
            .pool
            .get()
            .await
            .context("no database connection for the provider event")?;
        apply(&db, &self.secret, &feedback).await
    }
}

/// Applies what an event means, in one statement; logs the message and notification, the
/// number of addresses, never an address.
pub async fn apply(
    db: &impl GenericClient,
    secret: &[u8],
    feedback: &Feedback,
) -> anyhow::Result<FeedbackOutcome> {
    match feedback {
        Feedback::Suppress {
            message_id,
            addresses,
            reason,
        } => {
            let added = suppressions::add_reported(db, secret, addresses, *reason, message_id)
                .await
                .context("cannot add to the suppression list")?;
            tracing::info!(
                reason = reason.as_str(),
                message_id = %message_id,
                notification_id = %added.notification.map(|id| id.to_string()).unwrap_or_default(),
                addresses = addresses.len(),
                added = added.added,
                "provider feedback: addresses reported"
            );
            Ok(FeedbackOutcome::changed(added.added, 0))
        }
        Feedback::Delivered { message_id, at } => {
            let mark = queue::mark_delivered(db, message_id, *at)
                .await
                .context("cannot record the delivery")?;
            match (mark.notification, mark.marked) {
                (None, _) => tracing::warn!(
                    message_id = %message_id,
                    "provider feedback: no attempt sent this message"
                ),
                (Some(notification), 0) => tracing::info!(
                    message_id = %message_id,
                    notification_id = %notification,
                    "provider feedback: delivery already recorded"
                ),
                (Some(notification), _) => tracing::info!(
                    message_id = %message_id,
                    notification_id = %notification,
                    delivered_at = %crate::notification::format_time(at),
                    "provider feedback: delivered"
                ),
            }
            Ok(FeedbackOutcome::changed(0, mark.marked))
        }
        Feedback::Ignored { .. } => Ok(FeedbackOutcome::changed(0, 0)),
    }
}

/// At most 64 characters of a value read from the event, for the log.
fn short(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_that_changed_nothing_is_ignored() {
        let json = |outcome| serde_json::to_value(outcome).expect("json");
        assert_eq!(
            json(FeedbackOutcome::changed(0, 0)),
            serde_json::json!({"suppressed": 0, "delivered": 0, "ignored": 1})
        );
        assert_eq!(
            json(FeedbackOutcome::changed(2, 0)),
            serde_json::json!({"suppressed": 2, "delivered": 0, "ignored": 0})
        );
        assert_eq!(
            json(FeedbackOutcome::changed(0, 1)),
            serde_json::json!({"suppressed": 0, "delivered": 1, "ignored": 0})
        );
    }
}
