//! What the API shows of delivery: a notification's attempts, its provider message id,
//! and every channel's provider, budgets, circuit and pause.

use notify_local::aws_stub::{AwsStub, Reply, Rule};
use notify_shared::channel;
use notify_shared::config::ChannelRate;
use notify_shared::provider::Provider;
use notify_tests::TestApp;
use notify_tests::worker::sweep;
use reqwest::StatusCode;
use serde_json::json;

use super::{circuit, ses_only, sweeper};

/// `GET /providers`; must answer 200.
async fn read_providers(app: &TestApp) -> serde_json::Value {
    let (status, body) = app
        .send(app.request(reqwest::Method::GET, "/providers"))
        .await
        .pair();
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

#[tokio::test]
async fn attempts_list_every_provider_call_oldest_first_without_recipient_or_payload() {
    let stub = AwsStub::start().await.expect("stub");
    stub.push(Rule {
        service: None,
        recipient: None,
        times: Some(1),
        reply: Reply::error(500, "InternalFailure", "try again"),
    });
    let app = TestApp::spawn().await;
    let (status, created) = app
        .create(
            &json!({"recipient": "ada@example.com", "channel": "EMAIL", "priority": "HIGH",
                        "idempotencyKey": "k", "payload": {"subject": "s", "text": "secret text"},
                        "delaySeconds": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    app.db
        .execute("UPDATE notifications SET next_attempt_at = now()", &[])
        .await;
    let providers = ses_only(&app.db.pool, &stub.url()).await;
    let sweeper = sweeper(&app.db.pool, providers, circuit());
    sweep(&sweeper).await;
    app.db
        .execute("UPDATE notifications SET next_attempt_at = now()", &[])
        .await;
    sweep(&sweeper).await;

    let id = created["id"].as_str().expect("id");
    let (status, attempts) = app
        .send(app.request(
            reqwest::Method::GET,
            &format!("/notifications/{id}/attempts"),
        ))
        .await
        .pair();
    assert_eq!(status, StatusCode::OK, "{attempts}");
    let items = attempts["items"].as_array().expect("items");
    let outcomes: Vec<&str> = items
        .iter()
        .map(|i| i["outcome"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(outcomes, ["TEMPORARY", "DELIVERED"]);
    assert_eq!(items[0]["attempt"], 1);
    assert_eq!(items[1]["attempt"], 2);
    assert!(
        items[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("InternalFailure"))
    );
    assert!(items[1]["providerMessageId"].is_string());
    let text = attempts.to_string();
    assert!(!text.contains("ada@example.com") && !text.contains("secret text"));

    let (_, notification) = app.get(id).await;
    assert_eq!(
        notification["providerMessageId"],
        items[1]["providerMessageId"]
    );

    let (status, _) = app
        .send(app.request(
            reqwest::Method::GET,
            &format!("/notifications/{}/attempts", uuid::Uuid::new_v4()),
        ))
        .await
        .pair();
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn providers_show_each_channels_provider_budgets_circuit_and_pause() {
    let app = TestApp::spawn().await;
    let conn = app.db.pool.get().await.expect("connection");
    let stub = AwsStub::start().await.expect("stub");
    let providers = ses_only(&app.db.pool, &stub.url()).await;
    channel::configure_channels(
        &conn,
        &[
            Some(ChannelRate {
                transactional: 20.0,
                bulk: 30.0,
            }),
            None,
            None,
        ],
        |c| providers.is_real_for(c),
    )
    .await
    .expect("rates");
    let body = read_providers(&app).await;
    let email = &body["channels"]["EMAIL"];
    assert_eq!(email["circuit"]["state"], "CLOSED");
    assert_eq!(email["pausedUntil"], serde_json::Value::Null);
    assert_eq!(email["budgets"]["TRANSACTIONAL"]["ratePerSecond"], 20.0);
    assert_eq!(email["budgets"]["BULK"]["ratePerSecond"], 30.0);
    // Unpaced: both classes, unlimited.
    assert_eq!(
        body["channels"]["SMS"]["budgets"],
        json!({"TRANSACTIONAL": {"ratePerSecond": null, "tokens": null},
               "BULK": {"ratePerSecond": null, "tokens": null}})
    );
    for channel in ["EMAIL", "SMS", "PUSH"] {
        assert_eq!(body["channels"][channel]["provider"], "simulated", "{body}");
    }
}

#[tokio::test]
async fn a_channel_moved_back_to_the_simulated_provider_loses_the_circuit_and_pause_it_had() {
    let app = TestApp::spawn().await;
    let conn = app.db.pool.get().await.expect("connection");
    // Both EMAIL and SMS were sent by a real provider that opened the circuit and paused.
    conn.execute(
        "UPDATE channel_health SET circuit = 'OPEN', circuit_since = now() - interval '1 minute',
                circuit_until = now() + interval '1 hour',
                paused_until = now() + interval '1 hour', pause_reason = 'throttled'
         WHERE channel IN ('EMAIL', 'SMS')",
        &[],
    )
    .await
    .expect("open");
    // Now only EMAIL is: SMS is back on the simulated provider, which no circuit holds.
    channel::configure_channels(&conn, &[None, None, None], |c| {
        c == notify_shared::notification::Channel::Email
    })
    .await
    .expect("configure");
    let body = read_providers(&app).await;
    let email = &body["channels"]["EMAIL"];
    assert_eq!(email["circuit"]["state"], "OPEN", "{body}");
    assert_eq!(email["pauseReason"], "throttled", "{body}");
    // Set by hand, the pause has no recorded start; nothing was counted.
    assert_eq!(email["pausedSince"], serde_json::Value::Null, "{body}");
    assert_eq!(
        email["refusedCalls"],
        json!({"THROTTLED": 0, "PROVIDER_MISCONFIGURED": 0}),
        "{body}"
    );
    let sms = &body["channels"]["SMS"];
    assert_eq!(sms["circuit"]["state"], "CLOSED", "{body}");
    // Told it opened, a subscriber is told it closed; EMAIL's circuit did not move.
    let closed: Vec<serde_json::Value> = app
        .db
        .scalar(
            "SELECT coalesce(array_agg(body), '{}') FROM webhook_events WHERE type = 'circuit.closed'",
            &[],
        )
        .await;
    assert_eq!(closed.len(), 1, "{closed:?}");
    assert_eq!(closed[0]["channel"], "SMS");
    assert_eq!(sms["pausedUntil"], serde_json::Value::Null, "{body}");
    assert_eq!(sms["pauseReason"], serde_json::Value::Null, "{body}");
    let (status, digest) = app
        .send(app.request(reqwest::Method::GET, "/digest"))
        .await
        .pair();
    assert_eq!(status, StatusCode::OK, "{digest}");
    let text = digest.to_string();
    assert!(text.contains("CIRCUIT_OPEN"), "{digest}");
    let findings = digest["findings"].as_array().expect("findings");
    assert!(
        findings.iter().all(|f| !f.to_string().contains("\"SMS\"")),
        "{digest}"
    );
}
