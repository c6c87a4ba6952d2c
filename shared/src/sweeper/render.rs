//! Rendering at send: a template notification's payload is its pinned reference and its
//! data, and the provider is handed the rendered fields. Versions never change, so each
//! is read once per process; a notification without a template costs one map lookup.
//! A failure to render (data missing a variable) cannot get better: FAILED at once.

use serde_json::Value;

use super::Sweeper;
use crate::content::Reference;
use crate::queue::Claimed;

/// What a held notification is sent as: its own payload (`None`), the rendered fields,
/// or the reason it cannot be rendered.
pub(super) type Rendered = Result<Option<Value>, String>;

impl Sweeper {
    /// One [`Rendered`] per notification of `held`, in order.
    pub(super) async fn render(&self, held: &[&Claimed]) -> anyhow::Result<Vec<Rendered>> {
        let references: Vec<Option<(Reference, &Value)>> = held
            .iter()
            .map(|claim| Reference::of_payload(&claim.payload))
            .collect();
        if references.iter().all(Option::is_none) {
            return Ok(held.iter().map(|_| Ok(None)).collect());
        }
        let pinned: Vec<(&str, i32)> = references
            .iter()
            .flatten()
            .map(|(reference, _)| (reference.id.as_str(), reference.version))
            .collect();
        let versions = {
            let db = self.pool.get().await?;
            self.templates.get(&db, &pinned).await?
        };
        Ok(references
            .iter()
            .map(|reference| {
                let Some((reference, data)) = reference else {
                    return Ok(None);
                };
                let version = versions
                    .get(&(reference.id.clone(), reference.version))
                    .ok_or_else(|| {
                        format!(
                            "Template {} has no version {}",
                            reference.id, reference.version
                        )
                    })?;
                version
                    .render(&reference.locale, data)
                    .map(|fields| Some(Value::Object(fields)))
                    .map_err(|error| {
                        format!(
                            "Template {} version {} did not render: {error}",
                            reference.id, reference.version
                        )
                    })
            })
            .collect())
    }
}
