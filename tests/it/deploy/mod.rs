//! What a deployment relies on, against local stand-ins: secrets in Secrets Manager (moto)
//! read at cold start and read again after a rotation, the custom resource that migrates
//! and creates the first operator key, and the metrics the alarms watch.

mod batch_limit;
mod metrics;
mod secrets;
mod setup;

use std::time::Duration;

use notify_shared::provider::aws;
use notify_shared::secrets::Secrets;
use notify_tests::moto::Moto;

/// A Secrets Manager client for the functions and one for the test's own calls, both at moto.
async fn secrets_at(moto: &Moto) -> (Secrets, aws_sdk_secretsmanager::Client) {
    let sdk = aws::sdk_config_at(&moto.endpoint, Duration::from_secs(10)).await;
    (
        Secrets::new(&sdk),
        aws_sdk_secretsmanager::Client::new(&sdk),
    )
}

/// Creates a text secret in moto; returns its ARN.
async fn create_secret(client: &aws_sdk_secretsmanager::Client, name: &str, value: &str) -> String {
    client
        .create_secret()
        .name(name)
        .secret_string(value)
        .send()
        .await
        .expect("create secret")
        .arn
        .expect("arn")
}
