//! The one set of test doubles: providers that answer from a script, by recipient, slowly,
//! or by wrapping another and remembering what it answered; and randomness that always
//! gives the same number. Every provider sends each delivery through the sweeper's
//! [`Gate`], as a per-message provider must.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use notify_shared::backoff::Random;
use notify_shared::provider::{Attempt, Delivery, Gate, Places, Provider, ProviderOutcome};
use notify_shared::stop::StopSignal;
use tokio::sync::watch;
use uuid::Uuid;

/// Sends every delivery of a batch through [`Gate::each`], handing `call` a copy of the
/// delivery: every delivery passes the gate (one that does not is
/// [`Attempt::NotStarted`]) and runs under its time limit, answered in the batch's order.
pub async fn each_delivery<'a, F, Fut>(
    gate: &'a Gate,
    batch: &'a [Delivery<'a>],
    call: F,
) -> Vec<Attempt>
where
    F: Fn(Delivery<'a>) -> Fut,
    Fut: Future<Output = ProviderOutcome>,
{
    gate.each(batch, |delivery: &'a Delivery<'a>| call(*delivery))
        .await
}

/// The answer of a provider that accepted a delivery it had not seen before.
pub const DELIVERED: ProviderOutcome = ProviderOutcome::Delivered {
    already: false,
    message_id: None,
};

/// A gate with one place, no stop and a 5 s limit: for calling a provider by hand.
pub fn open_gate() -> Gate {
    Gate::new(Places::new(1), StopSignal::never(), Duration::from_secs(5))
}

/// Randomness that always answers the same number.
pub struct Fixed(pub f64);

impl Random for Fixed {
    fn unit(&self) -> f64 {
        self.0
    }
}

/// Answers from a programmed sequence, one outcome per delivery; `then` once it runs out.
/// Remembers the key of every delivery it was asked to make, in order.
pub struct Scripted {
    script: Mutex<VecDeque<ProviderOutcome>>,
    then: ProviderOutcome,
    calls: Mutex<Vec<Uuid>>,
}

impl Scripted {
    pub fn new(script: impl IntoIterator<Item = ProviderOutcome>, then: ProviderOutcome) -> Self {
        Scripted {
            script: Mutex::new(script.into_iter().collect()),
            then,
            calls: Mutex::default(),
        }
    }

    pub fn always(outcome: ProviderOutcome) -> Self {
        Self::new([], outcome)
    }

    /// Accepts everything.
    pub fn delivering() -> Self {
        Self::always(DELIVERED)
    }

    /// The keys of every delivery made, in order.
    pub fn calls(&self) -> Vec<Uuid> {
        self.calls.lock().expect("calls").clone()
    }

    fn answer(&self, key: Uuid) -> ProviderOutcome {
        self.calls.lock().expect("calls").push(key);
        self.script
            .lock()
            .expect("script")
            .pop_front()
            .unwrap_or_else(|| self.then.clone())
    }
}

impl Provider for Scripted {
    fn send<'a>(
        &'a self,
        batch: &'a [Delivery<'a>],
        gate: &'a Gate,
    ) -> BoxFuture<'a, Vec<Attempt>> {
        each_delivery(gate, batch, move |d| async move { self.answer(d.key) }).boxed()
    }

    fn name(&self) -> &'static str {
        "scripted"
    }
}

/// Decides by the recipient's first word: `sent-` is delivered, `fail-` fails for good,
/// `slow-` never answers (the gate's time limit ends it), anything else is temporary.
pub struct ByRecipient;

impl Provider for ByRecipient {
    fn send<'a>(
        &'a self,
        batch: &'a [Delivery<'a>],
        gate: &'a Gate,
    ) -> BoxFuture<'a, Vec<Attempt>> {
        each_delivery(gate, batch, |d| async move {
            if d.recipient.starts_with("sent-") {
                DELIVERED
            } else if d.recipient.starts_with("fail-") {
                ProviderOutcome::Permanent("no such mailbox".into())
            } else if d.recipient.starts_with("slow-") {
                std::future::pending().await
            } else {
                ProviderOutcome::Temporary("try later".into())
            }
        })
        .boxed()
    }

    fn name(&self) -> &'static str {
        "byrecipient"
    }
}

/// Takes `delay` per delivery before answering "delivered"; counts the deliveries started,
/// and the most that were ever in flight at once.
pub struct Slow {
    delay: Duration,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
    started: watch::Sender<usize>,
}

impl Slow {
    pub fn new(delay: Duration) -> Self {
        Slow {
            delay,
            in_flight: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            started: watch::Sender::new(0),
        }
    }

    /// Deliveries started so far.
    pub fn started(&self) -> usize {
        *self.started.borrow()
    }

    /// The most deliveries ever in flight at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    /// Waits (at most 10 s) until `count` deliveries have started.
    pub async fn wait_started(&self, count: usize) {
        let mut started = self.started.subscribe();
        tokio::time::timeout(Duration::from_secs(10), started.wait_for(|n| *n >= count))
            .await
            .expect("deliveries start in time")
            .expect("provider alive");
    }

    async fn deliver(&self) -> ProviderOutcome {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        self.started.send_modify(|n| *n += 1);
        // Counted out again even when the time limit drops this future mid-sleep.
        let _leaving = Leaving(&self.in_flight);
        tokio::time::sleep(self.delay).await;
        DELIVERED
    }
}

struct Leaving<'a>(&'a AtomicUsize);

impl Drop for Leaving<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Provider for Slow {
    fn send<'a>(
        &'a self,
        batch: &'a [Delivery<'a>],
        gate: &'a Gate,
    ) -> BoxFuture<'a, Vec<Attempt>> {
        each_delivery(gate, batch, |_| self.deliver()).boxed()
    }

    fn name(&self) -> &'static str {
        "slow"
    }
}

/// What providers wrapped in [`Counting`] were asked to deliver and what they answered,
/// in the order the answers came; shareable between several of them.
#[derive(Clone, Default)]
pub struct CallLog(Arc<Mutex<Vec<(Uuid, ProviderOutcome)>>>);

impl CallLog {
    /// The keys of every delivery the provider made (not those the gate held back).
    pub fn keys(&self) -> Vec<Uuid> {
        self.answers().into_iter().map(|(key, _)| key).collect()
    }

    pub fn answers(&self) -> Vec<(Uuid, ProviderOutcome)> {
        self.0.lock().expect("call log").clone()
    }
}

/// Wraps a provider and logs every delivery it made and what it answered.
pub struct Counting {
    inner: Arc<dyn Provider>,
    log: CallLog,
}

impl Counting {
    pub fn new(inner: Arc<dyn Provider>) -> Self {
        Self::with_log(inner, CallLog::default())
    }

    /// Logs into `log` (several providers may share one).
    pub fn with_log(inner: Arc<dyn Provider>, log: CallLog) -> Self {
        Counting { inner, log }
    }

    pub fn log(&self) -> &CallLog {
        &self.log
    }
}

impl Provider for Counting {
    fn send<'a>(
        &'a self,
        batch: &'a [Delivery<'a>],
        gate: &'a Gate,
    ) -> BoxFuture<'a, Vec<Attempt>> {
        async move {
            let attempts = self.inner.send(batch, gate).await;
            let made = batch.iter().zip(&attempts).filter_map(|(d, a)| match a {
                Attempt::Finished(call) => Some((d.key, call.outcome.clone())),
                Attempt::NotStarted => None,
            });
            self.log.0.lock().expect("call log").extend(made);
            attempts
        }
        .boxed()
    }

    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn is_real(&self) -> bool {
        self.inner.is_real()
    }
}
