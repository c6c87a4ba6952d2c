//! The summary table, the JSON file and docs/BENCHMARKS.md.

use std::fmt::Write as _;

use serde::Serialize;

use crate::args::Options;
use crate::floor::{Floor, VARIANTS};
use crate::scenarios::{DrainPass, Idle, Isolation, Single, StartTimes};
use crate::stats::{Spread, int, mb, ms};
use crate::sys::Machine;

#[derive(Debug, Clone, Serialize, Default)]
pub struct RunResult {
    pub run: u32,
    pub drains: Vec<DrainPass>,
    pub single: Option<Single>,
    pub idle: Option<Idle>,
    pub isolation: Option<Isolation>,
    pub start: Option<StartTimes>,
    pub floors: Vec<Floor>,
}

impl RunResult {
    fn drain(&self, workers: usize) -> Option<&DrainPass> {
        self.drains.iter().find(|d| d.workers == workers)
    }

    fn floor(&self, batch: i64, connections: usize, admission: bool) -> Option<&Floor> {
        self.floors.iter().find(|f| {
            f.variant.batch == batch
                && f.variant.connections == connections
                && f.variant.admission == admission
        })
    }

    /// B2 with one worker ÷ the best bare floor at the worker's batch size (100).
    fn drain_over_floor(&self) -> Option<f64> {
        let drain = self.drain(1)?.drain_per_s;
        let floor = [1, 2]
            .iter()
            .filter_map(|&c| self.floor(100, c, false).map(|f| f.per_s))
            .fold(None, |best: Option<f64>, v| {
                Some(best.map_or(v, |b| b.max(v)))
            })?;
        Some(drain / floor)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub id: &'static str,
    pub what: String,
    pub result: String,
    pub target: &'static str,
    pub meets: Option<bool>,
    pub notifyd_2_cores: &'static str,
    pub notifyd_published: &'static str,
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub size: u64,
    pub runs: u32,
    pub intake_calls_in_flight: usize,
    pub worker_counts: Vec<usize>,
    pub notify_local_env: Vec<(String, String)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub command: String,
    pub machine: Machine,
    pub settings: Settings,
    pub binary_sizes: Vec<(String, Option<u64>)>,
    pub elapsed_s: f64,
    pub rows: Vec<Row>,
    pub runs: Vec<RunResult>,
}

fn spread<'a>(runs: &'a [RunResult], f: impl Fn(&'a RunResult) -> Option<f64>) -> Option<Spread> {
    Spread::of(&runs.iter().filter_map(f).collect::<Vec<_>>())
}

fn median_of(values: &[f64]) -> Option<f64> {
    Spread::of(values).map(|s| s.median)
}

fn row(
    id: &'static str,
    what: impl Into<String>,
    headline: Option<Spread>,
    result: String,
    target: &'static str,
    meets: Option<bool>,
    peers: (&'static str, &'static str),
) -> Row {
    Row {
        id,
        what: what.into(),
        result,
        target,
        meets,
        notifyd_2_cores: peers.0,
        notifyd_published: peers.1,
        median: headline.map(|s| s.median),
        min: headline.map(|s| s.min),
        max: headline.map(|s| s.max),
    }
}

const NOT_RUN: &str = "not run";

pub fn summarize(
    runs: &[RunResult],
    options: &Options,
    sizes: &[(String, Option<u64>)],
) -> Vec<Row> {
    let mut rows = Vec::new();
    let n = options.bulk();
    let first_workers = options.workers.first().copied().unwrap_or(1);

    // B1
    let b1 = spread(runs, |r| r.drain(first_workers).map(|d| d.intake_per_s));
    rows.push(row(
        "B1",
        format!("batch intake, {} via 20 calls", int(n as f64)),
        b1,
        b1.map_or(NOT_RUN.into(), |s| format!("{} /s", s.show(int))),
        "≥ 60,000 /s",
        b1.map(|s| s.median >= 60_000.0),
        ("≈ 35,000 /s", "44,546 /s"),
    ));

    // B2
    let b2 = spread(runs, |r| r.drain(1).map(|d| d.drain_per_s));
    let mut text = b2.map_or(NOT_RUN.into(), |s| format!("{} /s (1 worker)", s.show(int)));
    for &w in options.workers.iter().filter(|&&w| w != 1) {
        if let Some(s) = spread(runs, |r| r.drain(w).map(|d| d.drain_per_s)) {
            let _ = write!(text, "; {w} workers: {} /s", int(s.median));
        }
    }
    rows.push(row(
        "B2",
        format!("drain {} released at once", int(n as f64)),
        b2,
        text,
        "≥ 10,000 /s, 1 worker",
        b2.map(|s| s.median >= 10_000.0),
        (
            "≈ 3,150 /s (≈ 7,200 /s with a 10 ms poll)",
            "3,537 /s (provider batching); 640 /s without",
        ),
    ));

    // B3
    let b3 = spread(runs, |r| r.single.as_ref().map(|s| s.http_per_s));
    let p50 = spread(runs, |r| r.single.as_ref().map(|s| s.http_latency.p50_ms));
    let p99 = spread(runs, |r| r.single.as_ref().map(|s| s.http_latency.p99_ms));
    let floor = spread(runs, |r| r.single.as_ref().map(|s| s.floor_per_s));
    let ratio = spread(runs, |r| r.single.as_ref().map(|s| s.ratio_to_floor));
    let text = match (b3, p50, p99, floor, ratio) {
        (Some(b3), Some(p50), Some(p99), Some(floor), Some(ratio)) => format!(
            "{} req/s, p50 {}, p99 {}; floor {} /s; ratio {}",
            b3.show(int),
            ms(p50.median),
            p99.show(ms),
            int(floor.median),
            ratio.show(|v| format!("{v:.2}"))
        ),
        _ => NOT_RUN.into(),
    };
    rows.push(row(
        "B3",
        "single intake, 8 clients",
        b3,
        text,
        "≥ 3,500 req/s, ≥ 0.7 × floor, p99 ≤ 10 ms",
        match (b3, ratio, p99) {
            (Some(b3), Some(ratio), Some(p99)) => {
                Some(b3.median >= 3500.0 && ratio.median >= 0.7 && p99.median <= 10.0)
            }
            _ => None,
        },
        (
            "≈ 1,330 req/s, p50 5.6 ms, p99 15 ms; bare insert ×8 ≈ 4,900 /s",
            "1,867 req/s, p50 3.9 ms",
        ),
    ));

    // B4
    let b4 = spread(runs, |r| r.idle.as_ref().map(|i| i.latency.p99_ms));
    let b4p50 = spread(runs, |r| r.idle.as_ref().map(|i| i.latency.p50_ms));
    rows.push(row(
        "B4",
        format!(
            "idle latency, {} due now at 100/s",
            int(options.idle_count() as f64)
        ),
        b4,
        match (b4, b4p50) {
            (Some(p99), Some(p50)) => format!("p99 {} (p50 {})", p99.show(ms), ms(p50.median)),
            _ => NOT_RUN.into(),
        },
        "p99 ≤ 250 ms",
        b4.map(|s| s.median <= 250.0),
        ("— (its floor is the 100 ms poll)", "—"),
    ));

    // B5
    let b5 = spread(runs, |r| {
        r.isolation.as_ref().map(|i| i.high_latency.p99_ms)
    });
    let low = spread(runs, |r| r.isolation.as_ref().map(|i| i.low_per_s));
    let high_n = spread(runs, |r| r.isolation.as_ref().map(|i| i.high as f64));
    rows.push(row(
        "B5",
        format!("isolation: {} LOW draining, HIGH at 50/s", int(n as f64)),
        b5,
        match (b5, low, high_n) {
            (Some(p99), Some(low), Some(h)) => format!(
                "HIGH p99 {} over {} HIGH; LOW drained at {} /s",
                p99.show(ms),
                int(h.median),
                int(low.median)
            ),
            _ => NOT_RUN.into(),
        },
        "HIGH p99 ≤ 1 s",
        b5.map(|s| s.median <= 1000.0),
        ("—", "—"),
    ));

    // B6
    let idle = spread(runs, |r| {
        r.drain(1).and_then(|d| d.idle_memory.map(|m| m.rss as f64))
    });
    let peak = spread(runs, |r| {
        r.drain(1).and_then(|d| d.peak_rss.map(|m| m as f64))
    });
    let start_api = spread(runs, |r| {
        r.start.as_ref().and_then(|s| median_of(&s.api_ms))
    });
    let start_worker = spread(runs, |r| {
        r.start.as_ref().and_then(|s| median_of(&s.worker_ms))
    });
    let sizes_text = sizes
        .iter()
        .map(|(name, size)| match size {
            Some(bytes) => format!("{name} {}", mb(*bytes as f64)),
            None => format!("{name} not built"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let mut text = String::new();
    if let (Some(idle), Some(peak)) = (idle, peak) {
        let _ = write!(
            text,
            "worker RSS idle {}, peak {} (B2, 1 worker); ",
            idle.show(mb),
            peak.show(mb)
        );
    }
    if let (Some(api), Some(worker)) = (start_api, start_worker) {
        let _ = write!(
            text,
            "start → ready: api {}, worker {}; ",
            api.show(ms),
            worker.show(ms)
        );
    }
    let _ = write!(text, "release binaries: {sizes_text}");
    let meets = match (peak, start_api, start_worker) {
        (Some(peak), Some(api), Some(worker)) => Some(
            peak.median <= 30.0 * 1024.0 * 1024.0 && api.median <= 50.0 && worker.median <= 50.0,
        ),
        _ => None,
    };
    rows.push(row(
        "B6",
        "footprint",
        peak,
        text,
        "RSS ≤ 30 MB; start ≤ 50 ms",
        meets,
        (
            "RSS ≈ 15 MB idle, 22 MB draining",
            "13 MB idle / 23 MB peak",
        ),
    ));

    // B7
    let b7 = spread(runs, |r| {
        r.drain(1).map(|d| d.storage.bytes_per_notification)
    });
    let detail = runs.iter().rev().find_map(|r| r.drain(1)).map(|d| {
        let per = |b: i64| int(b as f64 / d.storage.notifications.max(1) as f64);
        let index_bytes: i64 = d.storage.notifications_indexes.iter().map(|(_, b)| b).sum();
        format!(
            " (notifications {} [heap {}, {} indexes {}] + webhook_events {} + reservations {} + simulated_deliveries {})",
            per(d.storage.notifications_bytes),
            per(d.storage.notifications_heap_bytes),
            d.storage.notifications_indexes.len(),
            per(index_bytes),
            per(d.storage.webhook_events_bytes),
            per(d.storage.rate_limit_reservations_bytes),
            per(d.storage.simulated_deliveries_bytes)
        )
    });
    rows.push(row(
        "B7",
        "storage after B2 (tables + indexes)",
        b7,
        b7.map_or(NOT_RUN.into(), |s| {
            format!(
                "{} B per notification{}",
                s.show(int),
                detail.unwrap_or_default()
            )
        }),
        "≤ 1 kB",
        b7.map(|s| s.median <= 1000.0),
        ("1.4 kB per job right after the drain", "0.85 kB per job"),
    ));

    // B8
    let b8 = spread(runs, RunResult::drain_over_floor);
    let mut text = String::new();
    for variant in VARIANTS {
        if let Some(s) = spread(runs, |r| {
            r.floor(variant.batch, variant.connections, variant.admission)
                .map(|f| f.per_s)
        }) {
            if !text.is_empty() {
                text.push_str("; ");
            }
            let _ = write!(text, "{} {} /s", variant.name(), int(s.median));
        }
    }
    if let Some(ratio) = b8 {
        let _ = write!(
            text,
            "; B2 (1 worker) ÷ best floor at batch 100 = {}",
            ratio.show(|v| format!("{v:.2}"))
        );
    }
    rows.push(row(
        "B8",
        "SQL floor: claim + fence + provider + record",
        b8,
        if text.is_empty() {
            NOT_RUN.into()
        } else {
            text
        },
        "drain ÷ floor ≥ 0.7",
        b8.map(|s| s.median >= 0.7),
        (
            "500 rows: ≈ 10,000 /s (1 conn), 12,000–20,000 /s (2 conn)",
            "—",
        ),
    ));
    rows
}

/// The plain-text table printed at the end.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    for r in rows {
        let verdict = match r.meets {
            Some(true) => "meets",
            Some(false) => "MISSES",
            None => "",
        };
        let _ = writeln!(
            out,
            "{:<3} {:<46} {:<7} target {}",
            r.id, r.what, verdict, r.target
        );
        let _ = writeln!(out, "    {}", r.result);
        let _ = writeln!(out, "    notifyd on 2 cores: {}", r.notifyd_2_cores);
    }
    out
}

fn cpu_cell(value: Option<f64>, wall: f64) -> String {
    value.map_or("—".into(), |v| {
        format!("{v:.1} s ({:.0}% of a core)", 100.0 * v / wall.max(1e-9))
    })
}

/// docs/BENCHMARKS.md.
pub fn markdown(results: &Results, options: &Options) -> String {
    let m = &results.machine;
    let runs = &results.runs;
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "# Benchmarks\n");
    let _ = writeln!(
        w,
        "Generated by `notify-bench` on {}; do not edit by hand — rerun it. Protocol: \
         the shared benchmark spec (B1–B8), which follows notifyd's published benchmark so \
         that figures compare point by point.\n",
        m.date_utc
    );
    let _ = writeln!(w, "```sh\n{}\n```\n", results.command);
    let _ = writeln!(
        w,
        "It builds the workspace (`cargo build --release --bins --workspace`), then drives real \
         `notify-local` processes (`APP_ROLE=api` / `worker`) on a fresh database per scenario, \
         prints a table, writes the raw figures to `target/bench/results.json` and, after a \
         complete full-size run, rewrites this file, [`benchmarks/latency.svg`](benchmarks/latency.svg) \
         and [`benchmarks/results.json`](benchmarks/results.json). With `DATABASE_URL` \
         set it creates and drops `notify_bench_<uuid>` databases on that server; otherwise it \
         starts a private PostgreSQL. Run time of this invocation: {:.0} min.\n",
        results.elapsed_s / 60.0
    );
    let _ = writeln!(
        w,
        "CI smoke test (small, leaves this file alone):\n\n```sh\n\
         cargo run --release --bin notify-bench -- --size 2000 --runs 1 --no-docs\n```\n"
    );

    let _ = writeln!(w, "## Machine\n");
    let _ = writeln!(w, "| | |\n|---|---|");
    let _ = writeln!(w, "| cores | {} ({}) |", m.cores, m.cpu_model);
    let _ = writeln!(w, "| memory | {:.1} GiB |", m.memory_gib);
    let _ = writeln!(
        w,
        "| PostgreSQL | {} ({}), default `postgresql.conf`, same machine |",
        m.postgres_version, m.postgres
    );
    let _ = writeln!(
        w,
        "| commit | `{}`{} |",
        m.git_commit,
        if m.git_dirty {
            " with uncommitted changes"
        } else {
            ""
        }
    );
    let _ = writeln!(w, "| kernel | {} |", m.kernel);
    let _ = writeln!(
        w,
        "| load average at start | {} |\n",
        m.load_average_at_start
    );
    let _ = writeln!(
        w,
        "**This is a shared 2-core machine**: other builds and tests may run at the same \
         time, so absolute figures move from run to run (the min–max ranges show by how much) \
         and the CPU columns below show how much of the machine others took during each drain. \
         The comparable numbers are the ratios within one run (drain ÷ SQL floor, HTTP ÷ \
         bare insert, 2 and 4 workers ÷ 1).\n"
    );

    let _ = writeln!(w, "## Results\n");
    let _ = writeln!(
        w,
        "Median of {} run(s), min–max in brackets. \"notifyd, 2 cores\" is the same protocol run \
         on a machine like this one (2 cores, PostgreSQL 15); \"notifyd published\" is its paper's \
         figure on 8 vCPU with PostgreSQL 16.\n",
        options.runs
    );
    let _ = writeln!(
        w,
        "| id | what | Notify Queue | target | meets | notifyd, 2 cores | notifyd published (8 vCPU) |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|");
    for r in &results.rows {
        let meets = match r.meets {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "—",
        };
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.id, r.what, r.result, r.target, meets, r.notifyd_2_cores, r.notifyd_published
        );
    }
    let _ = writeln!(w);

