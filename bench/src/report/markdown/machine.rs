//! "Machine": the hardware, PostgreSQL and commit the figures were taken on.

use std::fmt::Write as _;

use crate::sys::Machine;

pub fn write(w: &mut String, m: &Machine) {
    let _ = writeln!(w, "## Machine\n");
    let _ = writeln!(w, "| | |\n|---|---|");
    let _ = writeln!(w, "| cores | {} ({}) |", m.cores, m.cpu_model);
    let _ = writeln!(w, "| memory | {:.1} GiB |", m.memory_gib);
    let _ = writeln!(
        w,
        "| PostgreSQL | {} ({}), default `postgresql.conf`, same machine |",
        m.postgres_version, m.postgres
    );
    let _ = writeln!(
        w,
        "| commit | `{}`{} |",
        m.git_commit,
        if m.git_dirty {
            " with uncommitted changes"
        } else {
            ""
        }
    );
    let _ = writeln!(w, "| kernel | {} |", m.kernel);
    let _ = writeln!(
        w,
        "| load average at start | {} |\n",
        m.load_average_at_start
    );
    let _ = writeln!(
        w,
        "**This is a shared 2-core machine**: other builds and tests may run at the same \
         time, so absolute figures move from run to run (the min–max ranges show by how much) \
         and the CPU columns below show how much of the machine others took during each drain. \
         The comparable numbers are the ratios within one run (drain ÷ SQL floor, HTTP ÷ \
         bare insert, 2 and 4 workers ÷ 1).\n"
    );
}
