//! Retention: the maintenance step that keeps the tables flat. Finished notifications
//! (with their attempts, webhook events and reservations) and delivered webhook events are
//! deleted in bounded statements, oldest first, within a time budget per step, so a
//! backlog of old rows is worked off over several steps and never in one giant delete.
//! The statements live with their tables (`queue::purge`, `webhook::outbox::purge`); this
//! module paces them and reads the running totals (`retention_counts`).

use std::time::{Duration, Instant};

use deadpool_postgres::{GenericClient, Pool};
use serde::Serialize;

use crate::config::RetentionConfig;
use crate::sql::{Statement, statement};
use crate::{queue, webhook};

const DELETED_SO_FAR: Statement = statement!("retention_counts/read");

/// Rows per delete statement (the spec's bound is 5,000).
pub const BATCH: i64 = 5_000;
/// How long one step may keep deleting before it hands the connection back.
pub const STEP_BUDGET: Duration = Duration::from_millis(250);
/// How often a sweeper runs the step.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// Rows one step (or the whole history, in [`deleted_so_far`]) deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Deleted {
    pub notifications_deleted: u64,
    pub webhook_events_deleted: u64,
}

/// One step: full batches are repeated while the budget lasts; a short batch means the
/// table is caught up.
pub async fn step(pool: &Pool, retention: &RetentionConfig) -> anyhow::Result<Deleted> {
    let started = Instant::now();
    let db = pool.get().await?;
    let mut deleted = Deleted::default();
    loop {
        let gone =
            queue::purge(&db, retention.notifications, retention.dead_letters, BATCH).await?;
        deleted.notifications_deleted += gone;
        if gone < BATCH as u64 || started.elapsed() >= STEP_BUDGET {
            break;
        }
    }
    loop {
        let gone = webhook::outbox::purge(&db, retention.webhook_events, BATCH).await?;
        deleted.webhook_events_deleted += gone;
        if gone < BATCH as u64 || started.elapsed() >= STEP_BUDGET {
            break;
        }
    }
    Ok(deleted)
}

/// Every row the retention step has deleted since the database was created.
pub async fn deleted_so_far(db: &impl GenericClient) -> Result<Deleted, tokio_postgres::Error> {
    let statement = DELETED_SO_FAR.prepare(db).await?;
    let row = db.query_one(&statement, &[]).await?;
    let count = |column: &str| -> Result<u64, tokio_postgres::Error> {
        Ok(u64::try_from(row.try_get::<_, i64>(column)?).unwrap_or(0))
    };
    Ok(Deleted {
        notifications_deleted: count("notifications")?,
        webhook_events_deleted: count("webhook_events")?,
    })
}
