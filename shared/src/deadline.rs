//! Invocation deadlines of the scheduled functions, and the one rule for when work must
//! stop before one.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Time kept free at the end of an invocation to record results and return.
pub const MARGIN: Duration = Duration::from_secs(2);

/// When work must stop so that a call started just before (bounded by `call_timeout`: a
/// provider call, a webhook POST) still finishes and is recorded before `deadline`.
pub fn reserve(deadline: Instant, call_timeout: Duration) -> Instant {
    deadline
        .checked_sub(call_timeout + MARGIN)
        .unwrap_or_else(Instant::now)
}

/// The invocation deadline (wall-clock milliseconds since the epoch, as Lambda gives it)
/// as an `Instant`.
pub fn from_epoch_ms(deadline_ms: u64) -> Instant {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    Instant::now() + Duration::from_millis(deadline_ms.saturating_sub(now_ms))
}

/// Lambda's deadline (epoch milliseconds) as an `Instant`. `cargo lambda watch` sends the
/// placeholder 600000 instead of a wall-clock time, which would end the invocation before
/// it starts: a deadline before 2001 means "emulator", and the invocation gets
/// `AWS_LAMBDA_FUNCTION_TIMEOUT` seconds (the emulators' name for the timeout; default 30).
pub fn invocation_deadline(deadline_ms: u64) -> Instant {
    const PLAUSIBLE_AFTER_MS: u64 = 978_307_200_000; // 2001-01-01T00:00:00Z
    if deadline_ms >= PLAUSIBLE_AFTER_MS {
        return from_epoch_ms(deadline_ms);
    }
    let seconds = std::env::var("AWS_LAMBDA_FUNCTION_TIMEOUT")
        .ok()
        .and_then(|value| value.trim().parse::<u64>().ok())
        .unwrap_or(30);
    Instant::now() + Duration::from_secs(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_deadline_is_kept_and_the_emulator_placeholder_gets_a_budget() {
        let in_a_minute = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock after 1970")
            .as_millis() as u64
            + 60_000;
        let real = invocation_deadline(in_a_minute);
        assert!(real > Instant::now() + Duration::from_secs(55));
        assert!(real <= Instant::now() + Duration::from_secs(61));
        // cargo lambda watch: Lambda-Runtime-Deadline-Ms: 600000
        assert!(invocation_deadline(600_000) > Instant::now() + Duration::from_secs(1));
    }

    #[test]
    fn a_deadline_in_the_past_means_now() {
        assert!(from_epoch_ms(0) <= Instant::now());
    }

    #[test]
    fn the_reserve_leaves_the_call_and_the_margin() {
        let deadline = Instant::now() + Duration::from_secs(60);
        let stop = reserve(deadline, Duration::from_secs(10));
        assert_eq!(deadline - stop, Duration::from_secs(12));
        assert!(reserve(Instant::now(), Duration::from_secs(10)) <= Instant::now());
    }
}
