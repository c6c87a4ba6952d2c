//! A campaign's expansion: one chunk of its audience per transaction, the notifications
//! inserted and the checkpoint advanced together, so a worker killed mid-chunk leaves
//! nothing half done and the next step resumes from the checkpoint.
//!
//! While a chunk's insert runs, the chunk after it is prepared on a second connection
//! when the pool has one free: its recipient ids read and put through the audience rules.
//! Preparing only reads, so it needs no transaction of its own; the next chunk uses it
//! only if it starts from the very checkpoint it was prepared for with the very recipient
//! ids it reads now, and prepares afresh otherwise (another worker moved the campaign on,
//! or a person was erased and left the audience). In B9 the reads and the work between
//! the statements were a quarter of a chunk's time.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use deadpool_postgres::{Client, GenericClient, Pool, Timeouts};
use uuid::Uuid;

use super::{CHUNK, Campaign, templates};
use crate::audience::profiles;
use crate::content::templates::Version;
use crate::domain::Class;
use crate::intake::request::{CreateRequest, RequestTarget, TemplateUse};
use crate::queue::{self, Due, NewNotification};
use crate::sql::{Statement, statement};

const NEXT_CHUNK: Statement = statement!("campaigns/next_chunk");
const ADVANCE: Statement = statement!("campaigns/advance");

/// Where a chunk starts: the campaign, how many of its recipients were expanded before
/// it, and the last recipient id expanded (a campaign of every profile pages from it).
#[derive(Debug, Clone, PartialEq)]
struct Checkpoint {
    campaign: Uuid,
    expanded: i32,
    cursor: Option<String>,
}

/// A chunk's recipients and the rows the audience rules made of them, ready to insert.
struct Prepared {
    start: Checkpoint,
    ids: Vec<String>,
    rows: Vec<NewNotification>,
}

/// Expands campaigns chunk by chunk; kept from chunk to chunk for the chunk it prepared
/// ahead and the pinned template version it read.
pub struct Expander {
    secret: Vec<u8>,
    max_attempts: i32,
    next: Option<Prepared>,
    /// Versions are immutable: the one a campaign pins is read once.
    version: Option<(String, i32, Arc<Version>)>,
}

impl Expander {
    /// `secret` keys the suppression list's hashes; `max_attempts` is what intake gives.
    pub fn new(secret: &[u8], max_attempts: i32) -> Self {
        Expander {
            secret: secret.to_vec(),
            max_attempts,
            next: None,
            version: None,
        }
    }

