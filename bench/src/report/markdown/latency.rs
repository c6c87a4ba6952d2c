//! "Latency details": the latency percentiles of B3, B4 and B5, and the plot.

use std::fmt::Write as _;

use crate::report::RunResult;
use crate::stats::{Latency, Spread, int, ms};

pub fn write(w: &mut String, runs: &[RunResult]) {
    let _ = writeln!(w, "## Latency details\n");
    let _ = writeln!(w, "| scenario | n | p50 | p90 | p99 | max |");
    let _ = writeln!(w, "|---|---|---|---|---|---|");
    let lat = |name: &str, f: &dyn Fn(&RunResult) -> Option<Latency>, w: &mut String| {
        let list: Vec<_> = runs.iter().filter_map(f).collect();
        if list.is_empty() {
            return;
        }
        let med = |g: &dyn Fn(&Latency) -> f64| Spread::of(&list.iter().map(g).collect::<Vec<_>>());
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
}
