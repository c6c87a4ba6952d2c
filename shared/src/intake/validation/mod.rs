//! Validation of the create request: every failing field is reported at once, with no
//! type coercion, and unknown properties rejected by name.

mod message;
mod timing;

pub use message::template_use;
pub use timing::{SEND_AT_HORIZON_DAYS, TTL_SECONDS_MAX, to_milliseconds};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::payload::RealProviders;
use super::request::{CreateRequest, RequestTarget};
use crate::notification::{Channel, Class, Priority};
use crate::problems::{FieldError, Problems};
use crate::queue::Due;
use message::literal_payload;
use timing::{expiry, parse_send_at};

use crate::audience::erasure::ERASED_RECIPIENT;
pub use crate::domain::RECIPIENT_MAX;
pub const IDEMPOTENCY_KEY_MAX: usize = 255;
pub const DELAY_SECONDS_MAX: i64 = 31_536_000;

const FIELDS: [&str; 14] = [
    "recipient",
    "recipientId",
    "channel",
    "payload",
    "priority",
    "idempotencyKey",
    "sendAt",
    "delaySeconds",
    "class",
    "category",
    "expiresAt",
    "ttlSeconds",
    "template",
    "locale",
];

/// A UUID in its one spelling on the wire, `8-4-4-4-12` hex digits: the braced, `urn:uuid:`
/// and hyphen-less forms the uuid crate also reads are refused, so an id has one text form.
pub fn uuid(text: &str) -> Option<uuid::Uuid> {
    if text.len() == 36 {
        uuid::Uuid::try_parse(text).ok()
    } else {
        None
    }
}

/// `^[a-z0-9][a-z0-9_.-]{0,63}$`: a category (and a template id).
pub fn is_category(text: &str) -> bool {
    let bytes = text.as_bytes();
    (1..=64).contains(&bytes.len())
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(b))
}

/// `^[A-Za-z0-9._:@-]{1,128}$`: a recipient id, chosen by the client.
pub fn is_recipient_id(text: &str) -> bool {
    (1..=128).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:@-".contains(&b))
}

/// The `category` field: "general" when absent, else 1 to 64 lower-case letters, digits
/// or `_.-` starting with a letter or digit (worded once for every route that takes one).
pub fn category(value: Option<&Value>, problems: &mut Problems) -> Option<String> {
    match value {
        None => Some("general".to_string()),
        Some(Value::String(category)) if is_category(category) => Some(category.clone()),
        Some(_) => {
            problems.add(
                "category",
                "category must be 1 to 64 lower-case letters, digits or _.- starting with a letter or digit",
            );
            None
        }
    }
}

/// Validates one create body for channels that all go to the simulated provider. `now`
/// bounds `sendAt` (at most 365 days ahead).
pub fn validate_create(body: &Value, now: DateTime<Utc>) -> Result<CreateRequest, Vec<FieldError>> {
    validate_create_for(body, now, &RealProviders::default())
}

