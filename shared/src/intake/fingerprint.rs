//! The request fingerprint that tells a replay from a conflicting reuse of a key: SHA-256
//! of a canonical JSON (keys sorted at every depth, absent members omitted, `sendAt` in UTC).

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::validation::CreateRequest;

pub fn fingerprint(request: &CreateRequest) -> String {
    let mut members: Vec<(&str, Value)> = vec![
        ("channel", Value::from(request.channel.as_str())),
        ("payload", request.payload.clone()),
        ("priority", Value::from(request.priority.as_str())),
        ("recipient", Value::from(request.recipient.as_str())),
    ];
    if let Some(at) = request.send_at {
        members.push((
            "sendAt",
            Value::from(at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)),
        ));
    }
    if let Some(seconds) = request.delay_seconds {
        members.push(("delaySeconds", Value::from(seconds)));
    }
    let object: serde_json::Map<String, Value> = members
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let mut canonical = String::new();
    write_canonical(&Value::Object(object), &mut canonical);
    hex::encode(Sha256::digest(canonical.as_bytes()))
}

/// Writes `value` with object keys sorted at every depth, whatever map order serde_json
/// was built with.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(key.as_str()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intake::validation::validate_create;
    use serde_json::json;

    fn fingerprint_of(body: &str) -> String {
        let value: Value = serde_json::from_str(body).expect("json");
        fingerprint(&validate_create(&value, chrono::Utc::now()).expect("valid"))
    }

    #[test]
    fn key_order_and_offsets_do_not_matter() {
        let a = fingerprint_of(
            r#"{"recipient":"r","channel":"SMS","priority":"LOW","idempotencyKey":"k",
            "payload":{"b":1,"a":{"y":2,"x":[{"q":1,"p":2}]}},"sendAt":"2026-01-01T09:30:00+01:00"}"#,
        );
        let b = fingerprint_of(
            r#"{"idempotencyKey":"k","sendAt":"2026-01-01T08:30:00.000Z","priority":"LOW",
            "payload":{"a":{"x":[{"p":2,"q":1}],"y":2},"b":1},"channel":"SMS","recipient":"r"}"#,
        );
        assert_eq!(a, b);
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn any_difference_in_content_changes_it() {
        let base = json!({"recipient":"r","channel":"SMS","priority":"LOW","idempotencyKey":"k","payload":{},"delaySeconds":5});
        let mut other = base.clone();
        other["delaySeconds"] = json!(6);
        let fp = |v: &Value| fingerprint(&validate_create(v, chrono::Utc::now()).expect("valid"));
        assert_ne!(fp(&base), fp(&other));
        // The key itself is not part of the fingerprint.
        let mut same = base.clone();
        same["idempotencyKey"] = json!("another");
        assert_eq!(fp(&base), fp(&same));
    }
}
