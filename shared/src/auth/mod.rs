//! API keys: `Authorization: Bearer nq_<key id>_<secret>`. Only a SHA-256 hash of the
//! secret is stored; the presented secret is compared in constant time. A key has a
//! scope: `client` (create, read, list and cancel its own notifications) or `operator`
//! (everything, including redrive and metrics). The only SQL on `api_keys` lives here.

mod keys;

pub use keys::{
    KeyInfo, UnusedKey, active_key_count, create_key, key_count, list_keys, lock_first_key,
    revoke_key, unused_keys,
};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use uuid::Uuid;

use crate::sql::{Statement, statement};

const ACTIVE: Statement = statement!("api_keys/active");
const TOUCH: Statement = statement!("api_keys/touch");

const PREFIX: &str = "nq_";
/// A snapshot of the active keys is trusted this long (how long a revoked key still works).
const SNAPSHOT_TTL: Duration = Duration::from_secs(10);
/// An unknown key id reads the keys again only if the snapshot is older than this.
const UNKNOWN_KEY_REREAD: Duration = Duration::from_secs(1);
/// A key's use is written to `api_keys.last_used_at` at most this often per process: the
/// digest asks about months, and a write per request would cost every request.
const TOUCH_EVERY: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Client,
    Operator,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Client => "client",
            Scope::Operator => "operator",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "client" => Some(Scope::Client),
            "operator" => Some(Scope::Operator),
            _ => None,
        }
    }

    /// An operator key may do everything a client key may.
    pub fn allows(self, required: Scope) -> bool {
        self >= required
    }
}

/// Who is calling: a key (and its scope), or anonymous access (every route open).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    pub key_id: Option<Uuid>,
    pub scope: Scope,
}

impl Caller {
    pub const ANONYMOUS: Caller = Caller {
        key_id: None,
        scope: Scope::Operator,
    };

    /// Client keys see only their own notifications; operators and anonymous see all.
    pub fn owner_filter(&self) -> Option<Uuid> {
        match self.scope {
            Scope::Client => self.key_id,
            Scope::Operator => None,
        }
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No key, a malformed key, an unknown or revoked key: 401.
    Unauthenticated,
    /// A valid key without the scope the route needs: 403.
    Forbidden,
    /// The keys could not be read and none were read before: 503.
    Unavailable,
}

/// The active keys as last read: id → (scope, secret hash), and when; and, read only while
/// the doors are open, whether any key was ever created (one created and revoked between
/// two reads closes them all the same).
#[derive(Default)]
struct Snapshot {
    keys: HashMap<Uuid, (Scope, String)>,
    read_at: Option<Instant>,
    any_key_created: bool,
}

impl Snapshot {
    fn age(&self) -> Duration {
        self.read_at.map_or(Duration::MAX, |at| at.elapsed())
    }
}

/// Checks keys against a snapshot of the active ones, read again when it is older than
/// [`SNAPSHOT_TTL`], or when an unknown key id arrives and it is older than
/// [`UNKNOWN_KEY_REREAD`] (a key created a moment ago). Unauthenticated traffic, whatever
/// keys it makes up, costs at most one read per second and never holds a connection.
///
/// Opened with [`Authenticator::open_until_a_key_exists`], it lets everyone in while the
/// database holds no key, looks again at most once a second, and requires keys from the
/// first one it sees (revoked ones included) until the process ends: a key created while
/// the service runs takes effect within a second, and revoking every key, even before the
/// next look, never opens the doors again.
#[derive(Clone)]
pub struct Authenticator {
    pool: Option<Pool>,
    /// Serving everyone until a key shows up (`false`: keys from the start, or since one
    /// was seen).
    open: Arc<AtomicBool>,
    snapshot: Arc<RwLock<Snapshot>>,
    /// One reader at a time; the others wait for its snapshot.
    reading: Arc<tokio::sync::Mutex<()>>,
    /// When this process last wrote each key's `last_used_at`.
    touched: Arc<std::sync::Mutex<HashMap<Uuid, Instant>>>,
}

impl Authenticator {
    /// Every request is let in as an operator. The local runner and deployments that
    /// explicitly allow it use this.
    pub fn anonymous() -> Self {
        Authenticator {
            pool: None,
            open: Arc::new(AtomicBool::new(true)),
            snapshot: Arc::default(),
            reading: Arc::default(),
            touched: Arc::default(),
        }
    }

    pub fn with_keys(pool: Pool) -> Self {
        Authenticator {
            pool: Some(pool),
            open: Arc::new(AtomicBool::new(false)),
            snapshot: Arc::default(),
            reading: Arc::default(),
            touched: Arc::default(),
        }
    }

