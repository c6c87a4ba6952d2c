//! Every test gets its own database, cloned from a migrated template, on the server named
//! by `DATABASE_URL` (or a private one started for this test process), and dropped when the
//! test ends — pass or fail.

use std::sync::OnceLock;
use std::time::Duration;

use deadpool_postgres::Pool;
use notify_local::embedded::{EmbeddedPostgres, default_base_dir};
use notify_local::scratch;
use notify_shared::db;
use tokio_postgres::types::{FromSqlOwned, ToSql};

pub use notify_local::scratch::with_database;

/// Statement parameters, as `tokio_postgres` takes them.
pub type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// A fresh, migrated database for one test.
pub struct TestDb {
    pub name: String,
    pub url: String,
    /// `DATABASE_POOL_MAX` connections (10, the default).
    pub pool: Pool,
    admin_url: String,
}

impl TestDb {
    /// A new database cloned from the migrated template.
    pub async fn new() -> TestDb {
        let admin_url = server_url();
        let template = template_name(&admin_url).await;
        let name = format!("notify_test_{}", uuid::Uuid::new_v4().simple());
        let admin = db::connect(&admin_url)
            .await
            .expect("connect to the test server");
        let mut created = false;
        for _ in 0..50 {
            match admin
                .batch_execute(&format!(
                    "CREATE DATABASE \"{name}\" TEMPLATE \"{template}\""
                ))
                .await
            {
                Ok(()) => {
                    created = true;
                    break;
                }
                // Another process may be connected to the template for an instant.
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        assert!(created, "could not create a test database");
        let url = with_database(&admin_url, &name);
        let pool = db::create_pool(&url, 10).expect("pool");
        TestDb {
            name,
            url,
            pool,
            admin_url,
        }
    }

    /// A separate pool on the same database (a second "process" in race tests).
    pub fn new_pool(&self, size: usize) -> Pool {
        db::create_pool(&self.url, size).expect("pool")
    }

    /// Runs one statement; returns the rows it changed.
    pub async fn execute(&self, sql: &str, params: Params<'_>) -> u64 {
        execute(&self.pool, sql, params).await
    }

    /// The first column of the one row `sql` returns.
    pub async fn scalar<T: FromSqlOwned>(&self, sql: &str, params: Params<'_>) -> T {
        scalar(&self.pool, sql, params).await
    }

    /// A count (`SELECT count(*) ...`, or any single `int8`) without parameters.
    pub async fn count(&self, sql: &str) -> i64 {
        scalar(&self.pool, sql, &[]).await
    }

    /// Polls the count `sql` until `until(count)`; panics after `limit` with `context()`
    /// (a process log, say).
    pub async fn wait_for_count(
        &self,
        sql: &str,
        limit: std::time::Duration,
        until: impl Fn(i64) -> bool,
        context: impl Fn() -> String,
    ) -> i64 {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let value = self.count(sql).await;
            if until(value) {
                return value;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{sql} is still {value} after {limit:?}\n{}",
                context()
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        self.pool.close();
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        // Drop runs outside any runtime we may block; use a private one on its own thread.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime
                .block_on(scratch::drop_database(&admin_url, &name))
                .ok()
        })
        .join();
    }
}

/// Runs one statement on `pool`; returns the rows it changed.
pub async fn execute(pool: &Pool, sql: &str, params: Params<'_>) -> u64 {
    pool.get()
        .await
        .expect("connection")
        .execute(sql, params)
        .await
        .unwrap_or_else(|error| panic!("{sql}: {error}"))
}

/// The first column of the one row `sql` returns on `pool`.
pub async fn scalar<T: FromSqlOwned>(pool: &Pool, sql: &str, params: Params<'_>) -> T {
    pool.get()
        .await
        .expect("connection")
        .query_one(sql, params)
        .await
        .unwrap_or_else(|error| panic!("{sql}: {error}"))
        .get(0)
}

/// The server URL: `DATABASE_URL`, else a private server for this test process.
pub fn server_url() -> String {
    if let Ok(url) = std::env::var("DATABASE_URL")
        && !url.trim().is_empty()
    {
        return url;
    }
    static EMBEDDED: OnceLock<EmbeddedPostgres> = OnceLock::new();
    EMBEDDED
        .get_or_init(|| {
            EmbeddedPostgres::start(&default_base_dir())
                .expect("start a private PostgreSQL for tests")
        })
        .url()
}

const TEMPLATE_LOCK: i64 = 0x6e71_7465_6d70_6c74;

/// Creates (once per schema version, across processes) the migrated template database.
async fn template_name(admin_url: &str) -> String {
    let mut migrations = std::fs::read_dir(format!("{}/migrations", crate::WORKSPACE))
        .expect("migrations folder")
        .filter_map(Result::ok)
        .map(|e| {
            std::fs::read_to_string(e.path()).unwrap_or_default() + &e.file_name().to_string_lossy()
        })
        .collect::<Vec<_>>();
    migrations.sort();
    let name = format!("notify_template_{:016x}", stable_hash(&migrations.concat()));

    let admin = db::connect(admin_url)
        .await
        .expect("connect to the test server");
    admin
        .execute("SELECT pg_advisory_lock($1)", &[&TEMPLATE_LOCK])
        .await
        .expect("template lock");
    let exists = admin
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .await
        .expect("look up template")
        .is_some();
    if !exists {
        let building = format!("{name}_building");
        scratch::drop_database(admin_url, &building)
            .await
            .expect("drop");
        admin
            .batch_execute(&format!("CREATE DATABASE \"{building}\""))
            .await
            .expect("create template");
        db::migrate(&with_database(admin_url, &building))
            .await
            .expect("migrate template");
        // The migration connection closes asynchronously; retry until the rename may proceed.
        let mut renamed = false;
        for _ in 0..100 {
            if admin
                .batch_execute(&format!(
                    "ALTER DATABASE \"{building}\" RENAME TO \"{name}\""
                ))
                .await
                .is_ok()
            {
                renamed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(renamed, "could not finish the template database");
    }
    admin
        .execute("SELECT pg_advisory_unlock($1)", &[&TEMPLATE_LOCK])
        .await
        .expect("unlock");
    name
}

/// A small stable string hash (FNV-1a), so template names agree across processes.
fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}
