//! One webhook request: the body of the contract, signed per Standard Webhooks when a key
//! is set, with no redirects followed and a time limit.

use std::time::Duration;

use anyhow::Context;
use chrono::Utc;
use serde_json::{Map, Value, json};
#[cfg(test)]
use uuid::Uuid;

use crate::notification::format_time;
use crate::webhook::outbox::{ClaimedEvent, Subject};
use crate::webhook::signing::{
    HEADER_ID, HEADER_SIGNATURE, HEADER_TIMESTAMP, SigningKey, sign_all,
};

pub const EVENT_ID_HEADER: &str = "X-Webhook-Event-Id";

/// The request body. A notification's event has the design's five fields and its type:
/// `{"eventId","type","jobId","status","attemptCount","timestamp"}`; any other event has
/// `eventId`, `type`, its own fields and `timestamp`.
pub fn body(event: &ClaimedEvent) -> Value {
    let mut body = Map::new();
    body.insert("eventId".into(), json!(event.event_id));
    body.insert("type".into(), json!(event.kind));
    match &event.subject {
        Subject::Notification {
            id,
            status,
            attempt_count,
        } => {
            body.insert("jobId".into(), json!(id));
            body.insert("status".into(), json!(status));
            body.insert("attemptCount".into(), json!(attempt_count));
        }
        Subject::Other(fields) => {
            for (key, value) in fields.as_object().into_iter().flatten() {
                body.insert(key.clone(), value.clone());
            }
        }
    }
    body.insert("timestamp".into(), json!(format_time(&event.occurred_at)));
    Value::Object(body)
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

    /// One POST to the default URL. `Err` carries the `last_error` text: connection
    /// error, timeout or non-2xx.
    pub async fn post(&self, event: &ClaimedEvent) -> Result<(), String> {
        send(
            &self.client,
            &self.url,
            self.key.as_slice(),
            event,
            self.timeout,
        )
        .await
    }
}

/// One POST of `event` to `url` with `client`, signed by every key in `keys` (none:
/// unsigned). `Err` carries the `last_error` text: connection error (a refused destination
/// included), timeout or non-2xx — a redirect is a non-2xx, never followed.
pub async fn send(
    client: &reqwest::Client,
    url: &str,
    keys: &[SigningKey],
    event: &ClaimedEvent,
    timeout: Duration,
) -> Result<(), String> {
    let body = serde_json::to_vec(&body(event))
        .map_err(|error| format!("Cannot encode the webhook body: {error}"))?;
    let event_id = event.event_id.to_string();
    let mut request = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(EVENT_ID_HEADER, &event_id);
    if !keys.is_empty() {
        // Signed at send time: receivers reject timestamps more than 5 minutes off.
        let timestamp = Utc::now().timestamp();
        request = request
            .header(HEADER_ID, &event_id)
            .header(HEADER_TIMESTAMP, timestamp.to_string())
            .header(
                HEADER_SIGNATURE,
                sign_all(keys, &event_id, timestamp, &body),
            );
    }
    match request.body(body).send().await {
        Ok(response) if response.status().is_success() => Ok(()),
        Ok(response) => Err(format!(
            "Webhook receiver answered HTTP {}",
            response.status().as_u16()
        )),
        Err(error) if error.is_timeout() => Err(format!(
            "Webhook receiver timed out after {}ms",
            timeout.as_millis()
        )),
        // Without the URL: it may carry a token in its query.
        Err(error) => Err(format!(
            "Webhook request failed: {}",
            error_chain(&error.without_url())
        )),
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
    use crate::webhook::outbox::Destination;

    #[test]
    fn a_notification_event_has_the_five_fields_and_its_type() {
        let id = Uuid::nil();
        let event = ClaimedEvent {
            id,
            event_id: id,
            destination: Destination::Default,
            kind: "notification.sent".into(),
            subject: Subject::Notification {
                id,
                status: "SENT".into(),
                attempt_count: 2,
            },
            occurred_at: chrono::DateTime::parse_from_rfc3339("2026-01-02T03:04:05.678Z")
                .expect("time")
                .to_utc(),
            dispatch_attempts: 1,
        };
        assert_eq!(
            body(&event),
            json!({"eventId": id, "type": "notification.sent", "jobId": id, "status": "SENT",
                   "attemptCount": 2, "timestamp": "2026-01-02T03:04:05.678Z"})
        );
    }

    #[test]
    fn a_channel_event_carries_its_own_fields() {
        let event = ClaimedEvent {
            id: Uuid::nil(),
            event_id: Uuid::nil(),
            destination: Destination::Default,
            kind: "circuit.opened".into(),
            subject: Subject::Other(json!({"channel": "EMAIL", "circuit": "OPEN"})),
            occurred_at: chrono::Utc::now(),
            dispatch_attempts: 1,
        };
        let body = body(&event);
        assert_eq!(body["type"], "circuit.opened");
        assert_eq!(body["channel"], "EMAIL");
        assert!(body.get("jobId").is_none());
    }
}
