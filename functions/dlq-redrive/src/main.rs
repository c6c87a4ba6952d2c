//! `dlq-redrive`: an operator's paced bulk redrive of DEAD_LETTERED or FAILED
//! notifications. `{"at": …}` defers it through a one-time EventBridge Scheduler schedule;
//! a run that nears its deadline with work left schedules its own continuation.

use std::time::{Duration, Instant};

use lambda_runtime::{LambdaEvent, service_fn};
use notify_shared::config::Config;
use notify_shared::functions::{Redriver, deadline_from_epoch_ms};
use notify_shared::telemetry;
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init_logging();
    let config = Config::from_env()?;
    let redriver = Redriver::from_config(&config).await?;
    let redriver = &redriver;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let deadline = invocation_deadline(event.context.deadline);
        let response = redriver
            .invoke(event.payload, &event.context.invoked_function_arn, deadline)
            .await?;
        tracing::info!(
            retried = response.retried,
            remaining = response.remaining,
            "redrive finished"
        );
        Ok::<_, lambda_runtime::Error>(response)
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