    // B2 scaling with CPU split.
    let _ = writeln!(w, "## B2: drain scaling and where the CPU went\n");
    let _ = writeln!(
        w,
        "Drain time runs from the commit of the release `UPDATE` to the last `sent_at`. CPU is \
         read from `/proc` over the drain: the `notify-local` worker processes, the whole \
         PostgreSQL server (postmaster and all its children), and whatever else kept the \
         machine busy (others); the machine has {} core-seconds per second.\n",
        m.cores
    );
    let _ = writeln!(
        w,
        "| workers | drain /s | release UPDATE | notify-local CPU | PostgreSQL CPU | PostgreSQL CPU per notification | others' CPU |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|");
    for &workers in &results.settings.worker_counts {
        let rate = spread(runs, |r| r.drain(workers).map(|d| d.drain_per_s));
        let Some(rate) = rate else { continue };
        let pass = |f: &dyn Fn(&DrainPass) -> Option<f64>| {
            median_of(
                &runs
                    .iter()
                    .filter_map(|r| r.drain(workers).and_then(f))
                    .collect::<Vec<_>>(),
            )
        };
        let wall = pass(&|d| Some(d.cpu.wall_s)).unwrap_or(f64::NAN);
        let per = pass(&|d| d.cpu.postgres_s.map(|s| s * 1e6 / d.notifications as f64));
        let _ = writeln!(
            w,
            "| {workers} | {} | {} | {} | {} | {} | {} |",
            rate.show(int),
            pass(&|d| Some(d.release_s * 1000.0)).map_or("—".into(), ms),
            cpu_cell(pass(&|d| d.cpu.notify_local_s), wall),
            cpu_cell(pass(&|d| d.cpu.postgres_s), wall),
            per.map_or("—".into(), |v| format!("{v:.0} µs")),
            cpu_cell(pass(&|d| d.cpu.others_s), wall),
        );
    }
    let _ = writeln!(w);

