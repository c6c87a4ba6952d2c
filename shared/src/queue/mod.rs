//! The only SQL on the `notifications` table: intake (insert, read, list, cancel) and the
//! worker's guarded transitions (claim, start fence, record, release, recover), and the
//! operator's redrive.
//!
//! Every transition that leaves PROCESSING names the claim token it expects; a stale
//! worker's statement matches no row and changes nothing.

mod records;
mod redrive;
pub mod stats;
mod transitions;

pub use records::{
    BatchOutcome, Cursor, Due, InsertOutcome, ListFilter, ListPage, NewNotification, cancel, find,
    insert, insert_batch, list,
};
pub use redrive::{RedriveFilter, count_matching, redrive_matching, redrive_one};
pub use transitions::{
    Claimed, Disposition, RecordSummary, Recovered, claim, record, recover_expired, release,
    start_fence,
};

use chrono::{DateTime, Utc};
use tokio_postgres::Row;

use crate::notification::{Channel, Notification, Priority, Status};

/// The columns that make up a [`Notification`], in the order [`from_row`] reads them.
pub(crate) const NOTIFICATION_COLUMNS: &str = "id, idempotency_key, recipient, channel, priority, \
    status, scheduled_at, next_attempt_at, attempt_count, max_attempts, last_error, sent_at, \
    failed_at, dead_lettered_at, cancelled_at, redrive_count, last_redriven_at, created_at, updated_at";

/// Maps a row selected with [`NOTIFICATION_COLUMNS`]. The CHECK constraints guarantee the
/// enumerations; an unknown value means the schema and the code disagree.
pub(crate) fn from_row(row: &Row) -> Result<Notification, tokio_postgres::Error> {
    let channel: String = row.try_get("channel")?;
    let priority: i16 = row.try_get("priority")?;
    let status: String = row.try_get("status")?;
    Ok(Notification {
        id: row.try_get("id")?,
        idempotency_key: row.try_get("idempotency_key")?,
        recipient: row.try_get("recipient")?,
        channel: Channel::parse(&channel).map_or("UNKNOWN", Channel::as_str),
        priority: Priority::from_rank(priority).map_or("UNKNOWN", Priority::as_str),
        status: Status::parse(&status).map_or("UNKNOWN", Status::as_str),
        scheduled_at: row.try_get::<_, DateTime<Utc>>("scheduled_at")?,
        next_attempt_at: row.try_get("next_attempt_at")?,
        attempt_count: row.try_get("attempt_count")?,
        max_attempts: row.try_get("max_attempts")?,
        last_error: row.try_get("last_error")?,
        sent_at: row.try_get("sent_at")?,
        failed_at: row.try_get("failed_at")?,
        dead_lettered_at: row.try_get("dead_lettered_at")?,
        cancelled_at: row.try_get("cancelled_at")?,
        redrive_count: row.try_get("redrive_count")?,
        last_redriven_at: row.try_get("last_redriven_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// The channel sweepers LISTEN on; intake and redrive NOTIFY it when work is due now.
pub const WAKE_CHANNEL: &str = "notify_queue_due";
