//! Facts about this machine and CPU accounting from `/proc`.

use serde::Serialize;

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// The fields of a `/proc/<pid>/stat` line that follow the command name. The name may
/// contain spaces; the fields resume after the last ')'.
fn stat_fields(text: &str) -> Option<Vec<&str>> {
    Some(text[text.rfind(')')? + 2..].split_whitespace().collect())
}

/// User + system CPU seconds of a process (all its threads), from `/proc/<pid>/stat`.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields = stat_fields(&text)?;
    // utime and stime are fields 14 and 15 of the full line, 12 and 13 after the name.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks_per_second())
}

pub fn self_cpu_seconds() -> Option<f64> {
    process_cpu_seconds(std::process::id())
}

/// Busy CPU seconds of the whole machine (all cores), from `/proc/stat`.
pub fn machine_busy_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let values: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal guest guest_nice
    let busy: f64 = [0usize, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|&i| values.get(i))
        .sum();
    Some(busy / ticks_per_second())
}

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cores: usize,
    pub cpu_model: String,
    pub memory_gib: f64,
    pub postgres_version: String,
    pub postgres: String,
    pub git_commit: String,
    pub git_dirty: bool,
    pub load_average_at_start: String,
    pub date_utc: String,
    pub kernel: String,
}

pub fn machine(postgres_version: String, postgres: String) -> Machine {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let memory_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            let line = t.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb / 1024.0 / 1024.0)
        })
        .unwrap_or(0.0);
    let load_average_at_start = std::fs::read_to_string("/proc/loadavg")
        .map(|t| t.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|t| t.trim().to_string())
        .unwrap_or_default();
    let (git_commit, git_dirty) = git();
    Machine {
        cores,
        cpu_model,
        memory_gib,
        postgres_version,
        postgres,
        git_commit,
        git_dirty,
        load_average_at_start,
        date_utc: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        kernel,
    }
}

/// The commit checked out in the workspace (read-only git commands).
fn git() -> (String, bool) {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(crate::WORKSPACE)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = run(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    // --no-optional-locks: status must not refresh (write) the index.
    let dirty = run(&[
        "--no-optional-locks",
        "status",
        "--porcelain",
        "--untracked-files=no",
    ])
    .is_some_and(|s| !s.is_empty());
    (commit, dirty)
}

/// CPU seconds of a PostgreSQL server: the postmaster (with its reaped children) plus
/// every live child (backends, autovacuum, WAL writer, checkpointer...).
pub fn postgres_server_cpu_seconds(postmaster: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{postmaster}/stat")).ok()?;
    // utime, stime, cutime, cstime: fields 14-17 of the line, 12-15 after the name.
    let mut ticks: f64 = stat_fields(&text)?
        .get(11..15)?
        .iter()
        .map(|v| v.parse::<f64>().unwrap_or(0.0))
        .sum();
    let parent = postmaster.to_string();
    for entry in std::fs::read_dir("/proc").ok()?.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(fields) = stat_fields(&stat) else {
            continue;
        };
        // ppid is field 4 of the line, 2 after the name.
        if fields.get(1) == Some(&parent.as_str()) {
            let utime: f64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0);
            let stime: f64 = fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
            ticks += utime + stime;
        }
    }
    Some(ticks / ticks_per_second())
}

/// The postmaster's pid, from `postmaster.pid` in the server's data folder (readable
/// only when the server runs on this machine and we may read its folder).
pub fn postmaster_pid(data_directory: &str) -> Option<u32> {
    let text = std::fs::read_to_string(format!("{data_directory}/postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// CPU seconds spent so far by the parts of the machine.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuSnapshot {
    pub machine: Option<f64>,
    pub processes: Option<f64>,
    pub postgres: Option<f64>,
    pub bench: Option<f64>,
}

/// Where the CPU went between two snapshots (seconds).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CpuUse {
    pub wall_s: f64,
    pub machine_busy_s: Option<f64>,
    pub notify_local_s: Option<f64>,
    pub postgres_s: Option<f64>,
    pub bench_s: Option<f64>,
    /// Busy time of the machine not spent by notify-local, PostgreSQL or the bench:
    /// other users of this shared machine.
    pub others_s: Option<f64>,
}

pub fn snapshot(pids: &[u32], postmaster: Option<u32>) -> CpuSnapshot {
    let processes = pids
        .iter()
        .map(|&pid| process_cpu_seconds(pid))
        .sum::<Option<f64>>();
    CpuSnapshot {
        machine: machine_busy_seconds(),
        processes,
        postgres: postmaster.and_then(postgres_server_cpu_seconds),
        bench: self_cpu_seconds(),
    }
}

pub fn cpu_use(before: CpuSnapshot, after: CpuSnapshot, wall_s: f64) -> CpuUse {
    let delta = |a: Option<f64>, b: Option<f64>| Some(b? - a?);
    let machine = delta(before.machine, after.machine);
    let processes = delta(before.processes, after.processes);
    let postgres = delta(before.postgres, after.postgres);
    let bench = delta(before.bench, after.bench);
    let others = (|| Some((machine? - processes? - postgres? - bench?).max(0.0)))();
    CpuUse {
        wall_s,
        machine_busy_s: machine,
        notify_local_s: processes,
        postgres_s: postgres,
        bench_s: bench,
        others_s: others,
    }
}