    /// Everyone is let in as an operator until the first active key exists; from then on,
    /// keys are required.
    pub fn open_until_a_key_exists(pool: Pool) -> Self {
        Authenticator {
            open: Arc::new(AtomicBool::new(true)),
            ..Authenticator::with_keys(pool)
        }
    }

    /// Whether a request without a key is let in now.
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// While open: still open unless the keys, read at most once a second, hold one now.
    async fn still_open(&self, pool: &Pool) -> Result<bool, Refusal> {
        if !self.is_open() {
            return Ok(false);
        }
        let age = self.snapshot.read().map_or(Duration::MAX, |s| s.age());
        if age >= UNKNOWN_KEY_REREAD {
            self.reread(pool, UNKNOWN_KEY_REREAD).await?;
        }
        let keys_exist = self
            .snapshot
            .read()
            .map_or(true, |s| !s.keys.is_empty() || s.any_key_created);
        if keys_exist && self.open.swap(false, Ordering::AcqRel) {
            tracing::warn!(
                "an API key exists now: every route requires one but /health, the API documents, the console page and unsubscribe links"
            );
        }
        Ok(!keys_exist)
    }

    /// Checks the `Authorization` header value.
    pub async fn authorize(
        &self,
        header: Option<&str>,
        required: Scope,
    ) -> Result<Caller, Refusal> {
        let Some(pool) = &self.pool else {
            return Ok(Caller::ANONYMOUS);
        };
        if self.still_open(pool).await? {
            return Ok(Caller::ANONYMOUS);
        }
        let (id, secret) = header
            .and_then(bearer_credentials)
            .map(str::trim)
            .and_then(split_key)
            .ok_or(Refusal::Unauthenticated)?;
        let (age, mut stored) = self.lookup(id);
        // Read again when the snapshot is stale, or when the id is unknown to a snapshot
        // older than a second (a key created a moment ago).
        let stale = match stored {
            Some(_) => SNAPSHOT_TTL,
            None => UNKNOWN_KEY_REREAD,
        };
        if age >= stale {
            self.reread(pool, stale).await?;
            stored = self.lookup(id).1;
        }
        let (scope, hash) = stored.ok_or(Refusal::Unauthenticated)?;
        let presented = hash_secret(secret);
        if !bool::from(presented.as_bytes().ct_eq(hash.as_bytes())) {
            return Err(Refusal::Unauthenticated);
        }
        self.touch(pool, id).await;
        if scope.allows(required) {
            Ok(Caller {
                key_id: Some(id),
                scope,
            })
        } else {
            Err(Refusal::Forbidden)
        }
    }

    /// Writes the key's `last_used_at` unless this process did so within [`TOUCH_EVERY`].
    /// A failure is logged, never refused: the request itself is authorized.
    async fn touch(&self, pool: &Pool, id: Uuid) {
        let due = match self.touched.lock() {
            Ok(mut touched) => {
                let due = touched
                    .get(&id)
                    .is_none_or(|at| at.elapsed() >= TOUCH_EVERY);
                if due {
                    touched.insert(id, Instant::now());
                }
                due
            }
            Err(_) => false,
        };
        if !due {
            return;
        }
        let written = async {
            let db = pool.get().await?;
            let statement = TOUCH.prepare(&db).await?;
            db.execute(&statement, &[&id]).await?;
            anyhow::Ok(())
        };
        if let Err(error) = written.await {
            tracing::warn!(error = %crate::telemetry::describe(&error), key = %id, "cannot record the key's use");
        }
    }

    /// The snapshot's age and what it holds for `id`.
    fn lookup(&self, id: Uuid) -> (Duration, Option<(Scope, String)>) {
        match self.snapshot.read() {
            Ok(snapshot) => (snapshot.age(), snapshot.keys.get(&id).cloned()),
            Err(_) => (Duration::MAX, None),
        }
    }

