//! The redrive service: single and bulk redrive for the HTTP routes, and the paced,
//! resumable bulk redrive the `dlq-redrive` function runs ([`function`]), deferred and
//! continued through one-time schedules ([`schedule`]). All share the statements of
//! `queue::redrive`.

pub mod function;
mod request;
pub mod schedule;

pub use function::{RedriveFunction, RedriveResponse, ScheduledRun};
pub use request::{ERROR_TEXT_MAX, RedriveRequest};
pub use schedule::Scheduler;

use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use serde::Serialize;
use uuid::Uuid;

use crate::notification::Notification;
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
    /// Exists but is not FAILED or DEAD_LETTERED, or its recipient was erased.
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
