//! The bodies of the recipient routes: a profile (`PUT /recipients/{id}`) and a change of
//! preferences (`PATCH /recipients/{id}/preferences`), each field checked and every problem
//! reported at once.

use chrono::NaiveTime;
use chrono_tz::Tz;
use serde_json::{Map, Value};

use super::payload::{is_e164, is_email_address, is_push_target};
use super::validation::is_category;
use crate::audience::QuietHours;
use crate::audience::profiles::{Preference, ProfileInput};
use crate::domain::{RECIPIENT_MAX, names};
use crate::notification::Channel;
use crate::problems::Problems;

const EMAIL_MAX: usize = 320;
const PUSH_TOKENS_MAX: usize = 8;
const LOCALE_MAX: usize = 35;
/// Categories one PATCH may change.
const PREFERENCE_CATEGORIES_MAX: usize = 100;

/// The body of `PUT /recipients/{id}`: every field optional (`null` = absent).
pub fn parse_profile(body: Option<&Value>) -> Result<ProfileInput, Problems> {
    let mut problems = Problems::new();
    let empty = Map::new();
    let object = match body {
        None => &empty,
        Some(Value::Object(object)) => object,
        Some(_) => {
            problems.add("body", "body must be a JSON object");
            return Err(problems);
        }
    };
    problems.only(
        object,
        &[
            "email",
            "phone",
            "pushTokens",
            "timezone",
            "locale",
            "quietHours",
            "unsubscribedAll",
        ],
    );
    let field = |name: &str| object.get(name).filter(|v| !v.is_null());
    let mut text = |name: &str, max: usize, ok: fn(&str) -> bool, rule: &str| match field(name) {
        None => None,
        Some(Value::String(value)) if problems.text(name, value, max) => {
            if ok(value) {
                Some(value.clone())
            } else {
                problems.add(name, format!("{name} must be {rule}"));
                None
            }
        }
        Some(Value::String(_)) => None,
        Some(_) => {
            problems.add(name, format!("{name} must be a string"));
            None
        }
    };
    let email = text("email", EMAIL_MAX, is_email_address, "an email address");
    let phone = text(
        "phone",
        16,
        is_e164,
        "an E.164 phone number (+ and 8 to 15 digits, the first not 0)",
    );
    let timezone = text(
        "timezone",
        64,
        |t| t.parse::<Tz>().is_ok(),
        "an IANA timezone name such as Europe/Paris",
    );
    let locale = text(
        "locale",
        LOCALE_MAX,
        is_locale,
        "a BCP 47 language tag such as en or pt-BR",
    );
    let push_tokens = match field("pushTokens") {
        None => Vec::new(),
        Some(Value::Array(tokens)) if tokens.len() <= PUSH_TOKENS_MAX => {
            let valid: Vec<String> = tokens
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| is_push_target(t))
                .map(str::to_string)
                .collect();
            if valid.len() != tokens.len() {
                problems.add(
                    "pushTokens",
                    format!(
                        "pushTokens must hold device tokens or SNS endpoint ARNs of at most {RECIPIENT_MAX} characters"
                    ),
                );
            }
            valid
        }
        Some(_) => {
            problems.add(
                "pushTokens",
                format!("pushTokens must be an array of at most {PUSH_TOKENS_MAX} strings"),
            );
            Vec::new()
        }
    };
    let quiet_hours = match field("quietHours") {
        None => None,
        Some(value) => quiet_hours(value, &mut problems),
    };
    let unsubscribed_all = match field("unsubscribedAll") {
        None => false,
        Some(Value::Bool(value)) => *value,
        Some(_) => {
            problems.add("unsubscribedAll", "unsubscribedAll must be a boolean");
            false
        }
    };
    problems.or(ProfileInput {
        email,
        phone,
        push_tokens,
        timezone: timezone
            .and_then(|t| t.parse().ok())
            .unwrap_or(chrono_tz::UTC),
        locale: locale.unwrap_or_else(|| "en".to_string()),
        quiet_hours,
        unsubscribed_all,
    })
}

/// `{"start": "HH:MM", "end": "HH:MM"}`, start and end different.
fn quiet_hours(value: &Value, problems: &mut Problems) -> Option<QuietHours> {
    let Value::Object(window) = value else {
        problems.add(
            "quietHours",
            "quietHours must be an object like {\"start\":\"22:00\",\"end\":\"08:00\"}",
        );
        return None;
    };
    for key in window.keys() {
        if key != "start" && key != "end" {
            problems.unknown(&format!("quietHours.{key}"));
        }
    }
    let mut time = |name: &str| {
        let field = format!("quietHours.{name}");
        let parsed = window
            .get(name)
            .and_then(Value::as_str)
            .filter(|t| t.len() == 5)
            .and_then(|t| NaiveTime::parse_from_str(t, "%H:%M").ok());
        if parsed.is_none() {
            problems.add(
                &field,
                format!("{field} must be a time HH:MM (00:00 to 23:59)"),
            );
        }
        parsed
    };
    let (start, end) = (time("start"), time("end"));
    let (start, end) = (start?, end?);
    if start == end {
        problems.add(
            "quietHours",
            "quietHours.start and quietHours.end must differ",
        );
        return None;
    }
    Some(QuietHours { start, end })
}

