//! The template engine: minijinja with strict undefined variables, HTML escaping for
//! `html` fields and nothing else, no loader (so no `include`, `extends` or `import`, no
//! file or network access), and a fuel limit so no template runs away.

use minijinja::{AutoEscape, Environment, UndefinedBehavior};
use serde_json::{Map, Value};

use crate::notification::Channel;
use crate::problems::Problems;

/// Instructions one field may run: ample for any message, a stop for a runaway loop.
const FUEL: u64 = 200_000;
/// Characters of one field's template source.
const SOURCE_MAX: usize = 100_000;
/// The longest email subject (RFC 5322's line limit), as for a literal payload.
const SUBJECT_MAX: usize = 998;
/// Push data as JSON, as for a literal payload.
const PUSH_DATA_MAX_BYTES: usize = 4096;

/// A field that did not render: `locales.<locale>.<field>` and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderError {
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for RenderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Every field of a body that did not render, in field order (never empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderErrors(pub Vec<RenderError>);

impl std::fmt::Display for RenderErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl From<RenderError> for RenderErrors {
    fn from(error: RenderError) -> Self {
        RenderErrors(vec![error])
    }
}

/// The fields a body of `channel` may have (those of its payload, `delivery.md`).
pub fn fields(channel: Channel) -> &'static [&'static str] {
    match channel {
        Channel::Email => &["subject", "text", "html"],
        Channel::Sms => &["text"],
        Channel::Push => &["title", "body", "data"],
    }
}

/// Checks the shape of one locale's body: known fields, template strings (for push
/// `data`, an object of template strings), and what the channel requires.
pub fn check_body(channel: Channel, locale: &str, body: &Value, problems: &mut Problems) {
    let at = format!("locales.{locale}");
    let Some(body) = body.as_object() else {
        problems.add(&at, format!("{at} must be an object"));
        return;
    };
    for (field, source) in body {
        let path = format!("{at}.{field}");
        if !fields(channel).contains(&field.as_str()) {
            problems.unknown(&path);
            continue;
        }
        let push_data = channel == Channel::Push && field == "data";
        match source {
            Value::Object(members) if push_data => {
                if !members.values().all(Value::is_string) {
                    problems.add(&path, format!("{path} must be an object of string values"));
                }
            }
            _ if push_data => {
                problems.add(&path, format!("{path} must be an object of string values"));
            }
            Value::String(text) if !text.is_empty() && text.chars().count() <= SOURCE_MAX => {}
            _ => problems.add(
                &path,
                format!("{path} must be a string of 1 to {SOURCE_MAX} characters"),
            ),
        }
    }
    let has = |field: &str| body.contains_key(field);
    match channel {
        Channel::Email => {
            if !has("subject") {
                problems.add(&format!("{at}.subject"), "subject is required");
            }
            if !has("text") && !has("html") {
                problems.add(&format!("{at}.text"), "a body needs text or html (or both)");
            }
        }
        Channel::Sms => {
            if !has("text") {
                problems.add(&format!("{at}.text"), "text is required");
            }
        }
        Channel::Push => {
            if !has("title") && !has("body") {
                problems.add(
                    &format!("{at}.body"),
                    "a body needs a title or a body (or both)",
                );
            }
        }
    }
}

/// The templates of a version's locales, parsed once: field `f` of locale `l` is the
/// template named `locales.<l>.<f>` (`locales.<l>.data.<key>` for push data).
#[derive(Debug)]
pub struct Compiled {
    environment: Environment<'static>,
}

/// Parses every field of `locales` (locale → body); every field that does not parse is
/// named.
pub fn compile(locales: &Map<String, Value>) -> Result<Compiled, RenderErrors> {
    let (compiled, errors) = compile_each(locales);
    if errors.is_empty() {
        Ok(compiled)
    } else {
        Err(RenderErrors(errors))
    }
}

/// Parses every field it can; the ones that do not parse are left out and named.
fn compile_each(locales: &Map<String, Value>) -> (Compiled, Vec<RenderError>) {
    let mut environment = environment();
    let mut errors = Vec::new();
    for (locale, body) in locales {
        let Some(body) = body.as_object() else {
            continue;
        };
        for (field, source) in body {
            let path = format!("locales.{locale}.{field}");
            let parsed = match source {
                Value::String(text) => add(&mut environment, path, text),
                Value::Object(members) => members.iter().try_for_each(|(key, text)| {
                    let text = text.as_str().unwrap_or_default();
                    add(&mut environment, format!("{path}.{key}"), text)
                }),
                _ => Ok(()),
            };
            errors.extend(parsed.err());
        }
    }
    (Compiled { environment }, errors)
}

