//! The PostgreSQL server the benchmark uses, and one fresh database per scenario.

use anyhow::Context;
use deadpool_postgres::Pool;
use notify_shared::db::{self, embedded::EmbeddedPostgres};

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
        let base = db::embedded::default_base_dir();
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
            url: with_database(&self.admin_url, &name),
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
        let admin = db::connect(&self.admin_url).await?;
        admin
            .batch_execute(&format!(
                "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                self.name
            ))
            .await
            .with_context(|| format!("cannot drop database {}", self.name))
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
            runtime.block_on(async {
                let admin = db::connect(&admin_url).await.ok()?;
                let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
                tokio::time::timeout(
                    std::time::Duration::from_secs(20),
                    admin.batch_execute(&sql),
                )
                .await
                .ok()?
                .ok()
            })
        })
        .join();
    }
}

/// `url` with its database name replaced.
pub fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{database}", &base[..authority_end]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn database_names_are_replaced() {
        assert_eq!(
            super::with_database("postgres://u:p@h:5/db?sslmode=require", "x"),
            "postgres://u:p@h:5/x?sslmode=require"
        );
        assert_eq!(
            super::with_database("postgres://u@h", "x"),
            "postgres://u@h/x"
        );
    }
}
