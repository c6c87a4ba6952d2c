//! Validation of the create request: every failing field is reported at once, with no
//! type coercion, and unknown properties rejected by name.

use chrono::{DateTime, FixedOffset, NaiveDateTime, TimeDelta, Utc};
use serde_json::Value;

use super::request::CreateRequest;
use crate::notification::{Channel, Priority};
use crate::problems::{FieldError, Problems, contains_nul};
use crate::queue::Due;

pub use crate::domain::RECIPIENT_MAX;
pub const IDEMPOTENCY_KEY_MAX: usize = 255;
pub const DELAY_SECONDS_MAX: i64 = 31_536_000;
pub const SEND_AT_HORIZON_DAYS: i64 = 365;

const FIELDS: [&str; 7] = [
    "recipient",
    "channel",
    "payload",
    "priority",
    "idempotencyKey",
    "sendAt",
    "delaySeconds",
];

/// Validates one create body for channels that all go to the simulated provider. `now`
/// bounds `sendAt` (at most 365 days ahead).
pub fn validate_create(body: &Value, now: DateTime<Utc>) -> Result<CreateRequest, Vec<FieldError>> {
    validate_create_for(body, now, |_| false)
}

/// Validates one create body; a channel for which `real` is true must also carry what its
/// real provider needs (see [`super::payload`]).
pub fn validate_create_for(
    body: &Value,
    now: DateTime<Utc>,
    real: impl Fn(Channel) -> bool,
) -> Result<CreateRequest, Vec<FieldError>> {
    let mut problems = Problems::new();
    let Some(object) = body.as_object() else {
        problems.add("body", "body must be a JSON object");
        return Err(problems.into_errors());
    };
    problems.only(object, &FIELDS);

    let recipient = problems.required_text(object, "recipient", RECIPIENT_MAX);
    let channel = required_one_of(
        &mut problems,
        object,
        "channel",
        Channel::parse,
        "EMAIL, SMS, PUSH",
    );
    let priority = required_one_of(
        &mut problems,
        object,
        "priority",
        Priority::parse,
        "HIGH, NORMAL, LOW",
    );
    let idempotency_key = problems.required_text(object, "idempotencyKey", IDEMPOTENCY_KEY_MAX);
    let payload = match object.get("payload") {
        None => {
            problems.add("payload", "payload is required");
            None
        }
        Some(value @ Value::Object(_)) if contains_nul(value) => {
            problems.add(
                "payload",
                "payload must not contain NUL (\\u0000) characters",
            );
            None
        }
        Some(value @ Value::Object(_)) => Some(value.clone()),
        Some(_) => {
            problems.add("payload", "payload must be a JSON object");
            None
        }
    };

    let (due, send_at, delay_seconds) = match (object.get("sendAt"), object.get("delaySeconds")) {
        (Some(send_at), None) => match parse_send_at(send_at, now) {
            Ok(at) => (Some(Due::At(at)), Some(at), None),
            Err(message) => {
                problems.add("sendAt", message);
                (None, None, None)
            }
        },
        (None, Some(delay)) => match delay.as_i64() {
            Some(seconds) if (1..=DELAY_SECONDS_MAX).contains(&seconds) => {
                let seconds = seconds as i32;
                (Some(Due::AfterSeconds(seconds)), None, Some(seconds))
            }
            Some(_) => {
                problems.add(
                    "delaySeconds",
                    format!("delaySeconds must be between 1 and {DELAY_SECONDS_MAX}"),
                );
                (None, None, None)
            }
            None => {
                problems.add("delaySeconds", "delaySeconds must be an integer");
                (None, None, None)
            }
        },
        _ => {
            problems.add("sendAt", "Provide exactly one of sendAt or delaySeconds");
            (None, None, None)
        }
    };

    if let (Some(recipient), Some(channel), Some(Value::Object(fields))) =
        (&recipient, channel, &payload)
        && real(channel)
    {
        super::payload::check(channel, recipient, fields, &mut problems);
    }

    match (recipient, channel, payload, priority, idempotency_key, due) {
        (
            Some(recipient),
            Some(channel),
            Some(payload),
            Some(priority),
            Some(idempotency_key),
            Some(due),
        ) if problems.is_empty() => Ok(CreateRequest {
            recipient,
            channel,
            payload,
            priority,
            idempotency_key,
            due,
            send_at,
            delay_seconds,
        }),
        _ => Err(problems.into_errors()),
    }
}

