//! A private PostgreSQL server for development and tests, started from the machine's own
//! PostgreSQL binaries when no `DATABASE_URL` is given, and removed again on exit.
//!
//! PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user
//! (or `nobody`). The server is told to stop when the process that started it dies, so
//! even a SIGKILLed runner leaves no server behind; its data folder is swept up by the
//! next start.

mod host;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};

use host::{
    UserIds, chown, find_bin_dir, free_port, private_temp_dir, random_password,
    reachable_by_others, remove_stale_clusters, spawn_from_parking_thread, unprivileged_user,
    with_user,
};

/// The message shown when there is neither a URL nor PostgreSQL on the machine.
pub const NO_POSTGRES_HELP: &str = "No DATABASE_URL is set and no PostgreSQL server binaries \
(initdb and postgres) were found on PATH or under /usr/lib/postgresql/*/bin. Either install \
PostgreSQL (for example `apt-get install postgresql`), or start one with `docker compose up -d` \
from the repository and set DATABASE_URL=postgres://postgres:postgres@127.0.0.1:5432/notify_queue";

const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A running private server. Dropping it stops the server and deletes its data folder.
pub struct EmbeddedPostgres {
    data_dir: PathBuf,
    port: u16,
    /// The `postgres` user's password, random per cluster.
    password: String,
    /// Where `postgres` lives and whom it runs as: kept so [`EmbeddedPostgres::restart`]
    /// can launch it again exactly as [`EmbeddedPostgres::start`] did.
    bin_dir: PathBuf,
    run_as: Option<UserIds>,
    child: Option<Child>,
}

