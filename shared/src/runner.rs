//! `notify-local`: the whole system in one process for development and black-box tests.
//! `APP_ROLE` picks the parts: `all`, `api` (HTTP only) or `worker` (sweeper and webhook
//! drainer; HTTP answers only `/health` and `/metrics`). With no `DATABASE_URL` it brings up a private PostgreSQL.

use std::time::Duration;

use anyhow::Context;

use crate::config::Config;
use crate::db::{self, embedded::EmbeddedPostgres};
use crate::intake::{self, AppState, Routes};
use crate::stop::{StopSignal, stop_on_signals};
use crate::sweeper;
use crate::webhook;
use crate::{queue, wake};

/// Extra time granted after the provider (or webhook) time limit for in-flight steps to record.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

pub async fn run_local(config: Config) -> anyhow::Result<()> {
    let (stop_handle, stop) = StopSignal::new();
    stop_on_signals(stop_handle);

    // Keep the private server alive until the very end; dropping it stops and deletes it.
    let (database_url, embedded) = match &config.database_url {
        Some(url) => (url.clone(), None),
        None => {
            let base = db::embedded::default_base_dir();
            let server = tokio::task::spawn_blocking(move || EmbeddedPostgres::start(&base))
                .await
                .context("the embedded PostgreSQL start-up task failed")??;
            eprintln!(
                "notify-local: started a private PostgreSQL in {}",
                server.data_dir().display()
            );
            (server.url(), Some(server))
        }
    };
    eprintln!("notify-local: database {}", redact(&database_url));

    db::migrate(&database_url).await?;
    let pool = db::create_pool(&database_url, config.database_pool_max)?;

    let mut workers = None;
    let mut drainer = None;
    if config.app_role.runs_workers() {
        // Without WEBHOOK_URL no drainer exists: events stay PENDING in the outbox until a
        // process with a URL drains them. Built before anything starts, so a bad secret or
        // URL stops start-up.
        match crate::functions::build_drainer(&pool, &config)? {
            Some(webhooks) => drainer = Some(tokio::spawn(webhook::run(webhooks, stop.clone()))),
            None => tracing::info!("WEBHOOK_URL is not set; webhook events stay in the outbox"),
        }
        let sweeper = crate::functions::build_sweeper(&pool, &config);
        let wake = wake::listen(database_url.clone(), queue::WAKE_CHANNEL, stop.clone());
        workers = Some(tokio::spawn(sweeper::run(sweeper, wake, stop.clone())));
    }

    let routes = if config.app_role.serves_api() {
        Routes::Full
    } else {
        Routes::HealthOnly
    };
    // The local runner may run without keys, and says so loudly.
    let auth = crate::auth::authenticator_for(&pool, true).await?;
    if auth.is_anonymous() {
        let warning = "no API keys exist: EVERY ROUTE IS OPEN TO ANYONE who can reach this port \
                       (create a key with `notify-local keys create --scope operator`)";
        eprintln!("notify-local: WARNING: {warning}");
        tracing::warn!("{warning}");
    }
    let state = AppState {
        pool: pool.clone(),
        max_attempts: config.retry.max_attempts(),
        auth,
    };
    let app = intake::router(state, routes);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", config.port))
        .await
        .with_context(|| format!("cannot listen on 127.0.0.1:{}", config.port))?;
    let address = listener.local_addr()?;
    eprintln!(
        "notify-local: role {:?}, listening on http://{address}",
        config.app_role
    );
    tracing::info!(%address, role = ?config.app_role, "listening");

    let server_stop = stop.clone();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { server_stop.stopped().await })
        .await
        .context("HTTP server failed")?;

    // One deadline for both loops; anything still running is left to lease recovery.
    let budget = config.worker.provider_timeout.max(config.webhook.timeout) + SHUTDOWN_GRACE;
    let deadline = tokio::time::Instant::now() + budget;
    if let Some(workers) = workers {
        await_loop("sweeper", workers, deadline).await;
    }
    if let Some(drainer) = drainer {
        await_loop("webhook drainer", drainer, deadline).await;
    }
    pool.close();
    drop(embedded);
    eprintln!("notify-local: stopped");
    Ok(())
}

async fn await_loop<T: std::fmt::Debug>(
    name: &str,
    task: tokio::task::JoinHandle<T>,
    deadline: tokio::time::Instant,
) {
    match tokio::time::timeout_at(deadline, task).await {
        Ok(Ok(summary)) => tracing::info!(?summary, "{name} stopped"),
        Ok(Err(error)) => tracing::error!(%error, "{name} task failed"),
        Err(_) => tracing::warn!("{name} did not finish within the shutdown budget"),
    }
}

/// The URL without its password, for logs.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let credentials = &url[scheme_end + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme_end + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// `notify-local keys create|list|revoke`: manages API keys in the database named by
/// `DATABASE_URL` (keys in a private, throw-away database would be useless).
pub async fn keys_command(config: &Config, args: &[String]) -> anyhow::Result<()> {
    const USAGE: &str = "usage: notify-local keys create --scope client|operator [--name NAME]\n\
                         \x20      notify-local keys list\n\
                         \x20      notify-local keys revoke KEY_ID";
    let url = config
        .database_url
        .as_deref()
        .context("keys are stored in the database: set DATABASE_URL")?;
    db::migrate(url).await?;
    let pool = db::create_pool(url, 1)?;
    let client = pool.get().await?;
    match args.first().map(String::as_str) {
        Some("create") => {
            let mut scope = None;
            let mut name = "unnamed".to_string();
            let mut rest = args[1..].iter();
            while let Some(flag) = rest.next() {
                match (flag.as_str(), rest.next()) {
                    ("--scope", Some(value)) => {
                        scope = Some(crate::auth::Scope::parse(value).with_context(|| {
                            format!("--scope must be client or operator (got {value:?})\n{USAGE}")
                        })?)
                    }
                    ("--name", Some(value)) => name = value.clone(),
                    _ => anyhow::bail!("unexpected argument {flag:?}\n{USAGE}"),
                }
            }
            let scope = scope.with_context(|| format!("--scope is required\n{USAGE}"))?;
            let (id, key) = crate::auth::create_key(&client, &name, scope).await?;
            eprintln!(
                "created {} key {id} ({name}); the key is shown once, store it now:",
                scope.as_str()
            );
            println!("{key}");
        }
        Some("list") => {
            for key in crate::auth::list_keys(&client).await? {
                let state = match key.revoked_at {
                    Some(at) => format!("revoked {}", crate::notification::format_time(&at)),
                    None => "active".to_string(),
                };
                println!(
                    "{}  {:8}  {:7}  created {}  {}",
                    key.id,
                    key.scope,
                    state,
                    crate::notification::format_time(&key.created_at),
                    key.name
                );
            }
        }
        Some("revoke") => {
            let id = args
                .get(1)
                .and_then(|id| uuid::Uuid::try_parse(id).ok())
                .with_context(|| format!("revoke needs a key id (see `keys list`)\n{USAGE}"))?;
            anyhow::ensure!(
                crate::auth::revoke_key(&client, id).await?,
                "no active key {id}"
            );
            eprintln!("revoked {id}; running processes stop accepting it within 10 s");
        }
        _ => anyhow::bail!("{USAGE}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_never_reach_the_log() {
        assert_eq!(
            super::redact("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(super::redact("postgres://u@h/db"), "postgres://u@h/db");
    }
}
