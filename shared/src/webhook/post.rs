//! One webhook request: the body of the contract, signed per Standard Webhooks when a key
//! is set, with no redirects followed and a time limit.

use std::time::Duration;

use anyhow::Context;
use chrono::Utc;
use serde::Serialize;
use uuid::Uuid;

use crate::notification::format_time;
use crate::webhook::outbox::ClaimedEvent;
use crate::webhook::signing::{HEADER_ID, HEADER_SIGNATURE, HEADER_TIMESTAMP, SigningKey};

pub const EVENT_ID_HEADER: &str = "X-Webhook-Event-Id";

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

/// Where events go and how they are signed.
pub struct WebhookClient {
    client: reqwest::Client,
    url: String,
    key: Option<SigningKey>,
    timeout: Duration,
}

impl WebhookClient {
    /// A malformed URL fails here, at start-up.
    pub fn new(url: &str, key: Option<SigningKey>, timeout: Duration) -> anyhow::Result<Self> {
        reqwest::Url::parse(url).context("WEBHOOK_URL is not a valid URL")?;
        let client = reqwest::Client::builder()
            .timeout(timeout)
            // A redirect would turn the POST into a GET elsewhere; count it as a failure.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("notify-queue-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .context("cannot build the webhook HTTP client")?;
        Ok(WebhookClient {
            client,
            url: url.to_string(),
            key,
            timeout,
        })
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// One POST. `Err` carries the `last_error` text: connection error, timeout or non-2xx.
    pub async fn post(&self, event: &ClaimedEvent) -> Result<(), String> {
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
}
