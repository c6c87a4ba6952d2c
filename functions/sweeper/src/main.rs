//! `sweeper`: invoked by EventBridge Scheduler; claims and delivers until its deadline
//! nears, then returns a JSON summary of what it did.

use lambda_runtime::{LambdaEvent, service_fn};
use notify_shared::config::Config;
use notify_shared::functions::{Worker, invocation_deadline};
use notify_shared::telemetry;
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init_logging();
    let worker = Worker::from_config(Config::from_env()?)?;
    let worker = &worker;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let summary = worker
            .sweep_until(invocation_deadline(event.context.deadline))
            .await;
        tracing::info!(?summary, "sweeper invocation finished");
        Ok::<_, lambda_runtime::Error>(summary)
    }))
    .await
}
