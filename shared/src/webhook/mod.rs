//! Webhooks from the transactional outbox.
//!
//! Every transition to SENT, FAILED or DEAD_LETTERED writes a `webhook_events` row in the
//! same statement as the transition (see `queue::record`). The drainer here delivers those
//! rows at least once: it claims due events under a lease, POSTs them with no transaction or
//! connection held, and records every outcome in one statement fenced on the dispatch
//! attempt. Receivers dedupe on `eventId`. A webhook failure never touches the notification.
//!
//! An event goes to the endpoints the client that created its notification registered
//! ([`endpoints`]), one outbox row per endpoint, each held to the SSRF rules of
//! [`destination`] at dispatch; `WEBHOOK_URL` stays the default for clients without an
//! endpoint and for work created without a key.
//!
//! - [`endpoints`]: registered endpoints, their event types and secrets.
//! - [`destination`]: the SSRF rules and the HTTP client that enforces them.
//! - [`outbox`]: the drainer's SQL (route, claim, record, counts, purge, health).
//! - [`events`]: what the API reads (list, a notification's events, replay).
//! - [`post`]: one signed request.
//! - [`signing`]: Standard Webhooks v1 signatures.
//! - [`drainer`]: the step function [`WebhookDrainer::drain_once`] and the loop [`run`].
//! - [`function`]: the `webhook-drainer` Lambda's state and invocation.

pub mod destination;
pub mod drainer;
pub mod endpoints;
pub mod events;
pub mod function;
pub mod outbox;
pub mod post;
pub mod signing;

pub use drainer::{DrainOutcome, WebhookDrainer, run};
pub use function::{DrainReport, DrainerFunction};
pub use outbox::{ClaimedEvent, Dispatch, OutboxCounts};
pub use post::{EVENT_ID_HEADER, WebhookClient};
pub use signing::SigningKey;
