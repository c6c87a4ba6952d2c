//! `provider-events`: the target of the EventBridge rule for SES email events. Applies
//! each bounce, complaint and delivery to the suppression list and attempt history, and
//! returns a JSON summary of what changed.

use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use notify_shared::cold_start::{ColdStart, Needs};
use notify_shared::feedback::{Malformed, ProviderEventsFunction};
use notify_shared::telemetry;
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    telemetry::init_logging();
    let start = ColdStart::load(Needs {
        unsubscribe_secret: true,
    })
    .await?;
    let function = ProviderEventsFunction::new(&start)?;
    let function = &function;
    lambda_runtime::spawn_graceful_shutdown_handler(start.shutdown_hook()).await;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        match function.invoke(event.payload).await {
            Ok(outcome) => {
                tracing::info!(?outcome, "provider-events invocation finished");
                Ok(outcome)
            }
            Err(error) => {
                // The runtime reports this text: `describe` keeps row values out of it.
                let text = telemetry::describe(&error);
                tracing::error!(error = %text, "provider event not applied");
                // A malformed event fails the same way on every retry; a database error may not.
                let error_type = if error.is::<Malformed>() {
                    "MalformedEvent"
                } else {
                    "ProviderEventNotApplied"
                };
                Err(Diagnostic {
                    error_type: error_type.into(),
                    error_message: text,
                })
            }
        }
    }))
    .await
}
