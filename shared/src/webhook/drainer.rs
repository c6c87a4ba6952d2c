//! The webhook drainer: one step function, [`WebhookDrainer::drain_once`], that routes new
//! events to their endpoints, claims a batch of due events, POSTs them concurrently and
//! records every outcome in one statement.
//! [`run`] is the loop around it that the `webhook-drainer` Lambda and `notify-local` share.

use std::ops::AddAssign;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use deadpool_postgres::Pool;
use futures::StreamExt;
use serde::Serialize;

use crate::backoff::{Random, ThreadRandom, retry_delay};
use crate::config::{Config, RetryPolicy};
use crate::stop::StopSignal;
use crate::webhook::destination::{self, DestinationPolicy};
use crate::webhook::endpoints;
use crate::webhook::outbox::{self, ClaimedEvent, Destination, Dispatch};
use crate::webhook::post::{self, WebhookClient};
use crate::webhook::signing::SigningKey;

/// Events claimed per claim statement.
pub const DEFAULT_BATCH_SIZE: i64 = 100;
/// POSTs in flight per drainer.
pub const DEFAULT_CONCURRENCY: usize = 16;
/// Added to the longest a batch's POSTs can take to form the lease. It covers waiting for a
/// pooled connection and the recording statement under load. Too short costs only a
/// duplicate POST (another drainer resends; receivers dedupe on eventId); too long only
/// delays the resend of a crashed drainer's events.
pub const LEASE_MARGIN: Duration = Duration::from_secs(30);

/// What one step (or a whole run) did. Serialised as the `webhook-drainer` Lambda's summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainOutcome {
    /// New events given their destination (or closed unsent: nowhere to go).
    pub routed: u64,
    /// Events claimed for sending.
    pub claimed: u64,
    pub delivered: u64,
    /// Failed with attempts left; due again after backoff.
    pub retried: u64,
    /// Failed on the final attempt, or found with an expired lease on it.
    pub given_up: u64,
    /// Claimed but handed back unsent because the drainer was stopping.
    pub released: u64,
    /// Steps that failed (database unreachable, login refused, missing schema).
    pub failed_steps: u64,
}

impl AddAssign for DrainOutcome {
    fn add_assign(&mut self, other: Self) {
        self.routed += other.routed;
        self.claimed += other.claimed;
        self.delivered += other.delivered;
        self.retried += other.retried;
        self.given_up += other.given_up;
        self.released += other.released;
        self.failed_steps += other.failed_steps;
    }
}

/// The `last_error` of an event whose endpoint was deleted before it was sent.
pub const ENDPOINT_DELETED: &str = "The webhook endpoint was deleted";

pub struct WebhookDrainer {
    pool: Pool,
    /// `WEBHOOK_URL`: events of clients without endpoints, and of work created without a key.
    default: Option<WebhookClient>,
    /// Registered endpoints: checked against `policy` at every dispatch. Built at the
    /// first dispatch to an endpoint: building one reads the system's certificate bundle,
    /// tens of milliseconds a process that never sends to an endpoint should not spend
    /// before it is ready. `None` inside if it could not be built: endpoint events then
    /// fail rather than go out unchecked.
    endpoints: OnceLock<Option<reqwest::Client>>,
    policy: DestinationPolicy,
    timeout: Duration,
    random: Arc<dyn Random>,
    retry: RetryPolicy,
    max_attempts: i32,
    poll_interval: Duration,
    batch_size: i64,
    concurrency: usize,
    lease: Option<Duration>,
}

impl WebhookDrainer {
    /// The drainer of the registered endpoints and of `WEBHOOK_URL` when it is set. Without
    /// it, events stay in the outbox while no endpoint is registered, and once one is,
    /// events of clients with no endpoint are closed unsent. A malformed URL fails here, at
    /// start-up.
    pub fn from_config(pool: &Pool, config: &Config) -> anyhow::Result<Self> {
        let default = match &config.webhook.url {
            Some(url) => {
                let key = config.webhook.signing_key.clone().map(SigningKey::new);
                Some(WebhookClient::new(url, key, config.webhook.timeout)?)
            }
            None => None,
        };
        Ok(Self::assemble(
            pool.clone(),
            default,
            config.webhook.destinations(),
            config.webhook.timeout,
            config.webhook.max_attempts,
            config.retry,
            config.worker.poll_interval,
            Arc::new(ThreadRandom),
        ))
    }

