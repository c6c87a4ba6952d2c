//! The B11 row: the drain through SES beside B2's one-worker drain and the best floor at
//! batch 100 of the same runs.

use std::fmt::Write as _;

use super::{NOT_RUN, row as make_row};
use crate::args::Options;
use crate::report::results::{Row, RunResult};
use crate::report::spread;
use crate::stats::int;

/// B11 beside B2's one-worker drain and the best floor at batch 100 of the same runs.
pub(super) fn row(runs: &[RunResult], options: &Options) -> Row {
    let b11 = spread(runs, |r| r.real_provider.as_ref().map(|d| d.drain_per_s));
    let mut text = String::new();
    if let (Some(rate), Some(last)) = (
        b11,
        runs.iter().rev().find_map(|r| r.real_provider.as_ref()),
    ) {
        let _ = write!(
            text,
            "{} /s (1 worker, WORKER_CONCURRENCY {}, stub answers in {:.0} ms)",
            rate.show(int),
            last.worker_concurrency,
            last.stub_latency_ms
        );
        if let Some(b2) = spread(runs, |r| {
            r.real_provider.as_ref()?;
            r.drain(1).map(|d| d.drain_per_s)
        }) {
            let _ = write!(text, "; B2 (1 worker) {} /s", int(b2.median));
        }
        if let Some(floor) = spread(runs, |r| {
            r.real_provider.as_ref()?;
            r.best_floor_100()
        }) {
            let _ = write!(text, "; best floor at batch 100 {} /s", int(floor.median));
        }
        if let Some(ratio) = spread(runs, |r| {
            Some(r.real_provider.as_ref()?.drain_per_s / r.best_floor_100()?)
        }) {
            let _ = write!(
                text,
                "; B11 ÷ floor = {}",
                ratio.show(|v| format!("{v:.2}"))
            );
        }
        let calls = spread(runs, |r| {
            r.real_provider.as_ref().map(|d| d.stub_calls as f64)
        });
        if let Some(calls) = calls {
            let _ = write!(
                text,
                "; SendEmail calls {} for {} notifications, every one SENT with a message id",
                calls.show(int),
                int(last.notifications as f64)
            );
        }
    }
    make_row(
        "B11",
        format!(
            "real provider: drain {} through SES (stub)",
            int(options.bulk() as f64)
        ),
        b11,
        if text.is_empty() {
            NOT_RUN.into()
        } else {
            text
        },
        "≥ 5,000 /s, 1 worker",
        b11.map(|s| s.median >= 5_000.0),
        ("—", "—"),
    )
}
