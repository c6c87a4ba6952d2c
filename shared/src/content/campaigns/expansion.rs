//! A campaign's expansion: one chunk of its audience per transaction, the notifications
//! inserted and the checkpoint advanced together, so a worker killed mid-chunk leaves
//! nothing half done and the next step resumes from the checkpoint.

use chrono::Utc;
use deadpool_postgres::Client;

use super::{CHUNK, Campaign, templates};
use crate::audience::profiles;
use crate::domain::Class;
use crate::intake::request::{CreateRequest, RequestTarget, TemplateUse};
use crate::queue::{self, Due};
use crate::sql::{Statement, statement};

const NEXT_CHUNK: Statement = statement!("campaigns/next_chunk");
const ADVANCE: Statement = statement!("campaigns/advance");

/// Expands one chunk of the oldest campaign no other worker is expanding, in one
/// transaction on `db`; returns the recipients it covered, `None` when no campaign is
/// expanding. `secret` keys the suppression list's hashes; `max_attempts` is what intake
/// gives. The caller keeps `db` from chunk to chunk: taking a connection for each chunk
/// from the pool the delivery lanes share made each chunk wait for one (in B9, reading a
/// page took 24 ms a chunk with a connection taken per chunk, 5.5 ms with one kept).
pub async fn expand_chunk(
    db: &mut Client,
    secret: &[u8],
    max_attempts: i32,
) -> anyhow::Result<Option<usize>> {
    let transaction = db.transaction().await?;
    // The chunk's commit does not wait for its WAL to reach the disk. A crash that loses
    // it loses the checkpoint with it, so the chunk is expanded again, keys and all; and
    // none of its notifications can have been sent: a claim that saw them commits after
    // it, and flushing the claim's commit flushes the chunk's.
    transaction
        .batch_execute("SET LOCAL synchronous_commit = off")
        .await?;
    let statement = NEXT_CHUNK.prepare(&transaction).await?;
    let chunk = i32::try_from(CHUNK).unwrap_or(i32::MAX);
    let Some(row) = transaction.query_opt(&statement, &[&chunk]).await? else {
        return Ok(None);
    };
    let campaign = Campaign::from_row(&row)?;
    let cursor: Option<String> = row.try_get("cursor_recipient")?;
    let ids: Vec<String> = if campaign.all_recipients {
        profiles::page_ids(&transaction, campaign.owner, cursor.as_deref(), CHUNK).await?
    } else {
        row.try_get("chunk")?
    };
    let exhausted = if campaign.all_recipients {
        (ids.len() as i64) < CHUNK
    } else {
        i64::from(campaign.expanded) + ids.len() as i64 >= i64::from(campaign.audience_size)
    };
    let version = templates::find(
        &transaction,
        &campaign.template_id,
        Some(campaign.template_version),
    )
    .await?
    .ok_or_else(|| anyhow::anyhow!("campaign {} names a missing template", campaign.id))?;
    let requests: Vec<CreateRequest> = ids
        .iter()
        .map(|recipient| CreateRequest {
            target: RequestTarget::Profile(recipient.clone()),
            channel: campaign.channel,
            payload: campaign.data.clone(),
            priority: campaign.priority,
            idempotency_key: format!("campaign:{}:{recipient}", campaign.id),
            due: campaign.send_at.map_or(Due::AfterSeconds(0), Due::At),
            send_at: campaign.send_at,
            delay_seconds: None,
            class: Class::Bulk,
            category: campaign.category.clone(),
            expiry: None,
            template: Some(TemplateUse {
                id: campaign.template_id.clone(),
                version: Some(campaign.template_version),
                locale: None,
                campaign: Some(campaign.id),
                pinned: Some(version.clone()),
            }),
        })
        .collect();
    let owner_key = (!campaign.owner.is_nil()).then_some(campaign.owner);
    let rows = crate::intake::admit::admit(
        &transaction,
        secret,
        owner_key,
        requests,
        max_attempts,
        Utc::now(),
    )
    .await?;
    queue::insert_batch(&transaction, &rows).await?;
    // After the first chunk is in, not before: a first chunk that keeps failing (a missing
    // template, say) is retried every 250 ms, and must not analyze the table each time.
    if campaign.all_recipients && cursor.is_none() {
        profiles::analyze(&transaction).await?;
    }
    let statement = ADVANCE.prepare(&transaction).await?;
    let expanded = i32::try_from(ids.len()).unwrap_or(i32::MAX);
    transaction
        .execute(
            &statement,
            &[
                &campaign.id,
                &expanded,
                &ids.last().or(cursor.as_ref()),
                &exhausted,
            ],
        )
        .await?;
    transaction.commit().await?;
    Ok(Some(ids.len()))
}
