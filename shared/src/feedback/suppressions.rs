//! The suppression list as provider feedback writes it (the record statement adds invalid
//! recipients itself, in the same statement as the transition).

use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::SuppressionReason;
use crate::domain::Channel;
use crate::sql::{Statement, statement};

const ADD_REPORTED: Statement = statement!("suppressions/add_reported");

/// What adding a report's addresses changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Added {
    /// Addresses that were not listed before.
    pub added: u64,
    /// The notification that sent the reported message, when an attempt has its id.
    pub notification: Option<Uuid>,
}

/// Lists `addresses` (already in stored form) for email with `reason`; listed ones keep
/// their first reason.
pub async fn add_reported(
    db: &impl GenericClient,
    addresses: &[String],
    reason: SuppressionReason,
    message_id: &str,
) -> Result<Added, tokio_postgres::Error> {
    let statement = ADD_REPORTED.prepare(db).await?;
    let row = db
        .query_one(
            &statement,
            &[&Channel::Email, &addresses, &message_id, &reason.as_str()],
        )
        .await?;
    Ok(Added {
        added: u64::try_from(row.try_get::<_, i64>("added")?).unwrap_or_default(),
        notification: row.try_get("notification_id")?,
    })
}
