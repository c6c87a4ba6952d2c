//! The gate every delivery passes: at most `WORKER_CONCURRENCY` deliveries in flight per
//! process (a place each, shared by every lane of the sweeper), a quarter of them kept
//! from bulk work, none started once the sweeper is stopping or that could outlast its
//! claim, and each under the provider time limit.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, SemaphorePermit};

use chrono::Utc;
use uuid::Uuid;

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
    /// Bulk work held by the process, claimed or in flight: twice the bulk places, so a
    /// batch being claimed and fenced does not keep a place from a delivery.
    bulk_held: Arc<Semaphore>,
    bulk_places: usize,
    concurrency: usize,
    /// How long the process's deliveries have been holding their places lately.
    pace: Arc<CallPace>,
}

impl Places {
    pub fn new(concurrency: usize) -> Self {
        let concurrency = concurrency.max(1);
        let bulk_places = concurrency - concurrency / 4;
        Places {
            all: Arc::new(Semaphore::new(concurrency)),
            bulk: Arc::new(Semaphore::new(bulk_places)),
            bulk_held: Arc::new(Semaphore::new(2 * bulk_places)),
            bulk_places,
            concurrency,
            pace: Arc::default(),
        }
    }

    /// `WORKER_CONCURRENCY`: the most deliveries in flight at once.
    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// How long a delivery has held its place lately (a moving mean); `None` until one
    /// has ended.
    pub fn recent_call(&self) -> Option<Duration> {
        self.pace.mean()
    }

    /// Whether a delivery of any class could start now.
    pub fn any_free(&self) -> bool {
        self.all.available_permits() > 0
    }

    /// Waits until a place is free (without taking it).
    pub async fn wait_free(&self) {
        drop(self.all.acquire().await);
    }

    /// The most bulk deliveries in flight at once (the process holds at most twice as
    /// many bulk notifications).
    pub fn bulk_places(&self) -> usize {
        self.bulk_places
    }

    /// Takes up to `most` tickets for bulk work, without waiting: the process holds at
    /// most twice its bulk places of bulk work (claimed or in flight), so the rest stays in
    /// the queue, where transactional work that arrives meanwhile is claimed first.
    pub fn take_bulk(&self, most: usize) -> BulkTickets {
        let mut wanted = most.min(self.bulk_held.available_permits());
        while wanted > 0 {
            let asked = u32::try_from(wanted).unwrap_or(u32::MAX);
            match self.bulk_held.clone().try_acquire_many_owned(asked) {
                Ok(permit) => return BulkTickets::holding(permit),
                // Another lane took some meanwhile: take what is left.
                Err(_) => wanted = wanted.min(self.bulk_held.available_permits()),
            }
        }
        BulkTickets::default()
    }

    /// Waits until `wanted` tickets for bulk work are free and takes them. Lanes waiting
    /// here are served in turn, one per `wanted` given back, not all woken by each.
    pub async fn wait_bulk(&self, wanted: usize) -> BulkTickets {
        let asked = u32::try_from(wanted.max(1)).unwrap_or(u32::MAX);
        match self.bulk_held.clone().acquire_many_owned(asked).await {
            Ok(permit) => BulkTickets::holding(permit),
            Err(_) => BulkTickets::default(),
        }
    }
}

/// Tickets for bulk work taken when it is claimed, one per bulk delivery, each given back
/// when its delivery ends (or, unused, when the tickets are dropped).
#[derive(Debug, Default, Clone)]
pub struct BulkTickets {
    held: Arc<Mutex<Option<OwnedSemaphorePermit>>>,
}

impl BulkTickets {
    fn holding(permit: OwnedSemaphorePermit) -> Self {
        BulkTickets {
            held: Arc::new(Mutex::new(Some(permit))),
        }
    }

    /// How many are held.
    pub fn count(&self) -> usize {
        self.lock()
            .as_ref()
            .map_or(0, OwnedSemaphorePermit::num_permits)
    }

    /// Adds `more` to these.
    pub fn merge(&self, more: BulkTickets) {
        let Some(permit) = more.lock().take() else {
            return;
        };
        let mut held = self.lock();
        match held.as_mut() {
            Some(mine) => mine.merge(permit),
            None => *held = Some(permit),
        }
    }

