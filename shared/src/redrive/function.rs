//! The `dlq-redrive` function: its state, built once per container, and one invocation.

use std::time::{Duration, Instant};

use anyhow::Context;
use deadpool_postgres::Pool;
use serde::Serialize;
use uuid::Uuid;

use super::{RedriveRequest, Scheduler, redrive_paced};
use crate::cold_start::ColdStart;
use crate::{deadline, metrics, queue};

/// What one `dlq-redrive` invocation did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RedriveResponse {
    pub retried: u64,
    pub remaining: u64,
    /// The one-time schedule created for a deferred request or a continuation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduled: Option<ScheduledRun>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledRun {
    pub name: String,
    pub at: String,
}

/// How long after running out of time a redrive continues.
pub const CONTINUATION_DELAY: Duration = Duration::from_secs(60);

/// Runs one `dlq-redrive` invocation: defer it when `at` is in the future, otherwise
/// redrive in paced batches until done or `stop_at`, and schedule a continuation when
/// work is left. The schedule that triggered this run (if any) is deleted at the end.
pub async fn handle_request(
    pool: &Pool,
    scheduler: &Scheduler,
    request: RedriveRequest,
    function_arn: &str,
    max_attempts: i32,
    stop_at: Instant,
) -> anyhow::Result<RedriveResponse> {
    let filter = request
        .filter()
        .map_err(|problems| anyhow::anyhow!("invalid redrive request: {problems}"))?;
    let now = chrono::Utc::now();
    if let Some(at) = request.at.filter(|at| *at > now) {
        let remaining = queue::count_matching(&pool.get().await?, &filter).await?;
        let scheduled = schedule_run(scheduler, &request, at, function_arn).await?;
        return Ok(RedriveResponse {
            retried: 0,
            remaining,
            scheduled: Some(scheduled),
        });
    }

    let paced = redrive_paced(
        pool,
        &filter,
        request.batch_size,
        request.per_second,
        max_attempts,
        stop_at,
    )
    .await?;
    let summary = paced.summary;
    let mut scheduled = None;
    if paced.out_of_time {
        let at = now + chrono::TimeDelta::from_std(CONTINUATION_DELAY).unwrap_or_default();
        scheduled = Some(schedule_run(scheduler, &request, at, function_arn).await?);
    }
    if let Some(name) = &request.schedule_name {
        scheduler.delete(name).await?;
    }
    Ok(RedriveResponse {
        retried: summary.retried,
        remaining: summary.remaining,
        scheduled,
    })
}

/// Schedules this request to run once at `at` (without `at`, so it runs when invoked).
async fn schedule_run(
    scheduler: &Scheduler,
    request: &RedriveRequest,
    at: chrono::DateTime<chrono::Utc>,
    function_arn: &str,
) -> anyhow::Result<ScheduledRun> {
    let name = format!("notify-redrive-{}", Uuid::new_v4().simple());
    let input = RedriveRequest {
        at: None,
        schedule_name: Some(name.clone()),
        ..request.clone()
    };
    let input = serde_json::to_string(&input)?;
    scheduler
        .schedule_once(&name, at, function_arn, &input)
        .await?;
    tracing::info!(schedule = %name, at = %at, "redrive scheduled");
    Ok(ScheduledRun {
        name,
        at: crate::notification::format_time(&at),
    })
}

/// What `dlq-redrive` needs, built once per container.
pub struct RedriveFunction {
    pool: Pool,
    scheduler: Scheduler,
    max_attempts: i32,
}

impl RedriveFunction {
    /// Builds the pool (connections open lazily) and the Scheduler client.
    pub async fn new(start: &ColdStart) -> anyhow::Result<Self> {
        let config = &start.config;
        Ok(RedriveFunction {
            pool: start.pool()?,
            scheduler: Scheduler::from_env(config.scheduler.clone()).await,
            max_attempts: config.retry.max_attempts(),
        })
    }

    /// One invocation: `payload` is the event (an operator's request or the input of a
    /// schedule this function created); `function_arn` is this function, the target of
    /// any schedule it creates.
    pub async fn invoke(
        &self,
        payload: serde_json::Value,
        function_arn: &str,
        deadline: Instant,
    ) -> anyhow::Result<RedriveResponse> {
        let request: RedriveRequest =
            serde_json::from_value(payload).context("invalid redrive request")?;
        let response = handle_request(
            &self.pool,
            &self.scheduler,
            request,
            function_arn,
            self.max_attempts,
            deadline::reserve(deadline, Duration::ZERO),
        )
        .await?;
        metrics::emf::emit_redrive(response.retried, response.remaining);
        Ok(response)
    }
}