/// A BCP 47 tag in its common shape: a 2–8 letter language, then subtags of 1–8 letters
/// or digits separated by `-`.
fn is_locale(text: &str) -> bool {
    let mut parts = text.split('-');
    let language = parts.next().unwrap_or_default();
    (2..=8).contains(&language.len())
        && language.bytes().all(|b| b.is_ascii_alphabetic())
        && parts.all(|p| (1..=8).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// The body of `PATCH …/preferences`: `{"categories": {"<category>" or "*": {"EMAIL":
/// bool, …}}}`.
pub fn parse_preferences(body: Option<&Value>) -> Result<Vec<Preference>, Problems> {
    let mut problems = Problems::new();
    let Some(Value::Object(object)) = body else {
        problems.add(
            "categories",
            "body must be an object like {\"categories\":{\"news\":{\"EMAIL\":false}}}",
        );
        return Err(problems);
    };
    problems.only(object, &["categories"]);
    let Some(Value::Object(categories)) = object.get("categories") else {
        problems.add("categories", "categories must be an object of categories");
        return Err(problems);
    };
    if categories.len() > PREFERENCE_CATEGORIES_MAX {
        problems.add(
            "categories",
            format!("categories may hold at most {PREFERENCE_CATEGORIES_MAX} categories"),
        );
    }
    let mut changes = Vec::new();
    for (category, channels) in categories {
        let field = format!("categories.{category}");
        if category != "*" && !is_category(category) {
            problems.add(
                &field,
                "a category must match ^[a-z0-9][a-z0-9_.-]{0,63}$ (or be * for every bulk category)",
            );
            continue;
        }
        let Value::Object(channels) = channels else {
            problems.add(
                &field,
                format!("{field} must be an object of channels to booleans"),
            );
            continue;
        };
        for (channel, opted_in) in channels {
            let field = format!("{field}.{channel}");
            match (Channel::parse(channel), opted_in) {
                (Some(channel), Value::Bool(opted_in)) => changes.push(Preference {
                    category: category.clone(),
                    channel,
                    opted_in: *opted_in,
                }),
                (None, _) => problems.add(
                    &field,
                    format!(
                        "channel must be one of the following values: {}",
                        names(&Channel::ALL, Channel::as_str)
                    ),
                ),
                (Some(_), _) => problems.add(&field, format!("{field} must be a boolean")),
            }
        }
    }
    problems.or(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_profile_reports_every_bad_field_at_once() {
        let body = json!({
            "email": "not-an-address", "phone": "555", "timezone": "Mars/Olympus",
            "quietHours": {"start": "22:00", "end": "25:00"}, "pushTokens": "x", "nick": 1
        });
        let fields: Vec<String> = parse_profile(Some(&body))
            .expect_err("invalid")
            .into_errors()
            .into_iter()
            .map(|e| e.field)
            .collect();
        for field in [
            "email",
            "phone",
            "timezone",
            "quietHours.end",
            "pushTokens",
            "nick",
        ] {
            assert!(fields.contains(&field.to_string()), "{field} in {fields:?}");
        }
    }

    #[test]
    fn a_profile_takes_defaults_and_null_as_absent() {
        let profile =
            parse_profile(Some(&json!({"email": "a@example.com", "phone": null}))).expect("valid");
        assert_eq!(profile.timezone, chrono_tz::UTC);
        assert_eq!(profile.locale, "en");
        assert_eq!(profile.phone, None);
        assert!(!profile.unsubscribed_all);
        let window = parse_profile(Some(
            &json!({"quietHours": {"start": "22:00", "end": "08:00"},
            "timezone": "Asia/Kolkata", "locale": "pt-BR"}),
        ))
        .expect("valid");
        assert_eq!(window.timezone, chrono_tz::Asia::Kolkata);
        assert!(window.quiet_hours.is_some());
        assert!(
            parse_profile(Some(
                &json!({"quietHours": {"start": "08:00", "end": "08:00"}})
            ))
            .is_err()
        );
    }

    #[test]
    fn preferences_name_their_bad_entries() {
        let body =
            json!({"categories": {"News": {"EMAIL": false}, "promo": {"FAX": false, "SMS": "no"}}});
        let fields: Vec<String> = parse_preferences(Some(&body))
            .expect_err("invalid")
            .into_errors()
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(
            fields,
            [
                "categories.News",
                "categories.promo.FAX",
                "categories.promo.SMS"
            ]
        );
        let changes = parse_preferences(Some(&json!({"categories": {"*": {"EMAIL": false}}})))
            .expect("valid");
        assert_eq!(changes[0].category, "*");
    }
}
