//! `intake-api`: the HTTP API behind API Gateway. The same axum router `notify-local`
//! serves, adapted to Lambda by lambda_http. The schema is brought up to date by the
//! deploy (the `migrator` function), never here: the init phase has 10 seconds.

use notify_shared::cold_start::{ColdStart, Needs};
use notify_shared::intake::{self, AppState, Routes};
use notify_shared::telemetry;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    telemetry::init_logging();
    let start = ColdStart::load(Needs {
        unsubscribe_secret: true,
    })
    .await?;
    // Built once per container; connections open on first use.
    let pool = start.pool()?;
    // Refuses to start without keys unless anonymous access is explicitly allowed.
    let auth = notify_shared::auth::authenticator_for(&pool, start.config.allow_anonymous).await?;
    let state = AppState::new(pool, &start.config, auth).for_lambda();
    lambda_runtime::spawn_graceful_shutdown_handler(start.shutdown_hook()).await;
    lambda_http::run(intake::router(state, Routes::Full)).await
}
