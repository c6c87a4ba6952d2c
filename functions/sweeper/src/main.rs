//! `sweeper`: invoked by EventBridge Scheduler; claims and delivers until its deadline
//! nears, then returns a JSON summary of what it did.

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
            .sweep_until(invocation_deadline(event.context.deadline))
            .await;
        tracing::info!(?summary, "sweeper invocation finished");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_deadline_is_kept_and_the_emulator_placeholder_gets_a_budget() {
        let in_a_minute = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after 1970")
            .as_millis() as u64
            + 60_000;
        let real = invocation_deadline(in_a_minute);
        assert!(real > Instant::now() + Duration::from_secs(55));
        assert!(real <= Instant::now() + Duration::from_secs(61));
        // cargo lambda watch: Lambda-Runtime-Deadline-Ms: 600000
        assert!(invocation_deadline(600_000) > Instant::now() + Duration::from_secs(1));
    }
}
