//! One email through SES v2, one SMS and one push through SNS, each sent by a sweeper and
//! found in moto afterwards with the message id the notification records.

use std::time::Duration;

use notify_shared::notification::{Channel, Status};
use notify_shared::provider::aws;
use notify_tests::worker::sweep_until_idle;
use notify_tests::{TestDb, factory, moto};
use serde_json::{Value, json};

use super::{FROM, aws_providers, circuit, sweeper};

/// Everything moto holds, as its dashboard API gives it.
async fn moto_state(endpoint: &str) -> Value {
    reqwest::get(format!("{endpoint}/moto-api/data.json"))
        .await
        .expect("moto data")
        .json()
        .await
        .expect("json")
}

#[tokio::test]
async fn ses_email_sns_sms_and_sns_push_are_delivered_and_found_in_moto() {
    let moto = moto::start();
    let sdk = aws::sdk_config_at(&moto.endpoint, Duration::from_secs(10)).await;
    aws_sdk_sesv2::Client::new(&sdk)
        .create_email_identity()
        .email_identity(FROM)
        .send()
        .await
        .expect("identity");
    let application = aws_sdk_sns::Client::new(&sdk)
        .create_platform_application()
        .name("notify")
        .platform("GCM")
        .attributes("PlatformCredential", "key")
        .send()
        .await
        .expect("platform application")
        .platform_application_arn()
        .expect("arn")
        .to_string();

    let db = TestDb::new().await;
    let email = factory::create(
        &db.pool,
        factory::Spec::to("ada@example.com")
            .payload(json!({"subject": "Welcome", "text": "Hello Ada"})),
    )
    .await;
    let sms = factory::create(
        &db.pool,
        factory::Spec::to("+15555550100")
            .channel(Channel::Sms)
            .payload(json!({"text": "Your code is 1234"})),
    )
    .await;
    let push = factory::create(
        &db.pool,
        factory::Spec::to("device-token-1")
            .channel(Channel::Push)
            .payload(json!({"title": "Ride", "body": "Your ride is here", "data": {"ride": "42"}})),
    )
    .await;

    let providers = aws_providers(&db.pool, &moto.endpoint, Some(application)).await;
    let outcome = sweep_until_idle(&sweeper(&db.pool, providers, circuit())).await;
    assert_eq!(outcome.sent, 3, "{outcome:?}");

    let mut ids = Vec::new();
    for notification in [&email, &sms, &push] {
        let stored = factory::load(&db.pool, notification.id).await;
        assert_eq!(stored.status, Status::Sent);
        let id = stored.provider_message_id.expect("provider message id");
        ids.push(id);
    }
    let state = moto_state(&moto.endpoint).await;
    let sent_email = state["ses"]["Message"]
        .as_array()
        .expect("SES messages")
        .iter()
        .find(|m| m["id"] == ids[0].as_str())
        .expect("the email is in moto");
    assert_eq!(
        sent_email["destinations"]["ToAddresses"],
        json!(["ada@example.com"])
    );
    assert_eq!(sent_email["subject"], "Welcome");
    let sent_sms = state["sns"]["SMS"]
        .as_array()
        .expect("SNS SMS")
        .iter()
        .find(|m| m["message_id"] == ids[1].as_str())
        .expect("the SMS is in moto");
    assert_eq!(sent_sms["phone_number"], "+15555550100");
    assert_eq!(sent_sms["message"], "Your code is 1234");
    let endpoint = state["sns"]["PlatformEndpoint"]
        .as_array()
        .expect("endpoints")
        .iter()
        .find(|e| e["token"] == "device-token-1")
        .expect("an endpoint was created for the token");
    let message: Value = serde_json::from_str(
        endpoint["messages"][ids[2].as_str()]
            .as_str()
            .expect("the push is in moto"),
    )
    .expect("json message");
    assert_eq!(message["default"], "Your ride is here");

    // One attempt row per call, each with the provider's id.
    assert_eq!(
        db.count(
            "SELECT count(*) FROM delivery_attempts
             WHERE outcome = 'DELIVERED' AND provider_message_id IS NOT NULL"
        )
        .await,
        3
    );
}
