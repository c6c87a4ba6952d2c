//! `notify-bench`: the benchmark of docs/BENCHMARKS.md in one command. It drives real
//! `notify-local` processes on a fresh database per scenario, prints a table, writes the
//! raw figures as JSON and, after a complete full-size run, rewrites the docs and plot.

mod args;
mod load;
mod plot;
mod procs;
mod report;
mod scenarios;
mod server;
mod stats;
mod sys;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use tokio::signal::unix::{SignalKind, signal};

use crate::args::Options;
use crate::report::{Results, Settings};
use crate::scenarios::Ctx;

/// The workspace this binary was built from (docs live there).
const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
const BUILD_TIMEOUT: Duration = Duration::from_secs(40 * 60);

#[tokio::main]
async fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let options = match Options::parse(&argv) {
        Ok(Some(options)) => options,
        Ok(None) => {
            print!("{}", args::HELP);
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("notify-bench: {error:#}");
            return ExitCode::from(2);
        }
    };
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(error) => {
            eprintln!("notify-bench: cannot watch SIGTERM: {error}");
            return ExitCode::FAILURE;
        }
    };
    // Whatever ends the run, its future is dropped and with it every guard: processes are
    // killed, databases dropped, the private PostgreSQL stopped.
    let outcome = tokio::select! {
        outcome = run(options, &argv) => outcome,
        _ = tokio::signal::ctrl_c() => Err(anyhow!("interrupted")),
        _ = terminate.recv() => Err(anyhow!("terminated")),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("notify-bench: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(options: Options, argv: &[String]) -> anyhow::Result<()> {
    let began = Instant::now();
    if options.build {
        build().await?;
    }
    let binary = procs::locate_binary()?;
    let release_dir = binary
        .parent()
        .context("notify-local has no parent folder")?
        .to_path_buf();
    // target/release/notify-local → target/bench
    let out_dir = release_dir
        .parent()
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf)
        .join("bench");
    let log_dir = out_dir.join("logs");
    if log_dir.is_dir() {
        std::fs::remove_dir_all(&log_dir)
            .with_context(|| format!("cannot clear {}", log_dir.display()))?;
    }
    std::fs::create_dir_all(&log_dir)
        .with_context(|| format!("cannot create {}", log_dir.display()))?;

    let http = reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(64)
        .timeout(Duration::from_secs(120))
        .build()
        .context("cannot build the HTTP client")?;
    let server = server::Server::start().await?;
    let admin = server.admin().await?;
    let version: String = admin
        .query_one("SHOW server_version", &[])
        .await?
        .try_get(0)?;
    let full_version: String = admin.query_one("SELECT version()", &[]).await?.try_get(0)?;
    let data_directory: Option<String> = admin
        .query_one("SHOW data_directory", &[])
        .await
        .ok()
        .and_then(|row| row.try_get(0).ok());
    drop(admin);
    let postmaster = data_directory.as_deref().and_then(sys::postmaster_pid);
    if postmaster.is_none() {
        eprintln!(
            "notify-bench: cannot see the PostgreSQL server's processes; PostgreSQL CPU is not reported"
        );
    }
    let where_pg = if server.embedded {
        "private server started by the bench (initdb defaults but max_connections=300), reached without TLS"
            .to_string()
    } else {
        let url = std::env::var("DATABASE_URL").unwrap_or_default();
        let tls = if url.contains("sslmode=disable") {
            "without TLS (sslmode=disable)"
        } else if url.contains("sslmode=") {
            "with the URL's sslmode"
        } else {
            "with TLS whenever the server offers it (no sslmode: prefer)"
        };
        format!("DATABASE_URL's server, reached {tls}")
    };
    let machine = sys::machine(
        version,
        format!(
            "{where_pg}; {}",
            full_version.split(',').next().unwrap_or_default()
        ),
    );
    eprintln!(
        "notify-bench: {} cores, {:.1} GiB, PostgreSQL {}, commit {}, load average {}",
        machine.cores,
        machine.memory_gib,
        machine.postgres_version,
        &machine.git_commit[..machine.git_commit.len().min(12)],
        machine.load_average_at_start
    );

    let ctx = Ctx {
        server,
        launcher: procs::Launcher {
            binary,
            log_dir,
            extra_env: options.extra_env.clone(),
            http: http.clone(),
        },
        options: options.clone(),
        http,
        postmaster,
    };

    let mut runs = Vec::new();
    for run in 1..=options.runs {
        eprintln!("notify-bench: run {run} of {}", options.runs);
        runs.push(scenarios::one_run(&ctx, run).await?);
        eprintln!(
            "notify-bench: run {run} done after {:.1} min in all",
            began.elapsed().as_secs_f64() / 60.0
        );
    }

    let sizes = procs::binary_sizes(&release_dir);
    let rows = report::summarize(&runs, &options, &sizes);
    let mut command = "cargo run --release --bin notify-bench".to_string();
    if !argv.is_empty() {
        command.push_str(" -- ");
        command.push_str(&argv.join(" "));
    }
    if let Ok(url) = std::env::var("DATABASE_URL")
        && !url.trim().is_empty()
    {
        command = format!("DATABASE_URL={} {command}", notify_local::redact(&url));
    }
    let results = Results {
        command,
        machine,
        settings: Settings {
            size: options.size,
            runs: options.runs,
            intake_calls_in_flight: options.b1_inflight,
            worker_counts: options.workers.clone(),
            notify_local_env: options.extra_env.clone(),
        },
        binary_sizes: sizes,
        elapsed_s: began.elapsed().as_secs_f64(),
        rows,
        runs,
    };

    println!("\n{}", report::table(&results.rows));
    let json_path = out_dir.join("results.json");
    write(&json_path, serde_json::to_vec_pretty(&results)?)?;
    println!("raw figures: {}", json_path.display());

    let series = plot::series(&results.runs);
    match options.docs_refusal() {
        None => {
            let docs = Path::new(WORKSPACE).join("docs");
            let plot_dir = docs.join("benchmarks");
            std::fs::create_dir_all(&plot_dir)
                .with_context(|| format!("cannot create {}", plot_dir.display()))?;
            if !series.is_empty() {
                plot::latency_cdf(&plot_dir.join("latency.svg"), &series)?;
            }
            // The raw figures behind the published ones stay next to them.
            let raw = plot_dir.join("results.json");
            write(&raw, serde_json::to_vec_pretty(&results)?)?;
            let path = docs.join("BENCHMARKS.md");
            write(&path, report::markdown(&results, &options))?;
            println!(
                "rewrote {}, {} and {}",
                path.display(),
                plot_dir.join("latency.svg").display(),
                raw.display()
            );
        }
        Some(reason) => {
            if !series.is_empty() {
                let path = out_dir.join("latency.svg");
                plot::latency_cdf(&path, &series)?;
                println!("plot: {}", path.display());
            }
            let path = out_dir.join("BENCHMARKS.md");
            write(&path, report::markdown(&results, &options))?;
            println!(
                "docs/BENCHMARKS.md left alone ({reason}); this run's report: {}",
                path.display()
            );
        }
    }
    Ok(())
}

/// Writes one output file, naming it in the error.
fn write(path: &Path, contents: impl AsRef<[u8]>) -> anyhow::Result<()> {
    std::fs::write(path, contents).with_context(|| format!("cannot write {}", path.display()))
}

/// `cargo build --release --bins --workspace`, so notify-local and the function binaries
/// whose sizes B6 reports are current.
async fn build() -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!("notify-bench: cargo build --release --bins --workspace (skip with --no-build)");
    let mut child = tokio::process::Command::new(cargo)
        .args(["build", "--release", "--bins", "--workspace"])
        .current_dir(WORKSPACE)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("cannot run cargo")?;
    let status = tokio::time::timeout(BUILD_TIMEOUT, child.wait())
        .await
        .map_err(|_| anyhow!("the release build took longer than {BUILD_TIMEOUT:?}"))?
        .context("cargo build failed to run")?;
    if !status.success() {
        bail!("cargo build --release --bins --workspace failed ({status})");
    }
    Ok(())
}
