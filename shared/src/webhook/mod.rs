//! Webhooks from the transactional outbox.
//!
//! Every transition to SENT, FAILED or DEAD_LETTERED writes a `webhook_events` row in the
//! same statement as the transition (see `queue::record`). The drainer here delivers those
//! rows at least once: it claims due events under a lease, POSTs them with no transaction or
//! connection held, and records every outcome in one statement fenced on the dispatch
//! attempt. Receivers dedupe on `eventId`. A webhook failure never touches the notification.
//!
//! - [`outbox`]: the SQL (claim, record, counts).
//! - [`post`]: one signed request.
//! - [`signing`]: Standard Webhooks v1 signatures.
//! - [`drainer`]: the step function [`WebhookDrainer::drain_once`] and the loop [`run`].
//! - [`function`]: the `webhook-drainer` Lambda's state and invocation.

pub mod drainer;
pub mod function;
pub mod outbox;
pub mod post;
pub mod signing;

pub use drainer::{DrainOutcome, WebhookDrainer, run};
pub use function::{DrainReport, DrainerFunction};
pub use outbox::{ClaimedEvent, Dispatch, OutboxCounts};
pub use post::{EVENT_ID_HEADER, WebhookClient};
pub use signing::SigningKey;
