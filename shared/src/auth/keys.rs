//! Key administration: create, list and revoke keys, the unused ones, and the lock the
//! deploy's setup takes before it creates the first key.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use uuid::Uuid;

use super::{PREFIX, Scope, hash_secret};
use crate::sql::{Statement, statement};

const CREATE: Statement = statement!("api_keys/create");
const LIST: Statement = statement!("api_keys/list");
const LOCK_FIRST_KEY: Statement = statement!("api_keys/lock_first_key");
const REVOKE: Statement = statement!("api_keys/revoke");
const COUNT_ACTIVE: Statement = statement!("api_keys/count_active");
const COUNT_ALL: Statement = statement!("api_keys/count_all");
const UNUSED: Statement = statement!("api_keys/unused");

/// A key as listed (never its secret).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyInfo {
    pub id: Uuid,
    pub name: String,
    pub scope: String,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// Creates a key and returns it in full; this is the only time the secret exists outside
/// the caller's hands.
pub async fn create_key(
    db: &impl GenericClient,
    name: &str,
    scope: Scope,
) -> Result<(Uuid, String), tokio_postgres::Error> {
    let id = Uuid::new_v4();
    let secret = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
    let statement = CREATE.prepare(db).await?;
    db.execute(
        &statement,
        &[&id, &name, &scope.as_str(), &hash_secret(&secret)],
    )
    .await?;
    Ok((id, format!("{PREFIX}{}_{secret}", id.simple())))
}

pub async fn list_keys(db: &impl GenericClient) -> Result<Vec<KeyInfo>, tokio_postgres::Error> {
    let statement = LIST.prepare(db).await?;
    db.query(&statement, &[])
        .await?
        .iter()
        .map(|row| {
            Ok(KeyInfo {
                id: row.try_get("id")?,
                name: row.try_get("name")?,
                scope: row.try_get("scope")?,
                created_at: row.try_get("created_at")?,
                revoked_at: row.try_get("revoked_at")?,
            })
        })
        .collect()
}

/// Revokes a key; `false` when no active key has that id.
pub async fn revoke_key(db: &impl GenericClient, id: Uuid) -> Result<bool, tokio_postgres::Error> {
    let statement = REVOKE.prepare(db).await?;
    let changed = db.execute(&statement, &[&id]).await?;
    Ok(changed == 1)
}

/// An active key nobody has used for a while (the digest's `UNUSED_KEY`).
#[derive(Debug, Clone, PartialEq)]
pub struct UnusedKey {
    pub id: Uuid,
    pub name: String,
    pub scope: String,
    pub created_at: DateTime<Utc>,
    /// `None`: never used since its use was first recorded (migration V11).
    pub last_used_at: Option<DateTime<Utc>>,
}

/// Active keys neither used nor created in the last `days` days, longest unused first.
pub async fn unused_keys(
    db: &impl GenericClient,
    days: i64,
) -> Result<Vec<UnusedKey>, tokio_postgres::Error> {
    let statement = UNUSED.prepare(db).await?;
    db.query(&statement, &[&days])
        .await?
        .iter()
        .map(|row| {
            Ok(UnusedKey {
                id: row.try_get("id")?,
                name: row.try_get("name")?,
                scope: row.try_get("scope")?,
                created_at: row.try_get("created_at")?,
                last_used_at: row.try_get("last_used_at")?,
            })
        })
        .collect()
}

/// Until the transaction `db` ends, no other caller of this function gets past it: the
/// deploy's setup checks for keys and creates the first one under it.
pub async fn lock_first_key(db: &impl GenericClient) -> Result<(), tokio_postgres::Error> {
    let statement = LOCK_FIRST_KEY.prepare(db).await?;
    db.query(&statement, &[]).await?;
    Ok(())
}

pub async fn active_key_count(db: &impl GenericClient) -> Result<i64, tokio_postgres::Error> {
    let statement = COUNT_ACTIVE.prepare(db).await?;
    db.query_one(&statement, &[]).await?.try_get("count")
}

/// Every key ever created, revoked ones included.
pub async fn key_count(db: &impl GenericClient) -> Result<i64, tokio_postgres::Error> {
    let statement = COUNT_ALL.prepare(db).await?;
    db.query_one(&statement, &[]).await?.try_get("count")
}