    // B8 breakdown.
    let _ = writeln!(w, "## B8: the SQL floor, statement by statement\n");
    let _ = writeln!(
        w,
        "The sweeper's own functions (`queue::claim`, `queue::start_fence`, the simulated \
         provider's statement, `queue::record`) called back to back from one or two connections \
         over {} released notifications, with no application work in between. \"sweeper \
         statements\" adds what the sweeper also does per batch: the fence inside a transaction \
         with the rate-limit admission (advisory locks on the batch's recipients, reading and \
         inserting reservations). Time per batch is summed over connections.\n",
        int(options.bulk() as f64)
    );
    let _ = writeln!(
        w,
        "| variant | notifications /s | claim | fence | provider | record | ms per batch | PostgreSQL CPU per notification | others' CPU |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|---|---|");
    for variant in VARIANTS {
        let pick = |r: &RunResult| -> Option<Floor> {
            r.floor(variant.batch, variant.connections, variant.admission)
                .cloned()
        };
        let Some(rate) = spread(runs, |r| pick(r).map(|f| f.per_s)) else {
            continue;
        };
        let per_batch = |f: &dyn Fn(&Floor) -> f64| {
            median_of(
                &runs
                    .iter()
                    .filter_map(pick)
                    .map(|fl| f(&fl) * 1000.0 / fl.times.batches.max(1) as f64)
                    .collect::<Vec<_>>(),
            )
            .unwrap_or(f64::NAN)
        };
        let claim = per_batch(&|f| f.times.claim_s);
        let fence = per_batch(&|f| f.times.fence_s);
        let provider = per_batch(&|f| f.times.provider_s);
        let record = per_batch(&|f| f.times.record_s);
        let total = claim + fence + provider + record;
        let cell = |v: f64| format!("{} ({:.0}%)", ms(v), 100.0 * v / total);
        let cpu = |f: &dyn Fn(&Floor) -> Option<f64>| {
            median_of(
                &runs
                    .iter()
                    .filter_map(pick)
                    .filter_map(|fl| f(&fl))
                    .collect::<Vec<_>>(),
            )
        };
        let pg = cpu(&|f| f.cpu.postgres_s.map(|s| s * 1e6 / f.notifications as f64));
        let wall = cpu(&|f| Some(f.cpu.wall_s)).unwrap_or(f64::NAN);
        let _ = writeln!(
            w,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            variant.name(),
            rate.show(int),
            cell(claim),
            cell(fence),
            cell(provider),
            cell(record),
            ms(total),
            pg.map_or("—".into(), |v| format!("{v:.0} µs")),
            cpu_cell(cpu(&|f| f.cpu.others_s), wall),
        );
    }
    let _ = writeln!(w);

