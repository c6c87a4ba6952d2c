//! Email through Amazon SES v2 (`SendEmail`), one call per message, each through the gate.
//! SES has no idempotency key: a resend after a crash between SES's answer and the
//! record can deliver twice. The sweeper records a long batch in parts as its calls end
//! (every half second), so a crash repeats at most the calls of that last half second and
//! those in flight.

use aws_sdk_sesv2::Client;
use aws_sdk_sesv2::types::{Body, Content, Destination, EmailContent, Message, MessageHeader};
use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;

use super::aws::{ServiceAnswer, classify, common, describe};
use super::{Attempt, Delivery, Gate, Provider, ProviderOutcome};

pub struct SesProvider {
    client: Client,
    from: String,
    configuration_set: Option<String>,
}

impl SesProvider {
    pub fn new(
        sdk: &aws_config::SdkConfig,
        from: String,
        configuration_set: Option<String>,
    ) -> Self {
        SesProvider {
            client: Client::new(sdk),
            from,
            configuration_set,
        }
    }

    async fn send_one(&self, delivery: &Delivery<'_>) -> ProviderOutcome {
        let message = match message(delivery.payload, delivery.unsubscribe_url) {
            Ok(message) => message,
            Err(problem) => return ProviderOutcome::Permanent(problem),
        };
        let mut request = self
            .client
            .send_email()
            .from_email_address(&self.from)
            .destination(
                Destination::builder()
                    .to_addresses(delivery.recipient)
                    .build(),
            )
            .content(EmailContent::builder().simple(message).build());
        if let Some(reply_to) = delivery.payload.get("replyTo").and_then(Value::as_str) {
            request = request.reply_to_addresses(reply_to);
        }
        if let Some(set) = &self.configuration_set {
            request = request.configuration_set_name(set);
        }
        match request.send().await {
            Ok(sent) => ProviderOutcome::Delivered {
                already: false,
                message_id: sent.message_id().map(str::to_string),
            },
            Err(error) => classify(&error, &[delivery.recipient], ses_answer),
        }
    }
}

/// RFC 5322's limit on a line, which a header's name and value share.
pub const HEADER_LINE_MAX: usize = 998;

/// A header field name (RFC 5322): printable ASCII but the colon, no spaces.
pub fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= HEADER_LINE_MAX
        && name.bytes().all(|b| (33..=126).contains(&b) && b != b':')
}

/// A header value that cannot start another header: no CR, LF or NUL, and short enough to
/// fit one line with its name.
pub fn is_header_value(name: &str, value: &str) -> bool {
    name.len() + 2 + value.len() <= HEADER_LINE_MAX && !value.contains(['\r', '\n', '\0'])
}

/// The message of a payload: `subject`, `text` and/or `html`, the headers given as
/// `headers`, and for bulk email the RFC 8058 pair pointing at `unsubscribe_url` (which
/// replaces any the client gave).
fn message(payload: &Value, unsubscribe_url: Option<&str>) -> Result<Message, String> {
    let text = |field: &str| payload.get(field).and_then(Value::as_str);
    let content = |data: &str| {
        Content::builder()
            .data(data)
            .charset("UTF-8")
            .build()
            .map_err(|error| format!("Cannot build the message: {error}"))
    };
    let subject = text("subject").ok_or("The payload has no subject")?;
    let mut body = Body::builder();
    if let Some(plain) = text("text") {
        body = body.text(content(plain)?);
    }
    if let Some(html) = text("html") {
        body = body.html(content(html)?);
    }
    let mut message = Message::builder()
        .subject(content(subject)?)
        .body(body.build());
    let header = |name: &str, value: &str| {
        MessageHeader::builder()
            .name(name)
            .value(value)
            .build()
            .map_err(|error| format!("Cannot build the message: {error}"))
    };
    let ours = |name: &str| {
        unsubscribe_url.is_some()
            && (name.eq_ignore_ascii_case("List-Unsubscribe")
                || name.eq_ignore_ascii_case("List-Unsubscribe-Post"))
    };
    if let Some(headers) = payload.get("headers").and_then(Value::as_object) {
        for (name, value) in headers {
            let Some(value) = value.as_str() else {
                continue;
            };
            // Intake refuses these; a notification stored while the channel was simulated
            // was not checked, and must not smuggle a header in through a line break.
            if !is_header_name(name) || !is_header_value(name, value) {
                return Err(format!(
                    "The payload's header {name:?} is not a valid header"
                ));
            }
            if !ours(name) {
                message = message.headers(header(name, value)?);
            }
        }
    }
    if let Some(url) = unsubscribe_url {
        message = message
            .headers(header("List-Unsubscribe", &format!("<{url}>"))?)
            .headers(header(
                "List-Unsubscribe-Post",
                "List-Unsubscribe=One-Click",
            )?);
    }
    Ok(message.build())
}

