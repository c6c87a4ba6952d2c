//! `notify-local`: runs Notify Queue in one process for development (see README).

use notify_shared::config::Config;

const HELP: &str = "\
notify-local: Notify Queue in one process (HTTP API, sweeper, simulated provider)

USAGE: notify-local [--help]

Configuration comes from the environment (README lists every variable):
  APP_ROLE      all (default) | api | worker
  PORT          HTTP port on 127.0.0.1 (default 3000)
  DATABASE_URL  PostgreSQL URL; when unset a private PostgreSQL is started under target/
";

#[tokio::main]
async fn main() -> std::process::ExitCode {
    if std::env::args().skip(1).any(|a| a == "--help" || a == "-h") {
        print!("{HELP}");
        return std::process::ExitCode::SUCCESS;
    }
    notify_shared::telemetry::init_logging();
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("notify-local: {error}");
            return std::process::ExitCode::from(2);
        }
    };
    match notify_shared::runner::run_local(config).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("notify-local: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
