//! What the private server needs from the machine: the PostgreSQL binaries, an
//! unprivileged user when running as root, folders others can reach, a free port, a
//! random password, and a postmaster that dies with the process that started it.

use std::fs;
use std::io;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;

use anyhow::{Context, bail};

/// A folder holding both `initdb` and `postgres`: PATH first, then the newest
/// `/usr/lib/postgresql/<version>/bin`.
pub(super) fn find_bin_dir() -> Option<PathBuf> {
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
pub(super) struct UserIds {
    uid: libc::uid_t,
    gid: libc::gid_t,
}

/// As root: the `postgres` user if it exists, else `nobody`. Otherwise: run as ourselves.
pub(super) fn unprivileged_user() -> anyhow::Result<Option<UserIds>> {
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

pub(super) fn chown(path: &Path, user: UserIds) -> anyhow::Result<()> {
    std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid))
        .with_context(|| format!("cannot hand {} to the postgres user", path.display()))
}

/// Runs the command as `user` (when given) and, for the server, asks the kernel to send it
/// SIGINT when the thread that started it goes away.
pub(super) fn with_user(
    mut command: Command,
    user: Option<UserIds>,
    die_with_parent: bool,
) -> Command {
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
pub(super) fn spawn_from_parking_thread(mut command: Command) -> anyhow::Result<Child> {
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
pub(super) fn reachable_by_others(dir: &Path) -> bool {
    let Ok(dir) = dir.canonicalize() else {
        return false;
    };
    dir.ancestors()
        .all(|folder| fs::metadata(folder).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
}

/// 32 random letters and digits: safe in a URL as it is.
pub(super) fn random_password() -> String {
    use rand::Rng;
    rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(32)
        .map(char::from)
        .collect()
}

/// A new folder in the temporary directory with a random name, mode 711.
pub(super) fn private_temp_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("notify-queue-pg-{}", random_password()));
    fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o711))?;
    Ok(dir)
}

pub(super) fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    Ok(listener.local_addr()?.port())
}

/// Deletes clusters left by runners that were killed (their pid no longer exists).
pub(super) fn remove_stale_clusters(base_dir: &Path) {
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
