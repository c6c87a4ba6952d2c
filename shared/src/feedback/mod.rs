//! Provider feedback: what SES reports after a send, published to EventBridge by the
//! configuration set the sweeper sends with. [`parse`] reads one EventBridge event into
//! one [`Feedback`]; [`function`] applies it:
//!
//! - a permanent bounce or a complaint: the addresses join the suppression list (reasons
//!   `BOUNCED`, `COMPLAINED`);
//! - a delivery: the attempt that sent the message gets its `delivered_at`;
//! - anything else (a transient bounce, a reject, another event type): nothing changes.
//!
//! EventBridge delivers at least once, so every effect is idempotent: the same event twice
//! changes nothing the second time.

pub mod function;

pub use function::{FeedbackOutcome, ProviderEventsFunction};

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::audience::suppressions::ListReason;
use crate::domain::RECIPIENT_MAX;

/// What one SES event means for the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Feedback {
    /// The addresses (lower-case, distinct) must not be sent email again.
    Suppress {
        message_id: String,
        addresses: Vec<String>,
        reason: ListReason,
    },
    /// The message reached the recipient's mail server at `at`.
    Delivered {
        message_id: String,
        at: DateTime<Utc>,
    },
    /// Nothing to change; `why` is for the log.
    Ignored {
        event_type: String,
        message_id: Option<String>,
        why: &'static str,
    },
}

/// An event this function cannot read, naming the first field missing or wrong (never
/// its value: it may be an address).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed SES event: {0}")]
pub struct Malformed(String);

/// Reads an EventBridge event of SES (`source` `aws.ses`, the SES event in `detail`).
pub fn parse(event: &Value) -> Result<Feedback, Malformed> {
    // Absent when invoked by hand; present and different, the rule is wrong.
    if let Some(source) = event.get("source")
        && source.as_str() != Some("aws.ses")
    {
        return Err(Malformed("source is not aws.ses".into()));
    }
    let detail = object(event, "detail", "detail")?;
    let event_type = text(detail, "eventType", "detail.eventType")?;
    let message_id = detail
        .get("mail")
        .and_then(|mail| mail.get("messageId"))
        .and_then(Value::as_str)
        .filter(|id| !id.trim().is_empty())
        .map(str::to_string);
    let message = || {
        message_id
            .clone()
            .ok_or_else(|| missing("detail.mail.messageId"))
    };
    let ignored = |why| Feedback::Ignored {
        event_type: event_type.to_string(),
        message_id: message_id.clone(),
        why,
    };
    match event_type {
        "Bounce" => {
            let bounce = object(detail, "bounce", "detail.bounce")?;
            match text(bounce, "bounceType", "detail.bounce.bounceType")? {
                "Permanent" => Ok(Feedback::Suppress {
                    message_id: message()?,
                    addresses: addresses(
                        bounce,
                        "bouncedRecipients",
                        "detail.bounce.bouncedRecipients",
                    )?,
                    reason: ListReason::Bounced,
                }),
                "Transient" => Ok(ignored("transient bounce: the address may receive later")),
                _ => Ok(ignored("bounce of undetermined type")),
            }
        }
        "Complaint" => {
            let complaint = object(detail, "complaint", "detail.complaint")?;
            // A feedback report of type not-spam says the message was not a complaint.
            if complaint
                .get("complaintFeedbackType")
                .and_then(Value::as_str)
                == Some("not-spam")
            {
                return Ok(ignored("complaint feedback of type not-spam"));
            }
            Ok(Feedback::Suppress {
                message_id: message()?,
                addresses: addresses(
                    complaint,
                    "complainedRecipients",
                    "detail.complaint.complainedRecipients",
                )?,
                reason: ListReason::Complained,
            })
        }
        "Delivery" => {
            let delivery = object(detail, "delivery", "detail.delivery")?;
            let timestamp = text(delivery, "timestamp", "detail.delivery.timestamp")?;
            let at = DateTime::parse_from_rfc3339(timestamp)
                .map_err(|_| Malformed("detail.delivery.timestamp is not an RFC 3339 time".into()))?
                .with_timezone(&Utc);
            Ok(Feedback::Delivered {
                message_id: message()?,
                at,
            })
        }
        "Reject" => Ok(ignored("SES rejected the message and did not send it")),
        _ => Ok(ignored("not an event type this function acts on")),
    }
}

