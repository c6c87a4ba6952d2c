//! "B3: CPU per request": where the CPU of one intake request (and of one bare insert)
//! went.

use std::fmt::Write as _;

use crate::report::{RunResult, median_of};
use crate::scenarios::intake::Single;
use crate::sys::CpuUse;

pub fn write(w: &mut String, runs: &[RunResult]) {
    let single: Vec<&Single> = runs.iter().filter_map(|r| r.single.as_ref()).collect();
    if !single.is_empty() {
        let per = |f: &dyn Fn(&Single) -> Option<f64>| {
            median_of(&single.iter().filter_map(|s| f(s)).collect::<Vec<_>>())
                .map_or("—".into(), |v| format!("{v:.0} µs"))
        };
        let _ = writeln!(w, "## B3: CPU per request\n");
        let _ = writeln!(
            w,
            "CPU over the measured seconds divided by the requests (or inserts) completed; \
             \"client\" is the bench process (reqwest clients, or the 8 tokio-postgres \
             connections of the floor, and the copy of each child's log to its file), \
             which shares the machine with what it measures. The copy is buffered since \
             2026-12-04: written a line at a time it cost ~50 µs a request (alternated B3 \
             runs on a 2-core AMD EPYC host: client 94–106 µs a request before, 49–50 µs \
             after; ratio to the floor 0.63 and 0.71 before, 0.80 and 0.75 after).\n"
        );
        let _ = writeln!(
            w,
            "| path | notify-local (API) | PostgreSQL | client | others |"
        );
        let _ = writeln!(w, "|---|---|---|---|---|");
        // µs of CPU per completed request, and per completed insert of the floor.
        let http = |cpu: fn(&CpuUse) -> Option<f64>| {
            per(&|s| cpu(&s.http_cpu).map(|c| c * 1e6 / s.http_requests.max(1) as f64))
        };
        let floor = |cpu: fn(&CpuUse) -> Option<f64>| {
            per(&|s| cpu(&s.floor_cpu).map(|c| c * 1e6 / s.floor_inserts.max(1) as f64))
        };
        let _ = writeln!(
            w,
            "| POST /notifications | {} | {} | {} | {} |",
            http(|c| c.notify_local_s),
            http(|c| c.postgres_s),
            http(|c| c.bench_s),
            http(|c| c.others_s),
        );
        let _ = writeln!(
            w,
            "| insert statement with its suppression check (floor) | — | {} | {} | {} |\n",
            floor(|c| c.postgres_s),
            floor(|c| c.bench_s),
            floor(|c| c.others_s),
        );
    }
}
