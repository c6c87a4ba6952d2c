//! Retention of finished notifications: bounded deletes, oldest first.

use std::time::Duration;

use deadpool_postgres::GenericClient;

use crate::sql::{Statement, statement};

const PURGE: Statement = statement!("notifications/purge");

/// Deletes up to `limit` notifications finished longer ago than `finished` (SENT, FAILED,
/// CANCELLED, SUPPRESSED, EXPIRED) or `dead_lettered` (DEAD_LETTERED), with their attempts,
/// webhook events and reservations. Returns how many went.
pub async fn purge(
    db: &impl GenericClient,
    finished: Duration,
    dead_lettered: Duration,
    limit: i64,
) -> Result<u64, tokio_postgres::Error> {
    let statement = PURGE.prepare(db).await?;
    let finished = i64::try_from(finished.as_secs()).unwrap_or(i64::MAX);
    let dead_lettered = i64::try_from(dead_lettered.as_secs()).unwrap_or(i64::MAX);
    let row = db
        .query_one(&statement, &[&finished, &dead_lettered, &limit])
        .await?;
    Ok(u64::try_from(row.try_get::<_, i64>("deleted")?).unwrap_or(0))
}
