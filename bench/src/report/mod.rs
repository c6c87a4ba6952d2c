//! What one invocation reports: the figures of every run ([`results`], also the JSON
//! file), the rows they sum up to ([`summary`]), the plain-text table printed at the end
//! ([`table`]) and docs/BENCHMARKS.md ([`markdown`]).

mod markdown;
mod results;
mod summary;
mod table;

pub use markdown::markdown;
pub use results::{Results, RunResult, Settings};
pub use summary::summarize;
pub use table::table;

use crate::stats::Spread;

/// One figure over the runs that have it: median, min and max.
fn spread<'a>(runs: &'a [RunResult], f: impl Fn(&'a RunResult) -> Option<f64>) -> Option<Spread> {
    Spread::of(&runs.iter().filter_map(f).collect::<Vec<_>>())
}

fn median_of(values: &[f64]) -> Option<f64> {
    Spread::of(values).map(|s| s.median)
}
