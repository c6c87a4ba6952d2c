//! Attempt history: the provider calls of one notification (written by the record
//! statement, in the same statement as the transition).

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use uuid::Uuid;

use crate::notification::format_time;
use crate::sql::{Statement, statement};

const LIST: Statement = statement!("delivery_attempts/list");

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
