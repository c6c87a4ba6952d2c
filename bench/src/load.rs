//! Request bodies and the HTTP calls that put notifications into the system.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::stats::Progress;

/// When a generated notification is due.
#[derive(Debug, Clone, Copy)]
pub enum When {
    /// `delaySeconds: 86400`: stored, not due during the benchmark.
    Tomorrow,
    /// `sendAt` = the client's clock when the body is built: due at once.
    Now,
}

/// The payload of the `i`-th generated notification (through HTTP or straight to SQL).
pub fn payload(i: u64) -> Value {
    json!({"template": "welcome", "name": "Ada", "n": i})
}

/// The payload of the `i`-th notification sent through SES (B11): what the SES provider
/// needs, a subject and a text body.
pub fn email_payload(i: u64) -> Value {
    json!({
        "subject": format!("Welcome, Ada ({i})"),
        "text": format!("Hello Ada, this is message {i} of the benchmark."),
    })
}

/// One create body. Every notification has its own recipient and key.
pub fn item(prefix: &str, i: u64, priority: &str, when: When) -> Value {
    item_with(prefix, i, priority, when, payload)
}

/// One create body with the payload `payload` makes for `i`.
pub fn item_with(
    prefix: &str,
    i: u64,
    priority: &str,
    when: When,
    payload: fn(u64) -> Value,
) -> Value {
    let mut body = json!({
        "recipient": format!("{prefix}-{i}@bench.example"),
        "channel": "EMAIL",
        "priority": priority,
        "idempotencyKey": format!("{prefix}-{i}"),
        "payload": payload(i),
    });
    match when {
        When::Tomorrow => body["delaySeconds"] = json!(86_400),
        When::Now => {
            body["sendAt"] =
                json!(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
        }
    }
    body
}

/// `n` notifications split into 20 calls (at most 5,000 each), serialised in advance;
/// `payload` makes each one's payload.
pub fn batch_bodies(
    prefix: &str,
    n: u64,
    priority: &str,
    payload: fn(u64) -> Value,
) -> anyhow::Result<Vec<(u64, Vec<u8>)>> {
    let per_call = n.div_ceil(20).clamp(1, 5000);
    let mut bodies = Vec::new();
    let mut start = 0;
    while start < n {
        let end = (start + per_call).min(n);
        let items: Vec<Value> = (start..end)
            .map(|i| item_with(prefix, i, priority, When::Tomorrow, payload))
            .collect();
        bodies.push((
            end - start,
            serde_json::to_vec(&json!({ "notifications": items }))?,
        ));
        start = end;
    }
    Ok(bodies)
}

/// Posts the batch bodies with `inflight` calls at a time; every item must answer 201.
/// Returns the time from the first call to the last answer.
pub async fn post_batches(
    http: &reqwest::Client,
    base_url: &str,
    bodies: Vec<(u64, Vec<u8>)>,
    inflight: usize,
    progress: &mut Progress,
) -> anyhow::Result<Duration> {
    let url = format!("{base_url}/notifications/batch");
    let started = Instant::now();
    let calls = bodies.into_iter().map(|(count, body)| {
        let http = http.clone();
        let url = url.clone();
        async move {
            let response = post_json(&http, &url, body)
                .await
                .context("batch call failed")?;
            let status = response.status();
            let text = response.bytes().await.context("batch answer")?;
            anyhow::Ok((count, status, text))
        }
    });
    let mut answers = futures::stream::iter(calls).buffer_unordered(inflight);
    let mut done = 0;
    while let Some(answer) = answers.next().await {
        let (count, status, text) = answer?;
        if !status.is_success() {
            bail!(
                "POST /notifications/batch answered {status}: {}",
                start_of(&text)
            );
        }
        let created = occurrences(&text, b"\"status\":201") as u64;
        if created != count {
            bail!(
                "POST /notifications/batch created {created} of {count}: {}",
                start_of(&text)
            );
        }
        done += count;
        progress.update(done);
    }
    Ok(started.elapsed())
}

/// The first 500 bytes of an answer, for an error message.
fn start_of(text: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(&text[..text.len().min(500)])
}

fn occurrences(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count()
}

/// `POST /notifications`; returns the status and the time the call took.
pub async fn post_one(
    http: &reqwest::Client,
    url: &str,
    body: Vec<u8>,
) -> anyhow::Result<(u16, Duration)> {
    let started = Instant::now();
    let response = post_json(http, url, body)
        .await
        .context("POST /notifications failed")?;
    let status = response.status().as_u16();
    let _ = response
        .bytes()
        .await
        .context("POST /notifications answer")?;
    Ok((status, started.elapsed()))
}

/// A POST with a JSON body.
async fn post_json(
    http: &reqwest::Client,
    url: &str,
    body: Vec<u8>,
) -> reqwest::Result<reqwest::Response> {
    http.post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
}

#[cfg(test)]
mod tests {
    #[test]
    fn bodies_split_into_twenty_calls() {
        let bodies = super::batch_bodies("t", 2000, "LOW", super::payload).expect("bodies");
        assert_eq!(bodies.len(), 20);
        assert_eq!(bodies.iter().map(|b| b.0).sum::<u64>(), 2000);
        assert_eq!(super::occurrences(b"aXbXX", b"X"), 3);
    }
}
