//! The sweeper: one step function, [`Sweeper::sweep_once`], that recovers expired claims,
//! claims due work of every channel, fences it, delivers it and records every result in
//! one statement. [`run`] is the loop around it that the `sweeper` Lambda ([`function`])
//! and `notify-local` share.
//!
//! - [`admit`]: the start fence, the rate limit, handing claims back.
//! - [`budget`]: how many claims one process holds at a time.
//! - [`claim`]: claiming a batch across the channels, paced or not.
//! - [`deliver`]: the provider call, the dispositions, what a channel learnt.
//! - [`lease`]: the leases of a batch kept while it is delivered.
//! - [`maintain`]: the housekeeping between steps (expiry, recovery, retention, campaigns)
//!   and the campaign expansion that runs beside them.
//! - `run`: the lanes, and the housekeeping and expansion tasks beside them.
//! - [`setup`]: making a sweeper from the configuration, or piece by piece.

mod admit;
mod budget;
mod claim;
mod deliver;
pub mod function;
mod lease;
mod maintain;
mod outcome;
mod pacing;
mod render;
mod run;
mod setup;

pub use function::SweeperFunction;
pub use outcome::SweepOutcome;
pub use pacing::ClaimPacing;
pub use run::run;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;

use crate::backoff::Random;
use crate::config::{
    AudienceConfig, CircuitConfig, RateLimitConfig, RetentionConfig, RetryPolicy, WorkerConfig,
};
use crate::content::VersionCache;
use crate::domain::Class;
use crate::notification::Channel;
use crate::provider::{
    Attempt, BulkTickets, Call, Gate, Holding, Places, Provider, ProviderOutcome,
};
use crate::queue::{Claimed, RecordSummary, Settled, Stopped};
use crate::retention;
use crate::stop::StopSignal;
use budget::ClaimBudget;

/// How often expired claims are looked for.
pub const RECOVERY_INTERVAL: Duration = Duration::from_secs(1);
/// Lease a claim must still have at the start fence beyond the provider time limits.
const FENCE_MARGIN: Duration = Duration::from_secs(5);

pub struct Sweeper {
    pool: Pool,
    provider: Arc<dyn Provider>,
    random: Arc<dyn Random>,
    worker_id: String,
    config: WorkerConfig,
    retry: RetryPolicy,
    rate_limit: Option<RateLimitConfig>,
    circuit: CircuitConfig,
    /// The key of address hashes and unsubscribe links, and where the links point.
    audience: AudienceConfig,
    /// How long finished work is kept.
    retention: RetentionConfig,
    /// Deliveries in flight in this process: `WORKER_CONCURRENCY` places, shared by every
    /// lane.
    places: Places,
    /// The claims this process holds, kept to what its places start within a second.
    budget: ClaimBudget,
    recovery_interval: Duration,
    last_recovery: Mutex<Option<Instant>>,
    last_prune: Mutex<Option<Instant>>,
    last_expiry: Mutex<Option<Instant>>,
    /// When each pooled connection (by its statement cache) last dropped its prepared
    /// statements; see [`Sweeper::connection`].
    prepared_at: Mutex<std::collections::HashMap<usize, Instant>>,
    /// When the next retention step is due; one runs at a time.
    retention_pacer: retention::Pacer,
    /// Template versions read so far (they never change).
    templates: VersionCache,
    last_finish: Mutex<Option<Instant>>,
    /// How often this process claims each paced channel.
    pacing: ClaimPacing,
}

impl Sweeper {
    /// When an idle lane should claim again because a lane was refused a paced channel's
    /// turn (see [`ClaimPacing::take_retry`]).
    pub(super) fn paced_retry(&self) -> Option<Instant> {
        self.pacing.take_retry()
    }

    /// Waits until a delivery could start, so a lane claims no work that would only wait
    /// for a place (or until `stop`).
    pub async fn wait_for_capacity(&self, stop: &StopSignal) {
        if self.places.any_free() {
            return;
        }
        tokio::select! {
            () = self.places.wait_free() => {}
            () = stop.stopped() => {}
        }
    }

    /// Waits until a share of the bulk places is free and takes it, for a lane whose last
    /// claim found no bulk place free (see [`SweepOutcome::bulk_capped`]): the lanes
    /// waiting are served one per share given back, not all woken by every delivery's end.
    pub async fn wait_for_bulk_places(&self) -> BulkTickets {
        let share = (self.places.bulk_places() / 2).clamp(1, self.batch_places());
        self.places.wait_bulk(share).await
    }

