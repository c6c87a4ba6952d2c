//! `webhook-drainer`: invoked by EventBridge Scheduler; POSTs due webhook events from the
//! outbox until its deadline nears, then returns a JSON summary.

use lambda_runtime::{LambdaEvent, service_fn};
use notify_shared::cold_start::{ColdStart, Needs};
use notify_shared::webhook::DrainerFunction;
use notify_shared::{deadline, telemetry};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init_logging();
    let start = ColdStart::load(Needs::default()).await?;
    let function = DrainerFunction::new(&start)?;
    let function = &function;
    lambda_runtime::spawn_graceful_shutdown_handler(start.shutdown_hook()).await;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let deadline = deadline::invocation_deadline(event.context.deadline);
        let report = function.invoke(deadline).await;
        tracing::info!(?report, "webhook-drainer invocation finished");
        Ok::<_, lambda_runtime::Error>(report)
    }))
    .await
}
