//! How a notification names its template: the stored payload of a template notification
//! is the reference and the data, never the rendered text:
//! `{"$template": {"id", "version", "locale", "campaign"?}, "data": {…}}`. The version and
//! locale are fixed at enqueue; the sweeper renders at send. A literal payload may not use
//! the `$template` member, so the two never mix.

use serde::Serialize;
use serde_json::{Value, json};
use uuid::Uuid;

/// The member that marks a template notification's payload.
pub const MARKER: &str = "$template";

/// A pinned template reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub id: String,
    pub version: i32,
    /// The resolved locale: one the version has.
    pub locale: String,
    /// The campaign that enqueued it, if any.
    pub campaign: Option<Uuid>,
}

/// `template` as a notification's representation shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shown {
    pub id: String,
    pub version: i32,
}

impl Reference {
    /// The payload to store: this reference and `data`.
    pub fn payload(&self, data: Value) -> Value {
        let mut reference = json!({"id": self.id, "version": self.version, "locale": self.locale});
        if let Some(campaign) = self.campaign {
            reference["campaign"] = Value::from(campaign.to_string());
        }
        json!({ MARKER: reference, "data": data })
    }

    /// The reference of a stored payload's `$template` member.
    pub fn from_marker(marker: &Value) -> Option<Reference> {
        Some(Reference {
            id: marker.get("id")?.as_str()?.to_string(),
            version: i32::try_from(marker.get("version")?.as_i64()?).ok()?,
            locale: marker.get("locale")?.as_str()?.to_string(),
            campaign: marker
                .get("campaign")
                .and_then(Value::as_str)
                .and_then(|c| Uuid::try_parse(c).ok()),
        })
    }

    /// The reference and data of a stored payload; `None` for a literal payload.
    pub fn of_payload(payload: &Value) -> Option<(Reference, &Value)> {
        let marker = payload.get(MARKER)?;
        let data = payload.get("data")?;
        Some((Reference::from_marker(marker)?, data))
    }

    pub fn shown(&self) -> Shown {
        Shown {
            id: self.id.clone(),
            version: self.version,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_gives_back_its_reference_and_data() {
        let reference = Reference {
            id: "welcome".into(),
            version: 3,
            locale: "pt".into(),
            campaign: Some(Uuid::nil()),
        };
        let payload = reference.payload(json!({"name": "Ana"}));
        let (back, data) = Reference::of_payload(&payload).expect("a template payload");
        assert_eq!(back, reference);
        assert_eq!(data, &json!({"name": "Ana"}));
        assert!(Reference::of_payload(&json!({"subject": "literal"})).is_none());
    }
}
