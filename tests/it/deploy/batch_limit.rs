//! Behind Lambda the batch body stops below the 6 MB invocation payload cap, with a 413
//! that says why; the local runner keeps its larger limit.

use notify_shared::auth::Authenticator;
use notify_shared::config::Config;
use notify_shared::intake::{self, AppState, Routes};
use notify_tests::TestDb;
use reqwest::StatusCode;
use serde_json::Value;

async fn serve(db: &TestDb, lambda: bool) -> String {
    let config = Config::from_vars(Default::default()).expect("configuration");
    let state = AppState::new(db.pool.clone(), &config, Authenticator::anonymous());
    let state = if lambda { state.for_lambda() } else { state };
    let router = intake::router(state, Routes::Full);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{address}/notifications/batch")
}

/// A well-formed batch body of `size` bytes whose one item is invalid (nothing is stored).
fn body_of(size: usize) -> String {
    let head = r#"{"notifications":[{"channel":"EMAIL"}],"padding":""#;
    let tail = r#""}"#;
    format!("{head}{}{tail}", "x".repeat(size - head.len() - tail.len()))
}

async fn post(url: &str, body: String) -> (StatusCode, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("request");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_batch_above_five_mib_gets_a_413_naming_the_lambda_cap_only_behind_lambda() {
    let db = TestDb::new().await;
    let lambda = serve(&db, true).await;
    let local = serve(&db, false).await;
    let limit = 5 * 1024 * 1024;

    let (status, body) = post(&lambda, body_of(limit + 1)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    let text = body.to_string();
    assert!(
        text.contains("6 MB") && text.contains("smaller batches"),
        "{text}"
    );

    let (status, body) = post(&lambda, body_of(limit)).await;
    assert_ne!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    let (status, body) = post(&local, body_of(limit + 1)).await;
    assert_ne!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
}
