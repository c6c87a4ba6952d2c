//! "B2: drain scaling and where the CPU went": one line per worker count.

use std::fmt::Write as _;

use super::cpu_cell;
use crate::report::{Results, median_of, spread};
use crate::scenarios::drain::DrainPass;
use crate::stats::{int, ms};

pub fn write(w: &mut String, results: &Results) {
    let m = &results.machine;
    let runs = &results.runs;
    let _ = writeln!(w, "## B2: drain scaling and where the CPU went\n");
    let _ = writeln!(
        w,
        "Drain time runs from the commit of the release `UPDATE` to the last `sent_at`. CPU is \
         read from `/proc` over the drain: the `notify-local` worker processes, the whole \
         PostgreSQL server (postmaster and all its children), and whatever else kept the \
         machine busy (others); the machine has {} core-seconds per second.\n",
        m.cores
    );
    let _ = writeln!(
        w,
        "| workers | drain /s | release UPDATE | notify-local CPU | PostgreSQL CPU | PostgreSQL CPU per notification | others' CPU |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|");
    for &workers in &results.settings.worker_counts {
        let rate = spread(runs, |r| r.drain(workers).map(|d| d.drain_per_s));
        let Some(rate) = rate else { continue };
        let pass = |f: &dyn Fn(&DrainPass) -> Option<f64>| {
            median_of(
                &runs
                    .iter()
                    .filter_map(|r| r.drain(workers).and_then(f))
                    .collect::<Vec<_>>(),
            )
        };
        let wall = pass(&|d| Some(d.cpu.wall_s)).unwrap_or(f64::NAN);
        let per = pass(&|d| d.cpu.postgres_s.map(|s| s * 1e6 / d.notifications as f64));
        let _ = writeln!(
            w,
            "| {workers} | {} | {} | {} | {} | {} | {} |",
            rate.show(int),
            pass(&|d| Some(d.release_s * 1000.0)).map_or("—".into(), ms),
            cpu_cell(pass(&|d| d.cpu.notify_local_s), wall),
            cpu_cell(pass(&|d| d.cpu.postgres_s), wall),
            per.map_or("—".into(), |v| format!("{v:.0} µs")),
            cpu_cell(pass(&|d| d.cpu.others_s), wall),
        );
    }
    let _ = writeln!(w);
}

/// "B7: where the bytes are": each table's heap and indexes after the one-worker drain,
/// per notification (the median over the runs).
pub fn write_storage(w: &mut String, results: &Results) {
    let runs = &results.runs;
    let Some(last) = runs.iter().rev().find_map(|r| r.drain(1)) else {
        return;
    };
    let _ = writeln!(w, "## B7: where the bytes are\n");
    let _ = writeln!(
        w,
        "Right after the one-worker B2 drain, before any vacuum has run on purpose: each \
         table's heap (with its TOAST table and its free-space and visibility maps) and each \
         of its indexes, in bytes per notification stored.\n"
    );
    let _ = writeln!(w, "| table | heap or index | B per notification |");
    let _ = writeln!(w, "|---|---|---|");
    for relation in &last.storage.relations {
        let per = median_of(
            &runs
                .iter()
                .filter_map(|r| r.drain(1))
                .filter_map(|d| {
                    let bytes = d.storage.relations.iter().find(|other| {
                        other.table == relation.table && other.index == relation.index
                    })?;
                    Some(bytes.bytes as f64 / d.storage.notifications.max(1) as f64)
                })
                .collect::<Vec<_>>(),
        );
        let _ = writeln!(
            w,
            "| {} | {} | {} |",
            relation.table,
            relation
                .index
                .as_deref()
                .map_or("heap".into(), |i| format!("`{i}`")),
            per.map_or("—".into(), int),
        );
    }
    let _ = writeln!(w);
}