    /// Keeps `used` and gives the rest back.
    pub fn keep(&self, used: usize) {
        let mut held = self.lock();
        let Some(permit) = held.as_mut() else {
            return;
        };
        let spare = permit.num_permits().saturating_sub(used);
        if spare == permit.num_permits() {
            *held = None;
        } else if spare > 0 {
            drop(permit.split(spare));
        }
    }

    /// One, for a bulk delivery about to start.
    fn take_one(&self) -> Option<OwnedSemaphorePermit> {
        let mut held = self.lock();
        let permit = held.as_mut()?;
        if permit.num_permits() > 1 {
            permit.split(1)
        } else {
            held.take()
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<OwnedSemaphorePermit>> {
        // A panic while holding this lock leaves only a count behind: still usable.
        lock(&self.held)
    }
}

/// A moving mean of how long deliveries hold their places: each new one weighs an
/// eighth, so the mean follows a provider that slows down within a few dozen calls.
#[derive(Debug, Default)]
struct CallPace {
    mean_secs: Mutex<Option<f64>>,
}

impl CallPace {
    const WEIGHT: f64 = 1.0 / 8.0;

    fn observe(&self, took: Duration) {
        let took = took.as_secs_f64();
        let mut mean = lock(&self.mean_secs);
        *mean = Some(match *mean {
            Some(mean) => mean + (took - mean) * Self::WEIGHT,
            None => took,
        });
    }

    fn mean(&self) -> Option<Duration> {
        (*lock(&self.mean_secs)).map(Duration::from_secs_f64)
    }
}

/// A delivery's place, given back when dropped; how long it was held counts towards the
/// process's call pace.
#[derive(Debug)]
pub struct Place<'a> {
    _place: SemaphorePermit<'a>,
    _bulk: Option<OwnedSemaphorePermit>,
    _ticket: Option<OwnedSemaphorePermit>,
    pace: &'a CallPace,
    /// When the delivery started (set once it passed every check of the gate).
    since: Option<Instant>,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        if let Some(since) = self.since {
            self.pace.observe(since.elapsed());
        }
    }
}

#[derive(Debug, Clone)]
pub struct Gate {
    places: Places,
    stop: StopSignal,
    timeout: Duration,
    /// The bulk places taken with the batch's claim.
    tickets: BulkTickets,
    /// The deliveries that got a place, recorded under the same lock as the stop check,
    /// so once the sweeper is stopping it can tell which ones never will start.
    started: Arc<Mutex<HashSet<Uuid>>>,
    /// How long the batch's claims are held; none when the caller keeps no account.
    holding: Option<Holding>,
    /// Where each call of [`Gate::each`] is told the moment it ends, for a caller that
    /// records a long batch in parts.
    finished: Option<UnboundedSender<(Uuid, Call)>>,
}

/// How long the claims of a batch are known to be held, and which of them a renewal found
/// no longer held (recovered by another sweeper after renewals failed): no delivery starts
/// that could still run once its claim may have passed to another sweeper.
#[derive(Debug, Clone)]
pub struct Holding {
    state: Arc<Mutex<HoldingState>>,
}

#[derive(Debug)]
struct HoldingState {
    until: Instant,
    lost: HashSet<Uuid>,
    /// The last moment each delivery that expires may start.
    start_by: HashMap<Uuid, Instant>,
}

impl Holding {
    /// Every claim of the batch held until `until`.
    pub fn until(until: Instant) -> Self {
        Holding {
            state: Arc::new(Mutex::new(HoldingState {
                until,
                lost: HashSet::new(),
                start_by: HashMap::new(),
            })),
        }
    }

    /// Deliveries that expire: none starts after its moment (it waited too long for a
    /// place), so none is handed to the provider late; it goes back untried and the
    /// expiry step marks it EXPIRED.
    pub fn with_start_by(self, start_by: impl IntoIterator<Item = (Uuid, Instant)>) -> Self {
        lock(&self.state).start_by.extend(start_by);
        self
    }

    /// Until when the claims still held are held.
    pub fn held_until(&self) -> Instant {
        lock(&self.state).until
    }

    /// A renewal asked for `asked` and found `kept` still held, now until `until`.
    pub fn renewed(&self, until: Instant, asked: &[Uuid], kept: &[Uuid]) {
        let kept: HashSet<&Uuid> = kept.iter().collect();
        let mut state = lock(&self.state);
        state.until = state.until.max(until);
        state
            .lost
            .extend(asked.iter().filter(|id| !kept.contains(id)));
    }

