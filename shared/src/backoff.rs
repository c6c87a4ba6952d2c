//! Retry delays: exponential with "equal jitter". A pure function of the attempt that just
//! failed and a random number in [0, 1), so it is tested without luck.

use std::time::Duration;

use crate::config::RetryPolicy;

/// `delay(n) = c/2 + random·c/2` with `c = min(base · 2^(n−1), max)`.
pub fn retry_delay(policy: &RetryPolicy, failed_attempt: u32, random: f64) -> Duration {
    let exponent = failed_attempt.saturating_sub(1).min(63);
    let ceiling = policy
        .base_delay_ms
        .saturating_mul(1u64.checked_shl(exponent).unwrap_or(u64::MAX))
        .min(policy.max_delay_ms);
    let half = ceiling as f64 / 2.0;
    let random = random.clamp(0.0, 1.0);
    Duration::from_secs_f64((half + random * half) / 1000.0)
}

/// A source of uniform numbers in [0, 1). Injected wherever chance decides something.
pub trait Random: Send + Sync {
    fn unit(&self) -> f64;
}

/// The process's thread-local generator.
#[derive(Debug, Default, Clone, Copy)]
pub struct ThreadRandom;

impl Random for ThreadRandom {
    fn unit(&self) -> f64 {
        rand::random::<f64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: RetryPolicy = RetryPolicy {
        max_retries: 5,
        base_delay_ms: 1000,
        max_delay_ms: 60_000,
    };

    fn bounds(attempt: u32) -> (Duration, Duration) {
        (
            retry_delay(&POLICY, attempt, 0.0),
            retry_delay(&POLICY, attempt, 1.0),
        )
    }

    #[test]
    fn windows_double_per_attempt() {
        assert_eq!(
            bounds(1),
            (Duration::from_millis(500), Duration::from_millis(1000))
        );
        assert_eq!(
            bounds(2),
            (Duration::from_millis(1000), Duration::from_millis(2000))
        );
        assert_eq!(
            bounds(3),
            (Duration::from_millis(2000), Duration::from_millis(4000))
        );
        assert_eq!(
            bounds(4),
            (Duration::from_millis(4000), Duration::from_millis(8000))
        );
        assert_eq!(
            bounds(5),
            (Duration::from_millis(8000), Duration::from_millis(16000))
        );
    }

    #[test]
    fn the_cap_holds_for_any_attempt() {
        assert_eq!(
            bounds(7),
            (Duration::from_secs(30), Duration::from_secs(60))
        );
        assert_eq!(
            bounds(500),
            (Duration::from_secs(30), Duration::from_secs(60))
        );
    }

    #[test]
    fn jitter_lands_inside_the_window() {
        let middle = retry_delay(&POLICY, 2, 0.5);
        assert_eq!(middle, Duration::from_millis(1500));
    }
}
