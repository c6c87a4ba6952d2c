//! The redrive service: single and bulk redrive for the HTTP routes, and the paced,
//! resumable bulk redrive the `dlq-redrive` function runs. All share the statements in
//! `queue::redrive`.

use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use serde::Serialize;
use uuid::Uuid;

use crate::notification::{Channel, Notification, Status};
use crate::queue::{self, RedriveFilter};

/// At most this many notifications per bulk statement.
pub const MAX_BATCH: i64 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RedriveSummary {
    pub retried: u64,
    pub remaining: u64,
}

/// Result of redriving one notification.
#[derive(Debug, Clone, PartialEq)]
pub enum SingleRedrive {
    Redriven(Notification),
    /// Exists but is not FAILED or DEAD_LETTERED.
    WrongStatus(Notification),
    NotFound,
}

pub async fn redrive_one(
    pool: &Pool,
    id: Uuid,
    max_attempts: i32,
) -> Result<SingleRedrive, RedriveError> {
    let db = pool.get().await?;
    Ok(match queue::redrive_one(&db, id, max_attempts).await? {
        Some((notification, true)) => SingleRedrive::Redriven(notification),
        Some((notification, false)) => SingleRedrive::WrongStatus(notification),
        None => SingleRedrive::NotFound,
    })
}

/// One bulk step: up to `limit` (≤ [`MAX_BATCH`]) matching notifications, oldest first.
pub async fn redrive_batch(
    pool: &Pool,
    filter: &RedriveFilter,
    limit: i64,
    max_attempts: i32,
) -> Result<RedriveSummary, RedriveError> {
    let db = pool.get().await?;
    let retried =
        queue::redrive_matching(&db, filter, limit.clamp(1, MAX_BATCH), max_attempts).await?;
    let remaining = queue::count_matching(&db, filter).await?;
    Ok(RedriveSummary { retried, remaining })
}

/// How a paced redrive ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacedRedrive {
    pub summary: RedriveSummary,
    /// Stopped because the next batch would not start before `stop_at`.
    pub out_of_time: bool,
}

/// Redrives in batches of `batch_size`, at most `per_second` notifications a second,
/// until nothing matches or the next batch would start after `stop_at`. The first batch
/// always runs.
pub async fn redrive_paced(
    pool: &Pool,
    filter: &RedriveFilter,
    batch_size: i64,
    per_second: Option<u32>,
    max_attempts: i32,
    stop_at: Instant,
) -> Result<PacedRedrive, RedriveError> {
    let mut total = RedriveSummary {
        retried: 0,
        remaining: 0,
    };
    loop {
        let started = Instant::now();
        let step = redrive_batch(pool, filter, batch_size, max_attempts).await?;
        total.retried += step.retried;
        total.remaining = step.remaining;
        // Nothing left, or what is left is held by a concurrent redrive.
        if step.retried == 0 || step.remaining == 0 {
            return Ok(PacedRedrive {
                summary: total,
                out_of_time: false,
            });
        }
        // Pace: a batch of n at r per second takes n / r seconds.
        let pause = per_second
            .filter(|rate| *rate > 0)
            .map(|rate| Duration::from_secs_f64(step.retried as f64 / f64::from(rate)))
            .unwrap_or_default()
            .saturating_sub(started.elapsed());
        if Instant::now() + pause >= stop_at {
            return Ok(PacedRedrive {
                summary: total,
                out_of_time: true,
            });
        }
        tokio::time::sleep(pause).await;
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RedriveError {
    #[error("database unavailable: {0}")]
    Pool(#[from] deadpool_postgres::PoolError),
    #[error("database error: {0}")]
    Database(#[from] tokio_postgres::Error),
}

/// The `dlq-redrive` function's event.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RedriveRequest {
    #[serde(default = "dead_lettered")]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipient: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_contains: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_before: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_after: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(default = "default_batch_size")]
    pub batch_size: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_second: Option<u32>,
    /// Run at this time instead of now (a one-time schedule is created).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<chrono::DateTime<chrono::Utc>>,
    /// Set by this function on the input of the schedules it creates, so the invocation
    /// they trigger can delete its schedule when done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_name: Option<String>,
}

fn dead_lettered() -> String {
    Status::DeadLettered.as_str().to_string()
}

fn default_batch_size() -> i64 {
    100
}

impl RedriveRequest {
    /// Checks every field; all problems are reported together.
    pub fn filter(&self) -> Result<RedriveFilter, String> {
        let mut problems = Vec::new();
        let status = match Status::parse(&self.status) {
            Some(status @ (Status::DeadLettered | Status::Failed)) => Some(status),
            _ => {
                problems.push("status must be DEAD_LETTERED or FAILED".to_string());
                None
            }
        };
        let channel = match self.channel.as_deref().map(Channel::parse) {
            None => None,
            Some(Some(channel)) => Some(channel),
            Some(None) => {
                problems.push("channel must be EMAIL, SMS or PUSH".to_string());
                None
            }
        };
        if !(1..=MAX_BATCH).contains(&self.batch_size) {
            problems.push(format!("batchSize must be between 1 and {MAX_BATCH}"));
        }
        if self.per_second == Some(0) {
            problems.push("perSecond must be at least 1".to_string());
        }
        for (name, value) in [
            ("recipient", &self.recipient),
            ("errorContains", &self.error_contains),
        ] {
            if value
                .as_deref()
                .is_some_and(|v| v.is_empty() || v.contains('\0'))
            {
                problems.push(format!("{name} must be a non-empty string without NUL"));
            }
        }
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        Ok(RedriveFilter {
            status,
            recipient: self.recipient.clone(),
            channel,
            error_contains: self.error_contains.clone(),
            created_before: self.created_before,
            created_after: self.created_after,
        })
    }
}

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
    scheduler: &crate::schedule::Scheduler,
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
    scheduler: &crate::schedule::Scheduler,
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