/// SES's own codes first, then the rules every AWS service shares.
fn ses_answer(answer: &ServiceAnswer<'_>) -> ProviderOutcome {
    let text = describe(answer);
    match answer.code {
        "AccountSuspendedException"
        | "SendingPausedException"
        // The name SES's v1 API gives the account's sending being paused.
        | "AccountSendingPausedException"
        | "MailFromDomainNotVerifiedException"
        | "NotFoundException" => ProviderOutcome::Misconfigured(text),
        // An identity that is not verified (the sender, or any recipient while the account
        // is in the SES sandbox): nothing will go out until an operator fixes it.
        "MessageRejected" if answer.message.contains("not verified") => {
            ProviderOutcome::Misconfigured(text)
        }
        "MessageRejected" => ProviderOutcome::Permanent(text),
        // SES refuses an address on its account-level suppression list.
        "BadRequestException" if answer.message.to_ascii_lowercase().contains("suppress") => {
            ProviderOutcome::InvalidRecipient(text)
        }
        _ => common(answer),
    }
}

impl Provider for SesProvider {
    fn send<'a>(
        &'a self,
        batch: &'a [Delivery<'a>],
        gate: &'a Gate,
    ) -> BoxFuture<'a, Vec<Attempt>> {
        async move {
            gate.each(batch, |delivery: &'a Delivery<'a>| self.send_one(delivery))
                .await
        }
        .boxed()
    }

    fn name(&self) -> &'static str {
        "ses"
    }

    fn is_real(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, code: &'static str, message: &'static str) -> ServiceAnswer<'static> {
        ServiceAnswer {
            status,
            code,
            message,
            retry_after: None,
        }
    }

    #[test]
    fn ses_answers_are_classified_by_what_the_worker_must_do() {
        assert!(matches!(
            ses_answer(&answer(
                400,
                "MessageRejected",
                "Email address is not verified."
            )),
            ProviderOutcome::Misconfigured(_)
        ));
        assert!(matches!(
            ses_answer(&answer(400, "MessageRejected", "Illegal header")),
            ProviderOutcome::Permanent(_)
        ));
        assert!(matches!(
            ses_answer(&answer(400, "SendingPausedException", "")),
            ProviderOutcome::Misconfigured(_)
        ));
        assert!(matches!(
            ses_answer(&answer(400, "AccountSendingPausedException", "")),
            ProviderOutcome::Misconfigured(_)
        ));
        assert!(matches!(
            ses_answer(&answer(429, "TooManyRequestsException", "")),
            ProviderOutcome::Throttled { .. }
        ));
        assert!(matches!(
            ses_answer(&answer(500, "InternalFailure", "")),
            ProviderOutcome::Temporary(_)
        ));
    }

    #[test]
    fn a_payload_without_a_subject_is_not_a_message() {
        assert!(message(&serde_json::json!({"text": "hi"}), None).is_err());
        assert!(message(&serde_json::json!({"subject": "s", "text": "hi"}), None).is_ok());
    }

    #[test]
    fn a_header_with_a_line_break_is_never_sent() {
        let smuggling = serde_json::json!({
            "subject": "s", "text": "hi",
            "headers": {"X-Note": "a\r\nBcc: evil@example.com"},
        });
        assert!(message(&smuggling, None).is_err());
        let fine = serde_json::json!({"subject": "s", "text": "hi", "headers": {"X-Note": "a"}});
        assert!(message(&fine, None).is_ok());
    }
}