fn missing(field: &str) -> Malformed {
    Malformed(format!("{field} is missing"))
}

fn object<'a>(parent: &'a Value, key: &str, field: &str) -> Result<&'a Value, Malformed> {
    parent
        .get(key)
        .filter(|value| value.is_object())
        .ok_or_else(|| missing(field))
}

fn text<'a>(parent: &'a Value, key: &str, field: &str) -> Result<&'a str, Malformed> {
    parent
        .get(key)
        .and_then(Value::as_str)
        .filter(|value| !value.trim().is_empty())
        .ok_or_else(|| missing(field))
}

/// The `emailAddress` of every entry of a recipients list, as the suppression list stores
/// email: no display name, lower-case, each once. An empty list is malformed: a bounce or
/// complaint is about someone.
fn addresses(parent: &Value, key: &str, field: &str) -> Result<Vec<String>, Malformed> {
    let list = parent
        .get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| missing(field))?;
    if list.is_empty() {
        return Err(Malformed(format!("{field} is empty")));
    }
    let mut found = Vec::with_capacity(list.len());
    for (index, recipient) in list.iter().enumerate() {
        let raw = recipient
            .get("emailAddress")
            .and_then(Value::as_str)
            .ok_or_else(|| missing(&format!("{field}[{index}].emailAddress")))?;
        let address = normalise(raw).ok_or_else(|| {
            Malformed(format!(
                "{field}[{index}].emailAddress is not an email address"
            ))
        })?;
        found.push(address);
    }
    found.sort();
    found.dedup();
    Ok(found)
}

