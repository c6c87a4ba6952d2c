//! docs/BENCHMARKS.md, one module per section, written in the order the page shows them.

mod drain;
mod floor;
mod headline;
mod intake;
mod intro;
mod latency;
mod machine;
mod method;
mod profile;
mod soak;

use super::results::Results;
use crate::args::Options;

/// The whole page.
pub fn markdown(results: &Results, options: &Options) -> String {
    let mut out = String::new();
    let w = &mut out;
    intro::write(w, results);
    machine::write(w, &results.machine);
    headline::write(w, results, options);
    drain::write(w, results);
    drain::write_storage(w, results);
    floor::write(w, results, options);
    intake::write(w, &results.runs);
    latency::write(w, &results.runs);
    soak::write(w, &results.runs, &results.command);
    profile::write(w);
    method::write(w, results, options);
    out
}

/// CPU seconds, and their share of one core over `wall` seconds.
fn cpu_cell(value: Option<f64>, wall: f64) -> String {
    value.map_or("—".into(), |v| {
        format!("{v:.1} s ({:.0}% of a core)", 100.0 * v / wall.max(1e-9))
    })
}
