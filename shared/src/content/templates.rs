//! Template versions: the only SQL on `templates` and `template_versions`, the version as
//! the API shows it, and a process cache (versions never change once published).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde_json::{Map, Value, json};

use super::engine::{self, Compiled, RenderError, RenderErrors};
use super::locale;
use crate::notification::{Channel, format_time};
use crate::sql::{Statement, statement};

const PUBLISH: Statement = statement!("templates/publish");
const RESOLVE: Statement = statement!("template_versions/resolve");
const LIST: Statement = statement!("template_versions/list");
const LIST_TEMPLATES: Statement = statement!("templates/list");

/// Versions a process keeps; past this the cache starts over (they are reread at need).
const CACHE_MAX: usize = 1000;

/// One immutable version of a template.
#[derive(Debug, Clone)]
pub struct Version {
    pub template_id: String,
    pub version: i32,
    pub channel: Channel,
    pub default_locale: String,
    /// The body of each locale: field → template source.
    pub locales: Map<String, Value>,
    pub sample_data: Value,
    /// SMS only: the cost of the sample rendering per locale.
    pub sms: Option<Value>,
    pub created_at: DateTime<Utc>,
    /// Its templates, parsed on first use (a version never changes).
    compiled: Arc<OnceLock<Result<Compiled, RenderErrors>>>,
}

/// Versions are equal when their stored fields are (the parsed templates follow).
impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.template_id == other.template_id
            && self.version == other.version
            && self.channel == other.channel
            && self.default_locale == other.default_locale
            && self.locales == other.locales
            && self.sample_data == other.sample_data
            && self.sms == other.sms
            && self.created_at == other.created_at
    }
}

/// What a new version holds.
#[derive(Debug, Clone)]
pub struct NewVersion {
    pub channel: Channel,
    pub default_locale: String,
    pub locales: Map<String, Value>,
    pub sample_data: Value,
    pub sms: Option<Value>,
}

impl Version {
    fn from_row(row: &tokio_postgres::Row) -> Result<Self, tokio_postgres::Error> {
        let locales: Value = row.try_get("locales")?;
        Ok(Version {
            template_id: row.try_get("template_id")?,
            version: row.try_get("version")?,
            channel: row.try_get("channel")?,
            default_locale: row.try_get("default_locale")?,
            locales: match locales {
                Value::Object(map) => map,
                _ => Map::new(),
            },
            sample_data: row.try_get("sample_data")?,
            sms: row.try_get("sms")?,
            created_at: row.try_get("created_at")?,
            compiled: Arc::default(),
        })
    }

    /// The locale a notification gets: `wanted` or the default, down the fallback chain.
    pub fn resolve_locale(&self, wanted: Option<&str>) -> &str {
        locale::resolve(
            wanted,
            &self.default_locale,
            self.locales.keys().map(String::as_str),
        )
    }

    /// The rendered fields of `locale` (one of this version's) with `data`.
    pub fn render(&self, locale: &str, data: &Value) -> Result<Map<String, Value>, RenderErrors> {
        let body = self
            .locales
            .get(locale)
            .and_then(Value::as_object)
            .ok_or_else(|| RenderError {
                field: format!("locales.{locale}"),
                message: format!("version {} has no locale {locale}", self.version),
            })?;
        match self.compiled.get_or_init(|| engine::compile(&self.locales)) {
            Ok(compiled) => compiled.render(self.channel, locale, body, data),
            Err(error) => Err(error.clone()),
        }
    }

    /// The publish response: the locales by name.
    pub fn summary(&self) -> Value {
        let mut value = json!({
            "templateId": self.template_id,
            "version": self.version,
            "channel": self.channel.as_str(),
            "defaultLocale": self.default_locale,
            "locales": self.locales.keys().collect::<Vec<_>>(),
            "createdAt": format_time(&self.created_at),
        });
        if let Some(sms) = &self.sms {
            value["sms"] = sms.clone();
        }
        value
    }

