//! "B10: soak with retention": the rounds of the last soak, or, when this run had none
//! (a full run leaves it out), the figures last measured, kept here.

use std::fmt::Write as _;

use crate::report::RunResult;
use crate::scenarios::soak::{MAX_GROWTH, MIN_RATE_RATIO, Soak};
use crate::stats::{int, mb};

pub fn write(w: &mut String, runs: &[RunResult], command: &str) {
    match runs.iter().rev().find_map(|r| r.soak.as_ref()) {
        Some(soak) => section(w, soak, command),
        None => {
            let _ = writeln!(w, "{SOAK_NOTES}");
        }
    }
}

/// The section for one soak: its settings, one line per round and the verdict.
pub fn section(w: &mut String, soak: &Soak, command: &str) {
    let _ = writeln!(w, "## B10: soak with retention\n");
    let _ = writeln!(
        w,
        "`{command}`: one `APP_ROLE=api` and one `APP_ROLE=worker` process with \
         `RETENTION_SECONDS={r}` and `WEBHOOK_RETENTION_SECONDS={r}` (a compressed clock); \
         {rounds} rounds of {n} notifications, each loaded as in B1, released as in B2 and \
         drained while retention deletes what finished more than {r} s earlier. Bytes are \
         `pg_total_relation_size` of every table a notification writes to (B7's list), \
         read right after each round's drain; the last line is read once retention had \
         deleted every notification ({age:.0} s after the last drain). Whole soak: {min:.1} min.\n",
        r = soak.retention_s,
        rounds = soak.rounds.len(),
        n = int(soak.round_size as f64),
        age = soak.age_out_s,
        min = soak.elapsed_s / 60.0,
    );
    let first = &soak.rounds[0];
    let _ = writeln!(
        w,
        "| round | intake | drain | ÷ round 1 | tables + indexes | ÷ round 1 | notifications left | deleted so far | vacuums so far |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|---|---|");
    for r in &soak.rounds {
        let _ = writeln!(
            w,
            "| {} | {:.1} s | {} /s | {:.2} | {} | {:.2} | {} | {} | {} |",
            r.round,
            r.intake_s,
            int(r.drain_per_s),
            r.drain_per_s / first.drain_per_s,
            mb(r.total_bytes as f64),
            r.total_bytes as f64 / first.total_bytes.max(1) as f64,
            int(r.notifications_left as f64),
            int(r.deleted_so_far as f64),
            r.vacuums_so_far,
        );
    }
    let _ = writeln!(
        w,
        "| end | | | | {} | {:.2} | 0 | {} | {} |\n",
        mb(soak.final_bytes as f64),
        soak.growth,
        int((soak.round_size * soak.rounds.len() as u64) as f64),
        soak.final_vacuums,
    );
    let tables: Vec<String> = soak
        .final_tables
        .iter()
        .map(|(t, b)| format!("{t} {}", mb(*b as f64)))
        .collect();
    let _ = writeln!(w, "At the end: {}.\n", tables.join(", "));
    let verdict = |ok: bool| if ok { "met" } else { "**not met**" };
    let _ = writeln!(
        w,
        "Final bytes ÷ after round 1: {:.2} (target ≤ {MAX_GROWTH}: {}); last round's drain ÷ \
         the first's: {:.2} (target ≥ {MIN_RATE_RATIO}: {}).\n",
        soak.growth,
        verdict(soak.growth <= MAX_GROWTH),
        soak.rate_ratio,
        verdict(soak.rate_ratio >= MIN_RATE_RATIO),
    );
}

/// The soak as last measured (kept with the generated figures until a run with
/// `--only B10` rewrites it).
const SOAK_NOTES: &str = "\
## B10: soak with retention

Not measured yet.
";
