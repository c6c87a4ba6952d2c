//! Notifications stopped before their provider call: the expiry step, and the audience
//! re-check at send (a preference or suppression may change during a long drain).

use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::Claimed;
use crate::domain::SuppressionReason;
use crate::notification::Status;
use crate::sql::{Statement, statement};

const EXPIRE: Statement = statement!("notifications/expire");
const RECHECK: Statement = statement!("notifications/recheck");

/// Why a claim was stopped at send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    Expired,
    Suppressed(SuppressionReason),
    /// The person was erased after the claim: cancelled, as erasure cancels what waits.
    Cancelled,
}

/// Turns up to `limit` PENDING notifications past their `expiresAt` into EXPIRED, with
/// their webhook events. Returns how many.
pub async fn expire(db: &impl GenericClient, limit: i64) -> Result<u64, tokio_postgres::Error> {
    let statement = EXPIRE.prepare(db).await?;
    let row = db.query_one(&statement, &[&limit]).await?;
    let expired: i64 = row.try_get("expired")?;
    Ok(expired.max(0) as u64)
}

/// Prepares the re-check once per connection (see [`super::prepare_fence`]).
pub(super) async fn prepare(
    db: &impl GenericClient,
) -> Result<tokio_postgres::Statement, tokio_postgres::Error> {
    RECHECK.prepare(db).await
}

/// The re-check at send for claims still held: those expired since the claim, or whose
/// address was suppressed or person opted out since enqueue, are finished here (EXPIRED
/// or SUPPRESSED, attempt refunded, webhook event written), and those whose person was
/// erased since are CANCELLED. `hashes` holds the keyed hash
/// of each claim's address, in `batch` order. Returns the ids stopped and why.
pub async fn recheck(
    db: &impl GenericClient,
    batch: &[&Claimed],
    hashes: &[String],
) -> Result<Vec<(Uuid, Stopped)>, tokio_postgres::Error> {
    if batch.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Uuid> = batch.iter().map(|c| c.id).collect();
    let tokens: Vec<Uuid> = batch.iter().map(|c| c.token).collect();
    let statement = RECHECK.prepare(db).await?;
    let rows = db.query(&statement, &[&ids, &tokens, &hashes]).await?;
    rows.iter()
        .map(|row| {
            let id: Uuid = row.try_get("id")?;
            let status: Status = row.try_get("status")?;
            let reason: Option<SuppressionReason> = row.try_get("suppressed_reason")?;
            Ok(match (status, reason) {
                (_, Some(reason)) => (id, Stopped::Suppressed(reason)),
                (Status::Cancelled, None) => (id, Stopped::Cancelled),
                _ => (id, Stopped::Expired),
            })
        })
        .collect()
}
