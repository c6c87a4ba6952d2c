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
/// the gap; one that happens twice, the first.
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
    first_instant_at_or_after(timezone, end_date.and_time(quiet.end))
}

/// The first instant whose local time in `timezone` is `local` or, when `local` does not
/// exist (a gap), the first that follows it.
fn first_instant_at_or_after(timezone: Tz, local: NaiveDateTime) -> Option<DateTime<Utc>> {
    // Gaps are at most a few hours and transitions fall on whole minutes.
    for minutes in 0..=(24 * 60) {
        let candidate = local + Duration::minutes(minutes);
        match timezone.from_local_datetime(&candidate) {
            LocalResult::Single(at) => return Some(at.with_timezone(&Utc)),
            LocalResult::Ambiguous(first, _) => return Some(first.with_timezone(&Utc)),
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

    fn night() -> QuietHours {
        QuietHours {
            start: NaiveTime::from_hms_opt(22, 0, 0).expect("time"),
            end: NaiveTime::from_hms_opt(8, 0, 0).expect("time"),
        }
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
        let until_half_past_two = QuietHours {
            start: NaiveTime::from_hms_opt(1, 0, 0).expect("time"),
            end: NaiveTime::from_hms_opt(2, 30, 0).expect("time"),
        };
        // 02:30 does not exist on 8 March 2026: the window ends at 03:00 EDT (07:00 UTC).
        assert_eq!(
            deferred(utc("2026-03-08T06:30:00Z"), new_york, until_half_past_two),
            Some(utc("2026-03-08T07:00:00Z"))
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