    fn batch_places(&self) -> usize {
        usize::try_from(self.config.batch_size)
            .unwrap_or(usize::MAX)
            .max(1)
    }

    /// One step: maybe recover, claim due work of every channel, deliver, record.
    pub async fn sweep_once(&self, stop: &StopSignal) -> anyhow::Result<SweepOutcome> {
        self.sweep_holding(stop, BulkTickets::default()).await
    }

    /// [`Self::sweep_once`] with bulk places already taken: the claim takes bulk work only
    /// for these and the bulk places free now, so a backlog of bulk work waits in the
    /// queue, not in this process, and transactional work claimed after it starts at once.
    pub async fn sweep_holding(
        &self,
        stop: &StopSignal,
        tickets: BulkTickets,
    ) -> anyhow::Result<SweepOutcome> {
        let mut outcome = self.maintain().await?;
        if stop.is_stopped() {
            return Ok(outcome);
        }
        let batch = self.batch_places();
        // A process holds what its places can start soon; the rest stays in the queue for
        // another process, behind any HIGH notification that arrives meanwhile.
        let allowance = self.budget.allowance(&self.places);
        if allowance == Some(0) {
            return Ok(outcome);
        }
        let most = allowance.map_or(batch, |allowed| allowed.min(batch));
        let (paced, free): (Vec<Channel>, Vec<Channel>) = Channel::ALL
            .into_iter()
            .partition(|channel| self.provider.is_real_for(*channel));
        let now = Instant::now();
        let turns: Vec<Channel> = paced
            .iter()
            .copied()
            .filter(|channel| self.pacing.take_turn(*channel, now))
            .collect();
        // A lane refused every paced channel's turn takes no bulk places: it would hold
        // them from the lane whose turn it is while it claims the free channels.
        let refused = !paced.is_empty() && turns.is_empty();
        if !refused {
            tickets.merge(self.places.take_bulk(batch.saturating_sub(tickets.count())));
        }
        let bulk_asked = tickets.count();
        let mut counted = self.budget.hold(most);
        let claimed = self.claim(&free, &turns, most, bulk_asked).await?;
        counted.keep(claimed.len());
        let bulk_claimed = claimed.iter().filter(|c| c.class == Class::Bulk).count();
        tickets.keep(bulk_claimed);
        outcome.claimed = claimed.len() as u64;
        outcome.full = claimed.len() as u64 >= self.config.batch_size as u64;
        outcome.bulk_capped = !refused && bulk_asked < batch && bulk_claimed >= bulk_asked;
        if claimed.is_empty() {
            return Ok(outcome);
        }

        // From here until the provider is called, any way out hands the work back untried.
        if stop.is_stopped() {
            outcome.released = self.release(&claimed.iter().collect::<Vec<_>>()).await;
            return Ok(outcome);
        }
        let admitted = match self.fence_and_admit(&claimed).await {
            Ok(admitted) => admitted,
            Err(error) => {
                // The step fails; what was handed back is visible in the log line.
                let released = self.release(&claimed.iter().collect::<Vec<_>>()).await;
                tracing::warn!(released, "start fence failed; claims released");
                return Err(error);
            }
        };
        let held = admitted.send;
        let holding = Holding::until(admitted.held_until).with_start_by(
            held.iter()
                .filter_map(|claim| Some((claim.id, claim.start_by?))),
        );
        outcome.deferred = admitted.deferred;
        for (id, stopped) in &admitted.stopped {
            match stopped {
                Stopped::Expired => outcome.expired += 1,
                Stopped::Suppressed(_) => outcome.suppressed += 1,
                Stopped::Cancelled => outcome.cancelled += 1,
            }
            tracing::info!(notification_id = %id, ?stopped, "stopped at send");
        }
        outcome.lost =
            (claimed.len() - held.len()) as u64 - admitted.deferred - admitted.stopped.len() as u64;
        if held.is_empty() {
            return Ok(outcome);
        }

        // Template notifications are rendered now; one that cannot be is FAILED untried.
        let rendered = match self.render(&held).await {
            Ok(rendered) => rendered,
            Err(error) => {
                let released = self.release(&held).await;
                tracing::warn!(released, "template versions unreadable; claims released");
                return Err(error);
            }
        };
        let mut sendable: Vec<&Claimed> = Vec::with_capacity(held.len());
        let mut payloads = Vec::with_capacity(held.len());
        let mut unrenderable: Vec<(&Claimed, Call)> = Vec::new();
        for (claim, rendered) in held.iter().zip(rendered) {
            match rendered {
                Ok(payload) => {
                    sendable.push(claim);
                    payloads.push(payload);
                }
                Err(error) => {
                    let now = chrono::Utc::now();
                    let call = Call {
                        outcome: ProviderOutcome::Permanent(error),
                        started_at: now,
                        finished_at: now,
                    };
                    unrenderable.push((claim, call));
                }
            }
        }
        let held = sendable;

        // Tickets of bulk work that will not be sent go back before the calls start.
        tickets.keep(held.iter().filter(|c| c.class == Class::Bulk).count());
        // Each call of a per-message provider is reported as it ends, so a long batch is
        // recorded in parts; its leases are kept while it is out (see `lease`).
        let (finished_sender, finished) = tokio::sync::mpsc::unbounded_channel();
        let gate = Gate::new(
            self.places.clone(),
            stop.clone(),
            self.config.provider_timeout,
        )
        .with_tickets(tickets)
        .with_holding(holding.clone())
        .with_finished(finished_sender);
        let every_claim: Vec<&Claimed> = held
            .iter()
            .copied()
            .chain(unrenderable.iter().map(|(claim, _)| *claim))
            .collect();
        let delivered = tokio::sync::Notify::new();
        let calls = async {
            let delivering = self.deliver(&held, &payloads, &gate);
            tokio::pin!(delivering);
            let ended = tokio::select! {
                attempts = &mut delivering => (attempts, 0),
                () = stop.stopped() => {
                    // What has not started never will: it goes back now, not once the
                    // calls still running end (a stop may not outlast them). One try
                    // only, so the record of what did run is not held up by it: a claim
                    // it could not release is released again after the calls, with the
                    // other retries. Released twice, a claim changes nothing the second
                    // time: its token is gone.
                    let started = gate.started();
                    let waiting: Vec<&Claimed> =
                        held.iter().copied().filter(|c| !started.contains(&c.id)).collect();
                    let (released, attempts) =
                        tokio::join!(self.release_tries(&waiting, 1), &mut delivering);
                    (attempts, released)
                }
            };
            delivered.notify_one();
            ended
        };
        let minding = self.mind_batch(&every_claim, &held, &holding, finished, &delivered);
        let ((attempts, released), parts) = tokio::join!(calls, minding);
        outcome.released += released;
        outcome += parts.outcome;
        let mut settled: Vec<Settled<'_>> = Vec::with_capacity(held.len() + unrenderable.len());
        for (claim, call) in &unrenderable {
            settled.push(self.settle(claim, call));
        }
        let mut unstarted: Vec<&Claimed> = Vec::new();
        for (claim, attempt) in held.iter().zip(&attempts) {
            match attempt {
                // Taken over by another sweeper while this batch was out: nothing to
                // hand back, its token is gone.
                Attempt::NotStarted if holding.lost(claim.id) => outcome.lost += 1,
                Attempt::NotStarted => unstarted.push(claim),
                Attempt::Finished(_) if parts.recorded.contains(&claim.id) => {}
                Attempt::Finished(call) => settled.push(self.settle(claim, call)),
            }
        }
        // The leases of what is left to record are kept until it is recorded.
        let open: Vec<&Claimed> = settled.iter().map(|s| s.claim).collect();
        let finishing = async {
            // Stopped before these started: the provider never saw them.
            let released = self.release(&unstarted).await;
            self.observe(&held, &attempts).await;
            // After the provider was called nothing is refunded but what the provider
            // refused to work on: if recording fails, the lease expires and recovery
            // resends with the same key.
            let recorded = if settled.is_empty() {
                Ok(RecordSummary::default())
            } else {
                self.record(&settled).await
            };
            (released, recorded)
        };
        let (released, recorded) = tokio::select! {
            finished = finishing => finished,
            never = self.keep_leases(&open, &holding) => match never {},
        };
        outcome.released += released;
        deliver::count_recorded(&mut outcome, &settled, &recorded?);
        Ok(outcome)
    }
}
