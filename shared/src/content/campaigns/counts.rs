//! A campaign's notifications by status, as the triggers on `notifications` keep them in
//! `campaign_counts` (one row per campaign, status and connection shard). Reading them
//! costs a few rows whatever the campaign's size. The completion step reads the same rows
//! inside its own statement (`campaigns/finish.sql`); nothing else touches the table.

use std::collections::HashMap;

use deadpool_postgres::GenericClient;
use uuid::Uuid;

use crate::sql::{Statement, statement};

const READ: Statement = statement!("campaign_counts/read");

/// The notifications of each of `campaigns` by status, in one statement; a campaign
/// without notifications has no entry, a status none is in is left out.
pub async fn read(
    db: &impl GenericClient,
    campaigns: &[Uuid],
) -> Result<HashMap<Uuid, HashMap<String, i64>>, tokio_postgres::Error> {
    let mut counts: HashMap<Uuid, HashMap<String, i64>> = HashMap::new();
    if campaigns.is_empty() {
        return Ok(counts);
    }
    let ids: Vec<String> = campaigns.iter().map(Uuid::to_string).collect();
    let statement = READ.prepare(db).await?;
    for row in db.query(&statement, &[&ids]).await? {
        let campaign: String = row.try_get("campaign")?;
        // The statement matched the text of one of `campaigns`, so it parses.
        let Ok(campaign) = Uuid::parse_str(&campaign) else {
            continue;
        };
        counts
            .entry(campaign)
            .or_default()
            .insert(row.try_get("status")?, row.try_get("n")?);
    }
    Ok(counts)
}
