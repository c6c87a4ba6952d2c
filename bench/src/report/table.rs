//! The plain-text table printed at the end of a run.

use std::fmt::Write as _;

use super::results::Row;

/// The plain-text table printed at the end.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    for r in rows {
        let verdict = match r.meets {
            Some(true) => "meets",
            Some(false) => "MISSES",
            None => "",
        };
        let _ = writeln!(
            out,
            "{:<3} {:<46} {:<7} target {}",
            r.id, r.what, verdict, r.target
        );
        let _ = writeln!(out, "    {}", r.result);
        let _ = writeln!(out, "    notifyd on 2 cores: {}", r.notifyd_2_cores);
    }
    out
}