    // B3 CPU split.
    let single: Vec<&Single> = runs.iter().filter_map(|r| r.single.as_ref()).collect();
    if !single.is_empty() {
        let per = |f: &dyn Fn(&Single) -> Option<f64>| {
            median_of(&single.iter().filter_map(|s| f(s)).collect::<Vec<_>>())
                .map_or("—".into(), |v| format!("{v:.0} µs"))
        };
        let _ = writeln!(
            w,
            "## B3: CPU per request
"
        );
        let _ = writeln!(
            w,
            "CPU over the measured seconds divided by the requests (or inserts) completed; \
             \"client\" is the bench process (reqwest clients, or the 8 tokio-postgres \
             connections of the floor), which shares the machine with what it measures.\n"
        );
        let _ = writeln!(
            w,
            "| path | notify-local (API) | PostgreSQL | client | others |"
        );
        let _ = writeln!(w, "|---|---|---|---|---|");
        let _ = writeln!(
            w,
            "| POST /notifications | {} | {} | {} | {} |",
            per(&|s| s
                .http_cpu
                .notify_local_s
                .map(|c| c * 1e6 / s.http_requests.max(1) as f64)),
            per(&|s| s
                .http_cpu
                .postgres_s
                .map(|c| c * 1e6 / s.http_requests.max(1) as f64)),
            per(&|s| s
                .http_cpu
                .bench_s
                .map(|c| c * 1e6 / s.http_requests.max(1) as f64)),
            per(&|s| s
                .http_cpu
                .others_s
                .map(|c| c * 1e6 / s.http_requests.max(1) as f64)),
        );
        let _ = writeln!(
            w,
            "| insert statement (floor) | — | {} | {} | {} |\n",
            per(&|s| s
                .floor_cpu
                .postgres_s
                .map(|c| c * 1e6 / s.floor_inserts.max(1) as f64)),
            per(&|s| s
                .floor_cpu
                .bench_s
                .map(|c| c * 1e6 / s.floor_inserts.max(1) as f64)),
            per(&|s| s
                .floor_cpu
                .others_s
                .map(|c| c * 1e6 / s.floor_inserts.max(1) as f64)),
        );
    }

