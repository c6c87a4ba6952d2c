//! The HTTP API: one axum [`Router`] served by `intake-api` on Lambda and by
//! `notify-local` on a socket.

mod accept;
pub mod admit;
mod batch;
mod body;
mod campaigns;
mod console;
mod delivery;
mod docs;
pub mod error;
mod fingerprint;
pub mod handlers;
mod json;
mod middleware;
mod operations;
pub mod payload;
mod recipient_body;
pub mod recipients;
pub mod request;
mod suppressions;
mod templated;
mod templates;
pub mod times;
mod unsubscribe;
pub mod validation;
mod webhooks;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{Next, from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use deadpool_postgres::Pool;

use crate::auth::{Authenticator, Refusal, Scope};
use crate::config::{AudienceConfig, Config, ProvidersConfig};
use crate::webhook::destination::DestinationPolicy;
use error::ApiError;
use payload::RealProviders;

pub use middleware::request_id_for;
pub use request::CreateRequest;

/// What handlers share; built once per process.
#[derive(Clone)]
pub struct AppState {
    pub pool: Pool,
    /// Attempts a new notification gets (`MAX_RETRIES + 1`).
    pub max_attempts: i32,
    pub auth: Authenticator,
    /// Which provider sends each channel, and the circuit breaker's window, for
    /// `GET /providers`.
    pub providers: ProvidersConfig,
    /// The channels a real provider sends, which intake checks notifications against.
    pub real_providers: RealProviders,
    /// The key of unsubscribe links and suppression hashes, and where links point.
    pub audience: AudienceConfig,
    /// The SSRF rules webhook endpoints are registered under.
    pub webhooks: DestinationPolicy,
    /// `SMS_MAX_SEGMENTS`: the most segments an SMS template may render to.
    pub sms_max_segments: u32,
    /// Largest batch body: [`batch::BATCH_BODY_LIMIT`], lower behind Lambda.
    pub batch_body_limit: usize,
}

impl AppState {
    /// The state of a process serving `config` on `pool` with `auth`.
    pub fn new(pool: Pool, config: &Config, auth: Authenticator) -> Self {
        AppState {
            pool,
            max_attempts: config.retry.max_attempts(),
            auth,
            providers: config.providers.clone(),
            real_providers: RealProviders::of(&config.providers),
            audience: config.audience.clone(),
            webhooks: config.webhook.destinations(),
            sms_max_segments: config.sms_max_segments,
            batch_body_limit: batch::BATCH_BODY_LIMIT,
        }
    }

    /// Served by AWS Lambda: the batch body limit drops below Lambda's payload cap.
    pub fn for_lambda(mut self) -> Self {
        self.batch_body_limit = batch::LAMBDA_BATCH_BODY_LIMIT;
        self
    }
}

/// Which routes a process answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routes {
    /// The whole API.
    Full,
    /// Worker processes: `/health` and `/metrics` only.
    HealthOnly,
}

