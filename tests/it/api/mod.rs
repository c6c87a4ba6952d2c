//! The HTTP contract for create, get, list and cancel.

mod create;
mod errors;
mod idempotency;
mod list;

use serde_json::{Value, json};

/// A valid create body with idempotency key `key`, due in a minute.
fn body(key: &str) -> Value {
    json!({"recipient": "ada@example.com", "channel": "EMAIL", "payload": {"subject": "hi"},
           "priority": "HIGH", "idempotencyKey": key, "delaySeconds": 60})
}
