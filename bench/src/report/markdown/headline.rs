//! "Results": the summary rows B1–B8, B11 and M1 against their targets and notifyd's
//! figures.

use std::fmt::Write as _;

use crate::args::Options;
use crate::report::Results;

pub fn write(w: &mut String, results: &Results, options: &Options) {
    let _ = writeln!(w, "## Results\n");
    let _ = writeln!(
        w,
        "Median of {} run(s), min–max in brackets. \"notifyd, 2 cores\" is the same protocol run \
         on a machine like this one (2 cores, PostgreSQL 15); \"notifyd published\" is its paper's \
         figure on 8 vCPU with PostgreSQL 16. The targets are the benchmark spec's second \
         round, raised where the first round met its own (B1 60,000 /s, B2 10,000 /s with one \
         worker, B3 3,500 req/s, B4 p99 250 ms, B5 HIGH p99 1 s).\n",
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
}
