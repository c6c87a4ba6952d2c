//! `webhook-drainer`: not implemented yet. It starts (configuration and pool are checked once per
//! container) and answers every invocation with an error saying so, never a fake success.

use lambda_runtime::{LambdaEvent, service_fn};
use notify_shared::config::Config;
use notify_shared::functions::Worker;
use notify_shared::telemetry;
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init_logging();
    let _worker = Worker::from_config(Config::from_env()?)?;
    lambda_runtime::run(service_fn(|_event: LambdaEvent<Value>| async {
        Err::<Value, lambda_runtime::Error>(
            "webhook-drainer: the webhook drainer is not implemented yet".into(),
        )
    }))
    .await
}
