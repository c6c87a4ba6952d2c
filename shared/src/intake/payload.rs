//! What a real provider needs of a notification, checked at intake so a message that
//! cannot be sent is refused with a 400 instead of failing later. The simulated provider
//! takes any JSON object (the design's wire compatibility), so these rules apply only to
//! channels sent by SES or SNS.

use serde_json::{Map, Value};

use crate::config::ProvidersConfig;
use crate::domain::RECIPIENT_MAX;
use crate::notification::Channel;
use crate::problems::Problems;
use crate::provider::ses::{HEADER_LINE_MAX, is_header_name, is_header_value};

const SUBJECT_MAX: usize = 998;
pub const SMS_TEXT_MAX: usize = 1600;
const PUSH_DATA_MAX_BYTES: usize = 4096;

/// The channels this deployment sends through a real provider, which intake checks
/// notifications against.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RealProviders {
    email: bool,
    sms: bool,
    push: bool,
    /// Whether push takes raw device tokens (SNS turns them into endpoints of
    /// `SNS_PLATFORM_APPLICATION_ARN`), not only endpoint ARNs.
    device_tokens: bool,
}

impl RealProviders {
    pub fn of(config: &ProvidersConfig) -> Self {
        RealProviders {
            email: config.is_real(Channel::Email),
            sms: config.is_real(Channel::Sms),
            push: config.is_real(Channel::Push),
            device_tokens: config.sns_platform_application_arn.is_some(),
        }
    }

    pub fn send(&self, channel: Channel) -> bool {
        match channel {
            Channel::Email => self.email,
            Channel::Sms => self.sms,
            Channel::Push => self.push,
        }
    }
}

/// Adds the problems of `payload` and `recipient` (`None`: a profile's address, resolved
/// later) for `channel`'s real provider.
pub fn check(
    channel: Channel,
    recipient: Option<&str>,
    payload: &Map<String, Value>,
    real: &RealProviders,
    problems: &mut Problems,
) {
    match channel {
        Channel::Email => {
            if recipient.is_some_and(|r| !is_email_address(r)) {
                problems.add("recipient", "recipient must be an email address");
            }
            match payload.get("subject") {
                Some(Value::String(subject))
                    if (1..=SUBJECT_MAX).contains(&subject.chars().count()) => {}
                _ => problems.add(
                    "payload.subject",
                    format!("payload.subject must be a string of 1 to {SUBJECT_MAX} characters"),
                ),
            }
            let text = optional_string(payload, "text", problems);
            let html = optional_string(payload, "html", problems);
            if text.is_none() && html.is_none() {
                problems.add("payload.text", "payload needs text or html (or both)");
            }
            if let Some(reply_to) = optional_string(payload, "replyTo", problems)
                && !is_email_address(reply_to)
            {
                problems.add(
                    "payload.replyTo",
                    "payload.replyTo must be an email address",
                );
            }
            match payload.get("headers") {
                None => {}
                Some(Value::Object(headers)) => {
                    for (name, value) in headers {
                        if !is_header_name(name) {
                            problems.add(
                                &format!("payload.headers.{name}"),
                                "a header name must be printable ASCII without spaces or colons",
                            );
                        } else if !value.as_str().is_some_and(|v| is_header_value(name, v)) {
                            problems.add(
                                &format!("payload.headers.{name}"),
                                format!(
                                    "a header value must be a string without line breaks, at most \
                                     {HEADER_LINE_MAX} characters with its name"
                                ),
                            );
                        }
                    }
                }
                Some(_) => problems.add(
                    "payload.headers",
                    "payload.headers must be an object of string values",
                ),
            }
        }
        Channel::Sms => {
            if recipient.is_some_and(|r| !is_e164(r)) {
                problems.add(
                    "recipient",
                    "recipient must be an E.164 phone number (+ and 8 to 15 digits, the first not 0)",
                );
            }
            match payload.get("text") {
                Some(Value::String(text)) if (1..=SMS_TEXT_MAX).contains(&text.chars().count()) => {
                }
                _ => problems.add(
                    "payload.text",
                    format!("payload.text must be a string of 1 to {SMS_TEXT_MAX} characters"),
                ),
            }
        }
        Channel::Push => {
            match recipient {
                Some(r) if !is_push_target(r) => problems.add(
                    "recipient",
                    "recipient must be an SNS platform endpoint ARN or a device token",
                ),
                Some(r) if !real.device_tokens && !r.starts_with("arn:") => problems.add(
                    "recipient",
                    "recipient must be an SNS platform endpoint ARN: device tokens need \
                     SNS_PLATFORM_APPLICATION_ARN, which this deployment does not set",
                ),
                _ => {}
            }
            let title = optional_string(payload, "title", problems);
            let body = optional_string(payload, "body", problems);
            if title.is_none() && body.is_none() {
                problems.add("payload.body", "payload needs a title or a body (or both)");
            }
            match payload.get("data") {
                None => {}
                Some(data @ Value::Object(fields))
                    if fields.values().all(Value::is_string)
                        && data.to_string().len() > PUSH_DATA_MAX_BYTES =>
                {
                    problems.add(
                        "payload.data",
                        format!("payload.data must be at most {PUSH_DATA_MAX_BYTES} bytes as JSON"),
                    );
                }
                Some(Value::Object(fields)) if fields.values().all(Value::is_string) => {}
                Some(_) => problems.add(
                    "payload.data",
                    "payload.data must be an object of string values",
                ),
            }
        }
    }
}