/// Validates one create body; a channel `real` says a real provider sends must also carry
/// what that provider needs (see [`super::payload`]).
pub fn validate_create_for(
    body: &Value,
    now: DateTime<Utc>,
    real: &RealProviders,
) -> Result<CreateRequest, Vec<FieldError>> {
    let mut problems = Problems::new();
    let Some(object) = body.as_object() else {
        problems.add("body", "body must be a JSON object");
        return Err(problems.into_errors());
    };
    problems.only(object, &FIELDS);

    // Of each pair that excludes the other, each one given is checked, then that exactly
    // one is: every failing field is reported at once.
    let address = object.contains_key("recipient").then(|| {
        match problems.required_text(object, "recipient", RECIPIENT_MAX) {
            // The mark an erased notification carries; no address is spelled so.
            Some(address) if address == ERASED_RECIPIENT => {
                problems.add("recipient", "recipient [erased] is reserved");
                None
            }
            address => address,
        }
    });
    let profile = object.get("recipientId").map(|id| match id {
        Value::String(id) if is_recipient_id(id) => Some(id.clone()),
        _ => {
            problems.add(
                "recipientId",
                "recipientId must be 1 to 128 letters, digits or ._:@-",
            );
            None
        }
    });
    let target = match (address, profile) {
        (Some(address), None) => address.map(RequestTarget::Address),
        (None, Some(id)) => id.map(RequestTarget::Profile),
        _ => {
            problems.add(
                "recipient",
                "Provide exactly one of recipient or recipientId",
            );
            None
        }
    };
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
    let payload = object
        .get("payload")
        .map(|payload| literal_payload(payload, &mut problems));
    let template = object
        .get("template")
        .map(|template| template_use(template, &mut problems));
    let (payload, template) = match (payload, template) {
        (Some(payload), None) => (payload, None),
        (None, Some(Some((template, data)))) => (Some(data), Some(template)),
        (None, Some(None)) => (None, None),
        _ => {
            problems.add("payload", "Provide exactly one of payload or template");
            (None, None)
        }
    };
    let template = match (template, object.get("locale")) {
        (template, None) => template,
        (Some(mut template), Some(Value::String(tag)))
            if crate::content::locale::is_locale(tag) =>
        {
            template.locale = Some(tag.clone());
            Some(template)
        }
        (Some(_), Some(_)) => {
            problems.add(
                "locale",
                "locale must be a language tag such as en or pt-BR",
            );
            None
        }
        (None, Some(_)) => {
            if object.contains_key("template") || object.contains_key("payload") {
                problems.add(
                    "locale",
                    "locale applies only to a notification with a template",
                );
            }
            None
        }
    };

    // Each of the two is checked when given, then that exactly one is: every failing field
    // is reported at once.
    let send_at = object
        .get("sendAt")
        .map(|value| match parse_send_at(value, now) {
            Ok(at) => Some(at),
            Err(message) => {
                problems.add("sendAt", message);
                None
            }
        });
    let delay_seconds = object
        .get("delaySeconds")
        .map(|value| delay_seconds(value, &mut problems));
    let (due, send_at, delay_seconds) = match (send_at, delay_seconds) {
        (Some(at), None) => (at.map(Due::At), at, None),
        (None, Some(seconds)) => (seconds.map(Due::AfterSeconds), None, seconds),
        _ => {
            problems.add("sendAt", "Provide exactly one of sendAt or delaySeconds");
            (None, None, None)
        }
    };

    let class = match object.get("class") {
        None => Some(Class::Transactional),
        Some(value) => {
            problems.one_of("class", value.as_str(), Class::parse, "TRANSACTIONAL, BULK")
        }
    };
    let category = category(object.get("category"), &mut problems);
    let expiry = expiry(object, now, due, &mut problems);

    if let (Some(target), Some(channel), Some(Value::Object(fields))) = (&target, channel, &payload)
        && real.send(channel)
        && template.is_none()
    {
        let recipient = match target {
            RequestTarget::Address(recipient) => Some(recipient.as_str()),
            RequestTarget::Profile(_) => None,
        };
        super::payload::check(channel, recipient, fields, real, &mut problems);
    }

    match (
        target,
        channel,
        payload,
        priority,
        idempotency_key,
        due,
        class,
        category,
    ) {
        (
            Some(target),
            Some(channel),
            Some(payload),
            Some(priority),
            Some(idempotency_key),
            Some(due),
            Some(class),
            Some(category),
        ) if problems.is_empty() => Ok(CreateRequest {
            target,
            channel,
            payload,
            priority,
            idempotency_key,
            due,
            send_at,
            delay_seconds,
            class,
            category,
            expiry: expiry.flatten(),
            template,
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

/// `delaySeconds`: a whole number of seconds from 1 to [`DELAY_SECONDS_MAX`]; `None` after
/// a problem.
fn delay_seconds(value: &Value, problems: &mut Problems) -> Option<i32> {
    match crate::problems::integer(value) {
        Some(seconds) if (1..=DELAY_SECONDS_MAX).contains(&seconds) => Some(seconds as i32),
        // Out of range, as is a whole number too large to hold exactly (1e23).
        _ if value.as_f64().is_some_and(|f| f.fract() == 0.0) => {
            problems.add(
                "delaySeconds",
                format!("delaySeconds must be between 1 and {DELAY_SECONDS_MAX}"),
            );
            None
        }
        _ => {
            problems.add("delaySeconds", "delaySeconds must be an integer");
            None
        }
    }
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
    fn a_real_provider_checks_a_profiles_payload_and_push_tokens_need_an_application() {
        let config = |vars: &[(&str, &str)]| {
            let mut all: std::collections::HashMap<String, String> = [
                ("EMAIL_PROVIDER", "ses"),
                ("SES_FROM_ADDRESS", "sender@example.com"),
                ("PUSH_PROVIDER", "sns"),
            ]
            .iter()
            .chain(vars)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            all.insert("DATABASE_URL".into(), "postgres://localhost/x".into());
            let config = crate::config::Config::from_vars(all).expect("config");
            RealProviders::of(&config.providers)
        };
        let real = config(&[]);
        let to_profile = json!({"recipientId": "ada", "channel": "EMAIL", "payload": {},
                                "priority": "HIGH", "idempotencyKey": "k", "delaySeconds": 60});
        let errors = validate_create_for(&to_profile, now(), &real).expect_err("no subject");
        assert_eq!(fields(&errors), ["payload.subject", "payload.text"]);

        let to_token = json!({"recipient": "device-token", "channel": "PUSH",
                              "payload": {"title": "t"}, "priority": "HIGH",
                              "idempotencyKey": "k", "delaySeconds": 60});
        let errors = validate_create_for(&to_token, now(), &real).expect_err("no application");
        assert_eq!(fields(&errors), ["recipient"]);
        let with_application = config(&[(
            "SNS_PLATFORM_APPLICATION_ARN",
            "arn:aws:sns:us-east-1:123456789012:app/GCM/notify",
        )]);
        assert!(validate_create_for(&to_token, now(), &with_application).is_ok());
    }

    #[test]
    fn a_valid_request_passes() {
        let request = validate_create(&valid(), now()).expect("valid");
        assert_eq!(request.due, Due::AfterSeconds(60));
        assert_eq!(request.priority, Priority::High);
    }

    #[test]
    fn the_mark_of_an_erased_recipient_is_no_address() {
        let mut body = valid();
        body["recipient"] = json!("[erased]");
        let errors = validate_create(&body, now()).expect_err("reserved");
        assert_eq!(errors[0].field, "recipient");
        assert_eq!(errors[0].errors, ["recipient [erased] is reserved"]);
    }

    #[test]
    fn an_integral_float_is_an_integer_and_a_fraction_is_not() {
        for spelling in [json!(60.0), json!(6e1)] {
            let mut body = valid();
            body["delaySeconds"] = spelling;
            let request = validate_create(&body, now()).expect("an integer");
            assert_eq!(request.due, Due::AfterSeconds(60));
        }
        let mut body = valid();
        body["delaySeconds"] = json!(60.5);
        let errors = validate_create(&body, now()).expect_err("a fraction");
        assert_eq!(fields(&errors), ["delaySeconds"]);
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
    fn both_of_an_exclusive_pair_given_report_their_own_problems_too() {
        let mut body = valid();
        body["recipientId"] = json!("no spaces allowed");
        body["template"] = json!({"id": "welcome"});
        body["payload"] = json!([1]);
        body["sendAt"] = json!("yesterday");
        body["delaySeconds"] = json!(-1);
        body["expiresAt"] = json!("soon");
        body["ttlSeconds"] = json!(0);
        let errors = validate_create(&body, now()).expect_err("invalid");
        let messages = |field: &str| -> Vec<String> {
            errors
                .iter()
                .find(|e| e.field == field)
                .map(|e| e.errors.clone())
                .unwrap_or_default()
        };
        assert_eq!(
            messages("recipient"),
            ["Provide exactly one of recipient or recipientId"]
        );
        assert_eq!(
            messages("recipientId"),
            ["recipientId must be 1 to 128 letters, digits or ._:@-"]
        );
        assert_eq!(messages("payload").len(), 2, "{errors:?}");
        assert_eq!(
            messages("payload")[1],
            "Provide exactly one of payload or template"
        );
        assert_eq!(messages("sendAt").len(), 2, "{errors:?}");
        assert_eq!(
            messages("delaySeconds"),
            ["delaySeconds must be between 1 and 31536000"]
        );
        assert_eq!(messages("expiresAt").len(), 2, "{errors:?}");
        assert_eq!(
            messages("expiresAt")[1],
            "Provide at most one of expiresAt or ttlSeconds"
        );
        assert_eq!(
            messages("ttlSeconds"),
            ["ttlSeconds must be an integer between 1 and 2592000"]
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
    fn a_send_at_below_the_millisecond_is_the_send_at_it_is_shown_as() {
        let mut body = valid();
        body.as_object_mut().expect("object").remove("delaySeconds");
        body["sendAt"] = json!("2026-09-24T08:30:00.0001Z");
        let fine = validate_create(&body, now()).expect("valid");
        body["sendAt"] = json!("2026-09-24T08:30:00Z");
        let whole = validate_create(&body, now()).expect("valid");
        assert_eq!(fine.fingerprint(), whole.fingerprint());
        assert_eq!(fine.send_at, whole.send_at);
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
