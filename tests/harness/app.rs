//! [`TestApp`]: a fresh database with the API router served on it on 127.0.0.1, and one
//! typed verb per route.

use std::fmt::Display;
use std::sync::Arc;

use deadpool_postgres::Pool;
use notify_shared::auth::Authenticator;
use notify_shared::config::Config;
use notify_shared::intake::{self, AppState, Routes};
use notify_shared::provider::Provider;
use notify_shared::sweeper::SweepOutcome;
use reqwest::header::HeaderMap;
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::Value;

use crate::db::TestDb;
use crate::worker;

/// A test's database and the API on it.
pub struct TestApp {
    pub db: TestDb,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    client: reqwest::Client,
}

/// A response: status, headers and the body as JSON (a JSON string holding the text when
/// the body is not JSON, `null` when it is empty).
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl TestApp {
    /// The whole API without authentication (every caller is an operator).
    pub async fn spawn() -> TestApp {
        Self::serve(Routes::Full, |_| Authenticator::anonymous()).await
    }

    /// The whole API, requiring API keys from the app's own database.
    pub async fn spawn_with_keys() -> TestApp {
        Self::serve(Routes::Full, |pool| Authenticator::with_keys(pool.clone())).await
    }

    /// The whole API under `config`, requiring API keys from the app's own database.
    pub async fn spawn_with_keys_and_config(config: Config) -> TestApp {
        Self::serve_config(Routes::Full, config, |pool| {
            Authenticator::with_keys(pool.clone())
        })
        .await
    }

    /// What a worker process serves: `/health` and `/metrics` only.
    pub async fn spawn_worker_role() -> TestApp {
        Self::serve(Routes::HealthOnly, |_| Authenticator::anonymous()).await
    }

    async fn serve(routes: Routes, auth: impl FnOnce(&Pool) -> Authenticator) -> TestApp {
        let config = Config::from_vars(Default::default()).expect("default configuration");
        Self::serve_config(routes, config, auth).await
    }

    async fn serve_config(
        routes: Routes,
        config: Config,
        auth: impl FnOnce(&Pool) -> Authenticator,
    ) -> TestApp {
        let db = TestDb::new().await;
        let state = AppState::new(db.pool.clone(), &config, auth(&db.pool));
        let router = intake::router(state, routes);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move { axum::serve(listener, router).await });
        TestApp {
            db,
            base: format!("http://{address}"),
            client: reqwest::Client::new(),
        }
    }

    pub fn pool(&self) -> &Pool {
        &self.db.pool
    }

    /// `path` (with its query) on this app.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// A request to `path` to finish and [`TestApp::send`].
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.client.request(method, self.url(path))
    }

    /// Sends a request and reads the whole response.
    pub async fn send(&self, request: RequestBuilder) -> Reply {
        let response = request.send().await.expect("request");
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.expect("body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Reply {
            status,
            headers,
            body,
        }
    }

    /// `POST /notifications` with `body`, the whole reply (the replay header matters).
    pub async fn post_notification(&self, body: &Value) -> Reply {
        self.send(self.request(Method::POST, "/notifications").json(body))
            .await
    }

    /// `POST /notifications`.
    pub async fn create(&self, body: &Value) -> (StatusCode, Value) {
        self.post_notification(body).await.pair()
    }

    /// `POST /notifications/batch`.
    pub async fn create_batch(&self, body: &Value) -> (StatusCode, Value) {
        self.send(
            self.request(Method::POST, "/notifications/batch")
                .json(body),
        )
        .await
        .pair()
    }

    /// `GET /notifications/{id}`.
    pub async fn get(&self, id: impl Display) -> (StatusCode, Value) {
        self.send(self.request(Method::GET, &format!("/notifications/{id}")))
            .await
            .pair()
    }

    /// `GET /notifications?{query}`.
    pub async fn list(&self, query: &str) -> (StatusCode, Value) {
        self.send(self.request(Method::GET, &format!("/notifications?{query}")))
            .await
            .pair()
    }

    /// `DELETE /notifications/{id}`.
    pub async fn cancel(&self, id: impl Display) -> (StatusCode, Value) {
        self.send(self.request(Method::DELETE, &format!("/notifications/{id}")))
            .await
            .pair()
    }

    /// `POST /notifications/{id}/retry`.
    pub async fn retry(&self, id: impl Display) -> (StatusCode, Value) {
        self.send(self.request(Method::POST, &format!("/notifications/{id}/retry")))
            .await
            .pair()
    }

    /// `POST /notifications/retry` with a JSON body.
    pub async fn retry_bulk(&self, body: &Value) -> (StatusCode, Value) {
        self.send(
            self.request(Method::POST, "/notifications/retry")
                .json(body),
        )
        .await
        .pair()
    }

    /// `GET /metrics` as JSON; must answer 200.
    pub async fn metrics(&self) -> Value {
        let (status, body) = self
            .send(self.request(Method::GET, "/metrics"))
            .await
            .pair();
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    /// Drives a sweeper over the app's database, delivering through `provider`, until a
    /// step claims nothing; returns what the steps did together.
    pub async fn sweep_until_idle(&self, provider: Arc<dyn Provider>) -> SweepOutcome {
        let sweeper = worker::sweeper(self.pool(), provider).build();
        worker::sweep_until_idle(&sweeper).await
    }
}

impl Reply {
    /// Status and body.
    pub fn pair(self) -> (StatusCode, Value) {
        (self.status, self.body)
    }
}

/// Asserts the error envelope every error response has.
pub fn assert_envelope(error: &Value, status: u16, path: &str) {
    assert_eq!(error["statusCode"], status, "{error}");
    assert!(
        error["error"].is_string() && error["message"].is_string(),
        "{error}"
    );
    assert_eq!(error["path"], path, "{error}");
    assert!(
        error["requestId"].as_str().is_some_and(|id| !id.is_empty()),
        "{error}"
    );
}

/// An error's `details`: (field, messages) in order.
pub fn details(error: &Value) -> Vec<(String, Vec<String>)> {
    error["details"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|d| {
                    let errors = d["errors"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|e| e.as_str().map(String::from))
                        .collect();
                    (d["field"].as_str().unwrap_or_default().to_string(), errors)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The fields named in an error's `details`, in order.
pub fn detail_fields(error: &Value) -> Vec<String> {
    details(error).into_iter().map(|(field, _)| field).collect()
}
