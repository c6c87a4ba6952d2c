//! The webhook drainer: one step function, [`WebhookDrainer::drain_once`], that claims a
//! batch of due events, POSTs them concurrently and records every outcome in one statement.
//! [`run`] is the loop around it that the `webhook-drainer` Lambda and `notify-local` share.

use std::ops::AddAssign;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chrono::Utc;
use deadpool_postgres::Pool;
use futures::StreamExt;
use serde::Serialize;
use uuid::Uuid;

use crate::backoff::{Random, retry_delay};
use crate::config::{RetryPolicy, WebhookConfig};
use crate::notification::format_time;
use crate::stop::StopSignal;
use crate::webhook::outbox::{self, ClaimedEvent, Dispatch};
use crate::webhook::signing::{HEADER_ID, HEADER_SIGNATURE, HEADER_TIMESTAMP, SigningKey};

/// Events claimed per claim statement.
pub const DEFAULT_BATCH_SIZE: i64 = 100;
/// POSTs in flight per drainer.
pub const DEFAULT_CONCURRENCY: usize = 16;
/// Added to the longest a batch's POSTs can take to form the lease. It covers waiting for a
/// pooled connection and the recording statement under load. Too short costs only a
/// duplicate POST (another drainer resends; receivers dedupe on eventId); too long only
/// delays the resend of a crashed drainer's events.
pub const LEASE_MARGIN: Duration = Duration::from_secs(30);

pub const EVENT_ID_HEADER: &str = "X-Webhook-Event-Id";

/// What one step (or a whole run) did. Serialised as the `webhook-drainer` Lambda's summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainOutcome {
    /// Events claimed for sending.
    pub claimed: u64,
    pub delivered: u64,
    /// Failed with attempts left; due again after backoff.
    pub retried: u64,
    /// Failed on the final attempt, or found with an expired lease on it.
    pub given_up: u64,
    /// Claimed but handed back unsent because the drainer was stopping.
    pub released: u64,
}

impl AddAssign for DrainOutcome {
    fn add_assign(&mut self, other: Self) {
        self.claimed += other.claimed;
        self.delivered += other.delivered;
        self.retried += other.retried;
        self.given_up += other.given_up;
        self.released += other.released;
    }
}

/// The request body: exactly these five fields.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EventBody<'a> {
    event_id: Uuid,
    job_id: Uuid,
    status: &'a str,
    attempt_count: i32,
    timestamp: String,
}

pub struct WebhookDrainer {
    pool: Pool,
    client: reqwest::Client,
    url: String,
    key: Option<SigningKey>,
    random: Arc<dyn Random>,
    retry: RetryPolicy,
    timeout: Duration,
    max_attempts: i32,
    poll_interval: Duration,
    batch_size: i64,
    concurrency: usize,
    lease: Option<Duration>,
}