/// A string member, if present; anything else present is a problem.
fn optional_string<'a>(
    payload: &'a Map<String, Value>,
    field: &str,
    problems: &mut Problems,
) -> Option<&'a str> {
    match payload.get(field) {
        None => None,
        Some(Value::String(text)) if !text.is_empty() => Some(text),
        Some(_) => {
            problems.add(
                &format!("payload.{field}"),
                format!("payload.{field} must be a non-empty string"),
            );
            None
        }
    }
}

/// `local@domain.tld`: one `@`, no spaces, a dot in the domain.
pub fn is_email_address(text: &str) -> bool {
    let Some((local, domain)) = text.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && local.len() <= 64
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !text.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// `+` and 8 to 15 digits, the first not 0: no country code starts with 0.
pub fn is_e164(text: &str) -> bool {
    text.strip_prefix('+').is_some_and(|digits| {
        (8..=15).contains(&digits.len())
            && digits.bytes().all(|b| b.is_ascii_digit())
            && !digits.starts_with('0')
    })
}

/// An SNS platform endpoint ARN, or a device token (printable ASCII, no spaces or
/// brackets), of at most [`RECIPIENT_MAX`] characters.
pub fn is_push_target(text: &str) -> bool {
    // A push target becomes a notification's recipient, held to the same length.
    if !(1..=RECIPIENT_MAX).contains(&text.len()) {
        return false;
    }
    // Printable ASCII without spaces; no brackets, so nothing reads as `[erased]`.
    if !text
        .bytes()
        .all(|b| b.is_ascii_graphic() && b != b'[' && b != b']')
    {
        return false;
    }
    if text.starts_with("arn:") {
        return text.starts_with("arn:aws") && text.contains(":endpoint/");
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every channel real, push with a platform application.
    const ALL_REAL: RealProviders = RealProviders {
        email: true,
        sms: true,
        push: true,
        device_tokens: true,
    };

    fn problems_of(channel: Channel, recipient: &str, payload: Value) -> Vec<String> {
        problems_with(channel, Some(recipient), payload, &ALL_REAL)
    }

    fn problems_with(
        channel: Channel,
        recipient: Option<&str>,
        payload: Value,
        real: &RealProviders,
    ) -> Vec<String> {
        let mut problems = Problems::new();
        check(
            channel,
            recipient,
            payload.as_object().expect("object"),
            real,
            &mut problems,
        );
        problems
            .into_errors()
            .into_iter()
            .map(|e| e.field)
            .collect()
    }

    #[test]
    fn a_phone_number_is_e164() {
        for good in ["+15555550100", "+44207946", "+999999999999999"] {
            assert!(is_e164(good), "{good}");
        }
        for bad in [
            "15555550100",
            "+1555555",
            "+9999999999999999",
            "+0123456789",
            "+1 555 555 0100",
            "+1555555010a",
        ] {
            assert!(!is_e164(bad), "{bad}");
        }
    }

    #[test]
    fn email_headers_cannot_carry_a_line_break_or_a_malformed_name() {
        let with = |headers: Value| {
            problems_of(
                Channel::Email,
                "a@example.com",
                json!({"subject": "s", "text": "t", "headers": headers}),
            )
        };
        assert!(with(json!({"X-Campaign": "spring", "Reply-By": "Friday"})).is_empty());
        assert_eq!(
            with(json!({"X-Note": "a\r\nBcc: evil@example.com"})),
            ["payload.headers.X-Note"]
        );
        assert_eq!(
            with(json!({"Bad Name": "x", "X-Ok": "fine", "X-Num": 5})),
            ["payload.headers.Bad Name", "payload.headers.X-Num"]
        );
        assert_eq!(
            with(json!({"X-Long": "v".repeat(991)})),
            ["payload.headers.X-Long"]
        );
        assert_eq!(with(json!("x")), ["payload.headers"]);
    }

    #[test]
    fn each_channel_names_what_its_provider_needs() {
        assert_eq!(
            problems_of(Channel::Email, "not-an-address", json!({})),
            ["recipient", "payload.subject", "payload.text"]
        );
        assert!(
            problems_of(
                Channel::Email,
                "a@example.com",
                json!({"subject": "s", "html": "<p>"})
            )
            .is_empty()
        );
        assert_eq!(
            problems_of(Channel::Sms, "0612345678", json!({"text": ""})),
            ["recipient", "payload.text"]
        );
        assert!(problems_of(Channel::Sms, "+33612345678", json!({"text": "hi"})).is_empty());
        assert_eq!(
            problems_of(Channel::Push, "has space", json!({"data": {"n": 1}})),
            ["recipient", "payload.body", "payload.data"]
        );
        assert!(
            problems_of(
                Channel::Push,
                "arn:aws:sns:us-east-1:123456789012:endpoint/GCM/app/0b1c",
                json!({"title": "t"})
            )
            .is_empty()
        );
    }

    #[test]
    fn a_device_token_needs_a_platform_application_and_a_profile_only_its_payload() {
        let without_application = RealProviders {
            device_tokens: false,
            ..ALL_REAL
        };
        let title = || json!({"title": "t"});
        assert_eq!(
            problems_with(
                Channel::Push,
                Some("device-token"),
                title(),
                &without_application
            ),
            ["recipient"]
        );
        assert!(
            problems_with(
                Channel::Push,
                Some("arn:aws:sns:us-east-1:123456789012:endpoint/GCM/app/0b1c"),
                title(),
                &without_application
            )
            .is_empty()
        );
        assert!(problems_with(Channel::Push, Some("device-token"), title(), &ALL_REAL).is_empty());
        // A recipient id: the payload is checked, the address later.
        assert_eq!(
            problems_with(Channel::Email, None, json!({}), &ALL_REAL),
            ["payload.subject", "payload.text"]
        );
    }
}
