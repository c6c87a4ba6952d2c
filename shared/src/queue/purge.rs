//! Retention of finished notifications: bounded deletes, oldest first.

use std::time::Duration;

use deadpool_postgres::GenericClient;

use crate::sql::{Statement, statement};

const PURGE: Statement = statement!("notifications/purge");

/// What one purge deleted: notifications, and the webhook events that went with them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    pub notifications: u64,
    pub webhook_events: u64,
}

/// Deletes up to `limit` notifications finished longer ago than `finished` (SENT, FAILED,
/// CANCELLED, SUPPRESSED, EXPIRED) or `dead_lettered` (DEAD_LETTERED), with their attempts,
/// webhook events and reservations.
pub async fn purge(
    db: &impl GenericClient,
    finished: Duration,
    dead_lettered: Duration,
    limit: i64,
) -> Result<Purged, tokio_postgres::Error> {
    let statement = PURGE.prepare(db).await?;
    let finished = i64::try_from(finished.as_secs()).unwrap_or(i64::MAX);
    let dead_lettered = i64::try_from(dead_lettered.as_secs()).unwrap_or(i64::MAX);
    let row = db
        .query_one(&statement, &[&finished, &dead_lettered, &limit])
        .await?;
    let count = |column: &str| -> Result<u64, tokio_postgres::Error> {
        Ok(u64::try_from(row.try_get::<_, i64>(column)?).unwrap_or(0))
    };
    Ok(Purged {
        notifications: count("deleted")?,
        webhook_events: count("events")?,
    })
}