/// A required enumeration value, given as one of its exact spellings.
fn required_one_of<T>(
    problems: &mut Problems,
    object: &serde_json::Map<String, Value>,
    field: &str,
    parse: fn(&str) -> Option<T>,
    allowed: &str,
) -> Option<T> {
    match object.get(field) {
        None => {
            problems.add(field, format!("{field} is required"));
            None
        }
        Some(value) => problems.one_of(field, value.as_str(), parse, allowed),
    }
}

/// Strict ISO-8601 date-time: `YYYY-MM-DDTHH:MM[:SS[.fraction]]` and an explicit offset.
fn parse_send_at(value: &Value, now: DateTime<Utc>) -> Result<DateTime<Utc>, &'static str> {
    const INVALID: &str = "sendAt must be a valid ISO 8601 date-time";
    let Some(text) = value.as_str() else {
        return Err(INVALID);
    };
    let at = parse_iso_date_time(text)?;
    if at - now > TimeDelta::days(SEND_AT_HORIZON_DAYS) {
        return Err("sendAt must be within 365 days from now");
    }
    Ok(at)
}

pub(crate) fn parse_iso_date_time(text: &str) -> Result<DateTime<Utc>, &'static str> {
    const INVALID: &str = "sendAt must be a valid ISO 8601 date-time";
    const NO_OFFSET: &str = "sendAt must include a timezone offset (Z or ±HH:MM)";
    // The date part must be exactly YYYY-MM-DD followed by 'T'.
    let bytes = text.as_bytes();
    let shaped = bytes.len() >= 16
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes[10] == b'T';
    if !shaped || !text.is_ascii() {
        return Err(INVALID);
    }
    if !has_offset(bytes) {
        // No offset, or one in another spelling (+0100, +01): the message says which.
        let time = &text[11..];
        let naive = ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"]
            .iter()
            .any(|format| NaiveDateTime::parse_from_str(text, format).is_ok());
        return Err(if naive || time.contains(['+', '-']) {
            NO_OFFSET
        } else {
            INVALID
        });
    }
    let with_offset = text
        .strip_suffix('Z')
        .map(|s| format!("{s}+00:00"))
        .unwrap_or_else(|| text.to_string());
    ["%Y-%m-%dT%H:%M:%S%.f%:z", "%Y-%m-%dT%H:%M%:z"]
        .iter()
        .find_map(|format| DateTime::<FixedOffset>::parse_from_str(&with_offset, format).ok())
        .map(|at| at.with_timezone(&Utc))
        .ok_or(INVALID)
}

