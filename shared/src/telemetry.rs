//! Logging: structured JSON lines (or readable text on a terminal), filtered by `RUST_LOG`.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber once; later calls do nothing.
pub fn init_logging() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let pretty = std::env::var("LOG_FORMAT").is_ok_and(|v| v == "text");
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if pretty {
        builder.try_init()
    } else {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init()
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
    #[test]
    fn plain_errors_keep_their_chain() {
        let error = anyhow::anyhow!("inner").context("outer");
        assert_eq!(super::describe(&error), "outer: inner");
    }
}