    /// The version object: the publish response with the stored bodies and sample data.
    pub fn full(&self) -> Value {
        let mut value = self.summary();
        value["locales"] = Value::Object(self.locales.clone());
        value["sampleData"] = self.sample_data.clone();
        value
    }
}

/// Stores the next version of `template_id`; `None` when the template is of another channel.
pub async fn publish(
    db: &impl GenericClient,
    template_id: &str,
    new: &NewVersion,
) -> Result<Option<Version>, tokio_postgres::Error> {
    let statement = PUBLISH.prepare(db).await?;
    let locales = Value::Object(new.locales.clone());
    let row = db
        .query_opt(
            &statement,
            &[
                &template_id,
                &new.channel,
                &new.default_locale,
                &locales,
                &new.sample_data,
                &new.sms,
            ],
        )
        .await?;
    row.as_ref().map(Version::from_row).transpose()
}

/// The versions asked for as (template id, version or `None` for the latest), keyed as asked.
pub async fn resolve(
    db: &impl GenericClient,
    asked: &[(&str, Option<i32>)],
) -> Result<HashMap<(String, Option<i32>), Arc<Version>>, tokio_postgres::Error> {
    if asked.is_empty() {
        return Ok(HashMap::new());
    }
    let ids: Vec<&str> = asked.iter().map(|(id, _)| *id).collect();
    let versions: Vec<Option<i32>> = asked.iter().map(|(_, v)| *v).collect();
    let statement = RESOLVE.prepare(db).await?;
    let rows = db.query(&statement, &[&ids, &versions]).await?;
    let mut found = HashMap::with_capacity(rows.len());
    for row in &rows {
        let template_id: String = row.try_get("template_id")?;
        let version: Option<i32> = row.try_get("asked")?;
        found.insert((template_id, version), Arc::new(Version::from_row(row)?));
    }
    Ok(found)
}

/// One version, or the latest.
pub async fn find(
    db: &impl GenericClient,
    template_id: &str,
    version: Option<i32>,
) -> Result<Option<Arc<Version>>, tokio_postgres::Error> {
    let mut found = resolve(db, &[(template_id, version)]).await?;
    Ok(found.remove(&(template_id.to_string(), version)))
}

/// Every version of a template, oldest first: number and time.
pub async fn list(
    db: &impl GenericClient,
    template_id: &str,
) -> Result<Vec<(i32, DateTime<Utc>)>, tokio_postgres::Error> {
    let statement = LIST.prepare(db).await?;
    db.query(&statement, &[&template_id])
        .await?
        .iter()
        .map(|row| Ok((row.try_get("version")?, row.try_get("created_at")?)))
        .collect()
}

/// A template as the listing shows it: the template and its latest version's locales.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub template_id: String,
    pub channel: Channel,
    pub latest_version: i32,
    pub default_locale: String,
    pub locales: Vec<String>,
    pub created_at: DateTime<Utc>,
    /// When the latest version was published.
    pub updated_at: DateTime<Utc>,
}

impl Listed {
    fn from_row(row: &tokio_postgres::Row) -> Result<Self, tokio_postgres::Error> {
        Ok(Listed {
            template_id: row.try_get("template_id")?,
            channel: row.try_get("channel")?,
            latest_version: row.try_get("latest_version")?,
            default_locale: row.try_get("default_locale")?,
            locales: row.try_get("locales")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
        })
    }

    pub fn to_json(&self) -> Value {
        json!({
            "templateId": self.template_id,
            "channel": self.channel.as_str(),
            "latestVersion": self.latest_version,
            "defaultLocale": self.default_locale,
            "locales": self.locales,
            "createdAt": format_time(&self.created_at),
            "updatedAt": format_time(&self.updated_at),
        })
    }

    /// Where a listing continues after this template.
    pub fn cursor(&self) -> TemplateCursor {
        TemplateCursor {
            created_at_micros: self.created_at.timestamp_micros(),
            template_id: self.template_id.clone(),
        }
    }
}

