//! Property tests of the two parsers that read untrusted text: the create-request validator
//! and the list cursor.
//!
//! - `validate_create` never panics, whatever JSON it is given; what it accepts satisfies
//!   every documented bound; what it refuses names each failing field.
//! - `Cursor::decode` never panics on any text; `decode(encode(c)) == c` for every cursor
//!   whose time PostgreSQL and chrono can represent; a cursor has exactly one text form.

use std::collections::HashSet;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Datelike, TimeDelta, Utc};
use notify_shared::intake::request::RequestTarget;
use notify_shared::intake::validation::{
    DELAY_SECONDS_MAX, IDEMPOTENCY_KEY_MAX, RECIPIENT_MAX, SEND_AT_HORIZON_DAYS, validate_create,
};
use notify_shared::problems::contains_nul;
use notify_shared::queue::{Cursor, Due};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use uuid::Uuid;

const FIELDS: [&str; 7] = [
    "recipient",
    "channel",
    "payload",
    "priority",
    "idempotencyKey",
    "sendAt",
    "delaySeconds",
];

/// Any JSON value: scalars (with NUL and non-ASCII text), nested arrays and objects.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
        "[a\u{0}é]{0,4}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Text near the length bound `max`, sometimes with NUL, sometimes multi-byte.
fn text_near(max: usize) -> impl Strategy<Value = Value> {
    prop_oneof![
        16 => "[a-z@.]{1,20}".prop_map(Value::String),
        1 => Just(Value::String(String::new())),
        2 => (max - 2..=max + 2).prop_map(|n| Value::String("é".repeat(n))),
        1 => "[a-z]{0,5}\u{0}[a-z]{0,5}".prop_map(Value::String),
        1 => any_json(),
    ]
}

/// `sendAt` values: well-formed ones around now and the one-year horizon, malformed ones,
/// and wrong types.
fn send_at(now: DateTime<Utc>) -> impl Strategy<Value = Value> {
    let horizon = SEND_AT_HORIZON_DAYS * 86_400;
    prop_oneof![
        8 => (-horizon..horizon + 86_400, 0..5usize).prop_map(move |(seconds, style)| {
            let at = now + TimeDelta::seconds(seconds);
            Value::String(match style {
                0 | 1 => at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
                2 => at.format("%Y-%m-%dT%H:%M:%S+00:00").to_string(),
                3 => at.format("%Y-%m-%dT%H:%M-05:30").to_string(),
                _ => at.format("%Y-%m-%dT%H:%M:%S").to_string(), // no offset: refused
            })
        }),
        1 => "[0-9T:Z+.-]{0,30}".prop_map(Value::String),
        1 => any_json(),
    ]
}

fn delay_seconds() -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => (-5i64..DELAY_SECONDS_MAX + 5).prop_map(Value::from),
        1 => Just(json!(DELAY_SECONDS_MAX)),
        1 => Just(json!(DELAY_SECONDS_MAX + 1)),
        1 => any::<f64>().prop_map(Value::from),
        1 => any_json(),
    ]
}

fn one_of_values(valid: &'static [&'static str]) -> impl Strategy<Value = Value> {
    prop_oneof![
        12 => prop::sample::select(valid).prop_map(|v| Value::String(v.to_string())),
        1 => prop::sample::select(valid).prop_map(|v| Value::String(v.to_lowercase())),
        1 => any_json(),
    ]
}

