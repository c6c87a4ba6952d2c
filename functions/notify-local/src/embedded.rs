//! A private PostgreSQL server for development and tests, started from the machine's own
//! PostgreSQL binaries when no `DATABASE_URL` is given, and removed again on exit.
//!
//! PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user
//! (or `nobody`). The server is told to stop when the process that started it dies, so
//! even a SIGKILLed runner leaves no server behind; its data folder is swept up by the
//! next start.

use std::fs;
use std::io;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};

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

    /// Starts the postmaster on this server's data folder and port.
    fn launch(&self) -> anyhow::Result<Child> {
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
            .stderr(Stdio::null());
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

    fn wait_until_ready(&self) -> anyhow::Result<()> {
        let started = Instant::now();
        let pid_file = self.data_dir.join("postmaster.pid");
        while started.elapsed() < READY_TIMEOUT {
            // Line 8 of postmaster.pid is the server state; "ready" once it accepts connections.
            if let Ok(text) = fs::read_to_string(&pid_file)
                && text.lines().nth(7).map(str::trim) == Some("ready")
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("the embedded PostgreSQL did not become ready within {READY_TIMEOUT:?}")
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

/// A folder holding both `initdb` and `postgres`: PATH first, then the newest
/// `/usr/lib/postgresql/<version>/bin`.
fn find_bin_dir() -> Option<PathBuf> {
    let has_both = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    if let Some(path) = std::env::var_os("PATH")
        && let Some(dir) = std::env::split_paths(&path).find(|d| has_both(d))
    {
        return Some(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            has_both(&bin).then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

#[derive(Clone, Copy)]
struct UserIds {
    uid: libc::uid_t,
    gid: libc::gid_t,
}

/// As root: the `postgres` user if it exists, else `nobody`. Otherwise: run as ourselves.
fn unprivileged_user() -> anyhow::Result<Option<UserIds>> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    for name in ["postgres", "nobody"] {
        let c_name = std::ffi::CString::new(name)?;
        // SAFETY: getpwnam reads the passwd database; the result is copied out at once and
        // start-up is single-threaded with respect to other getpw* callers.
        let entry = unsafe { libc::getpwnam(c_name.as_ptr()) };
        if !entry.is_null() {
            // SAFETY: non-null pointer returned by getpwnam.
            let (uid, gid) = unsafe { ((*entry).pw_uid, (*entry).pw_gid) };
            return Ok(Some(UserIds { uid, gid }));
        }
    }
    bail!(
        "running as root, but neither a `postgres` nor a `nobody` user exists to run PostgreSQL as"
    )
}

fn chown(path: &Path, user: UserIds) -> anyhow::Result<()> {
    std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid))
        .with_context(|| format!("cannot hand {} to the postgres user", path.display()))
}

/// Runs the command as `user` (when given) and, for the server, asks the kernel to send it
/// SIGINT when the thread that started it goes away.
fn with_user(mut command: Command, user: Option<UserIds>, die_with_parent: bool) -> Command {
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
    // system calls.
    unsafe {
        command.pre_exec(move || {
            if let Some(user) = user
                && (libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(user.gid) != 0
                    || libc::setuid(user.uid) != 0)
            {
                return Err(io::Error::last_os_error());
            }
            // Set after the user change, which would clear it.
            if die_with_parent && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
}

/// The parent-death signal fires when the *thread* that forked exits, so the server is
/// started from a thread that lives as long as the process.
fn spawn_from_parking_thread(mut command: Command) -> anyhow::Result<Child> {
    let (sender, receiver) = mpsc::channel();
    std::thread::Builder::new()
        .name("embedded-postgres".into())
        .spawn(move || {
            let _ = sender.send(command.spawn());
            loop {
                std::thread::park();
            }
        })
        .context("cannot start the embedded PostgreSQL thread")?;
    receiver
        .recv()
        .context("the embedded PostgreSQL thread ended early")?
        .context("cannot start postgres")
}

/// Every folder from the root down to `dir` lets other users pass through.
fn reachable_by_others(dir: &Path) -> bool {
    let Ok(dir) = dir.canonicalize() else {
        return false;
    };
    dir.ancestors()
        .all(|folder| fs::metadata(folder).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
}

/// 32 random letters and digits: safe in a URL as it is.
fn random_password() -> String {
    use rand::Rng;
    rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(32)
        .map(char::from)
        .collect()
}

/// A new folder in the temporary directory with a random name, mode 711.
fn private_temp_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("notify-queue-pg-{}", random_password()));
    fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o711))?;
    Ok(dir)
}

fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    Ok(listener.local_addr()?.port())
}

/// Deletes clusters left by runners that were killed (their pid no longer exists).
fn remove_stale_clusters(base_dir: &Path) {
    let Ok(entries) = fs::read_dir(base_dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}
