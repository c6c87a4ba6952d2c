//! The HTTP API: one axum [`Router`] served by `intake-api` on Lambda and by
//! `notify-local` on a socket.

mod batch;
mod body;
mod docs;
pub mod error;
mod fingerprint;
pub mod handlers;
mod middleware;
mod operations;
pub mod validation;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{get, post};
use deadpool_postgres::Pool;

pub use fingerprint::fingerprint;
pub use middleware::request_id_for;

/// What handlers share; built once per process.
#[derive(Clone)]
pub struct AppState {
    pub pool: Pool,
    /// Attempts a new notification gets (`MAX_RETRIES + 1`).
    pub max_attempts: i32,
}

/// Which routes a process answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routes {
    /// The whole API.
    Full,
    /// Worker processes: `/health` and `/metrics` only.
    HealthOnly,
}

pub fn router(state: AppState, routes: Routes) -> Router {
    let mut router = Router::new()
        .route("/health", get(handlers::health))
        .route("/metrics", get(operations::metrics));
    if routes == Routes::Full {
        router = router
            .route("/notifications", get(handlers::list).post(handlers::create))
            .route("/notifications/batch", post(batch::create_batch))
            .route("/notifications/retry", post(operations::retry_bulk))
            .route("/notifications/{id}", get(handlers::get_one).delete(handlers::cancel))
            .route("/notifications/{id}/retry", post(operations::retry_one))
            .route("/api/docs-json", get(handlers::openapi))
            .route("/api/docs", get(handlers::docs_page));
    }
    router
        .fallback(|| async { StatusCode::NOT_FOUND })
        .method_not_allowed_fallback(|| async { StatusCode::METHOD_NOT_ALLOWED })
        .layer(axum::middleware::from_fn(middleware::around_request))
        .with_state(state)
}
