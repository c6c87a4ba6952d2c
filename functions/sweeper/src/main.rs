//! `sweeper`: invoked by EventBridge Scheduler; claims and delivers until its deadline
//! nears, then returns a JSON summary of what it did.

use lambda_runtime::{LambdaEvent, service_fn};
use notify_shared::cold_start::{ColdStart, Needs};
use notify_shared::sweeper::SweeperFunction;
use notify_shared::{deadline, telemetry};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init_logging();
    let start = ColdStart::load(Needs {
        unsubscribe_secret: true,
    })
    .await?;
    let function = SweeperFunction::new(&start).await?;
    let function = &function;
    lambda_runtime::spawn_graceful_shutdown_handler(start.shutdown_hook()).await;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let deadline = deadline::invocation_deadline(event.context.deadline);
        let outcome = function.invoke(deadline).await;
        tracing::info!(?outcome, "sweeper invocation finished");
        Ok::<_, lambda_runtime::Error>(outcome)
    }))
    .await
}
