//! What the logs may never contain: a full create → deliver → webhook cycle on a real
//! `notify-local` process, with every log line captured and searched.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use notify_tests::process::KillOnDrop;
use notify_tests::receiver::Receiver;
use notify_tests::{TestDb, notify_local_binary};
use serde_json::{Value, json};

#[tokio::test]
async fn a_full_cycle_never_logs_the_payload_recipient_or_idempotency_key() {
    let db = TestDb::new().await;
    // A receiver that records webhook bodies.
    let receiver = Receiver::accepting_on(0).await;
    let hook = receiver.url.clone();

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let log_path = std::env::temp_dir().join(format!("notify-logs-{}.log", uuid::Uuid::new_v4()));
    let log = std::fs::File::create(&log_path).expect("log file");
    let _process = KillOnDrop(
        Command::new(notify_local_binary())
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
    // Routes whose path names a person: a profile under an address-like id, its
    // unsubscribe link, a suppressed address.
    let person = "secret-person-7c3e@example.com";
    let profile = client
        .put(format!("{base}/recipients/{person}"))
        .json(&json!({"email": recipient}))
        .send()
        .await
        .expect("profile");
    assert!(profile.status().is_success(), "{}", profile.status());
    let link: Value = client
        .post(format!("{base}/unsubscribe-links"))
        .json(&json!({"recipientId": person, "channel": "EMAIL", "category": "news"}))
        .send()
        .await
        .expect("link")
        .json()
        .await
        .expect("json");
    let token = link["token"].as_str().expect("token").to_string();
    client
        .get(format!("{base}/unsubscribe/{token}"))
        .send()
        .await
        .expect("unsubscribe page");
    client
        .delete(format!("{base}/suppressions/EMAIL/{recipient}"))
        .send()
        .await
        .expect("suppression");

    let started = Instant::now();
    loop {
        let delivered = receiver
            .received()
            .iter()
            .map(|request| request.json())
            .any(|b: Value| b["jobId"] == id.as_str() && b["status"] == "SENT");
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
    for secret in [recipient, key, payload_marker, person, &token] {
        let leaks: Vec<&str> = logs.lines().filter(|l| l.contains(secret)).collect();
        assert!(
            leaks.is_empty(),
            "{secret} leaked into the log:\n{}",
            leaks.join("\n")
        );
    }
}
