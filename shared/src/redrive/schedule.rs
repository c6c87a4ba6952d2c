//! One-time EventBridge Scheduler schedules, used by `dlq-redrive` to defer a redrive and
//! to continue one that ran out of time. Each schedule invokes the function once with a
//! JSON input and is deleted after it ran.

use anyhow::Context;
use aws_sdk_scheduler::types::{
    ActionAfterCompletion, FlexibleTimeWindow, FlexibleTimeWindowMode, Target,
};
use chrono::{DateTime, Utc};

use crate::config::SchedulerConfig;

pub struct Scheduler {
    client: aws_sdk_scheduler::Client,
    config: SchedulerConfig,
}

impl Scheduler {
    /// Uses the standard AWS configuration chain (`AWS_ENDPOINT_URL` points it at a local
    /// Scheduler API in tests).
    pub async fn from_env(config: SchedulerConfig) -> Self {
        let aws = aws_config::from_env()
            .http_client(crate::provider::aws_http::client(None))
            .load()
            .await;
        Scheduler {
            client: aws_sdk_scheduler::Client::new(&aws),
            config,
        }
    }

    /// Uses an already configured client (tests point one at a local Scheduler API).
    pub fn with_client(client: aws_sdk_scheduler::Client, config: SchedulerConfig) -> Self {
        Scheduler { client, config }
    }

    pub fn client(&self) -> &aws_sdk_scheduler::Client {
        &self.client
    }

    pub fn group(&self) -> &str {
        &self.config.group
    }

    /// The `at(...)` expression for `time`, in UTC to the second.
    pub fn at_expression(time: DateTime<Utc>) -> String {
        format!("at({})", time.format("%Y-%m-%dT%H:%M:%S"))
    }

    /// Creates a schedule that invokes `target_arn` once at `at` with `input`.
    pub async fn schedule_once(
        &self,
        name: &str,
        at: DateTime<Utc>,
        target_arn: &str,
        input: &str,
    ) -> anyhow::Result<()> {
        let role_arn = self
            .config
            .role_arn
            .as_deref()
            .context("SCHEDULER_ROLE_ARN is required to schedule a redrive")?;
        let target = Target::builder()
            .arn(target_arn)
            .role_arn(role_arn)
            .input(input)
            .build()
            .context("invalid schedule target")?;
        let window = FlexibleTimeWindow::builder()
            .mode(FlexibleTimeWindowMode::Off)
            .build()
            .context("invalid schedule window")?;
        self.client
            .create_schedule()
            .name(name)
            .group_name(&self.config.group)
            .schedule_expression(Self::at_expression(at))
            .schedule_expression_timezone("UTC")
            .flexible_time_window(window)
            .target(target)
            .action_after_completion(ActionAfterCompletion::Delete)
            .description("Notify Queue: one-time dead-letter redrive")
            .send()
            .await
            .with_context(|| format!("cannot create schedule {name}"))?;
        Ok(())
    }

    /// Deletes a schedule; one that is already gone is fine.
    pub async fn delete(&self, name: &str) -> anyhow::Result<()> {
        match self
            .client
            .delete_schedule()
            .name(name)
            .group_name(&self.config.group)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|e| e.is_resource_not_found_exception()) =>
            {
                Ok(())
            }
            Err(error) => Err(error).with_context(|| format!("cannot delete schedule {name}")),
        }
    }
}
