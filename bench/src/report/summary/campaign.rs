//! The B9 row: a campaign paced through SES beside transactional traffic.

use std::fmt::Write as _;

use super::{NOT_RUN, row as make_row};
use crate::args::Options;
use crate::report::results::{Row, RunResult};
use crate::report::spread;
use crate::scenarios::campaign::{RATE_PER_SECOND, TRANSACTIONAL_RESERVED};
use crate::stats::{int, ms};

/// The campaign's share of the rate, and the token bucket's burst (one second of it).
const BULK_SHARE: f64 = RATE_PER_SECOND - TRANSACTIONAL_RESERVED;

pub(super) fn row(runs: &[RunResult], options: &Options) -> Row {
    let p99 = spread(runs, |r| {
        r.campaign.as_ref().map(|c| c.transactional.p99_ms)
    });
    let expansion = spread(runs, |r| r.campaign.as_ref().map(|c| c.expansion_s));
    let busiest = spread(runs, |r| {
        r.campaign
            .as_ref()
            .map(|c| c.busiest_campaign_second as f64)
    });
    let drain = spread(runs, |r| r.campaign.as_ref().map(|c| c.campaign_drain_s));
    let mut text = String::new();
    if let (Some(p99), Some(expansion), Some(busiest), Some(drain)) =
        (p99, expansion, busiest, drain)
    {
        let _ = write!(
            text,
            "transactional p99 {}; expansion {} s; campaign's busiest second {} calls (share {} /s); campaign drained in {} s",
            p99.show(ms),
            expansion.show(|v| format!("{v:.1}")),
            busiest.show(int),
            int(BULK_SHARE),
            drain.show(|v| format!("{v:.1}")),
        );
    }
    let meets = p99
        .zip(expansion)
        .zip(busiest)
        .map(|((p99, e), b)| p99.max <= 250.0 && e.max <= 10.0 && b.max <= 2.0 * BULK_SHARE);
    make_row(
        "B9",
        format!(
            "campaign of {} on EMAIL at 2,000 /s (500 reserved) beside 50 /s transactional",
            int(options.bulk() as f64)
        ),
        p99,
        if text.is_empty() {
            NOT_RUN.into()
        } else {
            text
        },
        "campaign ≤ 1,500 /s + burst; transactional p99 ≤ 250 ms; expansion ≤ 10 s",
        meets,
        ("—", "—"),
    )
}
