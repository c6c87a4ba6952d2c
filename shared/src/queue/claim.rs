//! The worker's claim, the start fence before the provider call, and handing claims back.
//! Each statement handles a whole batch in one round trip.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde_json::Value;
use uuid::Uuid;

use super::millis;
use crate::domain::Class;
use crate::notification::{Channel, Priority};
use crate::sql::{Statement, statement};

const CLAIM_CHANNEL: Statement = statement!("notifications/claim_channel");
const CLAIM_PACED: Statement = statement!("notifications/claim_paced");
const START_FENCE: Statement = statement!("notifications/start_fence");
const RELEASE: Statement = statement!("notifications/release");
const LOCK_CHANNEL: Statement = statement!("channel_health/lock");

/// A notification this worker holds: PROCESSING with `token`.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: Uuid,
    pub token: Uuid,
    pub recipient: String,
    pub channel: Channel,
    pub class: Class,
    pub priority: Priority,
    pub payload: Value,
    /// Already counts this attempt.
    pub attempt_count: i32,
    pub max_attempts: i32,
    pub next_attempt_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub category: String,
    /// The profile the address was resolved from, if any.
    pub recipient_id: Option<String>,
    /// The client key that created it (`None`: an operator).
    pub owner_key_id: Option<Uuid>,
    /// The last moment its call may start: its `expiresAt`, on this process's clock. The
    /// database's clock is read after the claim was sent, so this is never later than the
    /// expiry itself. `None`: it does not expire.
    pub start_by: Option<Instant>,
}

impl Claimed {
    pub fn is_last_attempt(&self) -> bool {
        self.attempt_count >= self.max_attempts
    }

    /// Claim order: HIGH first, transactional before bulk within a priority, then the
    /// longest due, then the oldest.
    pub fn claim_order(&self) -> (Priority, bool, DateTime<Utc>, DateTime<Utc>) {
        (
            self.priority,
            self.class != Class::Transactional,
            self.next_attempt_at,
            self.created_at,
        )
    }
}

/// How a channel is claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimMode {
    /// Any due notification, up to the batch size (the simulated provider).
    Free,
    /// Only while the channel is neither paused nor open, and never more than its token
    /// buckets hold (a real provider).
    Paced,
}

/// How much one claim may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Notifications of every class.
    pub total: i64,
    /// Of them, bulk ones: no more than the bulk places free to deliver them.
    pub bulk: i64,
}

impl Limit {
    /// Up to `total`, of any class.
    pub fn of(total: i64) -> Self {
        Limit { total, bulk: total }
    }
}

/// Claims up to `limit` due notifications of `channel` in claim order, for `lease`.
pub async fn claim(
    db: &impl GenericClient,
    channel: Channel,
    mode: ClaimMode,
    worker_id: &str,
    limit: Limit,
    lease: Duration,
) -> Result<Vec<Claimed>, tokio_postgres::Error> {
    Ok(claim_and_probe(db, channel, mode, worker_id, limit, lease)
        .await?
        .0)
}

