//! `dlq-redrive`: an operator's paced bulk redrive of DEAD_LETTERED or FAILED
//! notifications. `{"at": …}` defers it through a one-time EventBridge Scheduler schedule;
//! a run that nears its deadline with work left schedules its own continuation.

use lambda_runtime::{LambdaEvent, service_fn};
use notify_shared::cold_start::{ColdStart, Needs};
use notify_shared::redrive::RedriveFunction;
use notify_shared::{deadline, telemetry};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init_logging();
    let start = ColdStart::load(Needs::default()).await?;
    let function = RedriveFunction::new(&start).await?;
    let function = &function;
    lambda_runtime::spawn_graceful_shutdown_handler(start.shutdown_hook()).await;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let deadline = deadline::invocation_deadline(event.context.deadline);
        let response = function
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