impl WebhookDrainer {
    /// Builds a drainer for `webhook.url`. Callers construct one only when `WEBHOOK_URL` is
    /// set; without it this fails. A malformed URL or secret also fails here, at start-up.
    pub fn new(
        pool: Pool,
        webhook: &WebhookConfig,
        retry: RetryPolicy,
        poll_interval: Duration,
        random: Arc<dyn Random>,
    ) -> anyhow::Result<Self> {
        let url = webhook
            .url
            .clone()
            .context("WEBHOOK_URL is not set; there is nowhere to send webhooks")?;
        reqwest::Url::parse(&url).context("WEBHOOK_URL is not a valid URL")?;
        let key = webhook
            .secret
            .as_deref()
            .map(SigningKey::from_secret)
            .transpose()?;
        let client = reqwest::Client::builder()
            .timeout(webhook.timeout)
            // A redirect would turn the POST into a GET elsewhere; count it as a failure.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("notify-queue-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .context("cannot build the webhook HTTP client")?;
        Ok(WebhookDrainer {
            pool,
            client,
            url,
            key,
            random,
            retry,
            timeout: webhook.timeout,
            max_attempts: webhook.max_attempts,
            poll_interval,
            batch_size: DEFAULT_BATCH_SIZE,
            concurrency: DEFAULT_CONCURRENCY,
            lease: None,
        })
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
        match self.post(event).await {
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

    /// One POST. `Err` carries the `last_error` text: connection error, timeout or non-2xx.
    async fn post(&self, event: &ClaimedEvent) -> Result<(), String> {
        let body = serde_json::to_vec(&EventBody {
            event_id: event.id,
            job_id: event.notification_id,
            status: &event.status,
            attempt_count: event.attempt_count,
            timestamp: format_time(&event.occurred_at),
        })
        .map_err(|error| format!("Cannot encode the webhook body: {error}"))?;
        let event_id = event.id.to_string();
        let mut request = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(EVENT_ID_HEADER, &event_id);
        if let Some(key) = &self.key {
            // Signed at send time: receivers reject timestamps more than 5 minutes off.
            let timestamp = Utc::now().timestamp();
            request = request
                .header(HEADER_ID, &event_id)
                .header(HEADER_TIMESTAMP, timestamp.to_string())
                .header(HEADER_SIGNATURE, key.sign(&event_id, timestamp, &body));
        }
        match request.body(body).send().await {
            Ok(response) if response.status().is_success() => Ok(()),
            Ok(response) => Err(format!(
                "Webhook receiver answered HTTP {}",
                response.status().as_u16()
            )),
            Err(error) if error.is_timeout() => Err(format!(
                "Webhook receiver timed out after {}ms",
                self.timeout.as_millis()
            )),
            // Without the URL: it may carry a token in its query.
            Err(error) => Err(format!(
                "Webhook request failed: {}",
                error_chain(&error.without_url())
            )),
        }
    }
}

/// An error and its sources on one line ("error sending request: connection refused").
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
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
                outcome.claimed == 0 && outcome.given_up == 0
            }
            Err(error) => {
                failures = failures.saturating_add(1);
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
mod tests {
    use super::*;

    #[test]
    fn the_body_has_exactly_the_five_documented_fields_in_order() {
        let id = Uuid::nil();
        let body = serde_json::to_string(&EventBody {
            event_id: id,
            job_id: id,
            status: "SENT",
            attempt_count: 2,
            timestamp: "2026-01-02T03:04:05.678Z".to_string(),
        })
        .expect("encode");
        assert_eq!(
            body,
            format!(
                r#"{{"eventId":"{id}","jobId":"{id}","status":"SENT","attemptCount":2,"timestamp":"2026-01-02T03:04:05.678Z"}}"#
            )
        );
    }

    fn drainer(timeout_ms: u64) -> WebhookDrainer {
        // The pool connects lazily; no database is needed here.
        let pool = crate::db::create_pool("postgres://user@127.0.0.1:1/none", 1).expect("pool");
        let webhook = WebhookConfig {
            url: Some("http://127.0.0.1:1/hook".to_string()),
            secret: None,
            timeout: Duration::from_millis(timeout_ms),
            max_attempts: 10,
        };
        let retry = RetryPolicy {
            max_retries: 5,
            base_delay_ms: 1000,
            max_delay_ms: 60_000,
        };
        let random = Arc::new(crate::backoff::ThreadRandom);
        WebhookDrainer::new(pool, &webhook, retry, Duration::from_secs(1), random).expect("drainer")
    }

    #[test]
    fn the_lease_covers_every_round_of_a_batch_plus_the_margin() {
        // 100 events, 16 in flight: 7 rounds of at most 5 s each, then 30 s to record.
        assert_eq!(drainer(5000).lease(), Duration::from_secs(65));
        assert_eq!(
            drainer(5000).with_concurrency(100).lease(),
            Duration::from_secs(35)
        );
        assert_eq!(
            drainer(5000).with_lease(Duration::from_millis(300)).lease(),
            Duration::from_millis(300)
        );
    }

    #[test]
    fn a_drainer_needs_a_url_and_a_valid_secret() {
        let pool = crate::db::create_pool("postgres://user@127.0.0.1:1/none", 1).expect("pool");
        let retry = RetryPolicy {
            max_retries: 0,
            base_delay_ms: 1,
            max_delay_ms: 1,
        };
        let mut webhook = WebhookConfig {
            url: None,
            secret: None,
            timeout: Duration::from_secs(1),
            max_attempts: 1,
        };
        let random: Arc<dyn Random> = Arc::new(crate::backoff::ThreadRandom);
        let build = |webhook: &WebhookConfig| {
            WebhookDrainer::new(
                pool.clone(),
                webhook,
                retry,
                Duration::from_secs(1),
                random.clone(),
            )
        };
        assert!(build(&webhook).is_err(), "no URL, no drainer");
        webhook.url = Some("http://127.0.0.1:9/hook".to_string());
        webhook.secret = Some("whsec_***".to_string());
        assert!(
            build(&webhook).is_err(),
            "a malformed secret fails at start-up"
        );
        webhook.secret = Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_string());
        assert!(build(&webhook).is_ok());
    }
}