/// [`claim`], and whether what it claimed is the probe of a circuit that was OPEN (only a
/// paced claim grants probes).
async fn claim_and_probe(
    db: &impl GenericClient,
    channel: Channel,
    mode: ClaimMode,
    worker_id: &str,
    limit: Limit,
    lease: Duration,
) -> Result<(Vec<Claimed>, bool), tokio_postgres::Error> {
    let statement = match mode {
        ClaimMode::Free => CLAIM_CHANNEL,
        ClaimMode::Paced => CLAIM_PACED,
    }
    .prepare(db)
    .await?;
    let asked = Instant::now();
    let rows = db
        .query(
            &statement,
            &[
                &channel,
                &limit.total,
                &worker_id,
                &millis(lease),
                &limit.bulk,
            ],
        )
        .await?;
    let mut claimed = rows
        .iter()
        .map(|row| {
            Ok(Claimed {
                id: row.try_get("id")?,
                token: row.try_get("claim_token")?,
                recipient: row.try_get("recipient")?,
                channel: row.try_get("channel")?,
                class: row.try_get("class")?,
                priority: row.try_get("priority")?,
                payload: row.try_get("payload")?,
                attempt_count: row.try_get("attempt_count")?,
                max_attempts: row.try_get("max_attempts")?,
                next_attempt_at: row.try_get("next_attempt_at")?,
                created_at: row.try_get("created_at")?,
                category: row.try_get("category")?,
                recipient_id: row.try_get("recipient_id")?,
                owner_key_id: row.try_get("owner_key_id")?,
                start_by: row
                    .try_get::<_, Option<i64>>("expires_in_ms")?
                    .map(|ms| asked + Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
            })
        })
        .collect::<Result<Vec<_>, tokio_postgres::Error>>()?;
    // UPDATE ... RETURNING has no order of its own; restore the claim order.
    claimed.sort_by_key(Claimed::claim_order);
    let probe = match mode {
        ClaimMode::Paced => match rows.first() {
            Some(row) => row.try_get("probe")?,
            None => false,
        },
        ClaimMode::Free => false,
    };
    Ok((claimed, probe))
}

/// What a paced claim took, and whether it is the probe of a circuit that was open (the
/// circuit is HALF_OPEN from this claim on).
#[derive(Debug)]
pub struct PacedClaim {
    pub claimed: Vec<Claimed>,
    pub probe: bool,
}

/// Claims up to `limit` due notifications of a paced `channel` (see [`ClaimMode::Paced`])
/// in a transaction that first waits for the channel's turn. Under load many sweepers
/// claim the same channel at once; waiting inside the claim statement would leave it with
/// a snapshot taken before the wait, and it would burn its time (holding the channel)
/// stepping over rows others claimed meanwhile, which makes the next one wait longer.
pub async fn claim_paced(
    db: &mut deadpool_postgres::Client,
    channel: Channel,
    worker_id: &str,
    limit: Limit,
    lease: Duration,
) -> Result<PacedClaim, tokio_postgres::Error> {
    let transaction = db.transaction().await?;
    let lock = LOCK_CHANNEL.prepare(&transaction).await?;
    transaction.execute(&lock, &[&channel]).await?;
    let (claimed, probe) = claim_and_probe(
        &transaction,
        channel,
        ClaimMode::Paced,
        worker_id,
        limit,
        lease,
    )
    .await?;
    transaction.commit().await?;
    Ok(PacedClaim { claimed, probe })
}

/// Prepares (once per connection) the statements between the claim and the provider call
/// (the start fence, the audience re-check, handing claims back), so a pipeline of them
/// sends each at once and in order (see [`crate::db::PipelinedTransaction`]).
pub async fn prepare_fence(db: &impl GenericClient) -> Result<(), tokio_postgres::Error> {
    tokio::try_join!(
        START_FENCE.prepare(db),
        RELEASE.prepare(db),
        super::recheck::prepare(db)
    )?;
    Ok(())
}

/// The start fence: the ids of `batch` this worker still holds. A missing id was lost (its
/// lease expired and another worker recovered it) and must not be sent. A claim with less
/// than `needed` of lease left is renewed to a full `lease`.
pub async fn start_fence(
    db: &impl GenericClient,
    batch: &[&Claimed],
    needed: Duration,
    lease: Duration,
) -> Result<Vec<Uuid>, tokio_postgres::Error> {
    Ok(fence(db, batch, needed, lease).await?.held)
}

/// What the start fence found.
#[derive(Debug, Clone, Default)]
pub struct Fenced {
    /// The claims still held.
    pub held: Vec<Uuid>,
    /// The least lease any of them has left, as the database read it (`None`: none held).
    pub least_left: Option<Duration>,
}

/// [`start_fence`], with the least lease left among the claims still held.
pub async fn fence(
    db: &impl GenericClient,
    batch: &[&Claimed],
    needed: Duration,
    lease: Duration,
) -> Result<Fenced, tokio_postgres::Error> {
    let ids: Vec<Uuid> = batch.iter().map(|c| c.id).collect();
    let tokens: Vec<Uuid> = batch.iter().map(|c| c.token).collect();
    let statement = START_FENCE.prepare(db).await?;
    let rows = db
        .query(
            &statement,
            &[&ids, &tokens, &millis(needed), &millis(lease)],
        )
        .await?;
    let mut fenced = Fenced::default();
    for row in &rows {
        fenced.held.push(row.try_get("id")?);
        let left: i64 = row.try_get("left_ms")?;
        let left = Duration::from_millis(u64::try_from(left).unwrap_or(0));
        fenced.least_left = Some(fenced.least_left.map_or(left, |least| least.min(left)));
    }
    Ok(fenced)
}

/// Hands claims back untried: PENDING, attempt refunded, due at the given time (`None` =
/// now; a time means a rate-limit deferral and is counted as one). Used on shutdown, near
/// a Lambda deadline, after an error before the provider was called, and for rate-limit
/// deferrals. Returns how many were still held.
pub async fn release(
    db: &impl GenericClient,
    batch: &[(&Claimed, Option<DateTime<Utc>>)],
) -> Result<u64, tokio_postgres::Error> {
    if batch.is_empty() {
        return Ok(0);
    }
    let ids: Vec<Uuid> = batch.iter().map(|(c, _)| c.id).collect();
    let tokens: Vec<Uuid> = batch.iter().map(|(c, _)| c.token).collect();
    let due: Vec<Option<DateTime<Utc>>> = batch.iter().map(|(_, due)| *due).collect();
    let statement = RELEASE.prepare(db).await?;
    db.execute(&statement, &[&ids, &tokens, &due]).await
}
