//! The whole system in one process for development and black-box tests. `APP_ROLE` picks
//! the parts: `all`, `api` (HTTP only) or `worker` (sweeper and webhook drainer; HTTP
//! answers only `/health` and `/metrics`). With no `DATABASE_URL` it brings up a private
//! PostgreSQL.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use notify_shared::config::{AppRole, Config};
use notify_shared::db;
use notify_shared::intake::{self, AppState, Routes};
use notify_shared::stop::{StopSignal, stop_on_signals};
use notify_shared::sweeper;
use notify_shared::webhook;
use notify_shared::{queue, wake};

use crate::embedded::{self, EmbeddedPostgres};

/// Extra time granted after the provider (or webhook) time limit for in-flight steps to record.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

pub async fn run_local(config: Config) -> anyhow::Result<()> {
    let (stop_handle, stop) = StopSignal::new();
    stop_on_signals(stop_handle);

    // Keep the private server alive until the very end; dropping it stops and deletes it.
    let (database_url, embedded) = match &config.database_url {
        Some(url) => (url.clone(), None),
        None => {
            let base = embedded::default_base_dir();
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

    // The pools connect on first use: the schema check takes the first connection.
    let (api_pool, pool) = pools(&database_url, &config)?;
    db::migrate_unless_current(&pool, &database_url).await?;

    let mut workers = None;
    let mut drainer = None;
    if config.app_role.runs_workers() {
        // The drainer serves registered endpoints; without WEBHOOK_URL events stay in the
        // outbox until an endpoint is registered, then those of clients with no endpoint
        // are closed unsent. Built before anything starts, so a bad secret or URL stops
        // start-up.
        let webhooks = webhook::WebhookDrainer::from_config(&pool, &config)?;
        if config.webhook.url.is_none() {
            tracing::info!(
                "WEBHOOK_URL is not set; events of clients without a registered endpoint are not sent"
            );
        }
        drainer = Some(tokio::spawn(webhook::run(Arc::new(webhooks), stop.clone())));
        let sweeper = Arc::new(sweeper::Sweeper::start(&pool, &config).await);
        let wake = wake::listen(
            db::Database::from_url(&database_url)?,
            queue::WAKE_CHANNEL,
            stop.clone(),
        );
        workers = Some(tokio::spawn(sweeper::run(sweeper, wake, stop.clone())));
    }

    let routes = if config.app_role.serves_api() {
        Routes::Full
    } else {
        Routes::HealthOnly
    };
    // The local runner may run without keys, and says so loudly.
    let auth = notify_shared::auth::authenticator_for(&api_pool, true).await?;
    if auth.is_open() {
        let warning = "no API keys exist: EVERY ROUTE IS OPEN TO ANYONE who can reach this port \
                       until one is created (`notify-local keys create --scope operator`); \
                       from then on every route requires one but /health, the API documents, \
                       the console page and unsubscribe links";
        eprintln!("notify-local: WARNING: {warning}");
        tracing::warn!("{warning}");
    }
    let state = AppState::new(api_pool.clone(), &config, auth);
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
    api_pool.close();
    drop(embedded);
    eprintln!("notify-local: stopped");
    Ok(())
}

/// The HTTP API's pool and the workers' pool. With both roles in one process the API gets
/// its own share of `DATABASE_POOL_MAX` (half, at least one), so a busy sweeper cannot
/// starve it; with one role, that role has all of them.
fn pools(url: &str, config: &Config) -> anyhow::Result<(db::DbPool, db::DbPool)> {
    let timeouts = &config.database_timeouts;
    let total = config.database_pool_max;
    if config.app_role != AppRole::All {
        let pool = db::create_pool_with(url, total, timeouts)?;
        return Ok((pool.clone(), pool));
    }
    let api = total.div_ceil(2).max(1);
    let workers = total.saturating_sub(api).max(1);
    Ok((
        db::create_pool_with(url, api, timeouts)?,
        db::create_pool_with(url, workers, timeouts)?,
    ))
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

/// The URL without its password, for logs: neither the one before `@` nor a `password`
/// parameter of the query string is shown.
pub fn redact(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let base = match (base.find("://"), base.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            match base[scheme_end + 3..at].split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &base[..scheme_end + 3], &base[at..]),
                None => base.to_string(),
            }
        }
        _ => base.to_string(),
    };
    let Some(query) = query else {
        return base;
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if name.eq_ignore_ascii_case("password") => format!("{name}=***"),
            _ => pair.to_string(),
        })
        .collect();
    format!("{base}?{}", query.join("&"))
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
        assert_eq!(
            super::redact("postgres://u@h/db?sslmode=require&password=secret&x=1"),
            "postgres://u@h/db?sslmode=require&password=***&x=1"
        );
    }
}
