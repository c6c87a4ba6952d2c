//! Notifications that carry content references: the template shown in a notification's
//! representation (read for a page of them in one statement; the representation's
//! statements leave payloads alone), and a campaign's notifications still PENDING, found
//! by the campaign id of their reference (index `notifications_by_campaign`).

use deadpool_postgres::GenericClient;
use serde_json::Value;
use uuid::Uuid;

use crate::content::Reference;
use crate::notification::Notification;
use crate::sql::{Statement, statement};

const TEMPLATE_REFS: Statement = statement!("notifications/template_refs");
const CANCEL_CAMPAIGN: Statement = statement!("notifications/cancel_campaign");

/// Fills `template` and `locale` of those of `notifications` that use a template.
pub async fn show_templates(
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

/// Cancels every notification of `campaign` still PENDING, `batch` per statement,
/// until none is left; returns how many.
pub async fn cancel_campaign(
    db: &impl GenericClient,
    campaign: Uuid,
    batch: i64,
) -> Result<i64, tokio_postgres::Error> {
    let statement = CANCEL_CAMPAIGN.prepare(db).await?;
    let campaign = campaign.to_string();
    let mut total = 0;
    loop {
        let cancelled: i64 = db
            .query_one(&statement, &[&campaign, &batch])
            .await?
            .try_get("cancelled")?;
        if cancelled == 0 {
            return Ok(total);
        }
        total += cancelled;
    }
}
