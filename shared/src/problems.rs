//! Field problems: every check of a request adds what it finds here, so all failing fields
//! are reported at once, and each rule that several routes share is worded once.

use std::collections::HashMap;
use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

/// A JSON number as an integer, when it is one: `60`, and also `60.0` or `6e1`, which a
/// JavaScript client cannot tell from `60` (the design's API read them all as 60). Floats
/// beyond 2^53 are not exact integers and are refused.
pub fn integer(value: &Value) -> Option<i64> {
    const EXACT: f64 = 9_007_199_254_740_992.0;
    value.as_i64().or_else(|| {
        value
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() <= EXACT)
            .map(|f| f as i64)
    })
}

/// One field's failures, reported together with every other failing field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub errors: Vec<String>,
}

/// The problems found so far, per field, in the order fields were checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Problems(Vec<FieldError>);

impl Problems {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, field: &str, message: impl Into<String>) {
        let message = message.into();
        match self.0.iter_mut().find(|e| e.field == field) {
            Some(entry) => entry.errors.push(message),
            None => self.0.push(FieldError {
                field: field.to_string(),
                errors: vec![message],
            }),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn into_errors(self) -> Vec<FieldError> {
        self.0
    }

    /// `Ok(value)` when nothing was found, else every problem.
    pub fn or<T>(self, value: T) -> Result<T, Problems> {
        if self.is_empty() {
            Ok(value)
        } else {
            Err(self)
        }
    }

    /// A property the request may not have.
    pub fn unknown(&mut self, field: &str) {
        self.add(field, format!("property {field} should not exist"));
    }

    /// A query string's pairs as a map of key to value: keys outside `allowed` and keys
    /// given more than once are reported.
    pub fn query<'q>(
        &mut self,
        pairs: &'q [(String, String)],
        allowed: &[&str],
    ) -> HashMap<&'q str, &'q str> {
        let mut values = HashMap::new();
        for (key, value) in pairs {
            if !allowed.contains(&key.as_str()) {
                self.unknown(key);
            } else if values.insert(key.as_str(), value.as_str()).is_some() {
                self.add(key, format!("{key} must be given at most once"));
            }
        }
        values
    }

    /// A listing's page from its query string `values`: `limit` (1–100; `None` when not
    /// given) and `cursor`, read by `decode` (a listing's own format; `None` when not
    /// given). Either one malformed is reported, worded the same for every listing.
    pub fn page<T>(
        &mut self,
        values: &HashMap<&str, &str>,
        decode: impl FnOnce(&str) -> Option<T>,
    ) -> (Option<i64>, Option<T>) {
        let limit = values
            .get("limit")
            .and_then(|limit| self.integer_in("limit", limit.parse().ok(), 1..=100));
        let after = values.get("cursor").and_then(|cursor| {
            let position = decode(cursor);
            if position.is_none() {
                self.add(
                    "cursor",
                    "cursor is not valid; use the nextCursor from a previous page",
                );
            }
            position
        });
        (limit, after)
    }

    /// Every key of `object` outside `allowed` is reported.
    pub fn only(&mut self, object: &Map<String, Value>, allowed: &[&str]) {
        for key in object.keys() {
            if !allowed.contains(&key.as_str()) {
                self.unknown(key);
            }
        }
    }

    /// A required string of 1 to `max` characters without NUL.
    pub fn required_text(
        &mut self,
        object: &Map<String, Value>,
        field: &str,
        max: usize,
    ) -> Option<String> {
        match object.get(field) {
            None => {
                self.add(field, format!("{field} is required"));
                None
            }
            Some(Value::String(value)) => self.text(field, value, max).then(|| value.clone()),
            Some(_) => {
                self.add(field, format!("{field} must be a string"));
                None
            }
        }
    }

    /// The text rule: 1 to `max` characters, no NUL (PostgreSQL cannot store it). True when
    /// `value` passes.
    pub fn text(&mut self, field: &str, value: &str, max: usize) -> bool {
        let mut ok = true;
        if !(1..=max).contains(&value.chars().count()) {
            self.add(
                field,
                format!("{field} must be between 1 and {max} characters"),
            );
            ok = false;
        }
        if value.contains('\0') {
            self.add(
                field,
                format!("{field} must not contain NUL (\\u0000) characters"),
            );
            ok = false;
        }
        ok
    }

    /// One of an enumeration's spellings (`parse`), listed in the message as `allowed`.
    pub fn one_of<T>(
        &mut self,
        field: &str,
        value: Option<&str>,
        parse: impl Fn(&str) -> Option<T>,
        allowed: &str,
    ) -> Option<T> {
        let parsed = value.and_then(parse);
        if parsed.is_none() {
            self.add(
                field,
                format!("{field} must be one of the following values: {allowed}"),
            );
        }
        parsed
    }

    /// An integer in `range`; `what` names it in the message.
    pub fn integer_in(
        &mut self,
        field: &str,
        value: Option<i64>,
        range: std::ops::RangeInclusive<i64>,
    ) -> Option<i64> {
        match value {
            Some(n) if range.contains(&n) => Some(n),
            _ => {
                self.add(
                    field,
                    format!(
                        "{field} must be an integer between {} and {}",
                        range.start(),
                        range.end()
                    ),
                );
                None
            }
        }
    }
}

/// `field: message; field: message` (for errors that are not HTTP responses).
impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for error in &self.0 {
            for message in &error.errors {
                if !first {
                    f.write_str("; ")?;
                }
                first = false;
                write!(f, "{}: {message}", error.field)?;
            }
        }
        Ok(())
    }
}

/// NUL anywhere: keys and string values at any depth.
pub fn contains_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(contains_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || contains_nul(v)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integral_numbers_read_as_integers_whatever_their_spelling() {
        use serde_json::json;
        for (value, expected) in [
            (json!(60), Some(60)),
            (json!(60.0), Some(60)),
            (json!(-3.0), Some(-3)),
            (json!(1e3), Some(1000)),
            (json!(60.5), None),
            (json!(1e300), None),
            (json!("60"), None),
        ] {
            assert_eq!(integer(&value), expected, "{value}");
        }
    }

    #[test]
    fn problems_are_grouped_per_field_in_order() {
        let mut problems = Problems::new();
        problems.add("b", "one");
        problems.add("a", "two");
        problems.add("b", "three");
        assert_eq!(problems.to_string(), "b: one; b: three; a: two");
        let errors = problems.into_errors();
        assert_eq!(errors[0].errors, ["one", "three"]);
    }

    #[test]
    fn the_text_rule_reports_length_and_nul_together() {
        let mut problems = Problems::new();
        assert!(!problems.text("recipient", "", 320));
        assert!(!problems.text("recipient", "a\0b", 320));
        assert!(problems.text("recipient", "a", 1));
        assert_eq!(
            problems.into_errors()[0].errors,
            [
                "recipient must be between 1 and 320 characters",
                "recipient must not contain NUL (\\u0000) characters"
            ]
        );
    }
}