/// A position in the newest-first order of templates: rows strictly after it come next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateCursor {
    pub created_at_micros: i64,
    pub template_id: String,
}

impl TemplateCursor {
    /// Opaque, URL-safe text.
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("{}:{}", self.created_at_micros, self.template_id))
    }

    /// `None` for anything [`TemplateCursor::encode`] did not produce (a template id never
    /// holds `:`).
    pub fn decode(text: &str) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        let text = std::str::from_utf8(&bytes).ok()?;
        let (micros, template_id) = text.split_once(':')?;
        let created_at_micros = micros.parse::<i64>().ok()?;
        crate::queue::cursor_time(created_at_micros)?;
        let valid = !template_id.is_empty()
            && template_id.len() <= 64
            && template_id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b));
        // Only the canonical spelling is accepted, so a cursor has exactly one text form.
        (valid && format!("{created_at_micros}:{template_id}") == text).then(|| TemplateCursor {
            created_at_micros,
            template_id: template_id.to_string(),
        })
    }
}

/// Templates newest first, after `after`, at most `limit`.
pub async fn list_templates(
    db: &impl GenericClient,
    after: Option<&TemplateCursor>,
    limit: i64,
) -> Result<Vec<Listed>, tokio_postgres::Error> {
    let (at, id) = match after.and_then(|c| {
        DateTime::<Utc>::from_timestamp_micros(c.created_at_micros)
            .map(|at| (at, c.template_id.as_str()))
    }) {
        Some(position) => position,
        // Before the first row: no template is created after the end of time.
        None => (DateTime::<Utc>::MAX_UTC, ""),
    };
    let statement = LIST_TEMPLATES.prepare(db).await?;
    db.query(&statement, &[&at, &id, &limit])
        .await?
        .iter()
        .map(Listed::from_row)
        .collect()
}

/// Pinned versions a process has read: they never change, so one read is enough.
#[derive(Default)]
pub struct VersionCache {
    versions: Mutex<HashMap<(String, i32), Arc<Version>>>,
}

impl VersionCache {
    /// The versions named by `pinned`, from the cache or (those missing) one read.
    pub async fn get(
        &self,
        db: &impl GenericClient,
        pinned: &[(&str, i32)],
    ) -> Result<HashMap<(String, i32), Arc<Version>>, tokio_postgres::Error> {
        let mut found = HashMap::new();
        let mut missing = Vec::new();
        {
            let cache = self.versions.lock().ok();
            for (id, version) in pinned {
                let key = (id.to_string(), *version);
                match cache.as_ref().and_then(|c| c.get(&key)) {
                    Some(hit) => {
                        found.insert(key, hit.clone());
                    }
                    None => missing.push((*id, Some(*version))),
                }
            }
        }
        if missing.is_empty() {
            return Ok(found);
        }
        let read = resolve(db, &missing).await?;
        for version in read.into_values() {
            found.insert((version.template_id.clone(), version.version), version);
        }
        if let Ok(mut cache) = self.versions.lock() {
            if cache.len() + found.len() > CACHE_MAX {
                cache.clear();
            }
            cache.extend(found.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_cursor_reads_back_only_what_it_wrote() {
        let cursor = TemplateCursor {
            created_at_micros: 1_764_000_000_123_456,
            template_id: "order.shipped-v2".into(),
        };
        assert_eq!(TemplateCursor::decode(&cursor.encode()), Some(cursor));
        for text in [
            "",
            "not base64!",
            &URL_SAFE_NO_PAD.encode("12"),
            &URL_SAFE_NO_PAD.encode("12:"),
            &URL_SAFE_NO_PAD.encode("012:a"),
            &URL_SAFE_NO_PAD.encode("12:Upper"),
            &URL_SAFE_NO_PAD.encode("400000000000000000:a"),
        ] {
            assert_eq!(TemplateCursor::decode(text), None, "{text}");
        }
    }
}
