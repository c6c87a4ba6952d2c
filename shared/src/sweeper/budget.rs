//! How much due work one process holds at a time. A lane claims only when a place is
//! free, but then takes up to a batch on each channel, and every lane of a busy process
//! holds its batch: with a slow provider that is many seconds of calls (four lanes of 40
//! at 100 ms a call and four places: 160 claims, 4 s), all started in the order claimed,
//! so a HIGH notification that arrived meanwhile waited behind them, and none of them
//! could go to another process. A process now holds at most what its places start within
//! [`CLAIM_HORIZON`] at the pace its deliveries have been ending, plus one round of
//! places; the rest stays in the queue, where the next claim takes HIGH work first.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::provider::Places;

/// How far ahead a process claims: about this much work for its places.
pub const CLAIM_HORIZON: Duration = Duration::from_secs(1);

/// The claims this process holds (claimed and not yet recorded or handed back).
#[derive(Debug, Default, Clone)]
pub struct ClaimBudget {
    held: Arc<AtomicUsize>,
}

impl ClaimBudget {
    /// How many more claims this process may take now; `None` while no delivery has
    /// ended yet, so nothing is known of the provider's pace (a claim then takes what
    /// the batch size allows).
    pub fn allowance(&self, places: &Places) -> Option<usize> {
        let held = self.held.load(Ordering::Relaxed);
        Some(Self::most_held(places.concurrency(), places.recent_call()?).saturating_sub(held))
    }

    /// What `concurrency` places start within the horizon when each delivery takes
    /// `call`, plus the places themselves.
    fn most_held(concurrency: usize, call: Duration) -> usize {
        let rounds = CLAIM_HORIZON.as_secs_f64() / call.as_secs_f64().max(1e-6);
        let ahead = (concurrency as f64 * rounds).min(usize::MAX as f64 / 2.0) as usize;
        concurrency.saturating_add(ahead)
    }

    /// Counts `claims` as held until the returned guard is dropped: taken before a claim
    /// (lanes claiming at once do not each see the same allowance), kept as claimed.
    pub fn hold(&self, claims: usize) -> Held {
        self.held.fetch_add(claims, Ordering::Relaxed);
        Held {
            held: self.held.clone(),
            claims,
        }
    }
}

/// Claims counted as held by a [`ClaimBudget`] while this lives.
#[derive(Debug)]
pub struct Held {
    held: Arc<AtomicUsize>,
    claims: usize,
}

impl Held {
    /// Counts `claims` from now on: what the claim took, fewer or (channels claimed
    /// together each round their share up) a few more than it reserved.
    pub fn keep(&mut self, claims: usize) {
        if claims < self.claims {
            self.held.fetch_sub(self.claims - claims, Ordering::Relaxed);
        } else {
            self.held.fetch_add(claims - self.claims, Ordering::Relaxed);
        }
        self.claims = claims;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.held.fetch_sub(self.claims, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_provider_holds_a_second_of_calls_and_a_fast_one_is_not_held_back() {
        assert_eq!(ClaimBudget::most_held(10, Duration::from_millis(400)), 35);
        assert_eq!(ClaimBudget::most_held(10, Duration::from_secs(10)), 11);
        assert_eq!(ClaimBudget::most_held(64, Duration::from_millis(5)), 12_864);
        assert!(ClaimBudget::most_held(10, Duration::ZERO) > 1_000_000);
    }

    #[tokio::test]
    async fn held_claims_count_until_their_guard_drops() {
        let budget = ClaimBudget::default();
        let places = Places::new(2);
        assert_eq!(budget.allowance(&places), None, "no pace known yet");
        let gate = crate::provider::Gate::new(
            places.clone(),
            crate::stop::StopSignal::never(),
            Duration::from_secs(5),
        );
        let place = gate
            .start(uuid::Uuid::new_v4(), crate::domain::Class::Transactional)
            .await;
        tokio::time::sleep(Duration::from_millis(250)).await;
        drop(place);
        let fresh = budget.allowance(&places).expect("a pace");
        assert!((6..=10).contains(&fresh), "{fresh}");
        let mut held = budget.hold(5);
        assert_eq!(budget.allowance(&places), Some(fresh - 5));
        held.keep(2);
        assert_eq!(budget.allowance(&places), Some(fresh - 2));
        drop(held);
        assert_eq!(budget.allowance(&places), Some(fresh));
    }
}
