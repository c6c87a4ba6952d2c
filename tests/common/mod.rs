//! Test harness: every test gets its own database, cloned from a migrated template, on
//! the server named by `DATABASE_URL` (or a private one started for this test process),
//! and dropped when the test ends — pass or fail.
#![allow(dead_code)]

pub mod factory;
pub mod moto;

use std::sync::OnceLock;

use deadpool_postgres::Pool;
use notify_local::embedded::EmbeddedPostgres;
use notify_local::scratch;
use notify_shared::db;
use sha2_free_hash::stable_hash;

/// A fresh, migrated database for one test.
pub struct TestDb {
    pub name: String,
    pub url: String,
    pub pool: Pool,
    admin_url: String,
}

impl TestDb {
    /// A separate pool on the same database (a second "process" in race tests).
    pub fn new_pool(&self, size: usize) -> Pool {
        db::create_pool(&self.url, size).expect("pool")
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
            let base =
                std::path::Path::new(notify_tests::WORKSPACE).join("target/embedded-postgres");
            EmbeddedPostgres::start(&base).expect("start a private PostgreSQL for tests")
        })
        .url()
}

pub use notify_local::scratch::with_database;

const TEMPLATE_LOCK: i64 = 0x6e71_7465_6d70_6c74;

/// Creates (once per schema version, across processes) the migrated template database.
async fn template_name(admin_url: &str) -> String {
    let migrations = std::fs::read_dir(format!("{}/migrations", notify_tests::WORKSPACE))
        .expect("migrations folder")
        .filter_map(Result::ok)
        .map(|e| {
            std::fs::read_to_string(e.path()).unwrap_or_default() + &e.file_name().to_string_lossy()
        })
        .collect::<Vec<_>>();
    let mut sorted = migrations;
    sorted.sort();
    let name = format!("notify_template_{:016x}", stable_hash(&sorted.concat()));

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
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(renamed, "could not finish the template database");
    }
    admin
        .execute("SELECT pg_advisory_unlock($1)", &[&TEMPLATE_LOCK])
        .await
        .expect("unlock");
    name
}

/// A fresh database for one test, with a pool of `DATABASE_POOL_MAX` (default 10).
pub async fn test_db() -> TestDb {
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
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
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

/// A small stable string hash (FNV-1a), so template names agree across processes.
mod sha2_free_hash {
    pub fn stable_hash(text: &str) -> u64 {
        text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
    }
}

/// Serves the full API router with the given authentication; returns its base URL.
pub async fn spawn_api_with(db: &TestDb, auth: notify_shared::auth::Authenticator) -> String {
    use notify_shared::intake::{self, AppState, Routes};
    let state = AppState {
        pool: db.pool.clone(),
        max_attempts: 6,
        auth,
    };
    let app = intake::router(state, Routes::Full);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}")
}

/// Serves the full API router for `db` on a free port of 127.0.0.1; returns its base URL.
pub async fn spawn_api(db: &TestDb) -> String {
    use notify_shared::intake::{self, AppState, Routes};
    let state = AppState {
        pool: db.pool.clone(),
        max_attempts: 6,
        auth: notify_shared::auth::Authenticator::anonymous(),
    };
    let app = intake::router(state, Routes::Full);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}")
}
