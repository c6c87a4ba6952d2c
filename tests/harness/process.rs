//! Real `notify-local` processes: one with its stderr captured in memory ([`Process`]),
//! the set a test started ([`Children`], killed when dropped), and a fleet of workers
//! logging to files ([`Fleet`], for the chaos scenarios).

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tempfile::TempDir;
use uuid::Uuid;

use crate::notify_local_binary;

/// A worker-only `notify-local` on `database_url`, HTTP on a port the OS picks, logging
/// warnings, with `env` on top.
pub fn worker_command(database_url: &str, env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(notify_local_binary());
    command
        .env("APP_ROLE", "worker")
        .env("DATABASE_URL", database_url)
        .env("PORT", "0")
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied());
    command
}

/// A running `notify-local` and everything it wrote to stderr so far.
pub struct Process {
    pub child: Child,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Process {
    pub fn spawn(command: &mut Command) -> Process {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start notify-local");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let pipe = child.stderr.take().expect("stderr");
        let lines = stderr.clone();
        // Drain stderr continuously so the child never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                lines.lock().expect("log").push(line);
            }
        });
        Process { child, stderr }
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid")
    }

    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid, which we have not reaped yet.
        let result = unsafe { libc::kill(self.pid(), signal) };
        assert_eq!(result, 0, "kill({}, {signal})", self.pid());
    }

    pub fn log(&self) -> String {
        self.stderr.lock().expect("log").join("\n")
    }

    /// The first stderr line containing `marker`, with what follows the marker.
    pub async fn wait_for_line(&mut self, marker: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(rest) = self.stderr.lock().expect("log").iter().find_map(|l| {
                l.split_once(marker)
                    .map(|(_, rest)| rest.trim().to_string())
            }) {
                return rest;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "notify-local exited ({status}) before {marker:?}:\n{}",
                    self.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "no {marker:?} within {limit:?}:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "notify-local {} did not exit within {limit:?}:\n{}",
                self.pid(),
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Owns every child a test starts and SIGKILLs whatever is still running when dropped, so
/// a failing test leaves no process behind.
#[derive(Default)]
pub struct Children(pub Vec<Process>);

impl Children {
    /// Starts `command`; returns its index.
    pub fn start(&mut self, command: &mut Command) -> usize {
        self.0.push(Process::spawn(command));
        self.0.len() - 1
    }

    /// Every child's log, each under its pid.
    pub fn logs(&self) -> String {
        self.0
            .iter()
            .map(|p| format!("--- {}:\n{}", p.child.id(), p.log()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for process in &mut self.0 {
            if matches!(process.child.try_wait(), Ok(None)) {
                let _ = process.child.kill();
            }
            let _ = process.child.wait();
        }
    }
}

/// A child process that is SIGKILLed and reaped when this is dropped.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Processes (other than zombies) whose command line mentions `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<(String, String)> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| {
            let raw = fs::read(e.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
            cmdline
                .contains(needle)
                .then(|| (e.file_name().to_string_lossy().into_owned(), cmdline))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// A fleet of workers logging to files
// ---------------------------------------------------------------------------------------

pub struct Worker {
    pub child: Child,
    pub log: PathBuf,
}

impl Worker {
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid")
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// Every worker a scenario started, and every log they wrote. Dropping it SIGKILLs the ones
/// still running and removes the logs.
pub struct Fleet {
    url: String,
    env: Vec<(&'static str, String)>,
    pub running: Vec<Worker>,
    logs: Vec<PathBuf>,
    dir: TempDir,
}

impl Fleet {
    pub fn new(url: &str, env: Vec<(&'static str, String)>) -> Fleet {
        let dir = tempfile::Builder::new()
            .prefix("notify-queue-chaos-")
            .tempdir()
            .expect("a folder for the logs");
        Fleet {
            url: url.to_string(),
            env,
            running: Vec::new(),
            logs: Vec::new(),
            dir,
        }
    }

    /// Starts one more worker-only `notify-local`; returns its pid.
    pub fn spawn(&mut self) -> i32 {
        let log = self
            .dir
            .path()
            .join(format!("worker-{}.log", self.logs.len()));
        let stderr = fs::File::create(&log).expect("create a log file");
        let child = Command::new(notify_local_binary())
            .env("APP_ROLE", "worker")
            .env("DATABASE_URL", &self.url)
            .env("PORT", "0")
            .envs(self.env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start notify-local");
        self.logs.push(log.clone());
        let worker = Worker { child, log };
        let pid = worker.pid();
        self.running.push(worker);
        pid
    }

    /// Panics (with the log) if a worker exited although nobody killed it.
    pub fn assert_all_running(&mut self) {
        for worker in &mut self.running {
            if !worker.is_running() {
                panic!(
                    "worker {} exited by itself ({:?}):\n{}",
                    worker.pid(),
                    worker.child.try_wait(),
                    tail(&worker.log, 40)
                );
            }
        }
    }

    /// SIGKILLs one running worker, chosen at random, and confirms the kill took it.
    pub fn kill_random(&mut self) {
        let index = (Uuid::new_v4().as_u128() % self.running.len() as u128) as usize;
        let mut worker = self.running.swap_remove(index);
        worker.child.kill().expect("SIGKILL");
        let status = worker.child.wait().expect("reap");
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "worker {} ended otherwise: {status}",
            worker.pid()
        );
    }

    /// SIGTERMs every running worker and waits for each to exit; panics unless all exit 0.
    pub async fn stop_all(&mut self, limit: Duration) {
        for worker in &self.running {
            // SAFETY: kill(2) on our own, not yet reaped child.
            unsafe { libc::kill(worker.pid(), libc::SIGTERM) };
        }
        let deadline = Instant::now() + limit;
        for worker in &mut self.running {
            loop {
                match worker.child.try_wait().expect("try_wait") {
                    Some(status) => {
                        assert!(
                            status.success(),
                            "worker {} stopped with {status}:\n{}",
                            worker.child.id(),
                            tail(&worker.log, 40)
                        );
                        break;
                    }
                    None if Instant::now() > deadline => {
                        panic!("worker {} ignored SIGTERM for {limit:?}", worker.child.id())
                    }
                    None => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        }
        self.running.clear();
    }

    /// Lines of every log, of every worker ever started, that contain `needle`.
    pub fn lines_containing(&self, needle: &str) -> Vec<String> {
        self.logs
            .iter()
            .flat_map(|log| {
                fs::read_to_string(log)
                    .unwrap_or_default()
                    .lines()
                    .filter(|line| line.contains(needle))
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The end of each running worker's log, for failure messages.
    pub fn tails(&self) -> String {
        self.running
            .iter()
            .map(|w| format!("--- worker {}:\n{}", w.child.id(), tail(&w.log, 15)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for worker in &mut self.running {
            if worker.is_running() {
                let _ = worker.child.kill();
            }
            let _ = worker.child.wait();
        }
    }
}

/// The last `lines` lines of a log file.
pub fn tail(log: &Path, lines: usize) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