    // B3 and latency details.
    let _ = writeln!(w, "## Latency details\n");
    let _ = writeln!(w, "| scenario | n | p50 | p90 | p99 | max |");
    let _ = writeln!(w, "|---|---|---|---|---|---|");
    let lat = |name: &str,
               f: &dyn Fn(&RunResult) -> Option<crate::scenarios::Latency>,
               w: &mut String| {
        let list: Vec<_> = runs.iter().filter_map(f).collect();
        if list.is_empty() {
            return;
        }
        let med = |g: &dyn Fn(&crate::scenarios::Latency) -> f64| {
            Spread::of(&list.iter().map(g).collect::<Vec<_>>())
        };
        let show = |s: Option<Spread>| s.map_or("—".into(), |s| s.show(ms));
        let _ = writeln!(
            w,
            "| {name} | {} | {} | {} | {} | {} |",
            med(&|l| l.count as f64).map_or("—".into(), |s| int(s.median)),
            show(med(&|l| l.p50_ms)),
            show(med(&|l| l.p90_ms)),
            show(med(&|l| l.p99_ms)),
            show(med(&|l| l.max_ms)),
        );
    };
    lat(
        "B3 POST /notifications (client-side, 8 clients)",
        &|r| r.single.as_ref().map(|s| s.http_latency),
        w,
    );
    lat(
        "B3 floor: insert statement (8 connections)",
        &|r| r.single.as_ref().map(|s| s.floor_latency),
        w,
    );
    lat(
        "B4 sent_at − due, idle worker",
        &|r| r.idle.as_ref().map(|i| i.latency),
        w,
    );
    lat(
        "B5 HIGH sent_at − due, LOW backlog draining",
        &|r| r.isolation.as_ref().map(|i| i.high_latency),
        w,
    );
    let _ = writeln!(
        w,
        "\n![Delivery latency, B4 and B5 HIGH](benchmarks/latency.svg)\n\n\
         The plot pools the samples of every run, so its p99 can differ from the median of \
         the runs' p99s above.\n"
    );