/// Every (method, path) [`router`] serves with [`Routes::Full`], in the order it declares
/// them. A route added to, changed in or removed from `router` must be changed here too,
/// and in the OpenAPI document (`openapi.json`): the tests check the list against the
/// router and the document against the list.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/metrics"),
    // Client scope.
    ("GET", "/notifications"),
    ("POST", "/notifications"),
    ("POST", "/notifications/batch"),
    ("GET", "/notifications/{id}"),
    ("DELETE", "/notifications/{id}"),
    ("GET", "/notifications/{id}/attempts"),
    ("GET", "/notifications/{id}/webhook-events"),
    ("PUT", "/recipients/{id}"),
    ("GET", "/recipients/{id}"),
    ("DELETE", "/recipients/{id}"),
    ("GET", "/recipients/{id}/preferences"),
    ("PATCH", "/recipients/{id}/preferences"),
    ("POST", "/webhook-endpoints"),
    ("GET", "/webhook-endpoints"),
    ("DELETE", "/webhook-endpoints/{id}"),
    ("POST", "/webhook-endpoints/{id}/rotate-secret"),
    ("GET", "/webhook-events"),
    ("POST", "/webhook-events/retry"),
    // Operator scope.
    ("POST", "/notifications/retry"),
    ("POST", "/notifications/{id}/retry"),
    ("GET", "/providers"),
    ("GET", "/suppressions"),
    ("POST", "/suppressions"),
    ("DELETE", "/suppressions/{channel}/{address}"),
    ("POST", "/unsubscribe-links"),
    ("GET", "/templates"),
    ("POST", "/templates/{id}/versions"),
    ("GET", "/templates/{id}"),
    ("GET", "/templates/{id}/versions/{version}"),
    ("POST", "/templates/{id}/preview"),
    ("GET", "/campaigns"),
    ("POST", "/campaigns"),
    ("GET", "/campaigns/{id}"),
    ("DELETE", "/campaigns/{id}"),
    ("GET", "/digest"),
    // Open.
    ("GET", "/unsubscribe/{token}"),
    ("POST", "/unsubscribe/{token}"),
    ("GET", "/api/docs-json"),
    ("GET", "/api/docs"),
    ("GET", "/console"),
    ("GET", "/health"),
];

/// Routes by the scope they need: `/health`, the API documents and one-click unsubscribe
/// and the console page are open; a client key may create, read, list and cancel
/// notifications and manage its recipients and webhook endpoints; redrive, metrics, the
/// digest, providers, templates, campaigns and the suppression list need an operator key.
/// Each route is listed in [`ROUTES`] and documented in `openapi.json`: change all three.
pub fn router(state: AppState, routes: Routes) -> Router {
    let operator = from_fn_with_state(state.clone(), require_operator);
    let client = from_fn_with_state(state.clone(), require_client);
    let mut router = Router::new().route(
        "/metrics",
        get(operations::metrics).route_layer(operator.clone()),
    );
    if routes == Routes::Full {
        let client_routes = Router::new()
            .route("/notifications", get(handlers::list).post(handlers::create))
            .route("/notifications/batch", post(batch::create_batch))
            .route(
                "/notifications/{id}",
                get(handlers::get_one).delete(handlers::cancel),
            )
            .route("/notifications/{id}/attempts", get(delivery::attempts))
            .route(
                "/notifications/{id}/webhook-events",
                get(delivery::webhook_events),
            )
            .route(
                "/recipients/{id}",
                put(recipients::put)
                    .get(recipients::get_one)
                    .delete(recipients::erase),
            )
            .route(
                "/recipients/{id}/preferences",
                get(recipients::get_preferences).patch(recipients::patch_preferences),
            )
            .route(
                "/webhook-endpoints",
                post(webhooks::create).get(webhooks::list),
            )
            .route("/webhook-endpoints/{id}", delete(webhooks::delete))
            .route(
                "/webhook-endpoints/{id}/rotate-secret",
                post(webhooks::rotate_secret),
            )
            .route("/webhook-events", get(webhooks::list_events))
            .route("/webhook-events/retry", post(webhooks::replay))
            // The query is checked first, before any body is read.
            .route_layer(from_fn(middleware::refuse_unread_body))
            .route_layer(from_fn(middleware::refuse_unread_query))
            .route_layer(client);
        let operator_routes = Router::new()
            .route("/notifications/retry", post(operations::retry_bulk))
            .route("/notifications/{id}/retry", post(operations::retry_one))
            .route("/providers", get(delivery::providers))
            .route(
                "/suppressions",
                get(suppressions::list).post(suppressions::add),
            )
            .route(
                "/suppressions/{channel}/{address}",
                delete(suppressions::remove),
            )
            .route("/unsubscribe-links", post(unsubscribe::link))
            .route("/templates", get(templates::list))
            .route("/templates/{id}/versions", post(templates::publish))
            .route("/templates/{id}", get(templates::get_one))
            .route(
                "/templates/{id}/versions/{version}",
                get(templates::get_version),
            )
            .route("/templates/{id}/preview", post(templates::preview))
            .route("/campaigns", get(campaigns::list).post(campaigns::create))
            .route(
                "/campaigns/{id}",
                get(campaigns::get_one).delete(campaigns::cancel),
            )
            .route("/digest", get(operations::digest))
            // The query is checked first, before any body is read.
            .route_layer(from_fn(middleware::refuse_unread_body))
            .route_layer(from_fn(middleware::refuse_unread_query))
            .route_layer(operator);
        router = router
            .merge(client_routes)
            .merge(operator_routes)
            // No key: the signed token is the authority.
            .route(
                "/unsubscribe/{token}",
                get(unsubscribe::confirm_page).post(unsubscribe::one_click),
            )
            .route("/api/docs-json", get(handlers::openapi))
            .route("/api/docs", get(handlers::docs_page))
            // The page holds no data; every call it makes carries the operator's key.
            .route("/console", get(console::page));
    }
    router
        .route("/health", get(handlers::health))
        .fallback(|| async { StatusCode::NOT_FOUND })
        .method_not_allowed_fallback(|| async { StatusCode::METHOD_NOT_ALLOWED })
        .layer(axum::middleware::from_fn(middleware::around_request))
        .with_state(state)
}

