//! Real `notify-local` processes: started with a clean environment, their stderr kept in
//! `target/bench/logs/`, ready when `/health` answers 200, and killed when dropped.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::process::{Child, Command};

const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// A child's log is written to its file in pieces of up to this size, ...
const LOG_BUFFER: usize = 64 * 1024;
/// ... and at least this often.
const LOG_FLUSH: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Api,
    Worker,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Api => "api",
            Role::Worker => "worker",
        }
    }
}

/// How to start processes: the binary, where logs go, and extra environment.
#[derive(Debug, Clone)]
pub struct Launcher {
    pub binary: PathBuf,
    pub log_dir: PathBuf,
    pub extra_env: Vec<(String, String)>,
    pub http: reqwest::Client,
}

/// A running `notify-local`. Dropping it kills the process (SIGKILL).
pub struct Process {
    child: Child,
    pub pid: u32,
    pub base_url: String,
    /// From spawn until `/health` answered 200.
    pub ready_after: Duration,
}

impl Launcher {
    /// Starts one process on `database_url` and waits until `/health` answers 200.
    pub async fn start(
        &self,
        role: Role,
        database_url: &str,
        tag: &str,
    ) -> anyhow::Result<Process> {
        self.start_with(role, database_url, tag, &[]).await
    }

    /// [`Launcher::start`] with a scenario's own environment, applied last.
    pub async fn start_with(
        &self,
        role: Role,
        database_url: &str,
        tag: &str,
        env: &[(String, String)],
    ) -> anyhow::Result<Process> {
        let mut command = Command::new(&self.binary);
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DATABASE_URL", database_url)
            .env("APP_ROLE", role.as_str())
            .env("PORT", "0")
            .env("MOCK_LATENCY_MS", "0")
            .env("MOCK_FAILURE_RATE", "0")
            .env("RUST_LOG", "info")
            .envs(self.extra_env.iter().map(|(k, v)| (k, v)))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // SAFETY: prctl is async-signal-safe; it makes the child die if the bench dies.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let started = Instant::now();
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start {}", self.binary.display()))?;
        let pid = child.id().context("the process exited at once")?;
        let stderr = child.stderr.take().context("no stderr pipe")?;
        let log_path = self
            .log_dir
            .join(format!("{tag}-{}-{pid}.log", role.as_str()));
        let (address_tx, address_rx) = tokio::sync::oneshot::channel();
        tokio::spawn(forward_log(stderr, log_path.clone(), address_tx));
        let mut process = Process {
            child,
            pid,
            base_url: String::new(),
            ready_after: Duration::ZERO,
        };

        let deadline = started + READY_TIMEOUT;
        let address = tokio::select! {
            address = address_rx => address.ok(),
            () = tokio::time::sleep_until(deadline.into()) => None,
        };
        let Some(address) = address else {
            let status = process.child.try_wait().ok().flatten();
            bail!(
                "notify-local ({}) did not report its address (exit status {status:?}); see {}",
                role.as_str(),
                log_path.display()
            );
        };
        process.base_url = address;
        let health = format!("{}/health", process.base_url);
        loop {
            let answered = self
                .http
                .get(&health)
                .timeout(Duration::from_secs(2))
                .send()
                .await;
            if let Ok(response) = answered
                && response.status() == reqwest::StatusCode::OK
            {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "notify-local ({}) did not become healthy; see {}",
                    role.as_str(),
                    log_path.display()
                );
            }
            if let Ok(Some(status)) = process.child.try_wait() {
                bail!(
                    "notify-local ({}) exited with {status}; see {}",
                    role.as_str(),
                    log_path.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        process.ready_after = started.elapsed();
        Ok(process)
    }
}

impl Process {
    /// SIGTERM, then SIGKILL after `grace`.
    pub async fn stop(mut self, grace: Duration) {
        if let Ok(pid) = i32::try_from(self.pid) {
            // SAFETY: kill(2) on our own child, which has not been reaped yet.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }

    pub fn memory(&self) -> Option<Memory> {
        memory_of(self.pid)
    }
}

/// Resident memory from `/proc/<pid>/status`, in bytes.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Memory {
    pub rss: u64,
    /// High-water mark of RSS since the process started.
    pub hwm: u64,
}

pub fn memory_of(pid: u32) -> Option<Memory> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    };
    Some(Memory {
        rss: field("VmRSS:")?,
        hwm: field("VmHWM:")?,
    })
}

/// Copies the child's stderr to its log file and reports the listening address. The file
/// is written through a buffer flushed once a second and at the end: two writes per line
/// cost this process ~50 µs of CPU a request in B3, taken from the processes it measures.
async fn forward_log(
    stderr: tokio::process::ChildStderr,
    path: PathBuf,
    address: tokio::sync::oneshot::Sender<String>,
) {
    let mut address = Some(address);
    let mut file = tokio::fs::File::create(&path)
        .await
        .ok()
        .map(|file| BufWriter::with_capacity(LOG_BUFFER, file));
    let mut lines = BufReader::new(stderr).lines();
    let mut flush = tokio::time::interval(LOG_FLUSH);
    loop {
        // `next_line` is cancellation safe: a tick loses no part of a line.
        let line = tokio::select! {
            line = lines.next_line() => line,
            _ = flush.tick() => {
                if let Some(f) = file.as_mut() {
                    let _ = f.flush().await;
                }
                continue;
            }
        };
        let Ok(Some(line)) = line else { break };
        if let Some(at) = line.find("listening on http://")
            && let Some(sender) = address.take()
        {
            let url = line[at + "listening on ".len()..].trim().to_string();
            let _ = sender.send(url);
        }
        if let Some(f) = file.as_mut() {
            let _ = f.write_all(line.as_bytes()).await;
            let _ = f.write_all(b"\n").await;
        }
    }
    if let Some(f) = file.as_mut() {
        let _ = f.flush().await;
    }
}

/// `notify-local` next to this executable.
pub fn locate_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the running executable")?;
    let binary = exe.with_file_name("notify-local");
    if !binary.is_file() {
        bail!(
            "{} does not exist: build it with `cargo build --release --bins` (or drop --no-build)",
            binary.display()
        );
    }
    Ok(binary)
}

/// Size in bytes of each function binary next to this executable, if built.
pub fn binary_sizes(dir: &Path) -> Vec<(String, Option<u64>)> {
    [
        "intake-api",
        "sweeper",
        "webhook-drainer",
        "dlq-redrive",
        "notify-local",
    ]
    .iter()
    .map(|name| {
        let size = std::fs::metadata(dir.join(name)).ok().map(|m| m.len());
        (name.to_string(), size)
    })
    .collect()
}
