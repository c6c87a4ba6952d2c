//! Logging: structured JSON lines (or readable text), filtered by `RUST_LOG`. Under
//! Lambda's advanced logging controls the function's `LoggingConfig` decides instead:
//! `AWS_LAMBDA_LOG_FORMAT` (JSON or Text) and `AWS_LAMBDA_LOG_LEVEL` (TRACE … FATAL).

use tracing_subscriber::EnvFilter;

/// What the environment asks of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LogSettings {
    /// An `EnvFilter` directive.
    filter: String,
    json: bool,
    /// Colours only for a developer's terminal, never in CloudWatch.
    ansi: bool,
}

/// `RUST_LOG` wins (a precise filter set on purpose), then `AWS_LAMBDA_LOG_LEVEL`, then
/// `info`. `AWS_LAMBDA_LOG_FORMAT` wins over the local `LOG_FORMAT=text`.
fn settings(var: impl Fn(&str) -> Option<String>) -> LogSettings {
    let set = |name: &str| {
        var(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let filter = set("RUST_LOG")
        .or_else(|| {
            set("AWS_LAMBDA_LOG_LEVEL").map(|level| match level.to_ascii_lowercase().as_str() {
                // tracing has no FATAL: errors are the closest.
                "fatal" => "error".to_string(),
                other => other.to_string(),
            })
        })
        .unwrap_or_else(|| "info".to_string());
    let lambda_format = set("AWS_LAMBDA_LOG_FORMAT");
    let json = match lambda_format.as_deref() {
        Some(format) => !format.eq_ignore_ascii_case("text"),
        None => set("LOG_FORMAT").is_none_or(|format| format != "text"),
    };
    LogSettings {
        filter,
        json,
        ansi: lambda_format.is_none() && set("AWS_LAMBDA_FUNCTION_NAME").is_none(),
    }
}

/// Installs the global subscriber once; later calls do nothing.
pub fn init_logging() {
    let settings = settings(|name| std::env::var(name).ok());
    let filter = EnvFilter::try_new(&settings.filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(settings.ansi)
        .with_writer(std::io::stderr);
    let _ = if settings.json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init()
    } else {
        builder.try_init()
    };
}

/// An error's chain for the log, without anything a row could have put there: a database
/// error shows its SQLSTATE and message but never its DETAIL (which can quote row values
/// such as a recipient) or the statement's parameters.
pub fn describe(error: &anyhow::Error) -> String {
    error
        .chain()
        .map(describe_one)
        .collect::<Vec<_>>()
        .join(": ")
}

fn describe_one(error: &(dyn std::error::Error + 'static)) -> String {
    if let Some(db) = error.downcast_ref::<tokio_postgres::error::DbError>() {
        return format!("{} ({})", db.message(), db.code().code());
    }
    if let Some(pg) = error.downcast_ref::<tokio_postgres::Error>() {
        return match pg.as_db_error() {
            Some(db) => format!("{} ({})", db.message(), db.code().code()),
            None => "database connection error".to_string(),
        };
    }
    error.to_string()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    fn settings_for(pairs: &[(&str, &str)]) -> super::LogSettings {
        let vars: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        super::settings(|name| vars.get(name).cloned())
    }

    #[test]
    fn lambda_logging_controls_set_format_and_level_unless_rust_log_is_given() {
        let lambda = settings_for(&[
            ("AWS_LAMBDA_FUNCTION_NAME", "notify-sweeper"),
            ("AWS_LAMBDA_LOG_FORMAT", "Text"),
            ("AWS_LAMBDA_LOG_LEVEL", "WARN"),
            ("LOG_FORMAT", "json"),
        ]);
        assert_eq!(lambda.filter, "warn");
        assert!(!lambda.json && !lambda.ansi);
        let json = settings_for(&[
            ("AWS_LAMBDA_LOG_FORMAT", "JSON"),
            ("AWS_LAMBDA_LOG_LEVEL", "FATAL"),
        ]);
        assert_eq!(json.filter, "error");
        assert!(json.json);
        let explicit = settings_for(&[
            ("AWS_LAMBDA_LOG_LEVEL", "DEBUG"),
            ("RUST_LOG", "notify_shared=trace"),
        ]);
        assert_eq!(explicit.filter, "notify_shared=trace");
        let local = settings_for(&[("LOG_FORMAT", "text")]);
        assert_eq!(local.filter, "info");
        assert!(!local.json && local.ansi);
    }

    #[test]
    fn plain_errors_keep_their_chain() {
        let error = anyhow::anyhow!("inner").context("outer");
        assert_eq!(super::describe(&error), "outer: inner");
    }
}
