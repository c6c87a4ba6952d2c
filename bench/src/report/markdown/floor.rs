//! "B8: the SQL floor, statement by statement": one line per floor variant.

use std::fmt::Write as _;

use super::cpu_cell;
use crate::args::Options;
use crate::report::{Results, RunResult, median_of, spread};
use crate::scenarios::floor::{Floor, VARIANTS};
use crate::stats::{int, ms};

pub fn write(w: &mut String, results: &Results, options: &Options) {
    let runs = &results.runs;
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
}
