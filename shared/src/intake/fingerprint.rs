//! The digest behind request fingerprints: SHA-256 of a canonical JSON, keys sorted at
//! every depth, so two spellings of the same request hash alike.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// SHA-256 hex of `value` written canonically.
pub fn digest(value: &Value) -> String {
    let mut canonical = String::new();
    write_canonical(value, &mut canonical);
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
        Value::Number(number) => match number.as_f64() {
            // A number with nothing after the point is the integer it names, as a
            // JavaScript client reads it: 100, 100.0 and 1e2 are one request.
            Some(float)
                if number.is_f64() && float.fract() == 0.0 && float.abs() < INTEGRAL_BELOW =>
            {
                out.push_str(&format!("{:.0}", float + 0.0));
            }
            _ => out.push_str(&number.to_string()),
        },
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// JavaScript writes integral numbers below 10^21 with every digit, larger ones with an
/// exponent.
const INTEGRAL_BELOW: f64 = 1e21;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_matter_at_any_depth() {
        let a = json!({"b": 1, "a": {"y": 2, "x": [{"q": 1, "p": 2}]}});
        let b = json!({"a": {"x": [{"p": 2, "q": 1}], "y": 2}, "b": 1});
        assert_eq!(digest(&a), digest(&b));
        assert_eq!(digest(&a).len(), 64);
        assert_ne!(digest(&a), digest(&json!({"b": 2})));
    }

    #[test]
    fn an_integral_number_is_one_request_however_it_is_written() {
        let parse = |text: &str| serde_json::from_str::<Value>(text).expect("json");
        let plain = digest(&parse(r#"{"v": 100, "z": 0}"#));
        assert_eq!(digest(&parse(r#"{"v": 100.0, "z": -0.0}"#)), plain);
        assert_eq!(digest(&parse(r#"{"v": 1e2, "z": 0.0}"#)), plain);
        assert_ne!(digest(&parse(r#"{"v": 100.5, "z": 0}"#)), plain);
        assert_ne!(digest(&parse(r#"{"v": 101, "z": 0}"#)), plain);
    }
}