fn add(
    environment: &mut Environment<'static>,
    path: String,
    source: &str,
) -> Result<(), RenderError> {
    environment
        .add_template_owned(path.clone(), source.to_string())
        .map_err(|error| RenderError {
            field: path,
            message: describe(&error),
        })
}

impl Compiled {
    /// Renders every field of `locale` (whose body is `body`) with `data`, a JSON object:
    /// the payload a provider is handed. Every field that fails is named.
    pub fn render(
        &self,
        channel: Channel,
        locale: &str,
        body: &Map<String, Value>,
        data: &Value,
    ) -> Result<Map<String, Value>, RenderErrors> {
        let rendered = self.render_fields(locale, body, data)?;
        let errors = check_rendered(channel, locale, &rendered);
        if errors.is_empty() {
            Ok(rendered)
        } else {
            Err(RenderErrors(errors))
        }
    }

    /// [`Compiled::render`] without the check of what its channel's provider takes.
    fn render_fields(
        &self,
        locale: &str,
        body: &Map<String, Value>,
        data: &Value,
    ) -> Result<Map<String, Value>, RenderErrors> {
        let context = minijinja::Value::from_serialize(data);
        let mut rendered = Map::with_capacity(body.len());
        let mut errors = Vec::new();
        for (field, source) in body {
            let path = format!("locales.{locale}.{field}");
            let value = match source {
                Value::String(_) => self.one(&path, &context).map(Value::String),
                Value::Object(members) => members
                    .keys()
                    .map(|key| {
                        let text = self.one(&format!("{path}.{key}"), &context)?;
                        Ok((key.clone(), Value::String(text)))
                    })
                    .collect::<Result<Map<_, _>, RenderError>>()
                    .map(Value::Object),
                other => Ok(other.clone()),
            };
            match value {
                Ok(value) => {
                    rendered.insert(field.clone(), value);
                }
                Err(error) => errors.push(error),
            }
        }
        if errors.is_empty() {
            Ok(rendered)
        } else {
            Err(RenderErrors(errors))
        }
    }

    fn one(&self, path: &str, context: &minijinja::Value) -> Result<String, RenderError> {
        self.environment
            .get_template(path)
            .and_then(|template| template.render(context))
            .map_err(|error| RenderError {
                field: path.to_string(),
                message: describe(&error),
            })
    }
}

/// Renders every field of one locale's `body` with `data` (a JSON object), parsing it
/// first: what publish checks. Every field that does not parse, and every other field
/// that does not render, is named.
pub fn render(
    channel: Channel,
    locale: &str,
    body: &Map<String, Value>,
    data: &Value,
) -> Result<Map<String, Value>, RenderErrors> {
    let mut one = Map::new();
    one.insert(locale.to_string(), Value::Object(body.clone()));
    let (compiled, mut errors) = compile_each(&one);
    let parsed: Map<String, Value> = body
        .iter()
        .filter(|(field, _)| {
            let path = format!("locales.{locale}.{field}");
            !errors
                .iter()
                .any(|error| error.field == path || error.field.starts_with(&format!("{path}.")))
        })
        .map(|(field, source)| (field.clone(), source.clone()))
        .collect();
    // With fields that did not parse, the rest is not whole: only their rendering counts.
    let rendered = if errors.is_empty() {
        compiled.render(channel, locale, &parsed, data)
    } else {
        compiled.render_fields(locale, &parsed, data)
    };
    match rendered {
        Ok(rendered) if errors.is_empty() => Ok(rendered),
        Ok(_) => Err(RenderErrors(errors)),
        Err(RenderErrors(more)) => {
            errors.extend(more);
            Err(RenderErrors(errors))
        }
    }
}

