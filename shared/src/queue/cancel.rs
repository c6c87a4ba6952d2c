//! Cancel: PENDING → CANCELLED in one conditional update.

use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::{find, from_row};
use crate::notification::Notification;
use crate::sql::{Statement, statement};

const CANCEL: Statement = statement!("notifications/cancel");

/// Cancels a PENDING notification; otherwise returns it unchanged (`None` when it does not
/// exist or, with `owner`, belongs to another key). The caller tells which from its status.
pub async fn cancel(
    db: &impl GenericClient,
    id: Uuid,
    owner: Option<Uuid>,
) -> Result<Option<Notification>, tokio_postgres::Error> {
    let statement = CANCEL.prepare(db).await?;
    match db.query_opt(&statement, &[&id, &owner]).await? {
        Some(row) => Ok(Some(from_row(&row)?)),
        None => find(db, id, owner).await,
    }
}