async fn require_client(state: State<AppState>, request: Request, next: Next) -> Response {
    authorize(state, request, next, Scope::Client).await
}

async fn require_operator(state: State<AppState>, request: Request, next: Next) -> Response {
    authorize(state, request, next, Scope::Operator).await
}

/// Lets the request through with its [`crate::auth::Caller`] attached, or answers 401/403.
async fn authorize(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
    required: Scope,
) -> Response {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match state.auth.authorize(header, required).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(Refusal::Unauthenticated) => {
            let mut response = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "A valid API key is required: send Authorization: Bearer <key>",
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
        Err(Refusal::Unavailable) => ApiError::unavailable().into_response(),
        Err(Refusal::Forbidden) => ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "This API key may not use this route; it needs the {} scope",
                required.as_str()
            ),
        )
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use super::*;

    /// `path` with every `{parameter}` filled in.
    fn concrete(path: &str) -> String {
        path.split('/')
            .map(|segment| {
                if segment.starts_with('{') {
                    "x"
                } else {
                    segment
                }
            })
            .collect::<Vec<_>>()
            .join("/")
    }

    /// Every listed route answers (neither the 404 fallback nor 405), and every other
    /// method on a listed path is a 405: the list says exactly what the router serves on
    /// these paths.
    #[tokio::test]
    async fn the_route_list_is_what_the_router_serves() {
        let unique: BTreeSet<_> = ROUTES.iter().collect();
        assert_eq!(unique.len(), ROUTES.len(), "a route is listed twice");

        let config = Config::from_vars(HashMap::new()).expect("defaults");
        // Nothing listens on port 1: a handler that reaches the database answers 503.
        let pool =
            crate::db::create_pool("postgres://postgres@127.0.0.1:1/none?sslmode=disable", 1)
                .expect("pool");
        let state = AppState::new(pool, &config, Authenticator::anonymous());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let server =
            tokio::spawn(async move { axum::serve(listener, router(state, Routes::Full)).await });
        let client = reqwest::Client::new();

        let paths: BTreeSet<&str> = ROUTES.iter().map(|(_, path)| *path).collect();
        for path in paths {
            for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
                let status = client
                    .request(
                        method.parse().expect("method"),
                        format!("{base}{}", concrete(path)),
                    )
                    .send()
                    .await
                    .expect("reply")
                    .status();
                if ROUTES.contains(&(method, path)) {
                    assert!(
                        status != StatusCode::NOT_FOUND && status != StatusCode::METHOD_NOT_ALLOWED,
                        "{method} {path} is in ROUTES but the router answers {status}"
                    );
                } else {
                    assert_eq!(
                        status,
                        StatusCode::METHOD_NOT_ALLOWED,
                        "{method} {path} is served: add it to ROUTES and to openapi.json"
                    );
                }
            }
        }
        server.abort();
    }
}