    /// Reads the active keys again unless a snapshot younger than `older_than` exists
    /// (another request may just have read it). When the database cannot be read, an
    /// existing snapshot stays in use; without one, the request is refused as unavailable.
    async fn reread(&self, pool: &Pool, older_than: Duration) -> Result<(), Refusal> {
        let _reading = self.reading.lock().await;
        let age = self.snapshot.read().map_or(Duration::MAX, |s| s.age());
        if age < older_than {
            return Ok(());
        }
        match read_keys(pool, self.is_open()).await {
            Ok((keys, any_key_created)) => {
                if let Ok(mut snapshot) = self.snapshot.write() {
                    *snapshot = Snapshot {
                        keys,
                        read_at: Some(Instant::now()),
                        any_key_created,
                    };
                }
                Ok(())
            }
            Err(error) if age == Duration::MAX => {
                tracing::error!(error = %crate::telemetry::describe(&error), "cannot read the API keys");
                Err(Refusal::Unavailable)
            }
            Err(error) => {
                tracing::warn!(error = %crate::telemetry::describe(&error), "cannot read the API keys; using the last snapshot");
                Ok(())
            }
        }
    }
}

/// The active keys, and with `count_all` whether any key, revoked or not, exists.
async fn read_keys(
    pool: &Pool,
    count_all: bool,
) -> anyhow::Result<(HashMap<Uuid, (Scope, String)>, bool)> {
    let db = pool.get().await?;
    let statement = ACTIVE.prepare(&db).await?;
    let mut keys = HashMap::new();
    for row in db.query(&statement, &[]).await? {
        let scope: String = row.try_get("scope")?;
        let scope = Scope::parse(&scope)
            .ok_or_else(|| anyhow::anyhow!("unknown key scope {scope:?} in the database"))?;
        keys.insert(row.try_get("id")?, (scope, row.try_get("secret_hash")?));
    }
    let any_key_created = count_all && key_count(&db).await? > 0;
    Ok((keys, any_key_created))
}

/// The message when keys are required but none exist.
pub const NO_KEYS: &str = "no API keys exist: create one with \
`notify-local keys create --scope operator --name <name>` (DATABASE_URL pointing at this \
database), or set ALLOW_ANONYMOUS=true to serve without authentication";

/// Chooses the mode at start-up: keys once any key was ever created, even if every one is
/// revoked now (revoking the last key and restarting must not open the doors); otherwise,
/// if `allow_anonymous`, open until the first key is created, else an error naming both
/// ways out.
pub async fn authenticator_for(
    pool: &Pool,
    allow_anonymous: bool,
) -> anyhow::Result<Authenticator> {
    let db = pool.get().await?;
    if key_count(&db).await? > 0 {
        if active_key_count(&db).await? == 0 {
            tracing::warn!(
                "every API key is revoked: every route but /health, the API documents, the \
                 console page and unsubscribe links answers 401 until one is created with \
                 `notify-local keys create --scope operator --name <name>`"
            );
        }
        return Ok(Authenticator::with_keys(pool.clone()));
    }
    anyhow::ensure!(allow_anonymous, NO_KEYS);
    Ok(Authenticator::open_until_a_key_exists(pool.clone()))
}

/// The credentials of an `Authorization` header of the Bearer scheme, whose name is
/// case-insensitive (RFC 9110, section 11.1).
fn bearer_credentials(header: &str) -> Option<&str> {
    let (scheme, credentials) = header.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(credentials)
}

/// Splits `nq_<32 hex id>_<secret>`; `None` for anything else.
fn split_key(key: &str) -> Option<(Uuid, &str)> {
    let rest = key.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    if id.len() != 32 || secret.is_empty() {
        return None;
    }
    Some((Uuid::try_parse(id).ok()?, secret))
}

fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_only_in_their_own_shape() {
        let id = Uuid::new_v4();
        let key = format!("nq_{}_secret", id.simple());
        assert_eq!(split_key(&key), Some((id, "secret")));
        for bad in [
            "",
            "nq_",
            "nq_abc_secret",
            &format!("xx_{}_s", id.simple()),
            &format!("nq_{}_", id.simple()),
        ] {
            assert_eq!(split_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_bearer_scheme_is_named_in_any_case() {
        for header in ["Bearer nq_k", "bearer nq_k", "BEARER nq_k", "bEaReR nq_k"] {
            assert_eq!(bearer_credentials(header), Some("nq_k"), "{header}");
        }
        for header in ["Basic nq_k", "Bearernq_k", "nq_k", ""] {
            assert_eq!(bearer_credentials(header), None, "{header}");
        }
    }

    #[test]
    fn operators_may_do_what_clients_may() {
        assert!(Scope::Operator.allows(Scope::Client));
        assert!(!Scope::Client.allows(Scope::Operator));
    }

    #[tokio::test]
    async fn anonymous_mode_lets_everyone_in_as_an_operator() {
        let auth = Authenticator::anonymous();
        assert_eq!(
            auth.authorize(None, Scope::Operator).await,
            Ok(Caller::ANONYMOUS)
        );
    }
}