impl EmbeddedPostgres {
    /// Creates a cluster in a new folder under `base_dir` and starts it on a free port of
    /// 127.0.0.1. Blocks until the server accepts connections.
    pub fn start(base_dir: &Path) -> anyhow::Result<Self> {
        let bin_dir = find_bin_dir().ok_or_else(|| anyhow!(NO_POSTGRES_HELP))?;
        let run_as = unprivileged_user()?;

        fs::create_dir_all(base_dir)
            .with_context(|| format!("cannot create {}", base_dir.display()))?;
        // PostgreSQL runs in its data folder: a relative path would be resolved again
        // from there (the socket folder, the log), so every path handed to it is absolute.
        let base_dir = &fs::canonicalize(base_dir)
            .with_context(|| format!("cannot resolve {}", base_dir.display()))?;
        // As root the server runs as another user, who must be able to reach the folder;
        // under a private home (mode 700) it cannot, so use a new folder of the temporary
        // directory instead: a random name, created here (never one that already exists),
        // that others may pass through but not list.
        let fallback;
        let base_dir = if run_as.is_some() && !reachable_by_others(base_dir) {
            fallback = private_temp_dir()?;
            fallback.as_path()
        } else {
            let _ = fs::set_permissions(base_dir, fs::Permissions::from_mode(0o755));
            base_dir
        };
        remove_stale_clusters(base_dir);

        let port = free_port()?;
        let data_dir = base_dir.join(format!("{}-{port}", std::process::id()));
        fs::create_dir_all(&data_dir)?;
        fs::set_permissions(&data_dir, fs::Permissions::from_mode(0o700))?;
        // Password authentication with a random password, even on loopback: other users
        // of the machine cannot connect.
        let password = random_password();
        let password_file = base_dir.join(format!(".{}-{port}.pw", std::process::id()));
        fs::write(&password_file, &password)?;
        fs::set_permissions(&password_file, fs::Permissions::from_mode(0o600))?;
        if let Some(user) = run_as {
            chown(&data_dir, user)?;
            chown(&password_file, user)?;
        }

        let output = with_user(Command::new(bin_dir.join("initdb")), run_as, false)
            .args(["-D"])
            .arg(&data_dir)
            .args([
                "-U",
                "postgres",
                "-A",
                "scram-sha-256",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .arg(format!("--pwfile={}", password_file.display()))
            .stdin(Stdio::null())
            .output()
            .context("cannot run initdb");
        let _ = fs::remove_file(&password_file);
        let output = output?;
        if !output.status.success() {
            let _ = fs::remove_dir_all(&data_dir);
            bail!(
                "initdb failed for {} (as root, every folder above it must be readable by the \
                 postgres user): {}",
                data_dir.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }

        let mut server = EmbeddedPostgres {
            data_dir,
            port,
            password,
            bin_dir,
            run_as,
            child: None,
        };
        server.child = Some(server.launch()?);
        server.wait_until_ready()?;
        Ok(server)
    }

    /// Where the server writes its own messages (read when it fails to start).
    fn log_file(&self) -> PathBuf {
        self.data_dir.join("server.log")
    }

    /// Starts the postmaster on this server's data folder and port; its messages go to
    /// [`Self::log_file`].
    fn launch(&self) -> anyhow::Result<Child> {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_file())
            .with_context(|| format!("cannot open {}", self.log_file().display()))?;
        let mut command = with_user(
            Command::new(self.bin_dir.join("postgres")),
            self.run_as,
            true,
        );
        command
            .arg("-D")
            .arg(&self.data_dir)
            .args([
                "-p",
                &self.port.to_string(),
                "-c",
                "listen_addresses=127.0.0.1",
            ])
            .arg("-c")
            .arg(format!(
                "unix_socket_directories={}",
                self.data_dir.display()
            ))
            .args(["-c", "max_connections=300"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        spawn_from_parking_thread(command)
    }

    /// Restarts the server in place: a fast shutdown (every connection is dropped), `down_for`
    /// with nothing listening, then a new postmaster on the same data folder and port.
    /// Blocks until it accepts connections again. The chaos tests use it to show that
    /// running processes reconnect by themselves.
    pub fn restart(&mut self, down_for: Duration) -> anyhow::Result<()> {
        self.shut_down();
        std::thread::sleep(down_for);
        self.child = Some(self.launch()?);
        self.wait_until_ready()
    }

    /// A URL for the `postgres` database of this server.
    pub fn url(&self) -> String {
        self.url_for("postgres")
    }

    pub fn url_for(&self, database: &str) -> String {
        // A private server on loopback: TLS would only cost start-up time.
        format!(
            "postgres://postgres:{}@127.0.0.1:{}/{database}?sslmode=disable",
            self.password, self.port
        )
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Process id of the postmaster (tests use it to restart or inspect the server).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Waits for the server to accept connections; a server that exits first is reported
    /// at once, with the end of its log.
    fn wait_until_ready(&mut self) -> anyhow::Result<()> {
        let started = Instant::now();
        let pid_file = self.data_dir.join("postmaster.pid");
        while started.elapsed() < READY_TIMEOUT {
            // Line 8 of postmaster.pid is the server state; "ready" once it accepts connections.
            if let Ok(text) = fs::read_to_string(&pid_file)
                && text.lines().nth(7).map(str::trim) == Some("ready")
            {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                bail!(
                    "the embedded PostgreSQL exited ({status}) before it accepted connections: {}",
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!(
            "the embedded PostgreSQL did not become ready within {READY_TIMEOUT:?}: {}",
            self.log_tail()
        )
    }

    /// The last lines of the server's log, for an error message.
    fn log_tail(&self) -> String {
        let text = fs::read_to_string(self.log_file()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(5)..].join(" | ");
        if tail.is_empty() {
            format!("nothing in {}", self.log_file().display())
        } else {
            tail
        }
    }

    /// Fast shutdown, then the data folder is deleted.
    pub fn stop(&mut self) {
        self.shut_down();
        let _ = fs::remove_dir_all(&self.data_dir);
        // The private temporary folder made for this cluster, now empty.
        if let Some(parent) = self.data_dir.parent()
            && parent
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("notify-queue-pg-"))
        {
            let _ = fs::remove_dir(parent);
        }
    }

    /// Fast shutdown of the postmaster, if it runs; the data folder stays.
    fn shut_down(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGINT is PostgreSQL's "fast" shutdown: roll back open transactions and exit.
            if let Ok(pid) = i32::try_from(child.id()) {
                // SAFETY: plain kill(2) on our own child's pid.
                unsafe { libc::kill(pid, libc::SIGINT) };
            }
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() > deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
    }
}

impl Drop for EmbeddedPostgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Where the runner keeps its private clusters: `<target>/embedded-postgres`, found from
/// the running executable (`target/<profile>/notify-local`), else `./target`.
pub fn default_base_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("CARGO_TARGET_DIR") {
        return PathBuf::from(dir).join("embedded-postgres");
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .find(|p| p.file_name().is_some_and(|n| n == "target"))
                .map(Path::to_path_buf)
        })
        .unwrap_or_else(|| PathBuf::from("target"))
        .join("embedded-postgres")
}