/// What a rendering must be for its channel's provider to take it (delivery.md's rules
/// for a literal payload): no NUL anywhere (PostgreSQL cannot store it, and no provider
/// takes it), an email subject of 1 to 998 characters on one line and a body that is not
/// empty, a push title or body that is not empty and push data of at most 4 KiB. Checked
/// on every rendering, so publish refuses what the sample data makes of a template and a
/// send fails at once (never retried) on what a notification's data makes of it.
fn check_rendered(
    channel: Channel,
    locale: &str,
    rendered: &Map<String, Value>,
) -> Vec<RenderError> {
    let mut errors = Vec::new();
    let mut fail = |field: &str, message: String| {
        errors.push(RenderError {
            field: format!("locales.{locale}.{field}"),
            message,
        })
    };
    let text = |field: &str| rendered.get(field).and_then(Value::as_str);
    let filled = |field: &str| text(field).is_some_and(|text| !text.trim().is_empty());
    for (field, value) in rendered {
        let has_nul = match value {
            Value::String(text) => text.contains('\0'),
            other => other.to_string().contains("\\u0000"),
        };
        if has_nul {
            fail(
                field,
                "renders a NUL (\\u0000) character, which no provider takes".to_string(),
            );
        }
    }
    match channel {
        Channel::Email => {
            if let Some(subject) = text("subject") {
                let characters = subject.chars().count();
                if !(1..=SUBJECT_MAX).contains(&characters) {
                    fail(
                        "subject",
                        format!(
                            "renders to {characters} characters; a subject is 1 to {SUBJECT_MAX}"
                        ),
                    );
                } else if subject.contains(['\r', '\n']) {
                    fail("subject", "renders to more than one line".to_string());
                }
            }
            if !filled("text") && !filled("html") {
                let field = if rendered.contains_key("text") {
                    "text"
                } else {
                    "html"
                };
                fail(field, "text and html render empty".to_string());
            }
        }
        Channel::Push => {
            if !filled("title") && !filled("body") {
                let field = if rendered.contains_key("body") {
                    "body"
                } else {
                    "title"
                };
                fail(field, "title and body render empty".to_string());
            }
            if let Some(data) = rendered.get("data") {
                let bytes = data.to_string().len();
                if bytes > PUSH_DATA_MAX_BYTES {
                    fail(
                        "data",
                        format!(
                            "renders to {bytes} bytes of JSON; push data is at most {PUSH_DATA_MAX_BYTES}"
                        ),
                    );
                }
            }
        }
        // Its length and segments are measured at publish, against SMS_MAX_SEGMENTS.
        Channel::Sms => {}
    }
    errors
}

fn environment() -> Environment<'static> {
    let mut environment = Environment::new();
    environment.set_undefined_behavior(UndefinedBehavior::Strict);
    // The template's name is its field path: only `…html` is escaped.
    environment.set_auto_escape_callback(|name| {
        if name.ends_with(".html") {
            AutoEscape::Html
        } else {
            AutoEscape::None
        }
    });
    environment.set_fuel(Some(FUEL));
    environment
}