    /// A drainer whose default URL is `client`'s, and whose endpoints follow the deployed
    /// rules (see [`Self::with_destinations`]).
    pub fn new(
        pool: Pool,
        client: WebhookClient,
        max_attempts: i32,
        retry: RetryPolicy,
        poll_interval: Duration,
        random: Arc<dyn Random>,
    ) -> Self {
        let timeout = client.timeout();
        Self::assemble(
            pool,
            Some(client),
            DestinationPolicy::default(),
            timeout,
            max_attempts,
            retry,
            poll_interval,
            random,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        pool: Pool,
        default: Option<WebhookClient>,
        policy: DestinationPolicy,
        timeout: Duration,
        max_attempts: i32,
        retry: RetryPolicy,
        poll_interval: Duration,
        random: Arc<dyn Random>,
    ) -> Self {
        WebhookDrainer {
            pool,
            default,
            endpoints: OnceLock::new(),
            policy,
            timeout,
            random,
            retry,
            max_attempts,
            poll_interval,
            batch_size: DEFAULT_BATCH_SIZE,
            concurrency: DEFAULT_CONCURRENCY,
            lease: None,
        }
    }

    /// The SSRF rules registered endpoints are held to (tests on loopback allow private
    /// addresses).
    pub fn with_destinations(mut self, policy: DestinationPolicy) -> Self {
        self.endpoints = OnceLock::new();
        self.policy = policy;
        self
    }

    pub fn with_batch_size(mut self, batch_size: i64) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    pub fn with_concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Overrides the computed lease (tests use a short one to watch a takeover).
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// How long a claimed event stays DISPATCHING before another drainer may take it: the
    /// longest the batch's POSTs can take (one timeout per round of `concurrency` requests)
    /// plus [`LEASE_MARGIN`].
    pub fn lease(&self) -> Duration {
        self.lease.unwrap_or_else(|| {
            let batch = u64::try_from(self.batch_size).unwrap_or(1);
            let rounds = batch.div_ceil(self.concurrency as u64).max(1);
            let rounds = u32::try_from(rounds).unwrap_or(u32::MAX);
            self.timeout
                .checked_mul(rounds)
                .unwrap_or(Duration::MAX)
                .saturating_add(LEASE_MARGIN)
        })
    }

    pub fn poll_interval(&self) -> Duration {
        self.poll_interval
    }

    /// One step: claim up to a batch, POST each event, record all outcomes.
    pub async fn drain_once(&self, stop: &StopSignal) -> anyhow::Result<DrainOutcome> {
        let mut outcome = DrainOutcome::default();
        if stop.is_stopped() {
            return Ok(outcome);
        }
        // The connection goes back to the pool before the first POST.
        let claim = {
            let db = self.pool.get().await?;
            // With nowhere to send anything, events stay in the outbox untouched, as they did
            // before endpoints existed; they are routed once a destination appears.
            if self.default.is_none() && !endpoints::any_registered(&db).await? {
                return Ok(outcome);
            }
            let routed = outbox::route(&db, self.batch_size, self.default.is_some()).await?;
            outcome.routed = routed.events;
            if routed.no_destination > 0 {
                tracing::debug!(
                    count = routed.no_destination,
                    "webhook events closed unsent: no endpoint of their client and no WEBHOOK_URL"
                );
            }
            outbox::claim(&db, self.batch_size, self.lease(), self.max_attempts).await?
        };
        outcome.claimed = claim.events.len() as u64;
        outcome.given_up = claim.given_up;
        if claim.given_up > 0 {
            tracing::warn!(
                count = claim.given_up,
                "webhook events given up: lease expired on the final attempt"
            );
        }
        if claim.events.is_empty() {
            return Ok(outcome);
        }

        // Futures are lazy: each one starts (and checks `stop`) only when `buffered` polls it.
        // Built into a Vec first: a borrowing closure inside the stream would not be `Send`.
        let sends: Vec<_> = claim
            .events
            .iter()
            .map(|event| self.dispatch(event, stop))
            .collect();
        let dispatches: Vec<Dispatch> = futures::stream::iter(sends)
            .buffered(self.concurrency)
            .collect()
            .await;
        let results: Vec<(&ClaimedEvent, Dispatch)> = claim.events.iter().zip(dispatches).collect();
        for (event, dispatch) in &results {
            match dispatch {
                Dispatch::Delivered => outcome.delivered += 1,
                Dispatch::Retry { .. } => outcome.retried += 1,
                Dispatch::GivenUp { .. } => outcome.given_up += 1,
                Dispatch::Released => outcome.released += 1,
            }
            log_result(event, dispatch);
        }
        // If this fails the leases expire and the events are sent again: at least once.
        let db = self.pool.get().await?;
        let recorded = outbox::record(&db, &results).await?;
        if recorded < results.len() as u64 {
            tracing::warn!(
                lost = results.len() as u64 - recorded,
                "webhook leases taken over before recording; their outcomes were dropped"
            );
        }
        Ok(outcome)
    }

    /// Sends one event unless the drainer is stopping, and decides what happens next.
    async fn dispatch(&self, event: &ClaimedEvent, stop: &StopSignal) -> Dispatch {
        // Checked when the POST would start, so a stop mid-batch hands back the rest.
        if stop.is_stopped() {
            return Dispatch::Released;
        }
        let sent = match (&event.destination, &self.default) {
            (Destination::Default, Some(default)) => default.post(event).await,
            // Routed to the default URL by a drainer that had one.
            (Destination::Default, None) => Err("WEBHOOK_URL is not set on this drainer".into()),
            (Destination::Deleted(_), _) => {
                return Dispatch::GivenUp {
                    error: ENDPOINT_DELETED.into(),
                };
            }
            (Destination::Endpoint { url, keys, .. }, _) => {
                self.send_to_endpoint(url, keys, event).await
            }
        };
        match sent {
            Ok(()) => Dispatch::Delivered,
            Err(error) if event.dispatch_attempts >= self.max_attempts => {
                Dispatch::GivenUp { error }
            }
            Err(error) => {
                let attempt = u32::try_from(event.dispatch_attempts).unwrap_or(1);
                let delay = retry_delay(&self.retry, attempt, self.random.unit());
                Dispatch::Retry { error, delay }
            }
        }
    }
}

impl WebhookDrainer {
    /// One POST to a registered endpoint: the URL's rules first (a literal address never
    /// reaches the resolver), then the request, whose resolver checks every address of the
    /// name and connects only to those.
    async fn send_to_endpoint(
        &self,
        url: &str,
        keys: &[SigningKey],
        event: &ClaimedEvent,
    ) -> Result<(), String> {
        destination::check_url(url, self.policy)
            .map_err(|reason| format!("Webhook destination refused: {reason}"))?;
        if keys.is_empty() {
            return Err("The webhook endpoint's secret cannot be decoded".into());
        }
        let client = self.endpoints.get_or_init(|| {
            destination::endpoint_client(self.policy, self.timeout)
                .inspect_err(|error| tracing::error!(error = %crate::telemetry::describe(error), "cannot build the webhook endpoint HTTP client"))
                .ok()
        });
        let Some(client) = client else {
            return Err("The webhook endpoint HTTP client could not be built".into());
        };
        post::send(client, url, keys, event, self.timeout).await
    }
}

fn log_result(event: &ClaimedEvent, dispatch: &Dispatch) {
    match dispatch {
        Dispatch::Delivered => tracing::debug!(
            event_id = %event.id, attempt = event.dispatch_attempts, "webhook delivered"
        ),
        Dispatch::Retry { error, delay } => tracing::info!(
            event_id = %event.id, attempt = event.dispatch_attempts, %error,
            retry_in_ms = delay.as_millis() as u64, "webhook failed; will retry"
        ),
        Dispatch::GivenUp { error } => tracing::warn!(
            event_id = %event.id, attempt = event.dispatch_attempts, %error, "webhook given up"
        ),
        Dispatch::Released => {
            tracing::debug!(event_id = %event.id, "webhook released unsent (stopping)")
        }
    }
}

/// Runs `drain_once` until `stop` fires and returns the sum of what it did. It goes straight
/// on while steps find work and waits the poll interval when idle (longer while the
/// database is failing).
pub async fn run(drainer: Arc<WebhookDrainer>, stop: StopSignal) -> DrainOutcome {
    let mut total = DrainOutcome::default();
    let mut failures = 0u32;
    while !stop.is_stopped() {
        let idle = match drainer.drain_once(&stop).await {
            Ok(outcome) => {
                failures = 0;
                total += outcome;
                // Routing alone is work too: a step that only closed events nobody
                // subscribes to goes on at once, or a backlog of them drains at one batch
                // per poll and holds up the events behind it.
                outcome.routed == 0 && outcome.claimed == 0 && outcome.given_up == 0
            }
            Err(error) => {
                failures = failures.saturating_add(1);
                total.failed_steps += 1;
                tracing::error!(error = %crate::telemetry::describe(&error), "webhook drain step failed");
                true
            }
        };
        if !idle {
            continue;
        }
        let pause = if failures > 0 {
            // Back off while the database is unreachable.
            (drainer.poll_interval * failures.min(5)).min(Duration::from_secs(5))
        } else {
            drainer.poll_interval
        };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = stop.stopped() => {}
        }
    }
    total
}

#[cfg(test)]
mod tests;
