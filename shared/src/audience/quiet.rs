//! Quiet hours: a bulk notification due inside a person's quiet window, in their own
//! timezone, waits until the window ends. The window is half-open, `[start, end)`, and may
//! cross midnight; the timezone's rules (chrono-tz, the IANA database) decide what local
//! time an instant is, so daylight-saving changes move nothing by an hour by mistake.

use chrono::{DateTime, Duration, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;

/// A daily window of local time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuietHours {
    pub start: NaiveTime,
    pub end: NaiveTime,
}

impl QuietHours {
    fn contains(&self, time: NaiveTime) -> bool {
        if self.start <= self.end {
            self.start <= time && time < self.end
        } else {
            time >= self.start || time < self.end
        }
    }
}

/// When `due` may go out: `None` when it is outside the window, else the window's end in
/// `timezone`. An end that falls in a daylight-saving gap becomes the first instant after
/// the gap; one that happens twice, the first of the two that is later than `due` (a due
/// time in the repeated hour never moves earlier).
pub fn deferred(due: DateTime<Utc>, timezone: Tz, quiet: QuietHours) -> Option<DateTime<Utc>> {
    let local = due.with_timezone(&timezone);
    let time = local.time();
    if !quiet.contains(time) {
        return None;
    }
    let today = local.date_naive();
    let end_date: NaiveDate = if quiet.start > quiet.end && time >= quiet.start {
        today.succ_opt()?
    } else {
        today
    };
    first_instant_at_or_after(timezone, end_date.and_time(quiet.end), due)
}

/// The first instant later than `after` whose local time in `timezone` is `local` or,
/// when `local` does not exist (a gap), the first that follows it.
fn first_instant_at_or_after(
    timezone: Tz,
    local: NaiveDateTime,
    after: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    // Gaps are at most a few hours and transitions fall on whole minutes.
    for minutes in 0..=(24 * 60) {
        let candidate = local + Duration::minutes(minutes);
        match timezone.from_local_datetime(&candidate) {
            LocalResult::Single(at) => return Some(at.with_timezone(&Utc)),
            LocalResult::Ambiguous(first, second) => {
                let first = first.with_timezone(&Utc);
                return Some(if first > after {
                    first
                } else {
                    second.with_timezone(&Utc)
                });
            }
            LocalResult::None => continue,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).expect("time").to_utc()
    }

    /// The window from `start` to `end`, each (hour, minute).
    fn window(start: (u32, u32), end: (u32, u32)) -> QuietHours {
        let at = |(hour, minute)| NaiveTime::from_hms_opt(hour, minute, 0).expect("time");
        QuietHours {
            start: at(start),
            end: at(end),
        }
    }

    fn night() -> QuietHours {
        window((22, 0), (8, 0))
    }

    #[test]
    fn a_window_across_midnight_defers_to_the_next_morning() {
        let new_york: Tz = "America/New_York".parse().expect("zone");
        // 23:30 on 10 July in New York (EDT, UTC-4) → 08:00 on 11 July.
        assert_eq!(
            deferred(utc("2026-07-11T03:30:00Z"), new_york, night()),
            Some(utc("2026-07-11T12:00:00Z"))
        );
        // 06:00 → 08:00 the same morning; 12:00 is not quiet.
        assert_eq!(
            deferred(utc("2026-07-11T10:00:00Z"), new_york, night()),
            Some(utc("2026-07-11T12:00:00Z"))
        );
        assert_eq!(
            deferred(utc("2026-07-11T16:00:00Z"), new_york, night()),
            None
        );
        // The window is half-open: 08:00 sharp is not quiet, 22:00 sharp is.
        assert_eq!(
            deferred(utc("2026-07-11T12:00:00Z"), new_york, night()),
            None
        );
        assert_eq!(
            deferred(utc("2026-07-11T02:00:00Z"), new_york, night()),
            Some(utc("2026-07-11T12:00:00Z"))
        );
    }

    #[test]
    fn both_daylight_saving_changes_of_a_year_keep_local_eight_o_clock() {
        let new_york: Tz = "America/New_York".parse().expect("zone");
        // Spring forward, 8 March 2026 at 02:00 EST → 03:00 EDT. 23:00 EST on the 7th
        // waits until 08:00 EDT, which is 12:00 UTC (not 13:00).
        assert_eq!(
            deferred(utc("2026-03-08T04:00:00Z"), new_york, night()),
            Some(utc("2026-03-08T12:00:00Z"))
        );
        // Fall back, 1 November 2026 at 02:00 EDT → 01:00 EST. 23:00 EDT on 31 October
        // waits until 08:00 EST, 13:00 UTC.
        assert_eq!(
            deferred(utc("2026-11-01T03:00:00Z"), new_york, night()),
            Some(utc("2026-11-01T13:00:00Z"))
        );
    }

    #[test]
    fn an_end_in_a_daylight_saving_gap_is_the_first_instant_after_it() {
        let new_york: Tz = "America/New_York".parse().expect("zone");
        let until_half_past_two = window((1, 0), (2, 30));
        // 02:30 does not exist on 8 March 2026: the window ends at 03:00 EDT (07:00 UTC).
        assert_eq!(
            deferred(utc("2026-03-08T06:30:00Z"), new_york, until_half_past_two),
            Some(utc("2026-03-08T07:00:00Z"))
        );
    }

    #[test]
    fn a_due_time_in_the_repeated_hour_waits_for_the_end_that_follows_it() {
        let new_york: Tz = "America/New_York".parse().expect("zone");
        let quarter_past_to_quarter_to = window((1, 15), (1, 45));
        // 7 November 2027, 02:00 EDT → 01:00 EST: 01:00–02:00 happens twice. Due at the
        // second 01:20 (EST, 06:20 UTC): the window ends at the second 01:45, 06:45 UTC,
        // not the first (05:45 UTC, before the due time).
        assert_eq!(
            deferred(
                utc("2027-11-07T06:20:00Z"),
                new_york,
                quarter_past_to_quarter_to
            ),
            Some(utc("2027-11-07T06:45:00Z"))
        );
        // Due at the first 01:20 (EDT, 05:20 UTC): the first 01:45.
        assert_eq!(
            deferred(
                utc("2027-11-07T05:20:00Z"),
                new_york,
                quarter_past_to_quarter_to
            ),
            Some(utc("2027-11-07T05:45:00Z"))
        );
        // A window across midnight whose end falls in the repeated hour.
        let until_half_past_one = window((22, 0), (1, 30));
        assert_eq!(
            deferred(utc("2027-11-07T06:10:00Z"), new_york, until_half_past_one),
            Some(utc("2027-11-07T06:30:00Z"))
        );
        let london: Tz = "Europe/London".parse().expect("zone");
        let ten_past_to_twenty_to = window((1, 10), (1, 40));
        // 31 October 2027, 02:00 BST → 01:00 GMT; the second 01:20 is 01:20 UTC.
        assert_eq!(
            deferred(utc("2027-10-31T01:20:00Z"), london, ten_past_to_twenty_to),
            Some(utc("2027-10-31T01:40:00Z"))
        );
    }

    #[test]
    fn a_half_hour_offset_is_honoured() {
        let kolkata: Tz = "Asia/Kolkata".parse().expect("zone");
        // 23:00 IST (UTC+5:30) = 17:30 UTC → 08:00 IST the next day = 02:30 UTC.
        assert_eq!(
            deferred(utc("2026-07-10T17:30:00Z"), kolkata, night()),
            Some(utc("2026-07-11T02:30:00Z"))
        );
        assert_eq!(
            deferred(utc("2026-07-10T06:00:00Z"), kolkata, night()),
            None
        );
    }
}
