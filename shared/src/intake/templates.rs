//! The template routes (operator): publish a version, list templates, read a template or
//! one version, preview a rendering. Every locale must render with the sample data before a version
//! is stored, and an SMS version records what each locale costs.

use std::collections::HashMap;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::AppState;
use super::body::{BODY_LIMIT, read_json};
use super::error::ApiError;
use super::payload::SMS_TEXT_MAX;
use super::validation::is_category;
use crate::content::templates::{self, NewVersion, TemplateCursor};
use crate::content::{engine, locale, sms};
use crate::notification::Channel;
use crate::problems::{Problems, contains_nul};

/// Locales one version may hold.
const LOCALES_MAX: usize = 100;

pub async fn publish(
    State(state): State<AppState>,
    Path(template_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    check_id(&template_id)?;
    let body = read_json(&headers, body, BODY_LIMIT)
        .await?
        .unwrap_or(Value::Null);
    let new = validate_version(&body, state.sms_max_segments)?;
    let db = state.pool.get().await?;
    match templates::publish(&db, &template_id, &new).await? {
        Some(version) => Ok((StatusCode::CREATED, Json(version.summary())).into_response()),
        None => Err(ApiError::conflict(format!(
            "Template {template_id} exists for another channel; every version of a template keeps its channel"
        ))),
    }
}

/// `limit` (1–100, default 20) and `cursor`; newest first, each with its latest version.
pub async fn list(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let pairs = super::body::query_pairs(query.as_deref())?;
    let mut problems = Problems::new();
    let values = problems.query(&pairs, &["limit", "cursor"]);
    let (limit, after) = problems.page(&values, TemplateCursor::decode);
    let limit = limit.unwrap_or(20);
    problems.or(())?;
    let db = state.pool.get().await?;
    let mut page = templates::list_templates(&db, after.as_ref(), limit + 1).await?;
    let next = (page.len() as i64 > limit).then(|| {
        page.truncate(limit as usize);
        page.last().map(|t| t.cursor().encode())
    });
    let items: Vec<Value> = page.iter().map(templates::Listed::to_json).collect();
    Ok(Json(json!({"items": items, "nextCursor": next.flatten()})).into_response())
}

pub async fn get_one(
    State(state): State<AppState>,
    Path(template_id): Path<String>,
) -> Result<Response, ApiError> {
    check_id(&template_id)?;
    let db = state.pool.get().await?;
    let latest = templates::find(&db, &template_id, None)
        .await?
        .ok_or_else(|| not_found(&template_id))?;
    let versions: Vec<Value> = templates::list(&db, &template_id)
        .await?
        .into_iter()
        .map(|(version, at)| {
            json!({"version": version, "createdAt": crate::notification::format_time(&at)})
        })
        .collect();
    Ok(Json(json!({
        "templateId": template_id,
        "channel": latest.channel.as_str(),
        "latest": latest.full(),
        "versions": versions,
    }))
    .into_response())
}

pub async fn get_version(
    State(state): State<AppState>,
    Path((template_id, version)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    check_id(&template_id)?;
    let version = parse_version(&version)?;
    let db = state.pool.get().await?;
    let found = templates::find(&db, &template_id, Some(version))
        .await?
        .ok_or_else(|| {
            ApiError::not_found(format!("Template {template_id} has no version {version}"))
        })?;
    Ok(Json(found.full()).into_response())
}

/// `{"version"?, "locale", "data"}` → the fields as they would be sent. The locale asked
/// for resolves as a notification's does (`pt-BR` → `pt` → the version's default).
pub async fn preview(
    State(state): State<AppState>,
    Path(template_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    check_id(&template_id)?;
    let body = read_json(&headers, body, BODY_LIMIT)
        .await?
        .unwrap_or_else(|| json!({}));
    let Some(object) = body.as_object() else {
        return Err(ApiError::field("body", "body must be a JSON object"));
    };
    let mut problems = Problems::new();
    problems.only(object, &["version", "locale", "data"]);
    let version = match object.get("version") {
        None => None,
        Some(value) => problems
            .integer_in(
                "version",
                crate::problems::integer(value),
                1..=i64::from(i32::MAX),
            )
            .map(|v| v as i32),
    };
    let wanted = match object.get("locale") {
        None => {
            problems.add("locale", "locale is required");
            None
        }
        Some(Value::String(tag)) if locale::is_locale(tag) => Some(tag.as_str()),
        Some(_) => {
            problems.add(
                "locale",
                "locale must be a language tag such as en or pt-BR",
            );
            None
        }
    };
    let data = match object.get("data") {
        None => {
            problems.add("data", "data is required");
            None
        }
        given => data_object(given, "data", &mut problems),
    };
    // Both are there once no problem was found; the refusal only keeps that unspoken rule
    // from becoming a panic.
    let (Some(wanted), Some(data)) = (wanted, problems.or(data)?) else {
        return Err(ApiError::field("locale", "locale is required"));
    };
    let db = state.pool.get().await?;
    let found = templates::find(&db, &template_id, version)
        .await?
        .ok_or_else(|| match version {
            Some(version) => {
                ApiError::not_found(format!("Template {template_id} has no version {version}"))
            }
            None => not_found(&template_id),
        })?;
    let resolved = found.resolve_locale(Some(wanted));
    let rendered = found.render(resolved, &data).map_err(|errors| {
        let mut problems = Problems::new();
        for error in errors.0 {
            problems.add(&error.field, error.message);
        }
        ApiError::from(problems)
    })?;
    let mut answer = json!({"locale": resolved, "version": found.version, "rendered": rendered});
    if found.channel == Channel::Sms
        && let Some(Value::String(text)) = rendered.get("text")
    {
        answer["sms"] = json!(sms::measure(text));
    }
    Ok(Json(answer).into_response())
}

/// Checks a publish body and renders every locale with its sample data.
fn validate_version(body: &Value, sms_max_segments: u32) -> Result<NewVersion, ApiError> {
    let Some(object) = body.as_object() else {
        return Err(ApiError::field("body", "body must be a JSON object"));
    };
    let mut problems = Problems::new();
    problems.only(
        object,
        &["channel", "defaultLocale", "locales", "sampleData"],
    );
    let channel = match object.get("channel") {
        None => {
            problems.add("channel", "channel is required");
            None
        }
        Some(value) => problems.one_of(
            "channel",
            value.as_str(),
            Channel::parse,
            "EMAIL, SMS, PUSH",
        ),
    };
    let mut default_locale = match object.get("defaultLocale") {
        Some(Value::String(tag)) if locale::is_locale(tag) => Some(tag.clone()),
        _ => {
            problems.add(
                "defaultLocale",
                "defaultLocale must be a language tag such as en or pt-BR",
            );
            None
        }
    };
    let locales = match object.get("locales") {
        Some(Value::Object(locales)) if (1..=LOCALES_MAX).contains(&locales.len()) => {
            Some(locales.clone())
        }
        _ => {
            problems.add(
                "locales",
                format!("locales must be an object of 1 to {LOCALES_MAX} bodies by language tag"),
            );
            None
        }
    };
    let sample_data = data_object(object.get("sampleData"), "sampleData", &mut problems);
    if let Some(locales) = &locales {
        // Tags are looked up without regard to case: a second spelling could never be used.
        let mut spellings: HashMap<String, &str> = HashMap::new();
        for (tag, body) in locales {
            if let Some(first) = spellings.insert(tag.to_ascii_lowercase(), tag) {
                problems.add(
                    &format!("locales.{tag}"),
                    format!("{tag} and {first} are the same language tag (case does not count)"),
                );
            }
            if !locale::is_locale(tag) {
                problems.add(
                    &format!("locales.{tag}"),
                    "a locale must be a language tag such as en or pt-BR",
                );
            } else if let Some(channel) = channel {
                engine::check_body(channel, tag, body, &mut problems);
            }
            if contains_nul(body) {
                problems.add(
                    &format!("locales.{tag}"),
                    "a body must not contain NUL (\\u0000) characters",
                );
            }
        }
        if let Some(default) = &default_locale {
            // Spelled as the locales spell it, since tags compare without case.
            match locales.keys().find(|tag| tag.eq_ignore_ascii_case(default)) {
                Some(tag) => default_locale = Some(tag.clone()),
                None => {
                    let tags: Vec<&str> = locales.keys().map(String::as_str).collect();
                    problems.add(
                        "defaultLocale",
                        format!(
                            "defaultLocale {default} must be one of the locales ({})",
                            tags.join(", ")
                        ),
                    );
                }
            }
        }
    }
    let (Some(channel), Some(default_locale), Some(locales), Some(sample_data)) =
        (channel, default_locale, locales, sample_data)
    else {
        return Err(problems.into());
    };
    if !problems.is_empty() {
        return Err(problems.into());
    }

    // Check at publish, not at send: every locale renders with the sample data.
    let mut costs = Map::new();
    for (tag, body) in &locales {
        let Some(body) = body.as_object() else {
            continue;
        };
        match engine::render(channel, tag, body, &sample_data) {
            Ok(rendered) if channel == Channel::Sms => {
                let text = rendered.get("text").and_then(Value::as_str).unwrap_or("");
                let cost = sms::measure(text);
                let characters = text.chars().count();
                if !(1..=SMS_TEXT_MAX).contains(&characters) {
                    problems.add(
                        &format!("locales.{tag}.text"),
                        format!(
                            "renders to {characters} characters with sampleData; an SMS is 1 to {SMS_TEXT_MAX}"
                        ),
                    );
                } else if cost.segments > sms_max_segments as usize {
                    problems.add(
                        &format!("locales.{tag}.text"),
                        format!(
                            "renders to {} segments with sampleData; at most {sms_max_segments} (SMS_MAX_SEGMENTS)",
                            cost.segments
                        ),
                    );
                }
                costs.insert(tag.clone(), json!(cost));
            }
            Ok(_) => {}
            Err(errors) => {
                for error in errors.0 {
                    problems.add(&error.field, error.message);
                }
            }
        }
    }
    problems.or(())?;
    Ok(NewVersion {
        channel,
        default_locale,
        locales,
        sample_data,
        sms: (channel == Channel::Sms).then_some(Value::Object(costs)),
    })
}

/// An optional JSON object of data (`{}` when absent); `None` after a problem.
pub(super) fn data_object(
    value: Option<&Value>,
    field: &str,
    problems: &mut Problems,
) -> Option<Value> {
    match value {
        None => Some(json!({})),
        Some(value @ Value::Object(_)) if contains_nul(value) => {
            problems.add(
                field,
                format!("{field} must not contain NUL (\\u0000) characters"),
            );
            None
        }
        Some(value @ Value::Object(_)) => Some(value.clone()),
        Some(_) => {
            problems.add(field, format!("{field} must be a JSON object"));
            None
        }
    }
}

fn check_id(template_id: &str) -> Result<(), ApiError> {
    if is_category(template_id) {
        Ok(())
    } else {
        Err(ApiError::field(
            "templateId",
            "templateId must be 1 to 64 lower-case letters, digits or _.- starting with a letter or digit",
        ))
    }
}

fn parse_version(text: &str) -> Result<i32, ApiError> {
    match text.parse::<i32>() {
        Ok(version) if version >= 1 => Ok(version),
        _ => Err(ApiError::field(
            "version",
            "version must be a positive integer",
        )),
    }
}

fn not_found(template_id: &str) -> ApiError {
    ApiError::not_found(format!("Template {template_id} not found"))
}
