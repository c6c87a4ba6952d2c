//! `notify-local`: runs Notify Queue in one process for development (see README), applies
//! the migrations to a database (`migrate`, used on deploy) and manages API keys (`keys`).

use std::process::ExitCode;

use notify_shared::config::Config;

const HELP: &str = "\
notify-local: Notify Queue in one process (HTTP API, sweeper, simulated provider)

USAGE:
  notify-local                 serve everything (see APP_ROLE)
  notify-local migrate         apply pending migrations to DATABASE_URL, then exit
  notify-local keys create --scope client|operator [--name NAME]
  notify-local keys list
  notify-local keys revoke KEY_ID
  notify-local --help

Configuration comes from the environment (README lists every variable):
  APP_ROLE      all (default) | api | worker
  PORT          HTTP port on 127.0.0.1 (default 3000)
  DATABASE_URL  PostgreSQL URL; when unset a private PostgreSQL is started under target/
                (`migrate` and `keys` need it)
";

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{HELP}");
        return ExitCode::SUCCESS;
    }
    notify_shared::telemetry::init_logging();
    let config = match Config::from_env() {
        // The local runner allows http:// webhook endpoints unless told otherwise.
        Ok(mut config) => {
            config.webhook.allow_http.get_or_insert(true);
            config
        }
        Err(error) => {
            eprintln!("notify-local: {error}");
            return ExitCode::from(2);
        }
    };
    let result = match args.first().map(String::as_str) {
        None => notify_local::runner::run_local(config).await,
        Some("migrate") if args.len() == 1 => migrate(&config).await,
        Some("keys") => notify_local::keys::command(&config, &args[1..]).await,
        Some(_) => {
            eprintln!(
                "notify-local: unexpected arguments {:?}; see notify-local --help",
                args.join(" ")
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // Database errors without their DETAIL, which can quote a row (a key's hash).
            eprintln!(
                "notify-local: {}",
                notify_shared::telemetry::describe(&error)
            );
            ExitCode::FAILURE
        }
    }
}

/// `notify-local migrate`: applies what is pending under the migration lock (so it is safe
/// next to starting functions) and exits; a second run finds nothing to do.
async fn migrate(config: &Config) -> anyhow::Result<()> {
    let url = config.database_url.as_deref().ok_or_else(|| {
        anyhow::anyhow!("migrate needs DATABASE_URL: the database to bring up to date")
    })?;
    notify_shared::db::migrate(url).await?;
    eprintln!("notify-local: {} is up to date", notify_local::redact(url));
    Ok(())
}