    /// Expands one chunk of the oldest campaign no other worker is expanding, in one
    /// transaction on `db`; returns the recipients it covered, `None` when no campaign is
    /// expanding. The caller keeps `db` from chunk to chunk: taking a connection for each
    /// chunk from the pool the delivery lanes share made each chunk wait for one (in B9,
    /// reading a page took 24 ms a chunk with a connection taken per chunk, 5.5 ms with one
    /// kept). The chunk after this one is prepared on a connection of `pool` only if one is
    /// free at once, for the same reason.
    pub async fn expand_chunk(
        &mut self,
        db: &mut Client,
        pool: &Pool,
    ) -> anyhow::Result<Option<usize>> {
        let transaction = db.transaction().await?;
        // The chunk's commit does not wait for its WAL to reach the disk. A crash that
        // loses it loses the checkpoint with it, so the chunk is expanded again, keys and
        // all; and none of its notifications can have been sent: a claim that saw them
        // commits after it, and flushing the claim's commit flushes the chunk's.
        transaction
            .batch_execute("SET LOCAL synchronous_commit = off")
            .await?;
        let statement = NEXT_CHUNK.prepare(&transaction).await?;
        let chunk = i32::try_from(CHUNK).unwrap_or(i32::MAX);
        let Some(row) = transaction.query_opt(&statement, &[&chunk]).await? else {
            self.next = None;
            return Ok(None);
        };
        let campaign = Campaign::from_row(&row)?;
        let start = Checkpoint {
            campaign: campaign.id,
            expanded: campaign.expanded,
            cursor: row.try_get("cursor_recipient")?,
        };
        let version = self.version(&transaction, &campaign).await?;
        let ids = if campaign.all_recipients {
            profiles::page_ids(&transaction, campaign.owner, start.cursor.as_deref(), CHUNK).await?
        } else {
            row.try_get("chunk")?
        };
        let prepared = match self.next.take() {
            // The chunk prepared ahead holds only if no other worker moved the campaign on
            // and nobody left its audience since (an erased person is no longer in `ids`).
            Some(prepared) if prepared.start == start && prepared.ids == ids => prepared,
            _ => {
                self.prepare(&transaction, &campaign, &version, start.clone(), ids)
                    .await?
            }
        };
        let exhausted = if campaign.all_recipients {
            (prepared.ids.len() as i64) < CHUNK
        } else {
            i64::from(campaign.expanded) + prepared.ids.len() as i64
                >= i64::from(campaign.audience_size)
        };
        let expanded = i32::try_from(prepared.ids.len()).unwrap_or(i32::MAX);
        let cursor = prepared.ids.last().cloned().or(start.cursor.clone());
        let following = Checkpoint {
            campaign: campaign.id,
            expanded: campaign.expanded.saturating_add(expanded),
            cursor: cursor.clone(),
        };
        let listed_next: Vec<String> = if campaign.all_recipients {
            Vec::new()
        } else {
            row.try_get("following")?
        };
        let spare = if exhausted {
            None
        } else {
            let at_once = Timeouts {
                wait: Some(Duration::ZERO),
                ..pool.timeouts()
            };
            pool.timeout_get(&at_once).await.ok()
        };

        // This chunk's insert, and meanwhile the next chunk's reads on the spare connection.
        let ahead = async {
            let spare = spare?;
            let ids = if campaign.all_recipients {
                profiles::page_ids(&spare, campaign.owner, cursor.as_deref(), CHUNK)
                    .await
                    .ok()?
            } else {
                listed_next
            };
            self.prepare(&spare, &campaign, &version, following, ids)
                .await
                .ok()
        };
        let (inserted, ahead) =
            tokio::join!(queue::insert_batch(&transaction, &prepared.rows), ahead);
        inserted?;

        // After the first chunk is in, not before: a first chunk that keeps failing (a
        // missing template, say) is retried every 250 ms, and must not analyze the table
        // each time.
        if campaign.all_recipients && start.cursor.is_none() {
            profiles::analyze(&transaction).await?;
        }
        let statement = ADVANCE.prepare(&transaction).await?;
        transaction
            .execute(&statement, &[&campaign.id, &expanded, &cursor, &exhausted])
            .await?;
        transaction.commit().await?;
        self.next = ahead;
        Ok(Some(prepared.ids.len()))
    }

    /// The template version `campaign` pins, read once.
    async fn version(
        &mut self,
        db: &impl GenericClient,
        campaign: &Campaign,
    ) -> anyhow::Result<Arc<Version>> {
        if let Some((id, number, version)) = &self.version
            && *id == campaign.template_id
            && *number == campaign.template_version
        {
            return Ok(version.clone());
        }
        let version = templates::find(db, &campaign.template_id, Some(campaign.template_version))
            .await?
            .ok_or_else(|| anyhow::anyhow!("campaign {} names a missing template", campaign.id))?;
        self.version = Some((
            campaign.template_id.clone(),
            campaign.template_version,
            version.clone(),
        ));
        Ok(version)
    }

    /// The rows of recipients `ids` of `campaign`, through the audience rules (read on `db`).
    async fn prepare(
        &self,
        db: &impl GenericClient,
        campaign: &Campaign,
        version: &Arc<Version>,
        start: Checkpoint,
        ids: Vec<String>,
    ) -> Result<Prepared, tokio_postgres::Error> {
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
            db,
            &self.secret,
            owner_key,
            requests,
            self.max_attempts,
            Utc::now(),
        )
        .await?;
        Ok(Prepared { start, ids, rows })
    }
}