    /// Whether a renewal found the claim of `key` no longer held.
    pub fn lost(&self, key: Uuid) -> bool {
        lock(&self.state).lost.contains(&key)
    }

    /// Whether a call of `key` that starts now and lasts at most `timeout` ends while its
    /// claim is still held, and starts before the notification expires.
    fn allows(&self, key: Uuid, timeout: Duration) -> bool {
        let state = lock(&self.state);
        let now = Instant::now();
        !state.lost.contains(&key)
            && now + timeout <= state.until
            && state.start_by.get(&key).is_none_or(|by| now < *by)
    }
}

impl Gate {
    /// `places` are shared by every batch of the process; `stop` is the sweeper's.
    pub fn new(places: Places, stop: StopSignal, timeout: Duration) -> Self {
        Gate {
            places,
            stop,
            timeout,
            tickets: BulkTickets::default(),
            started: Arc::default(),
            holding: None,
            finished: None,
        }
    }

    /// Each call made by [`Gate::each`] is sent to `finished` as soon as it ends.
    pub fn with_finished(mut self, finished: UnboundedSender<(Uuid, Call)>) -> Self {
        self.finished = Some(finished);
        self
    }

    /// Deliveries through this gate start only while `holding` says their claim outlasts
    /// them.
    pub fn with_holding(mut self, holding: Holding) -> Self {
        self.holding = Some(holding);
        self
    }

    /// Bulk deliveries through this gate use `tickets` before waiting for a bulk place.
    pub fn with_tickets(mut self, tickets: BulkTickets) -> Self {
        self.tickets = tickets;
        self
    }

