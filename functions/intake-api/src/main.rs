//! `intake-api`: the HTTP API behind API Gateway. The same axum router `notify-local`
//! serves, adapted to Lambda by lambda_http.

use notify_shared::config::Config;
use notify_shared::intake::{self, AppState, Routes};
use notify_shared::{db, telemetry};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    telemetry::init_logging();
    let config = Config::from_env()?;
    let url = config
        .database_url
        .as_deref()
        .ok_or("DATABASE_URL is required")?;
    // Built once per container; connections open on first use.
    let pool = db::create_pool(url, config.database_pool_max)?;
    // Refuses to start without keys unless anonymous access is explicitly allowed.
    let auth = notify_shared::auth::authenticator_for(&pool, config.allow_anonymous).await?;
    let state = AppState {
        pool,
        max_attempts: config.retry.max_attempts(),
        auth,
    };
    lambda_http::run(intake::router(state, Routes::Full)).await
}
