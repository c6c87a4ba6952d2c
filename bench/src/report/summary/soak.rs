//! The B10 row: ten rounds drained under retention of a few seconds.

use super::{NOT_RUN, row as make_row};
use crate::args::Options;
use crate::report::results::{Row, RunResult};
use crate::report::spread;
use crate::scenarios::soak::{MAX_GROWTH, MIN_RATE_RATIO, RETENTION_SECONDS, ROUNDS};
use crate::stats::{int, mb};

pub(super) fn row(runs: &[RunResult], options: &Options) -> Row {
    let growth = spread(runs, |r| r.soak.as_ref().map(|s| s.growth));
    let ratio = spread(runs, |r| r.soak.as_ref().map(|s| s.rate_ratio));
    let text = runs
        .iter()
        .rev()
        .find_map(|r| r.soak.as_ref())
        .zip(growth.zip(ratio))
        .map_or(NOT_RUN.into(), |(soak, (growth, ratio))| {
            let first = &soak.rounds[0];
            let last = &soak.rounds[soak.rounds.len() - 1];
            format!(
                "final bytes ÷ after round 1 = {} ({} ÷ {}); last round's drain ÷ the first's = {} ({} ÷ {} /s)",
                growth.show(|v| format!("{v:.2}")),
                mb(soak.final_bytes as f64),
                mb(first.total_bytes as f64),
                ratio.show(|v| format!("{v:.2}")),
                int(last.drain_per_s),
                int(first.drain_per_s),
            )
        });
    make_row(
        "B10",
        format!(
            "soak: {ROUNDS} rounds of {}, retention {RETENTION_SECONDS} s",
            int(options.soak_round() as f64)
        ),
        growth,
        text,
        "final bytes ≤ 1.2 × after round 1; last round ≥ 0.9 × the first's rate",
        growth
            .zip(ratio)
            .map(|(g, r)| g.median <= MAX_GROWTH && r.median >= MIN_RATE_RATIO),
        ("—", "—"),
    )
}