/// The error and its cause in one line, without the source excerpt.
fn describe(error: &minijinja::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("object")
    }

    #[test]
    fn html_is_escaped_and_text_is_not() {
        let rendered = render(
            Channel::Email,
            "en",
            &body(json!({"subject": "Hi {{ name }}", "text": "Hi {{ name }}", "html": "<p>Hi {{ name }}</p>"})),
            &json!({"name": "<script>alert(1)</script>"}),
        )
        .expect("renders");
        assert_eq!(rendered["text"], "Hi <script>alert(1)</script>");
        assert_eq!(rendered["subject"], "Hi <script>alert(1)</script>");
        assert_eq!(
            rendered["html"],
            "<p>Hi &lt;script&gt;alert(1)&lt;&#x2f;script&gt;</p>"
        );
    }

    #[test]
    fn an_undefined_variable_fails_and_names_its_field() {
        let error = render(
            Channel::Email,
            "pt-BR",
            &body(json!({"text": "ok", "html": "<p>{{ user.name }}</p>"})),
            &json!({"user": {}}),
        )
        .expect_err("strict");
        assert_eq!(fields_of(&error), ["locales.pt-BR.html"]);
        assert!(error.0[0].message.contains("undefined"), "{error}");
        let error = render(
            Channel::Sms,
            "en",
            &body(json!({"text": "{{ missing }}"})),
            &json!({}),
        )
        .expect_err("strict");
        assert_eq!(fields_of(&error), ["locales.en.text"]);
        // A syntax error is caught the same way.
        let error = render(
            Channel::Sms,
            "en",
            &body(json!({"text": "{% if %}"})),
            &json!({}),
        )
        .expect_err("syntax");
        assert_eq!(fields_of(&error), ["locales.en.text"]);
    }

    /// What the provider could not take fails the rendering, naming the field: at publish
    /// with the sample data, at send (FAILED, never retried) with the notification's.
    #[test]
    fn a_rendering_its_provider_could_not_take_fails_and_names_the_field() {
        let fails = |channel, source: Value, data: Value| -> Vec<String> {
            render(channel, "en", &body(source), &data)
                .expect_err("refused")
                .0
                .into_iter()
                .map(|error| format!("{}: {}", error.field, error.message))
                .collect()
        };
        assert_eq!(
            fails(
                Channel::Sms,
                json!({"text": "{{ x }}y"}),
                json!({"x": "\u{0}"})
            ),
            ["locales.en.text: renders a NUL (\\u0000) character, which no provider takes"]
        );
        assert_eq!(
            fails(
                Channel::Push,
                json!({"title": "t", "data": {"k": "{{ x }}"}}),
                json!({"x": "\u{0}"})
            ),
            ["locales.en.data: renders a NUL (\\u0000) character, which no provider takes"]
        );
        assert_eq!(
            fails(
                Channel::Email,
                json!({"subject": "{{ s }}", "text": "t"}),
                json!({"s": "x".repeat(999)})
            ),
            ["locales.en.subject: renders to 999 characters; a subject is 1 to 998"]
        );
        assert_eq!(
            fails(
                Channel::Email,
                json!({"subject": "{{ s }}", "text": "t"}),
                json!({"s": "a\nb"})
            ),
            ["locales.en.subject: renders to more than one line"]
        );
        assert_eq!(
            fails(
                Channel::Email,
                json!({"subject": "s", "text": "{{ t }}", "html": "{{ t }}"}),
                json!({"t": " "})
            ),
            ["locales.en.text: text and html render empty"]
        );
        assert_eq!(
            fails(Channel::Push, json!({"body": "{{ b }}"}), json!({"b": ""})),
            ["locales.en.body: title and body render empty"]
        );
        assert_eq!(
            fails(
                Channel::Push,
                json!({"title": "t", "data": {"k": "{{ v }}"}}),
                json!({"v": "x".repeat(4090)})
            ),
            ["locales.en.data: renders to 4098 bytes of JSON; push data is at most 4096"]
        );
        // At the limits, and with one of two bodies empty, it renders.
        let rendered = render(
            Channel::Email,
            "en",
            &body(json!({"subject": "{{ s }}", "text": "", "html": "<p>hi</p>"})),
            &json!({"s": "x".repeat(998)}),
        );
        assert!(rendered.is_ok(), "{rendered:?}");
    }

    fn fields_of(errors: &RenderErrors) -> Vec<&str> {
        errors.0.iter().map(|error| error.field.as_str()).collect()
    }

    #[test]
    fn every_failing_field_is_named_at_once_syntax_and_undefined_alike() {
        let error = render(
            Channel::Email,
            "en",
            &body(json!({
                "subject": "{{ nam }}",
                "text": "{% if %}",
                "html": "{{ name | nonexistentfilter }}",
            })),
            &json!({"name": "Ada"}),
        )
        .expect_err("three fields fail");
        let mut fields = fields_of(&error);
        fields.sort_unstable();
        assert_eq!(
            fields,
            ["locales.en.html", "locales.en.subject", "locales.en.text"]
        );
        assert_eq!(error.to_string().matches("; ").count(), 2, "{error}");
    }

    #[test]
    fn no_template_reaches_files_or_runs_away() {
        for source in [
            "{% include 'x' %}",
            "{% extends 'x' %}",
            "{% import 'x' as y %}",
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        ] {
            assert!(
                render(
                    Channel::Sms,
                    "en",
                    &body(json!({"text": source})),
                    &json!({})
                )
                .is_err(),
                "{source}"
            );
        }
    }

    #[test]
    fn push_data_values_are_templates() {
        let rendered = render(
            Channel::Push,
            "en",
            &body(json!({"title": "T", "data": {"order": "{{ id }}"}})),
            &json!({"id": 42}),
        )
        .expect("renders");
        assert_eq!(rendered["data"], json!({"order": "42"}));
    }

    #[test]
    fn bodies_are_checked_per_channel() {
        let mut problems = Problems::new();
        check_body(
            Channel::Email,
            "en",
            &json!({"text": "x", "title": "t"}),
            &mut problems,
        );
        check_body(Channel::Sms, "fr", &json!({"text": 5}), &mut problems);
        // Push data is an object of templates, never one template.
        check_body(
            Channel::Push,
            "de",
            &json!({"title": "t", "data": "{{ x }}"}),
            &mut problems,
        );
        let fields: Vec<String> = problems
            .into_errors()
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(
            fields,
            [
                "locales.en.title",
                "locales.en.subject",
                "locales.fr.text",
                "locales.de.data"
            ]
        );
    }
}
