//! The summary rows B1–B11 and M1: each scenario's headline figure over the runs,
//! against its target and notifyd's figures (B9, B10, B11 and M1 have none).

mod campaign;
mod metrics;
mod real;
mod soak;

use std::fmt::Write as _;

use super::results::{Row, RunResult};
use super::{median_of, spread};
use crate::args::Options;
use crate::scenarios::floor::VARIANTS;
use crate::stats::{Spread, int, mb, ms};

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

/// One row per scenario, B1 to B11 and M1, over all runs (B10 only when it ran).
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
        "≥ 100,000 /s",
        b1.map(|s| s.median >= 100_000.0),
        ("≈ 35,000 /s", "44,546 /s"),
    ));

    // B2
    let b2 = spread(runs, |r| r.drain(1).map(|d| d.drain_per_s));
    let b2_cpu = spread(runs, |r| {
        r.drain(1).and_then(|d| {
            d.cpu
                .postgres_s
                .map(|s| s * 1e6 / d.notifications.max(1) as f64)
        })
    });
    let b2_floor = spread(runs, RunResult::drain_over_floor);
    let mut text = b2.map_or(NOT_RUN.into(), |s| format!("{} /s (1 worker)", s.show(int)));
    if let Some(cpu) = b2_cpu {
        let _ = write!(
            text,
            ", PostgreSQL CPU {} per notification",
            cpu.show(|v| format!("{v:.0} µs"))
        );
    }
    if let Some(ratio) = b2_floor {
        let _ = write!(
            text,
            ", {} × the best batch-100 floor",
            ratio.show(|v| format!("{v:.2}"))
        );
    }
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
        "PostgreSQL CPU ≤ 60 µs per notification and ≥ 1.5 × the batch-100 floor, 1 worker",
        match (b2_cpu, b2_floor) {
            (Some(cpu), Some(ratio)) => Some(cpu.median <= 60.0 && ratio.median >= 1.5),
            _ => None,
        },
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
        "≥ 0.7 × floor, p99 ≤ 10 ms",
        match (ratio, p99) {
            (Some(ratio), Some(p99)) => Some(ratio.median >= 0.7 && p99.median <= 10.0),
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
        "p99 ≤ 25 ms",
        b4.map(|s| s.median <= 25.0),
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
        "HIGH p99 ≤ 100 ms",
        b5.map(|s| s.median <= 100.0),
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
        let tables: Vec<String> = d
            .storage
            .tables
            .iter()
            .map(|(table, bytes)| {
                if table == "notifications" {
                    format!(
                        "{table} {} [heap {}, {} indexes {}]",
                        per(*bytes),
                        per(d.storage.notifications_heap_bytes),
                        d.storage.notifications_indexes.len(),
                        per(index_bytes)
                    )
                } else {
                    format!("{table} {}", per(*bytes))
                }
            })
            .collect();
        format!(" ({})", tables.join(" + "))
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
        "≤ 1 kB (and flat under retention: B10)",
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
    rows.push(campaign::row(runs, options));
    if runs.iter().any(|r| r.soak.is_some()) {
        rows.push(soak::row(runs, options));
    }
    rows.push(real::row(runs, options));
    rows.push(metrics::row(runs, options));
    rows.push(metrics::digest_row(runs, options));
    rows
}