    let _ = writeln!(w, "{PROFILE_NOTES}");
    let _ = writeln!(w, "## How each figure is taken\n");
    let env = if results.settings.notify_local_env.is_empty() {
        String::new()
    } else {
        format!(
            " Extra environment: {}.",
            results
                .settings
                .notify_local_env
                .iter()
                .map(|(k, v)| format!("`{k}={v}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let _ = writeln!(
        w,
        "- Every `notify-local` runs with `MOCK_LATENCY_MS=0 MOCK_FAILURE_RATE=0`, no \
         `WEBHOOK_URL` (webhook events are still written to the outbox by the record statement, \
         as in production) and otherwise default settings: `WORKER_BATCH_SIZE=100`, \
         `WORKER_CONCURRENCY=10`, `DATABASE_POOL_MAX=10`, `WORKER_POLL_INTERVAL_MS=1000` with \
         LISTEN/NOTIFY wake-ups, the per-recipient rate limit on (every notification has its \
         own recipient, so it never refuses), `RUST_LOG=info`.{env}\n\
         - **B1**: {} notifications, `EMAIL`, `NORMAL`, `delaySeconds: 86400`, each with its own \
         recipient and key, in 20 calls of `POST /notifications/batch` (bodies serialised \
         before the clock starts), {} call(s) in flight, one `APP_ROLE=api` process; time from \
         the first call to the last answer; every item must answer 201. Each B2 pass loads its \
         own set this way; the B1 figure is the load before the one-worker drain.\n\
         - **B2**: the API process is stopped, N `APP_ROLE=worker` processes are started and \
         left idle for a second, then one transaction runs `UPDATE notifications SET \
         scheduled_at = now(), next_attempt_at = now() WHERE status = 'PENDING'` and \
         `pg_notify` on the wake-up channel (what intake sends for work due now). The clock \
         starts at its commit and stops at the last `sent_at`; completion (no PENDING or \
         PROCESSING row, probed through the partial indexes) is polled every 250 ms and \
         progress (`count(*)` of the outbox) every second, so that watching costs the drain \
         little.\n\
         - **B3**: {:.0} s measured after a 1 s warm-up, 8 client tasks in a closed loop on one \
         keep-alive HTTP client, each request a new key and recipient, due tomorrow; \
         latencies are client-side. The floor is `queue::insert` (the intake's own statement, \
         including its idempotency and wake-up parts) from 8 pooled connections for the same \
         time on a fresh database.\n\
         - **B4**: one API and one idle worker process; {} `POST /notifications` with `sendAt` \
         = the client's clock, paced at 100/s; latency = `sent_at − scheduled_at` from the \
         database.\n\
         - **B5**: {} LOW notifications loaded as in B1 and released as in B2 with one worker \
         process; meanwhile HIGH notifications due now arrive through the API at 50/s until the \
         LOW backlog is gone; latency of the HIGH ones as in B4.\n\
         - **B6**: VmRSS of the worker after start and one idle second; VmHWM after the \
         one-worker B2 drain; start → ready = spawn until `/health` answers 200, median of 5 \
         per role, database already running and migrated; sizes of the stripped release \
         binaries.\n\
         - **B7**: `pg_total_relation_size` of `notifications`, `webhook_events`, \
         `rate_limit_reservations` and `simulated_deliveries` right after the one-worker drain \
         (no VACUUM), divided by the number of notifications.\n\
         - **B8**: described above; it runs right after the one-worker drain of the same run, \
         and the headline ratio divides that drain by the faster of the two bare floors at \
         batch 100. Neighbours' load still differs between the two; PostgreSQL CPU per \
         notification (B2 and B8 tables) is the comparison they disturb least.\n",
        int(options.bulk() as f64),
        results.settings.intake_calls_in_flight,
        options.single_duration().as_secs_f64(),
        int(options.idle_count() as f64),
        int(options.bulk() as f64),
    );
    let _ = writeln!(
        w,
        "Raw figures of every run, including every latency sample: \
         [`benchmarks/results.json`](benchmarks/results.json) (written with this file; every \
         run, whatever its size, also writes `target/bench/results.json`); process logs of the \
         last run in `target/bench/logs/`."
    );
    out
}

/// Latency samples of all runs, for the plot.
pub fn plot_series(runs: &[RunResult]) -> Vec<(String, Vec<f64>)> {
    let b4: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.idle.as_ref())
        .flat_map(|i| i.samples_ms.iter().copied())
        .collect();
    let b5: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.isolation.as_ref())
        .flat_map(|i| i.high_samples_ms.iter().copied())
        .collect();
    let mut series = Vec::new();
    if !b4.is_empty() {
        series.push(("B4 idle worker, 100/s".to_string(), b4));
    }
    if !b5.is_empty() {
        series.push(("B5 HIGH during LOW drain".to_string(), b5));
    }
    series
}

/// A one-off profile of the B2 drain, kept with the generated figures (not regenerated).
const PROFILE_NOTES: &str = "\
## Where the drain's time goes (one-off profile, 2026-11-30, commits 3ad9196–6784490)

Not regenerated by the bench; measured by hand on the same machine with the same
one-worker B2 pass (100,000 notifications, default worker settings, PostgreSQL reached
over TLS on loopback).

- **The drain is bound by PostgreSQL CPU.** Over the drain PostgreSQL used 1.4–1.8 of the
  2 cores (≈ 100 µs of PostgreSQL CPU per notification) while the worker process used
  ≈ 7 µs per notification (≈ 10% of a core). More worker processes add contention, not
  throughput (table above).
- **Per statement** (server-side durations from `log_min_duration_statement = 0` on the
  bench database, 1,001 batches of 100, 10 lanes in flight, so each includes waiting for
  a core): `record` 12.1 ms per batch (33% of server time), `claim` 9.8 ms (28%), the
  `COMMIT` of the fence/admission transaction 8.0 ms (22%: waiting for the WAL flush
  behind the other lanes' writes), reservation insert 1.4 ms (4%), simulated provider
  1.0 ms (3%), start fence 0.7 ms (2%), reservation read 0.35 ms, recipient locks
  0.24 ms. Each batch costs 9 round trips: claim; BEGIN; locks + fence (pipelined);
  reservation read; `SELECT now()` (sent whenever none of the batch's recipients has a live
  reservation, i.e. always here); reservation insert; COMMIT; provider; record.
- **Inside PostgreSQL** (`perf record -e cpu-clock`, postgres processes): index insertion
  26% (`ExecInsertIndexTuples`), index scans and probes 15–22% (claim CTEs, the
  `unnest` joins of fence/provider/record), bottom-up index deletion 5% (version churn of
  non-HOT updates), the `webhook_events → notifications` foreign-key check 4%
  (`AfterTriggerEndQuery`/SPI, plus a `FOR KEY SHARE` lock on the row just updated),
  `ON CONFLICT` arbitration 4%, WAL insertion 2–4%.
- **Why so much index work:** every transition of a notification changes `status` (and
  `next_attempt_at` or the lease), which are indexed or in partial-index predicates, so no
  update is HOT. Over its life one notification writes 4 heap versions and 23 index
  entries (6 on insert, 6 on release, 6 on claim, 5 on record); the drain alone writes 11
  of them plus the outbox row (3 index entries), the reservation (2) and the simulated
  delivery (1). `notifications_list_by_status` is the largest index after a drain
  (≈ 230 B per notification, every transition inserts a new key) — the main reason B7 is
  2.5 kB per notification.
- **Settings, not code:** `WORKER_BATCH_SIZE=500` drained 20,700 and 22,300 /s (the latter
  with `WORKER_CONCURRENCY=4`) against 14,500 and 17,600 /s at the default 100 in the same
  half hour; `WORKER_CONCURRENCY=2` or `4` at batch 100 was slower (9,800–12,100 /s).
  `synchronous_commit=off` did not change the drain beyond the noise (13,300 → 14,500 /s).
- **Start → ready** (B6) was ≈ 100 ms at 3ad9196, ≈ 75 ms of it building the TLS
  connector twice; 6784490 builds one per process and none for `sslmode=disable`. Since
  then (probe by hand, spawn → `/health` 200): api ≈ 13 ms and worker ≈ 35 ms without TLS;
  api ≈ 60 ms and worker ≈ 80 ms over TLS on loopback (this server has `ssl = on`; one
  connector build ≈ 35 ms plus the handshakes). The worker is slower because its ten lanes
  open their connections (and LISTEN its own) at once.
";
