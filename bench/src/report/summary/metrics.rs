//! The M1 row: `GET /metrics` over 1,000,000 stored notifications, both formats.

use super::{NOT_RUN, row as make_row};
use crate::args::Options;
use crate::report::results::{Row, RunResult};
use crate::report::spread;
use crate::scenarios::metrics::MetricsScale;
use crate::stats::{int, ms};

/// M1: the slower format's p95 is the headline; both formats must meet the target.
pub(super) fn row(runs: &[RunResult], options: &Options) -> Row {
    let p95 = spread(runs, |r| {
        r.metrics
            .as_ref()
            .map(|m| m.json.p95_ms.max(m.prometheus.p95_ms))
    });
    let figure = |f: fn(&MetricsScale) -> f64| spread(runs, |r| r.metrics.as_ref().map(f));
    let text = match (
        figure(|m| m.json.p50_ms),
        figure(|m| m.json.p95_ms),
        figure(|m| m.prometheus.p50_ms),
        figure(|m| m.prometheus.p95_ms),
        figure(|m| m.rows as f64),
    ) {
        (Some(j50), Some(j95), Some(p50), Some(p95), Some(rows)) => format!(
            "JSON p50 {}, p95 {}; Prometheus p50 {}, p95 {}; {} rows present",
            j50.show(ms),
            j95.show(ms),
            p50.show(ms),
            p95.show(ms),
            rows.show(int)
        ),
        _ => NOT_RUN.into(),
    };
    make_row(
        "M1",
        format!(
            "GET /metrics at {} notifications",
            int(options.metrics_rows() as f64)
        ),
        p95,
        text,
        "GET /metrics ≤ 20 ms (p95, both formats)",
        p95.map(|s| s.median <= 20.0),
        ("—", "—"),
    )
}

/// M2: `GET /digest` on M1's database; its p95 is the headline.
pub(super) fn digest_row(runs: &[RunResult], options: &Options) -> Row {
    let p50 = spread(runs, |r| r.metrics.as_ref().map(|m| m.digest.p50_ms));
    let p95 = spread(runs, |r| r.metrics.as_ref().map(|m| m.digest.p95_ms));
    let text = match (p50, p95) {
        (Some(p50), Some(p95)) => format!("p50 {}, p95 {}", p50.show(ms), p95.show(ms)),
        _ => NOT_RUN.into(),
    };
    make_row(
        "M2",
        format!(
            "GET /digest at {} notifications",
            int(options.metrics_rows() as f64)
        ),
        p95,
        text,
        "GET /digest ≤ 200 ms (p95)",
        p95.map(|s| s.median <= 200.0),
        ("—", "—"),
    )
}
