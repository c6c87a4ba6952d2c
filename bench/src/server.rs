//! The PostgreSQL server the benchmark uses, and one fresh database per scenario.

use anyhow::Context;
use deadpool_postgres::Pool;
use notify_local::embedded::{self, EmbeddedPostgres};
use notify_local::scratch;
use notify_shared::db;

/// `DATABASE_URL`'s server, or a private one that lives as long as this value.
pub struct Server {
    admin_url: String,
    _embedded: Option<EmbeddedPostgres>,
    pub embedded: bool,
}

impl Server {
    pub async fn start() -> anyhow::Result<Self> {
        if let Ok(url) = std::env::var("DATABASE_URL")
            && !url.trim().is_empty()
        {
            let host_ok = ["@127.0.0.1", "@localhost", "//127.0.0.1", "//localhost"]
                .iter()
                .any(|h| url.contains(h));
            anyhow::ensure!(
                host_ok,
                "notify-bench only talks to a PostgreSQL on this machine (127.0.0.1); \
                 DATABASE_URL names another host"
            );
            return Ok(Server {
                admin_url: url,
                _embedded: None,
                embedded: false,
            });
        }
        let base = embedded::default_base_dir();
        let server = tokio::task::spawn_blocking(move || EmbeddedPostgres::start(&base))
            .await
            .context("the embedded PostgreSQL start-up task failed")??;
        eprintln!(
            "notify-bench: no DATABASE_URL; started a private PostgreSQL in {}",
            server.data_dir().display()
        );
        Ok(Server {
            admin_url: server.url(),
            _embedded: Some(server),
            embedded: true,
        })
    }

    pub async fn admin(&self) -> anyhow::Result<tokio_postgres::Client> {
        db::connect(&self.admin_url).await
    }

    /// Creates and migrates `notify_bench_<uuid>`; dropped with the returned value.
    pub async fn fresh_database(&self) -> anyhow::Result<FreshDb> {
        let name = format!("notify_bench_{}", uuid::Uuid::new_v4().simple());
        let admin = self.admin().await?;
        admin
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .await
            .with_context(|| format!("cannot create database {name}"))?;
        let fresh = FreshDb {
            url: scratch::with_database(&self.admin_url, &name),
            name,
            admin_url: self.admin_url.clone(),
            dropped: false,
        };
        db::migrate(&fresh.url)
            .await
            .with_context(|| format!("cannot migrate {}", fresh.name))?;
        Ok(fresh)
    }
}

/// A database for one scenario. [`FreshDb::drop_now`] drops it; `Drop` does so too (on a
/// thread of its own) when a scenario ends early.
pub struct FreshDb {
    pub name: String,
    pub url: String,
    admin_url: String,
    dropped: bool,
}

impl FreshDb {
    pub fn pool(&self, size: usize) -> anyhow::Result<Pool> {
        db::create_pool(&self.url, size)
    }

    pub async fn connect(&self) -> anyhow::Result<tokio_postgres::Client> {
        db::connect(&self.url).await
    }

    pub async fn drop_now(mut self) -> anyhow::Result<()> {
        self.dropped = true;
        scratch::drop_database(&self.admin_url, &self.name).await
    }
}

impl Drop for FreshDb {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        // Drop may run inside the runtime; use a private one on its own thread.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime
                .block_on(tokio::time::timeout(
                    std::time::Duration::from_secs(20),
                    scratch::drop_database(&admin_url, &name),
                ))
                .ok()?
                .ok()
        })
        .join();
    }
}
