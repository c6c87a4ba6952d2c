//! `sweeper`: invoked by EventBridge Scheduler; claims and delivers until its deadline
//! nears, then returns a JSON summary of what it did.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lambda_runtime::{LambdaEvent, service_fn};
use notify_shared::config::Config;
use notify_shared::functions::Worker;
use notify_shared::telemetry;
use serde_json::Value;

/// The invocation deadline as an `Instant` (Lambda gives wall-clock milliseconds).
fn deadline_of(deadline_ms: u64) -> Instant {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    Instant::now() + Duration::from_millis(deadline_ms.saturating_sub(now_ms))
}

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init_logging();
    let worker = Worker::from_config(Config::from_env()?)?;
    let worker = &worker;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let summary = worker
            .sweep_until(deadline_of(event.context.deadline))
            .await;
        tracing::info!(?summary, "sweeper invocation finished");
        Ok::<_, lambda_runtime::Error>(summary)
    }))
    .await
}
