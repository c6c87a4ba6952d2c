//! The template shown in a notification's representation, read for a page of them in one
//! statement (the representation's statements leave payloads alone, so notifications
//! without a template cost nothing more than this one index lookup).

use deadpool_postgres::GenericClient;
use serde_json::Value;
use uuid::Uuid;

use crate::content::Reference;
use crate::notification::Notification;
use crate::sql::{Statement, statement};

const TEMPLATE_REFS: Statement = statement!("notifications/template_refs");

/// Fills `template` and `locale` of those of `notifications` that use a template.
pub async fn show(
    db: &impl GenericClient,
    notifications: &mut [Notification],
) -> Result<(), tokio_postgres::Error> {
    if notifications.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = notifications.iter().map(|n| n.id).collect();
    let statement = TEMPLATE_REFS.prepare(db).await?;
    for row in db.query(&statement, &[&ids]).await? {
        let id: Uuid = row.try_get("id")?;
        let marker: Value = row.try_get("reference")?;
        if let (Some(reference), Some(notification)) = (
            Reference::from_marker(&marker),
            notifications.iter_mut().find(|n| n.id == id),
        ) {
            notification.template = Some(reference.shown());
            notification.locale = Some(reference.locale);
        }
    }
    Ok(())
}
