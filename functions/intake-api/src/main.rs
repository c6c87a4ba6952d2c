//! `intake-api`: the HTTP API behind API Gateway. The same axum router `notify-local`
//! serves, adapted to Lambda by lambda_http.

use notify_shared::config::Config;
use notify_shared::intake::{self, AppState, Routes};
use notify_shared::{db, telemetry};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    telemetry::init_logging();
    let config = Config::from_env()?;
    let migrate_on_start = migrate_on_start(std::env::var("MIGRATE_ON_START").ok().as_deref())?;
    let url = config
        .database_url
        .as_deref()
        .ok_or("DATABASE_URL is required")?;
    // Deploys may bring the schema up to date at cold start: migrations run under an
    // advisory lock and are idempotent, so concurrent cold starts apply them once.
    if migrate_on_start {
        db::migrate(url).await?;
    }
    // Built once per container; connections open on first use.
    let pool = db::pool_from_config(&config)?;
    // Refuses to start without keys unless anonymous access is explicitly allowed.
    let auth = notify_shared::auth::authenticator_for(&pool, config.allow_anonymous).await?;
    let state = AppState::new(pool, &config, auth);
    lambda_http::run(intake::router(state, Routes::Full)).await
}

/// `MIGRATE_ON_START`: `true`/`false` (unset or empty means `false`).
fn migrate_on_start(value: Option<&str>) -> Result<bool, String> {
    match value.map(str::trim) {
        None | Some("" | "false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(other) => Err(format!(
            "MIGRATE_ON_START must be true or false (got {other:?})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::migrate_on_start;

    #[test]
    fn migrate_on_start_is_off_unless_asked_for() {
        assert_eq!(migrate_on_start(None), Ok(false));
        assert_eq!(migrate_on_start(Some("")), Ok(false));
        assert_eq!(migrate_on_start(Some("false")), Ok(false));
        assert_eq!(migrate_on_start(Some("true")), Ok(true));
        assert_eq!(migrate_on_start(Some(" 1 ")), Ok(true));
        assert!(migrate_on_start(Some("yes")).is_err());
    }
}
