//! `webhook-drainer`: invoked by EventBridge Scheduler; POSTs due webhook events from the
//! outbox until its deadline nears, then returns a JSON summary.

use std::time::{Duration, Instant};

use lambda_runtime::{LambdaEvent, service_fn};
use notify_shared::config::Config;
use notify_shared::functions::{Worker, deadline_from_epoch_ms};
use notify_shared::telemetry;
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init_logging();
    let worker = Worker::from_config(Config::from_env()?)?;
    let worker = &worker;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let summary = worker
            .drain_until(invocation_deadline(event.context.deadline))
            .await;
        tracing::info!(%summary, "webhook-drainer invocation finished");
        Ok::<_, lambda_runtime::Error>(summary)
    }))
    .await
}

/// Lambda's deadline (epoch milliseconds) as an `Instant`. `cargo lambda watch` sends the
/// placeholder 600000 instead of a wall-clock time, which would end the invocation before
/// it starts: a deadline before 2001 means "emulator", and the invocation gets
/// `AWS_LAMBDA_FUNCTION_TIMEOUT` seconds (the emulators' name for the timeout; default 30).
fn invocation_deadline(deadline_ms: u64) -> Instant {
    const PLAUSIBLE_AFTER_MS: u64 = 978_307_200_000; // 2001-01-01T00:00:00Z
    if deadline_ms >= PLAUSIBLE_AFTER_MS {
        return deadline_from_epoch_ms(deadline_ms);
    }
    let seconds = std::env::var("AWS_LAMBDA_FUNCTION_TIMEOUT")
        .ok()
        .and_then(|value| value.trim().parse::<u64>().ok())
        .unwrap_or(30);
    Instant::now() + Duration::from_secs(seconds)
}
