//! Attempt history: the provider calls of one notification (written by the record
//! statement, in the same statement as the transition), and the delivery time a provider
//! reports later.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use uuid::Uuid;

use crate::notification::format_time;
use crate::sql::{Statement, statement};

const LIST: Statement = statement!("delivery_attempts/list");
const MARK_DELIVERED: Statement = statement!("delivery_attempts/mark_delivered");

/// One provider call as `GET /notifications/{id}/attempts` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptRecord {
    pub attempt: i32,
    pub started_at: String,
    pub finished_at: String,
    pub outcome: String,
    pub provider_message_id: Option<String>,
    pub error: Option<String>,
    /// When the provider reported the message delivered (SES delivery events).
    pub delivered_at: Option<String>,
}

/// The provider calls of a notification, oldest first.
pub async fn attempts(
    db: &impl GenericClient,
    notification: Uuid,
) -> Result<Vec<AttemptRecord>, tokio_postgres::Error> {
    let statement = LIST.prepare(db).await?;
    db.query(&statement, &[&notification])
        .await?
        .iter()
        .map(|row| {
            let time = |column: &str| {
                row.try_get::<_, DateTime<Utc>>(column)
                    .map(|t| format_time(&t))
            };
            Ok(AttemptRecord {
                attempt: row.try_get("attempt")?,
                started_at: time("started_at")?,
                finished_at: time("finished_at")?,
                outcome: row.try_get("outcome")?,
                provider_message_id: row.try_get("provider_message_id")?,
                error: row.try_get("error")?,
                delivered_at: row
                    .try_get::<_, Option<DateTime<Utc>>>("delivered_at")?
                    .map(|t| format_time(&t)),
            })
        })
        .collect()
}

/// What a provider's delivery report changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryMark {
    /// Attempts that got their delivery time (0 when it was set already).
    pub marked: u64,
    /// The notification whose attempt sent the message; `None` when no attempt has its id.
    pub notification: Option<Uuid>,
}

/// Sets `delivered_at` of the attempt that sent provider message `message_id`, unless set.
pub async fn mark_delivered(
    db: &impl GenericClient,
    message_id: &str,
    at: DateTime<Utc>,
) -> Result<DeliveryMark, tokio_postgres::Error> {
    let statement = MARK_DELIVERED.prepare(db).await?;
    let row = db.query_one(&statement, &[&message_id, &at]).await?;
    Ok(DeliveryMark {
        marked: u64::try_from(row.try_get::<_, i64>("marked")?).unwrap_or_default(),
        notification: row.try_get("notification_id")?,
    })
}