/// Ends in `Z` or `±HH:MM`, the only offsets the contract allows.
fn has_offset(bytes: &[u8]) -> bool {
    if bytes.ends_with(b"Z") {
        return true;
    }
    let Some(offset) = bytes.len().checked_sub(6).map(|start| &bytes[start..]) else {
        return false;
    };
    matches!(offset[0], b'+' | b'-')
        && offset[1..3].iter().all(u8::is_ascii_digit)
        && offset[3] == b':'
        && offset[4..6].iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-09-24T12:00:00Z")
            .expect("valid")
            .with_timezone(&Utc)
    }

    fn valid() -> Value {
        json!({"recipient": "a@example.com", "channel": "EMAIL", "payload": {"k": "v"},
               "priority": "HIGH", "idempotencyKey": "k-1", "delaySeconds": 60})
    }

    fn fields(errors: &[FieldError]) -> Vec<&str> {
        errors.iter().map(|e| e.field.as_str()).collect()
    }

    #[test]
    fn a_valid_request_passes() {
        let request = validate_create(&valid(), now()).expect("valid");
        assert_eq!(request.due, Due::AfterSeconds(60));
        assert_eq!(request.priority, Priority::High);
    }

    #[test]
    fn every_failing_field_is_reported_together() {
        let body = json!({"recipient": "", "channel": "FAX", "payload": [], "priority": 1,
                          "idempotencyKey": 5, "delaySeconds": "60", "extra": true});
        let errors = validate_create(&body, now()).expect_err("invalid");
        assert_eq!(
            fields(&errors),
            [
                "extra",
                "recipient",
                "channel",
                "priority",
                "idempotencyKey",
                "payload",
                "delaySeconds"
            ]
        );
        assert_eq!(errors[0].errors, ["property extra should not exist"]);
    }

    #[test]
    fn null_schedule_fields_count_as_present() {
        for (key, value) in [("sendAt", Value::Null), ("delaySeconds", Value::Null)] {
            let mut body = valid();
            body.as_object_mut().expect("object").remove("delaySeconds");
            body[key] = value;
            assert!(
                validate_create(&body, now()).is_err(),
                "{key}: null must be rejected"
            );
        }
        let mut both = valid();
        both["sendAt"] = json!("2026-09-24T12:00:00Z");
        let errors = validate_create(&both, now()).expect_err("both given");
        assert_eq!(
            errors[0].errors,
            ["Provide exactly one of sendAt or delaySeconds"]
        );
    }

    #[test]
    fn nul_is_rejected_at_any_depth() {
        let mut body = valid();
        body["payload"] = json!({"a": [{"b\u{0}": 1}]});
        body["recipient"] = json!("x\u{0}y");
        let errors = validate_create(&body, now()).expect_err("nul");
        assert_eq!(fields(&errors), ["recipient", "payload"]);
    }

    #[test]
    fn send_at_must_be_strict_iso_with_an_offset() {
        assert_eq!(
            parse_iso_date_time("2026-09-24T12:00:00"),
            Err("sendAt must include a timezone offset (Z or ±HH:MM)")
        );
        for bad in [
            "2026-09-24",
            "24/09/2026 12:00",
            "2026-09-24 12:00:00Z",
            "2026-13-01T00:00:00Z",
            "tomorrow",
        ] {
            assert_eq!(
                parse_iso_date_time(bad),
                Err("sendAt must be a valid ISO 8601 date-time"),
                "{bad}"
            );
        }
        for other_spelling in ["2026-09-24T09:30:00+0100", "2026-09-24T09:30:00+01"] {
            assert_eq!(
                parse_iso_date_time(other_spelling),
                Err("sendAt must include a timezone offset (Z or ±HH:MM)"),
                "{other_spelling}"
            );
        }
        let a = parse_iso_date_time("2026-09-24T09:30:00+01:00").expect("offset");
        let b = parse_iso_date_time("2026-09-24T08:30:00.000Z").expect("zulu");
        assert_eq!(a, b);
    }

    #[test]
    fn send_at_is_bounded_to_a_year() {
        let mut body = valid();
        body.as_object_mut().expect("object").remove("delaySeconds");
        body["sendAt"] = json!("2027-10-01T00:00:00Z");
        let errors = validate_create(&body, now()).expect_err("too far");
        assert_eq!(
            errors[0].errors,
            ["sendAt must be within 365 days from now"]
        );
        body["sendAt"] = json!("2020-01-01T00:00:00Z");
        assert!(
            validate_create(&body, now()).is_ok(),
            "the past means due now"
        );
    }

    #[test]
    fn integers_are_not_coerced() {
        for delay in [json!(60.5), json!("60"), json!(0), json!(31_536_001)] {
            let mut body = valid();
            body["delaySeconds"] = delay.clone();
            assert!(validate_create(&body, now()).is_err(), "{delay}");
        }
    }
}
