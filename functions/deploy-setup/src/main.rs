//! `deploy-setup`: the CloudFormation custom resource behind every deploy. Applies pending
//! migrations and creates the first operator key (stored in the stack's secret), then
//! answers CloudFormation; a Delete leaves the database as it is.

use lambda_runtime::{LambdaEvent, service_fn};
use notify_shared::cold_start::{ColdStart, Needs};
use notify_shared::deploy_setup::SetupFunction;
use notify_shared::telemetry;
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init_logging();
    // No connection opens here: the migrations run in the invocation, whose time limit
    // the template sets, not in the 10-second init phase.
    let start = ColdStart::load(Needs::default()).await?;
    let function = SetupFunction::new(&start).await?;
    let function = &function;
    lambda_runtime::spawn_graceful_shutdown_handler(start.shutdown_hook()).await;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let response = function.invoke(event.payload).await?;
        tracing::info!(status = response.status, reason = %response.reason, "deploy setup answered");
        Ok::<_, lambda_runtime::Error>(response)
    }))
    .await
}
