//! Forgetting a person: their profile and preferences go, and no table keeps their
//! addresses. Their notifications stay as records (counts, outcomes) without address or
//! payload; PENDING ones are cancelled; their suppression entries keep only the keyed hash,
//! so a bounced address stays suppressed without being kept.

use deadpool_postgres::Client;
use uuid::Uuid;

use super::address;
use crate::notification::Channel;
use crate::sql::{Statement, statement};

/// The recipient an erased notification shows instead of its address.
pub const ERASED_RECIPIENT: &str = "[erased]";

const LOCK: Statement = statement!("recipients/lock");
const LOCK_CAMPAIGNS: Statement = statement!("campaigns/lock_expanding");
const ERASE: Statement = statement!("recipients/erase");
const FORGET_DELIVERIES: Statement = statement!("recipients/forget_deliveries");

/// What an erasure removed. All zero when nothing was kept under the id: the erasure
/// holds all the same (nothing is kept), so the caller need not know whether it ran before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Erased {
    pub profiles: u64,
    pub preferences: u64,
    pub notifications: u64,
}

pub async fn erase(
    db: &mut Client,
    secret: &[u8],
    owner: Uuid,
    id: &str,
) -> Result<Erased, tokio_postgres::Error> {
    let tx = db.transaction().await?;
    let lock = LOCK.prepare(&tx).await?;
    // Without a profile there are no addresses to forget, but there may still be what
    // was kept under its id: an opt-out clicked before the profile existed, notifications
    // suppressed for want of an address.
    let mut addresses: Vec<(Channel, String)> = Vec::new();
    if let Some(row) = tx.query_opt(&lock, &[&owner, &id]).await? {
        if let Some(email) = row.try_get::<_, Option<String>>("email")? {
            addresses.push((Channel::Email, email));
        }
        if let Some(phone) = row.try_get::<_, Option<String>>("phone")? {
            addresses.push((Channel::Sms, phone));
        }
        for token in row.try_get::<_, Vec<String>>("push_tokens")? {
            addresses.push((Channel::Push, token));
        }
    }
    // As given and as compared (email in lower case): either may be what a row holds.
    let mut plain: Vec<String> = addresses.iter().map(|(_, a)| a.clone()).collect();
    plain.extend(
        addresses
            .iter()
            .map(|(channel, a)| address::normalize(*channel, a)),
    );
    plain.sort();
    plain.dedup();
    let hashes: Vec<String> = addresses
        .iter()
        .map(|(channel, a)| address::hash(secret, *channel, a))
        .collect();
    let channels: Vec<Channel> = addresses.iter().map(|(c, _)| *c).collect();
    // A chunk of the owner's campaign being inserted now may hold the person: wait for it,
    // so the erasure (a statement of its own, seeing what committed before it) redacts
    // what the chunk wrote, and keep the next chunk out until the person left the audience.
    let lock_campaigns = LOCK_CAMPAIGNS.prepare(&tx).await?;
    tx.execute(&lock_campaigns, &[&owner]).await?;
    let (inner_pad, outer_pad) = address::hmac_pads(secret);
    let erase = ERASE.prepare(&tx).await?;
    let row = tx
        .query_one(
            &erase,
            &[
                &owner, &id, &plain, &hashes, &channels, &inner_pad, &outer_pad,
            ],
        )
        .await?;
    let count = |column: &str| -> Result<u64, tokio_postgres::Error> {
        Ok(u64::try_from(row.try_get::<_, i64>(column)?).unwrap_or(0))
    };
    let erased = Erased {
        profiles: count("profiles")?,
        preferences: count("preferences")?,
        notifications: count("notifications")?,
    };
    // A statement of its own, seeing what committed while the erasure ran: a delivery in
    // flight may have written its copy meanwhile.
    let ids: Vec<Uuid> = row.try_get("ids")?;
    let forget = FORGET_DELIVERIES.prepare(&tx).await?;
    tx.execute(&forget, &[&ids]).await?;
    tx.commit().await?;
    Ok(erased)
}
