//! Content: templates per locale in immutable numbered versions, and campaigns that fan
//! one template out to an audience in restartable chunks.
//!
//! - [`engine`]: minijinja, strict and sandboxed; the field sets of each channel.
//! - [`sms`]: GSM-7 / UCS-2 encoding and segment counts.
//! - [`locale`]: language tags and the fallback chain.
//! - [`templates`]: the only SQL on `templates` and `template_versions`; the version cache.
//! - [`reference`]: how a notification's payload names its pinned template.
//! - [`campaigns`]: the only SQL on `campaigns`; expansion, completion, cancel.

pub mod campaigns;
pub mod engine;
pub mod locale;
pub mod reference;
pub mod sms;
pub mod templates;

pub use reference::Reference;
pub use templates::{Version, VersionCache};