fn payload() -> impl Strategy<Value = Value> {
    prop_oneof![
        12 => prop::collection::btree_map("[a-z]{1,6}", any_json(), 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        1 => any_json(),
    ]
}

/// Which of `sendAt` and `delaySeconds` a request carries: mostly exactly one.
fn schedule(now: DateTime<Utc>) -> impl Strategy<Value = (Option<Value>, Option<Value>)> {
    prop_oneof![
        9 => send_at(now).prop_map(|v| (Some(v), None)),
        9 => delay_seconds().prop_map(|v| (None, Some(v))),
        1 => (send_at(now), delay_seconds()).prop_map(|(a, b)| (Some(a), Some(b))),
        1 => Just((None, None)),
    ]
}

/// Create requests close to valid: each field present or absent, mostly well-formed,
/// sometimes wrong, sometimes an unknown property, so that both outcomes are common.
fn near_valid_request(now: DateTime<Utc>) -> impl Strategy<Value = Value> {
    (
        prop::option::weighted(0.98, text_near(RECIPIENT_MAX)),
        prop::option::weighted(0.98, one_of_values(&["EMAIL", "SMS", "PUSH"])),
        prop::option::weighted(0.98, payload()),
        prop::option::weighted(0.98, one_of_values(&["HIGH", "NORMAL", "LOW"])),
        prop::option::weighted(0.98, text_near(IDEMPOTENCY_KEY_MAX)),
        schedule(now),
        prop::option::weighted(0.03, (".{1,8}", any_json())),
    )
        .prop_map(
            |(recipient, channel, payload, priority, key, (send_at, delay), extra)| {
                let mut body = Map::new();
                for (name, value) in [
                    ("recipient", recipient),
                    ("channel", channel),
                    ("payload", payload),
                    ("priority", priority),
                    ("idempotencyKey", key),
                    ("sendAt", send_at),
                    ("delaySeconds", delay),
                ] {
                    if let Some(value) = value {
                        body.insert(name.to_string(), value);
                    }
                }
                if let Some((name, value)) = extra {
                    body.insert(name, value);
                }
                Value::Object(body)
            },
        )
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-09-24T12:00:00Z")
        .expect("valid")
        .with_timezone(&Utc)
}

fn text_within(value: &str, max: usize) -> bool {
    (1..=max).contains(&value.chars().count()) && !value.contains('\0')
}

/// Checks one outcome of `validate_create(body)` against the documented contract.
fn check(body: &Value) -> Result<bool, TestCaseError> {
    let now = now();
    match validate_create(body, now) {
        Ok(request) => {
            let object = body.as_object().expect("only an object can be accepted");
            prop_assert!(object.keys().all(|k| FIELDS.contains(&k.as_str())));
            // The generator never sends recipientId: the target is the address given.
            let RequestTarget::Address(recipient) = &request.target else {
                return Err(TestCaseError::fail(
                    "a profile target from a body without recipientId",
                ));
            };
            prop_assert!(text_within(recipient, RECIPIENT_MAX));
            prop_assert!(text_within(&request.idempotency_key, IDEMPOTENCY_KEY_MAX));
            prop_assert_eq!(object["recipient"].as_str(), Some(recipient.as_str()));
            prop_assert_eq!(
                object["idempotencyKey"].as_str(),
                Some(request.idempotency_key.as_str())
            );
            prop_assert!(request.payload.is_object());
            prop_assert!(!contains_nul(&request.payload));
            prop_assert_eq!(&request.payload, &object["payload"]);
            prop_assert_eq!(Some(request.channel.as_str()), object["channel"].as_str());
            prop_assert_eq!(Some(request.priority.as_str()), object["priority"].as_str());
            // Exactly one of sendAt and delaySeconds, within its bounds.
            prop_assert!(object.contains_key("sendAt") != object.contains_key("delaySeconds"));
            match (&request.due, request.send_at, request.delay_seconds) {
                (Due::At(at), Some(send_at), None) => {
                    prop_assert_eq!(*at, send_at);
                    prop_assert!(send_at - now <= TimeDelta::days(SEND_AT_HORIZON_DAYS));
                    prop_assert!(object["sendAt"].is_string());
                }
                (Due::AfterSeconds(seconds), None, Some(delay)) => {
                    prop_assert_eq!(*seconds, delay);
                    prop_assert!((1..=DELAY_SECONDS_MAX).contains(&i64::from(delay)));
                    prop_assert_eq!(object["delaySeconds"].as_i64(), Some(i64::from(delay)));
                }
                other => {
                    return Err(TestCaseError::fail(format!(
                        "inconsistent schedule {other:?}"
                    )));
                }
            }
            Ok(true)
        }
        Err(errors) => {
            prop_assert!(!errors.is_empty(), "a refusal names at least one field");
            let mut seen = HashSet::new();
            for error in &errors {
                prop_assert!(
                    seen.insert(error.field.clone()),
                    "{} listed twice",
                    error.field
                );
                prop_assert!(!error.errors.is_empty(), "{} has no message", error.field);
                prop_assert!(error.errors.iter().all(|m| !m.is_empty()));
                let known = FIELDS.contains(&error.field.as_str())
                    || (error.field == "body" && !body.is_object())
                    || body.get(&error.field).is_some();
                prop_assert!(known, "{} is neither a field nor in the body", error.field);
            }
            Ok(false)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn the_validator_never_panics_on_arbitrary_json(body in any_json()) {
        check(&body)?;
    }

    #[test]
    fn the_validator_enforces_the_documented_bounds(body in near_valid_request(now())) {
        check(&body)?;
    }

    #[test]
    fn an_unknown_property_is_always_refused_by_name(
        body in near_valid_request(now()),
        name in "[a-zA-Z]{1,12}",
        value in any_json(),
    ) {
        prop_assume!(!FIELDS.contains(&name.as_str()));
        let mut body = body;
        body.as_object_mut().expect("object").insert(name.clone(), value);
        let errors = validate_create(&body, now()).expect_err("refused");
        let expected = format!("property {name} should not exist");
        let named = errors.iter().any(|e| e.field == name && e.errors.contains(&expected));
        prop_assert!(named, "{:?}", errors);
    }

    #[test]
    fn cursor_decoding_never_panics(text in ".{0,80}") {
        let _ = Cursor::decode(&text);
    }

    #[test]
    fn cursor_decoding_never_panics_on_near_cursors(
        micros in any::<i64>(),
        id in any::<u128>(),
        cut in 0usize..70,
        noise in "[A-Za-z0-9_=+/-]{0,3}",
    ) {
        let text = Cursor { created_at_micros: micros, id: Uuid::from_u128(id) }.encode();
        let cut = cut.min(text.len());
        let mangled = format!("{}{noise}{}", &text[..cut], &text[cut..]);
        if let Some(cursor) = Cursor::decode(&mangled) {
            // Whatever decodes is a cursor in its one canonical spelling.
            prop_assert_eq!(cursor.encode(), mangled);
        }
    }

    #[test]
    fn every_representable_cursor_round_trips(micros in any::<i64>(), id in any::<u128>()) {
        let cursor = Cursor { created_at_micros: micros, id: Uuid::from_u128(id) };
        let decoded = Cursor::decode(&cursor.encode());
        let year = DateTime::<Utc>::from_timestamp_micros(micros).map(|t| t.year());
        if year.is_some_and(|year| (1..=9999).contains(&year)) {
            prop_assert_eq!(decoded, Some(cursor));
        } else {
            prop_assert_eq!(
                decoded,
                None,
                "a time outside years 1 to 9999 is refused, never sent to PostgreSQL"
            );
        }
    }

    #[test]
    fn a_decoded_cursor_has_exactly_one_text_form(text in "[A-Za-z0-9_-]{0,80}") {
        if let Some(cursor) = Cursor::decode(&text) {
            prop_assert_eq!(cursor.encode(), text);
        }
    }

    #[test]
    fn foreign_base64_is_refused_unless_it_spells_a_cursor(raw in ".{0,60}") {
        let text = URL_SAFE_NO_PAD.encode(raw.as_bytes());
        if let Some(cursor) = Cursor::decode(&text) {
            prop_assert_eq!(format!("{}:{}", cursor.created_at_micros, cursor.id), raw);
        }
    }
}

/// The generator above must reach both outcomes often, or the bounds property is vacuous.
#[test]
fn near_valid_requests_are_often_accepted_and_often_refused() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = near_valid_request(now());
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..2000 {
        let body = strategy.new_tree(&mut runner).expect("generate").current();
        match check(&body) {
            Ok(true) => accepted += 1,
            Ok(false) => refused += 1,
            Err(error) => panic!("{error}: {body}"),
        }
    }
    eprintln!("near-valid requests: {accepted} accepted, {refused} refused of 2000");
    assert!(accepted >= 200, "only {accepted} of 2000 accepted");
    assert!(refused >= 200, "only {refused} of 2000 refused");
}