    /// The provider time limit of one delivery.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Waits for a free place for delivery `key` of `class`; `None` when the sweeper stops
    /// first, so the delivery is never started and its claim goes back untried.
    pub async fn start(&self, key: Uuid, class: Class) -> Option<Place<'_>> {
        if self.stop.is_stopped() {
            return None;
        }
        let places = async {
            let (bulk, ticket) = match class {
                Class::Bulk => (
                    Some(self.places.bulk.clone().acquire_owned().await.ok()?),
                    self.tickets.take_one(),
                ),
                Class::Transactional => (None, None),
            };
            let place = self.places.all.acquire().await.ok()?;
            Some(Place {
                _place: place,
                _bulk: bulk,
                _ticket: ticket,
                pace: &self.places.pace,
                since: None,
            })
        };
        let mut place = tokio::select! {
            place = places => place?,
            () = self.stop.stopped() => return None,
        };
        // A stop that came while waiting wins, and so does a claim that will not outlast
        // the call: the place is handed on unused.
        let mut started = lock(&self.started);
        if self.stop.is_stopped() {
            return None;
        }
        if let Some(holding) = &self.holding
            && !holding.allows(key, self.timeout)
        {
            return None;
        }
        started.insert(key);
        place.since = Some(Instant::now());
        Some(place)
    }

    /// Once the sweeper is stopping: the deliveries that started. No other will.
    pub fn started(&self) -> HashSet<Uuid> {
        lock(&self.started).clone()
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
        // Each call goes on the heap at once: an AWS SDK call's future is kilobytes, and
        // held inline it was copied into the stream and again on its first poll (5 % of
        // the worker's CPU in B11).
        let mut calls = futures::stream::FuturesOrdered::new();
        for delivery in batch {
            calls.push_back(self.attempt(delivery, Box::pin(call(delivery))));
        }
        calls.collect().await
    }

    /// One delivery: a place at the gate, then the call under the time limit.
    async fn attempt(
        &self,
        delivery: &Delivery<'_>,
        call: impl Future<Output = ProviderOutcome>,
    ) -> Attempt {
        let Some(_place) = self.start(delivery.key, delivery.class).await else {
            return Attempt::NotStarted;
        };
        let started_at = Utc::now();
        let outcome = self.limit(call).await;
        let call = Call {
            outcome,
            started_at,
            finished_at: Utc::now(),
        };
        if let Some(finished) = &self.finished {
            // No one listening any more: the call is recorded with its batch.
            let _ = finished.send((delivery.key, call.clone()));
        }
        Attempt::Finished(call)
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

/// A lock whose holder cannot leave it inconsistent (a set insert, a clone).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        assert_eq!(gate.started(), HashSet::from([deliveries[0].key]));
    }

    #[tokio::test]
    async fn bulk_work_leaves_a_quarter_of_the_places_to_transactional_work() {
        let gate = Gate::new(Places::new(4), StopSignal::never(), Duration::from_secs(5));
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(
                gate.start(Uuid::new_v4(), Class::Bulk)
                    .await
                    .expect("a bulk place"),
            );
        }
        let fourth_bulk = tokio::time::timeout(
            Duration::from_millis(100),
            gate.start(Uuid::new_v4(), Class::Bulk),
        )
        .await;
        assert!(fourth_bulk.is_err(), "bulk work took the kept place");
        let transactional = tokio::time::timeout(
            Duration::from_millis(100),
            gate.start(Uuid::new_v4(), Class::Transactional),
        )
        .await;
        assert!(
            matches!(transactional, Ok(Some(_))),
            "no place for transactional work"
        );
        drop(held.pop());
        let bulk_again = tokio::time::timeout(
            Duration::from_millis(100),
            gate.start(Uuid::new_v4(), Class::Bulk),
        )
        .await;
        assert!(
            matches!(bulk_again, Ok(Some(_))),
            "a freed bulk place was not handed on"
        );
    }

    #[tokio::test]
    async fn tickets_taken_at_the_claim_are_kept_as_used_and_each_delivery_spends_one() {
        // Eight places: six for bulk deliveries, twelve tickets for bulk work held.
        let places = Places::new(8);
        let tickets = places.take_bulk(100);
        assert_eq!(tickets.count(), 12, "no more than twice the bulk places");
        assert_eq!(places.take_bulk(100).count(), 0, "none left to take");
        tickets.keep(4);
        assert_eq!(tickets.count(), 4);
        let spare = places.take_bulk(100);
        assert_eq!(spare.count(), 8, "the eight unused went back");

        let gate = Gate::new(places.clone(), StopSignal::never(), Duration::from_secs(5))
            .with_tickets(tickets.clone());
        let place = gate
            .start(Uuid::new_v4(), Class::Bulk)
            .await
            .expect("a place");
        assert_eq!(tickets.count(), 3, "the delivery spent one ticket");
        drop(place);
        let waiting = places.take_bulk(100);
        assert_eq!(
            waiting.count(),
            1,
            "the ended delivery's place is free again"
        );
        waiting.merge(tickets.clone());
        assert_eq!((waiting.count(), tickets.count()), (4, 0));
        drop((waiting, spare));
        assert_eq!(
            places.take_bulk(100).count(),
            12,
            "every ticket free at the end"
        );
    }

    #[tokio::test]
    async fn a_lane_waiting_for_bulk_places_gets_them_when_enough_are_given_back() {
        let places = Places::new(4);
        let held = places.take_bulk(100);
        assert_eq!(held.count(), 6);
        let waiter = tokio::spawn({
            let places = places.clone();
            async move { places.wait_bulk(2).await.count() }
        });
        held.keep(5);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "one ticket is not the two asked for");
        held.keep(4);
        let got = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("served")
            .expect("task");
        assert_eq!(got, 2);
    }

    #[tokio::test]
    async fn no_call_starts_that_could_outlast_its_claim_or_whose_claim_was_lost() {
        let (kept, lost) = (Uuid::new_v4(), Uuid::new_v4());
        let holding = Holding::until(Instant::now() + Duration::from_secs(3));
        let gate = Gate::new(Places::new(2), StopSignal::never(), Duration::from_secs(5))
            .with_holding(holding.clone());
        let class = crate::domain::Class::Transactional;
        assert!(
            gate.start(kept, class).await.is_none(),
            "a 5 s call on 3 s of lease"
        );
        holding.renewed(
            Instant::now() + Duration::from_secs(60),
            &[kept, lost],
            &[kept],
        );
        assert!(gate.start(kept, class).await.is_some(), "renewed for 60 s");
        assert!(gate.start(lost, class).await.is_none(), "no longer held");
        assert_eq!(gate.started(), HashSet::from([kept]));
    }
}