/// `Name <a@b>` or `a@b`, trimmed, to `a@b` in lower case; `None` when it is not an address.
fn normalise(raw: &str) -> Option<String> {
    let raw = raw.trim();
    let address = match (raw.rfind('<'), raw.rfind('>')) {
        (Some(open), Some(close)) if open < close => raw.get(open + 1..close)?.trim(),
        _ => raw,
    };
    let (local, domain) = address.rsplit_once('@')?;
    let well_formed = !local.is_empty()
        && !domain.is_empty()
        && address.chars().count() <= RECIPIENT_MAX
        && !address
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '<' | '>'));
    well_formed.then(|| address.to_lowercase())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The fixtures `cargo lambda invoke` and the smoke test use (tests/events/).
    fn fixture(name: &str) -> Value {
        let text = match name {
            "bounce" => include_str!("../../../tests/events/provider-events-bounce.json"),
            "complaint" => include_str!("../../../tests/events/provider-events-complaint.json"),
            "delivery" => include_str!("../../../tests/events/provider-events-delivery.json"),
            "transient" => {
                include_str!("../../../tests/events/provider-events-transient-bounce.json")
            }
            other => panic!("no fixture {other}"),
        };
        serde_json::from_str(text).expect("fixture is JSON")
    }

    #[test]
    fn a_permanent_bounce_suppresses_its_recipients_in_lower_case() {
        assert_eq!(
            parse(&fixture("bounce")),
            Ok(Feedback::Suppress {
                message_id: "0100019ad4f1b8a1-2f6c9e3d-8b7a-4c5d-a1e2-f3b4c5d6e7f8-000000".into(),
                addresses: vec!["ada.lovelace@example.com".into()],
                reason: ListReason::Bounced,
            })
        );
    }

    #[test]
    fn a_complaint_suppresses_the_complainant() {
        assert_eq!(
            parse(&fixture("complaint")),
            Ok(Feedback::Suppress {
                message_id: "0100019ad5a2c3d4-9e8f7a6b-5c4d-4e3f-8a2b-1c0d9e8f7a6b-000000".into(),
                addresses: vec!["grace.hopper@example.net".into()],
                reason: ListReason::Complained,
            })
        );
    }

    #[test]
    fn a_delivery_carries_its_message_and_time() {
        let at = DateTime::parse_from_rfc3339("2026-11-30T10:15:01.964Z")
            .expect("time")
            .with_timezone(&Utc);
        assert_eq!(
            parse(&fixture("delivery")),
            Ok(Feedback::Delivered {
                message_id: "0100019ad501d2e3-6a5b4c3d-2e1f-4a0b-9c8d-7e6f5a4b3c2d-000000".into(),
                at,
            })
        );
    }

    #[test]
    fn a_transient_bounce_changes_nothing() {
        let parsed = parse(&fixture("transient"));
        assert!(
            matches!(&parsed, Ok(Feedback::Ignored { event_type, message_id: Some(_), .. }) if event_type == "Bounce"),
            "{parsed:?}"
        );
    }

    #[test]
    fn rejects_other_types_and_not_spam_reports_change_nothing() {
        let mut reject = fixture("bounce");
        reject["detail"] = json!({"eventType": "Reject", "mail": {"messageId": "m"},
                                  "reject": {"reason": "Bad content"}});
        assert!(matches!(parse(&reject), Ok(Feedback::Ignored { .. })));

        let mut open = fixture("delivery");
        open["detail"]["eventType"] = json!("Open");
        assert!(matches!(parse(&open), Ok(Feedback::Ignored { .. })));

        let mut not_spam = fixture("complaint");
        not_spam["detail"]["complaint"]["complaintFeedbackType"] = json!("not-spam");
        assert!(matches!(parse(&not_spam), Ok(Feedback::Ignored { .. })));

        let mut undetermined = fixture("bounce");
        undetermined["detail"]["bounce"]["bounceType"] = json!("Undetermined");
        assert!(matches!(parse(&undetermined), Ok(Feedback::Ignored { .. })));
    }

    #[test]
    fn display_names_case_and_repeats_are_folded() {
        let mut bounce = fixture("bounce");
        bounce["detail"]["bounce"]["bouncedRecipients"] = json!([
            {"emailAddress": " Ada Lovelace <Ada@Example.com> "},
            {"emailAddress": "ada@EXAMPLE.com"},
            {"emailAddress": "bob@example.com"}
        ]);
        let Ok(Feedback::Suppress { addresses, .. }) = parse(&bounce) else {
            panic!("a permanent bounce suppresses");
        };
        assert_eq!(addresses, ["ada@example.com", "bob@example.com"]);
    }

    /// Each malformed event is an error naming the field, never a panic, and never quotes
    /// the address it could not read.
    #[test]
    fn malformed_events_name_what_is_missing() {
        let error = |event: Value| match parse(&event) {
            Err(error) => error.to_string(),
            Ok(feedback) => panic!("parsed {feedback:?}"),
        };
        assert!(error(json!({})).contains("detail is missing"));
        assert!(error(json!(null)).contains("detail is missing"));
        assert!(error(json!({"detail": "x"})).contains("detail is missing"));
        assert!(error(json!({"detail": {}})).contains("detail.eventType is missing"));
        assert!(error(json!({"source": "aws.s3", "detail": {}})).contains("source"));

        let mut no_message = fixture("bounce");
        no_message["detail"]["mail"] = json!({});
        assert!(error(no_message).contains("detail.mail.messageId is missing"));

        let mut no_type = fixture("bounce");
        no_type["detail"]["bounce"]
            .as_object_mut()
            .expect("object")
            .remove("bounceType");
        assert!(error(no_type).contains("detail.bounce.bounceType is missing"));

        let mut no_recipients = fixture("complaint");
        no_recipients["detail"]["complaint"]["complainedRecipients"] = json!([]);
        assert!(error(no_recipients).contains("complainedRecipients is empty"));

        let mut not_an_address = fixture("bounce");
        not_an_address["detail"]["bounce"]["bouncedRecipients"] =
            json!([{"emailAddress": "ada@example.com"}, {"emailAddress": "secret value"}]);
        let text = error(not_an_address);
        assert!(text.contains("bouncedRecipients[1].emailAddress is not an email address"));
        assert!(!text.contains("secret") && !text.contains("ada@"));

        let mut no_time = fixture("delivery");
        no_time["detail"]["delivery"]["timestamp"] = json!("yesterday");
        assert!(error(no_time).contains("detail.delivery.timestamp is not"));

        let mut no_delivery = fixture("delivery");
        no_delivery["detail"]
            .as_object_mut()
            .expect("object")
            .remove("delivery");
        assert!(error(no_delivery).contains("detail.delivery is missing"));
    }

    #[test]
    fn addresses_are_recognised_strictly() {
        assert_eq!(normalise("A@B.c"), Some("a@b.c".into()));
        assert_eq!(normalise("\"A B\" <A@B.c>"), Some("a@b.c".into()));
        for bad in ["", "@b.c", "a@", "a b@c.d", "no-at-sign", "<>", "a@b.c>"] {
            assert_eq!(normalise(bad), None, "{bad:?}");
        }
    }
}
