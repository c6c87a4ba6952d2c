//! What the logs may never contain: a full create → deliver → webhook cycle on a real
//! `notify-local` process, with every log line captured and searched.

mod common;

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use common::test_db;
use serde_json::{Value, json};

struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn a_full_cycle_never_logs_the_payload_recipient_or_idempotency_key() {
    let db = test_db().await;
    // A receiver that records webhook bodies.
    let received: Arc<Mutex<Vec<Value>>> = Arc::default();
    let sink = received.clone();
    let receiver = Router::new().route(
        "/hook",
        post(move |body: axum::Json<Value>| {
            let sink = sink.clone();
            async move {
                sink.lock().expect("lock").push(body.0);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let hook = format!("http://{}/hook", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, receiver).await });

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let log_path = std::env::temp_dir().join(format!("notify-logs-{}.log", uuid::Uuid::new_v4()));
    let log = std::fs::File::create(&log_path).expect("log file");
    let _process = Child(
        Command::new(notify_tests::notify_local_binary())
            .env("DATABASE_URL", &db.url)
            .env("PORT", port.to_string())
            .env("APP_ROLE", "all")
            .env("RUST_LOG", "debug")
            .env("MOCK_LATENCY_MS", "0")
            .env("MOCK_FAILURE_RATE", "0")
            .env("WORKER_POLL_INTERVAL_MS", "100")
            .env("WEBHOOK_URL", &hook)
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("start notify-local"),
    );
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let started = Instant::now();
    while client
        .get(format!("{base}/health"))
        .send()
        .await
        .map(|r| r.status().is_success())
        .ok()
        != Some(true)
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "notify-local did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let recipient = "secret-recipient-5f1c@example.com";
    let key = "secret-idempotency-key-9a7e";
    let payload_marker = "secret-payload-text-2d4b";
    let created: Value = client
        .post(format!("{base}/notifications"))
        .json(&json!({"recipient": recipient, "channel": "EMAIL", "priority": "HIGH", "idempotencyKey": key,
                      "payload": {"body": payload_marker}, "sendAt": "2020-01-01T00:00:00Z"}))
        .send()
        .await
        .expect("create")
        .json()
        .await
        .expect("json");
    let id = created["id"].as_str().expect("id").to_string();
    // Also a replay, a conflict and a listing filtered by recipient.
    client
        .post(format!("{base}/notifications"))
        .json(
            &json!({"recipient": recipient, "channel": "EMAIL", "priority": "HIGH",
        "idempotencyKey": key, "payload": {"body": "other"}, "sendAt": "2020-01-01T00:00:00Z"}),
        )
        .send()
        .await
        .expect("conflict");
    client
        .get(format!("{base}/notifications?recipient={recipient}"))
        .send()
        .await
        .expect("list");

    let started = Instant::now();
    loop {
        let delivered = received
            .lock()
            .expect("lock")
            .iter()
            .any(|b| b["jobId"] == id.as_str() && b["status"] == "SENT");
        if delivered {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the webhook did not arrive"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Let the drainer record the delivery and log it.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let logs = std::fs::read_to_string(&log_path).expect("logs");
    let _ = std::fs::remove_file(&log_path);
    assert!(
        logs.lines().count() > 5,
        "the process logged almost nothing:\n{logs}"
    );
    assert!(logs.contains(&id), "events carry the notification id");
    for secret in [recipient, key, payload_marker] {
        let leaks: Vec<&str> = logs.lines().filter(|l| l.contains(secret)).collect();
        assert!(
            leaks.is_empty(),
            "{secret} leaked into the log:\n{}",
            leaks.join("\n")
        );
    }
}
