//! The only code that runs SQL on the `notifications` table (its statements are the files
//! under `shared/sql/notifications/`):
//!
//! - [`insert`]: create one or a batch, with the database deciding idempotency;
//! - [`read`]: one notification, and keyset pages of them;
//! - [`cancel`]: PENDING → CANCELLED;
//! - [`claim`]: the worker's claim, start fence and release;
//! - [`record`]: the worker's results, and recovery of expired claims;
//! - [`redrive`]: the operator's way back from FAILED and DEAD_LETTERED;
//! - [`stats`]: aggregates for metrics;
//! - [`purge`]: retention, deleting what finished long ago;
//! - [`content`]: template references of the representation, a campaign's counts and cancel;
//! - [`attempts`]: attempt history (`delivery_attempts`, written by `record`), and the
//!   delivery time provider feedback reports.
//!
//! Every transition that leaves PROCESSING names the claim token it expects; a stale
//! worker's statement matches no row and changes nothing.

mod attempts;
mod cancel;
mod claim;
mod content;
mod insert;
mod purge;
mod read;
mod recheck;
mod record;
mod redrive;
pub mod stats;

pub use attempts::{AttemptRecord, DeliveryMark, attempts, mark_delivered};
pub use cancel::cancel;
pub use claim::{
    ClaimMode, Claimed, Fenced, Limit, PacedClaim, claim, claim_paced, fence, prepare_fence,
    release, start_fence,
};
pub use content::{cancel_campaign, show_templates};
pub use insert::{BatchOutcome, Due, Expiry, InsertOutcome, NewNotification, insert, insert_batch};
pub use purge::{Purged, purge};
pub use read::{Cursor, ListFilter, ListPage, cursor_time, find, list};
pub use recheck::{Stopped, expire, recheck};
pub use record::{Disposition, RecordSummary, Recovered, Settled, record, recover_expired};
pub use redrive::{RedriveFilter, count_matching, redrive_matching, redrive_one};

use tokio_postgres::Row;

use crate::notification::Notification;

/// The channel sweepers LISTEN on; intake and redrive NOTIFY it (in their statements) when
/// work is due now.
pub const WAKE_CHANNEL: &str = "notify_queue_due";

/// Maps a row holding the representation's columns, read by name.
pub(crate) fn from_row(row: &Row) -> Result<Notification, tokio_postgres::Error> {
    Ok(Notification {
        id: row.try_get("id")?,
        idempotency_key: row.try_get("idempotency_key")?,
        recipient: row.try_get("recipient")?,
        channel: row.try_get("channel")?,
        priority: row.try_get("priority")?,
        status: row.try_get("status")?,
        scheduled_at: row.try_get("scheduled_at")?,
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
        provider_message_id: row.try_get("provider_message_id")?,
        class: row.try_get("class")?,
        category: row.try_get("category")?,
        recipient_id: row.try_get("recipient_id")?,
        expires_at: row.try_get("expires_at")?,
        suppressed_at: row.try_get("suppressed_at")?,
        suppressed_reason: row.try_get("suppressed_reason")?,
        expired_at: row.try_get("expired_at")?,
        quiet_hours_deferred_from: row.try_get("quiet_hours_deferred_from")?,
        // The representation's statements do not read payloads; see `show_templates`.
        template: None,
        locale: None,
    })
}

/// Milliseconds as the statements take them (`int8`).
pub(crate) fn millis(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// A count from SQL (`int8`) as an unsigned number.
pub(crate) fn count(row: &Row, column: &str) -> Result<u64, tokio_postgres::Error> {
    Ok(u64::try_from(row.try_get::<_, i64>(column)?).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    /// Statements that wake sweepers spell the channel the listener uses.
    #[test]
    fn wake_ups_use_the_listened_channel() {
        for text in [
            include_str!("../../sql/notifications/insert.sql"),
            include_str!("../../sql/notifications/insert_batch.sql"),
            include_str!("../../sql/notifications/redrive_one.sql"),
            include_str!("../../sql/notifications/redrive_matching.sql"),
        ] {
            assert!(text.contains(&format!("pg_notify('{}'", super::WAKE_CHANNEL)));
        }
    }
}
