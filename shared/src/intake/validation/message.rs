//! What a notification sends: a literal payload, or a template reference and its data.

use serde_json::Value;

use super::is_category;
use crate::intake::request::TemplateUse;
use crate::problems::{Problems, contains_nul};

/// A literal payload: a JSON object without NUL and without the member that marks a
/// template reference.
pub(super) fn literal_payload(payload: &Value, problems: &mut Problems) -> Option<Value> {
    match payload {
        value @ Value::Object(_) if contains_nul(value) => {
            problems.add(
                "payload",
                "payload must not contain NUL (\\u0000) characters",
            );
            None
        }
        Value::Object(fields) if fields.contains_key(crate::content::reference::MARKER) => {
            problems.add(
                "payload",
                "payload must not have a $template member; send template instead",
            );
            None
        }
        value @ Value::Object(_) => Some(value.clone()),
        _ => {
            problems.add("payload", "payload must be a JSON object");
            None
        }
    }
}

/// `template`: `{"id", "version"?, "data"?}`; the template and its data.
pub fn template_use(value: &Value, problems: &mut Problems) -> Option<(TemplateUse, Value)> {
    let Some(object) = value.as_object() else {
        problems.add(
            "template",
            "template must be an object with id, version and data",
        );
        return None;
    };
    for key in object.keys() {
        if !["id", "version", "data"].contains(&key.as_str()) {
            problems.unknown(&format!("template.{key}"));
        }
    }
    let id = match object.get("id") {
        Some(Value::String(id)) if is_category(id) => Some(id.clone()),
        _ => {
            problems.add(
                "template.id",
                "template.id must be 1 to 64 lower-case letters, digits or _.- starting with a letter or digit",
            );
            None
        }
    };
    let version = match object.get("version") {
        None => Some(None),
        Some(value) => problems
            .integer_in(
                "template.version",
                crate::problems::integer(value),
                1..=i64::from(i32::MAX),
            )
            .map(|v| Some(v as i32)),
    };
    let data = crate::intake::templates::data_object(object.get("data"), "template.data", problems);
    match (id, version, data) {
        (Some(id), Some(version), Some(data)) => Some((
            TemplateUse {
                id,
                version,
                locale: None,
                campaign: None,
                pinned: None,
            },
            data,
        )),
        _ => None,
    }
}
