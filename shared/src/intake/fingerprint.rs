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
        scalar => out.push_str(&scalar.to_string()),
    }
}

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
}
