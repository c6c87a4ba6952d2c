//! The gate every delivery passes: at most `WORKER_CONCURRENCY` deliveries in flight per
//! process (a place each, shared by every lane of the sweeper), a quarter of them kept
//! from bulk work, none started once the sweeper is stopping, and each under the
//! provider time limit.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{Semaphore, SemaphorePermit};

use chrono::Utc;

use super::{Attempt, Call, Delivery, ProviderOutcome};
use crate::domain::Class;
use crate::stop::StopSignal;

/// The places for deliveries of one process. Bulk work may hold all but a quarter of them
/// (with four or more): a campaign's deliveries waiting for a place then never stand in
/// front of a password reset claimed after them, as its token bucket keeps a share of the
/// rate for transactional work.
#[derive(Debug, Clone)]
pub struct Places {
    all: Arc<Semaphore>,
    bulk: Arc<Semaphore>,
}

impl Places {
    pub fn new(concurrency: usize) -> Self {
        let concurrency = concurrency.max(1);
        Places {
            all: Arc::new(Semaphore::new(concurrency)),
            bulk: Arc::new(Semaphore::new(concurrency - concurrency / 4)),
        }
    }

    /// Whether a delivery of any class could start now.
    pub fn any_free(&self) -> bool {
        self.all.available_permits() > 0
    }

    /// Waits until a place is free (without taking it).
    pub async fn wait_free(&self) {
        drop(self.all.acquire().await);
    }
}

/// A delivery's place, given back when dropped.
#[derive(Debug)]
pub struct Place<'a> {
    _place: SemaphorePermit<'a>,
    _bulk: Option<SemaphorePermit<'a>>,
}

#[derive(Debug, Clone)]
pub struct Gate {
    places: Places,
    stop: StopSignal,
    timeout: Duration,
}

impl Gate {
    /// `places` are shared by every batch of the process; `stop` is the sweeper's.
    pub fn new(places: Places, stop: StopSignal, timeout: Duration) -> Self {
        Gate {
            places,
            stop,
            timeout,
        }
    }

    /// The provider time limit of one delivery.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Waits for a free place for a delivery of `class`; `None` when the sweeper stops
    /// first, so the delivery is never started and its claim goes back untried.
    pub async fn start(&self, class: Class) -> Option<Place<'_>> {
        if self.stop.is_stopped() {
            return None;
        }
        let places = async {
            let bulk = match class {
                Class::Bulk => Some(self.places.bulk.acquire().await.ok()?),
                Class::Transactional => None,
            };
            let place = self.places.all.acquire().await.ok()?;
            Some(Place {
                _place: place,
                _bulk: bulk,
            })
        };
        let place = tokio::select! {
            place = places => place?,
            () = self.stop.stopped() => return None,
        };
        // A stop that came while waiting wins: the place is handed on unused.
        (!self.stop.is_stopped()).then_some(place)
    }

    /// Runs `call` for every delivery of a per-message provider, each once it passes the
    /// gate and under the time limit (exceeding it is a temporary failure). Answers in the
    /// batch's order.
    pub async fn each<'a, F, Fut>(&self, batch: &'a [Delivery<'a>], call: F) -> Vec<Attempt>
    where
        F: Fn(&'a Delivery<'a>) -> Fut,
        Fut: Future<Output = ProviderOutcome>,
    {
        // Built in a loop, not by a closure over the iterator: the futures stay `Send`
        // for every lifetime the provider's boxed future needs.
        let mut calls = futures::stream::FuturesOrdered::new();
        for delivery in batch {
            calls.push_back(self.attempt(delivery.class, call(delivery)));
        }
        calls.collect().await
    }

    /// One delivery: a place at the gate, then the call under the time limit.
    async fn attempt(&self, class: Class, call: impl Future<Output = ProviderOutcome>) -> Attempt {
        let Some(_place) = self.start(class).await else {
            return Attempt::NotStarted;
        };
        let started_at = Utc::now();
        let outcome = self.limit(call).await;
        Attempt::Finished(Call {
            outcome,
            started_at,
            finished_at: Utc::now(),
        })
    }

    /// `call` under the time limit: too slow is a temporary failure.
    pub async fn limit(&self, call: impl Future<Output = ProviderOutcome>) -> ProviderOutcome {
        tokio::time::timeout(self.timeout, call)
            .await
            .unwrap_or_else(|_| self.timed_out())
    }

    /// The outcome of a delivery that ran out of time.
    pub fn timed_out(&self) -> ProviderOutcome {
        ProviderOutcome::Temporary(format!(
            "Provider timed out after {}ms",
            self.timeout.as_millis()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use uuid::Uuid;

    fn batch(payload: &serde_json::Value, n: usize) -> Vec<Delivery<'_>> {
        (0..n)
            .map(|_| Delivery {
                key: Uuid::new_v4(),
                channel: crate::notification::Channel::Sms,
                class: crate::domain::Class::Transactional,
                recipient: "r",
                payload,
                rendered: false,
                unsubscribe_url: None,
            })
            .collect()
    }

    #[tokio::test]
    async fn never_more_in_flight_than_permits() {
        let gate = Gate::new(Places::new(2), StopSignal::never(), Duration::from_secs(5));
        let (now, peak) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let payload = serde_json::json!({});
        let deliveries = batch(&payload, 7);
        let attempts = gate
            .each(&deliveries, |_| async {
                let running = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(running, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                ProviderOutcome::delivered()
            })
            .await;
        assert_eq!(attempts.len(), 7);
        assert_eq!(peak.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn the_limit_applies_per_delivery_and_a_stop_starts_nothing_more() {
        let (handle, stop) = StopSignal::new();
        let gate = Gate::new(Places::new(1), stop, Duration::from_millis(50));
        let payload = serde_json::json!({});
        let deliveries = batch(&payload, 3);
        let calls = AtomicUsize::new(0);
        let attempts = gate
            .each(&deliveries, |_| async {
                if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    // The first is too slow; the stop comes while it runs.
                    handle.stop();
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                ProviderOutcome::delivered()
            })
            .await;
        let outcomes: Vec<Option<&ProviderOutcome>> =
            attempts.iter().map(Attempt::outcome).collect();
        assert_eq!(
            outcomes,
            [
                Some(&ProviderOutcome::Temporary(
                    "Provider timed out after 50ms".into()
                )),
                None,
                None,
            ]
        );
    }

    #[tokio::test]
    async fn bulk_work_leaves_a_quarter_of_the_places_to_transactional_work() {
        let gate = Gate::new(Places::new(4), StopSignal::never(), Duration::from_secs(5));
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(gate.start(Class::Bulk).await.expect("a bulk place"));
        }
        let fourth_bulk =
            tokio::time::timeout(Duration::from_millis(100), gate.start(Class::Bulk)).await;
        assert!(fourth_bulk.is_err(), "bulk work took the kept place");
        let transactional =
            tokio::time::timeout(Duration::from_millis(100), gate.start(Class::Transactional))
                .await;
        assert!(
            matches!(transactional, Ok(Some(_))),
            "no place for transactional work"
        );
        drop(held.pop());
        let bulk_again =
            tokio::time::timeout(Duration::from_millis(100), gate.start(Class::Bulk)).await;
        assert!(
            matches!(bulk_again, Ok(Some(_))),
            "a freed bulk place was not handed on"
        );
    }
}
