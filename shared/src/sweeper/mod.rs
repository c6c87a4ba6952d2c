//! The sweeper: one step function, [`Sweeper::sweep_once`], that recovers expired claims,
//! claims due work of every channel, fences it, delivers it and records every result in
//! one statement. [`run`] is the loop around it that the `sweeper` Lambda ([`function`])
//! and `notify-local` share.
//!
//! - [`admit`]: the start fence, the rate limit, handing claims back.
//! - [`budget`]: how many claims one process holds at a time.
//! - [`deliver`]: the provider call, the dispositions, what a channel learnt.
//! - [`lease`]: the leases of a batch kept while it is delivered.
//! - [`maintain`]: the housekeeping between steps (expiry, recovery, retention, campaigns)
//!   and the campaign expansion that runs beside them.

mod admit;
mod budget;
mod deliver;
pub mod function;
mod lease;
mod maintain;
mod outcome;
mod pacing;
mod render;
mod run;

pub use function::SweeperFunction;
pub use outcome::SweepOutcome;
pub use pacing::ClaimPacing;
pub use run::run;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;

use crate::backoff::{Random, ThreadRandom};
use crate::channel;
use crate::config::{
    AudienceConfig, CircuitConfig, Config, RateLimitConfig, RetentionConfig, RetryPolicy,
    WorkerConfig,
};
use crate::content::VersionCache;
use crate::domain::Class;
use crate::notification::Channel;
use crate::provider::channels::ChannelProviders;
use crate::provider::simulated::SimulatedProvider;
use crate::provider::{
    Attempt, BulkTickets, Call, Gate, Holding, Places, Provider, ProviderOutcome,
};
use crate::queue::{self, ClaimMode, Claimed, Limit, RecordSummary, Settled, Stopped};
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
    /// The sweeper every process runs: the configured providers, retry policy, rate
    /// limit and circuit breaker.
    pub fn from_config(pool: &Pool, config: &Config, providers: ChannelProviders) -> Self {
        Sweeper::new(
            pool.clone(),
            Arc::new(providers),
            Arc::new(ThreadRandom),
            config.worker.clone(),
            config.retry,
        )
        .with_rate_limit(config.rate_limit)
        .with_circuit(config.providers.circuit)
        .with_audience(config.audience.clone())
        .with_retention(config.retention)
        .with_pacing(ClaimPacing::new(
            &config.providers.rates,
            config.worker.batch_size,
        ))
    }

    /// The configured providers, with each paced channel's rate written to its token
    /// buckets (a database that cannot be reached now leaves the buckets as they were; the
    /// claim still works from them).
    pub async fn start(pool: &Pool, config: &Config) -> Self {
        let providers = ChannelProviders::from_config(pool, config).await;
        let configured = match pool.get().await {
            Ok(db) => channel::configure_channels(&db, &config.providers.rates, |channel| {
                providers.is_real_for(channel)
            })
            .await
            .map_err(anyhow::Error::from),
            Err(error) => Err(error.into()),
        };
        if let Err(error) = configured {
            tracing::warn!(error = %crate::telemetry::describe(&error), "could not write the channels' rates and health; the last ones written stay in force");
        }
        // Retention deletes a notification's reservation with it: inside the window, the
        // limit would stop counting it.
        if config.retention.notifications < config.rate_limit.window {
            tracing::warn!(
                retention_seconds = config.retention.notifications.as_secs(),
                rate_limit_window_seconds = config.rate_limit.window.as_secs(),
                "RETENTION_SECONDS is shorter than RATE_LIMIT_WINDOW_SECONDS: a recipient can get more than the limit in one window"
            );
        }
        Self::from_config(pool, config, providers)
    }

    /// Every channel on the simulated provider.
    pub fn simulated(pool: &Pool, config: &Config) -> Self {
        let simulated = SimulatedProvider::new(pool.clone(), config.mock, Arc::new(ThreadRandom));
        Self::from_config(pool, config, ChannelProviders::simulated(simulated))
    }

    pub fn new(
        pool: Pool,
        provider: Arc<dyn Provider>,
        random: Arc<dyn Random>,
        config: WorkerConfig,
        retry: RetryPolicy,
    ) -> Self {
        Sweeper {
            pool,
            provider,
            random,
            // Written into every claim and attempt row, so kept short: the process id and
            // 32 random bits tell the sweepers of one deployment apart.
            worker_id: format!(
                "sweeper-{}-{:08x}",
                std::process::id(),
                uuid::Uuid::new_v4().as_u128() as u32
            ),
            places: Places::new(config.concurrency),
            budget: ClaimBudget::default(),
            config,
            retry,
            rate_limit: None,
            circuit: CircuitConfig {
                failure_ratio: 0.5,
                min_calls: 20,
                window: Duration::from_secs(30),
                open_for: Duration::from_secs(30),
            },
            audience: AudienceConfig::development(),
            retention: RetentionConfig::default(),
            recovery_interval: RECOVERY_INTERVAL,
            last_recovery: Mutex::new(None),
            last_prune: Mutex::new(None),
            last_expiry: Mutex::new(None),
            prepared_at: Mutex::default(),
            retention_pacer: retention::Pacer::default(),
            templates: VersionCache::default(),
            last_finish: Mutex::new(None),
            pacing: ClaimPacing::none(),
        }
    }

    /// Holds every recipient to the rolling-window limit (production always sets it).
    pub fn with_rate_limit(mut self, limit: RateLimitConfig) -> Self {
        self.rate_limit = Some(limit);
        self
    }

    /// The thresholds of the channels' circuit breakers.
    pub fn with_circuit(mut self, circuit: CircuitConfig) -> Self {
        self.circuit = circuit;
        self
    }

    /// The key of address hashes and unsubscribe links, and where the links point.
    pub fn with_audience(mut self, audience: AudienceConfig) -> Self {
        self.audience = audience;
        self
    }

    /// How long finished work is kept before the retention step deletes it.
    pub fn with_retention(mut self, retention: RetentionConfig) -> Self {
        self.retention = retention;
        self
    }

    /// How often this process claims each channel paced by token buckets.
    pub fn with_pacing(mut self, pacing: ClaimPacing) -> Self {
        self.pacing = pacing;
        self
    }

    /// When an idle lane should claim again because a lane was refused a paced channel's
    /// turn (see [`ClaimPacing::take_retry`]).
    pub(super) fn paced_retry(&self) -> Option<Instant> {
        self.pacing.take_retry()
    }

    /// Looks for expired claims on every step instead of once per interval (tests).
    pub fn recover_on_every_step(mut self) -> Self {
        self.recovery_interval = Duration::ZERO;
        self
    }

    pub fn config(&self) -> &WorkerConfig {
        &self.config
    }

    /// The most connections this sweeper's pool opens.
    pub fn pool_size(&self) -> usize {
        self.pool.status().max_size
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

    /// The due work of the `free` channels and of the `paced` ones whose turn this lane
    /// took, each claimed by its own statement, at most `most` in all (at most a batch on
    /// each channel) and at most `bulk_places` bulk notifications: the free channels (the
    /// simulated provider's) together on one connection, then each paced channel (sent by
    /// a real provider) in its own short transaction. (The channels claimed together may
    /// each take `bulk_places`, and each its share of `most` rounded up; what is claimed
    /// beyond them waits for a place at the gate.) Returned in claim order across the
    /// channels. When one channel's claim fails, the others' go back untried and the step
    /// fails.
    async fn claim(
        &self,
        free: &[Channel],
        paced: &[Channel],
        most: usize,
        bulk_places: usize,
    ) -> anyhow::Result<Vec<Claimed>> {
        let mut db = self.connection().await?;
        let (batch, lease) = (self.config.batch_size, self.config.visibility_timeout);
        let as_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let bulk = as_i64(bulk_places);
        let each_free = if most < self.batch_places() {
            most.div_ceil(free.len().max(1))
        } else {
            most
        };
        let limit = Limit {
            total: batch.min(as_i64(each_free)),
            bulk,
        };
        let claims = free.iter().map(|channel| {
            queue::claim(
                &db,
                *channel,
                ClaimMode::Free,
                &self.worker_id,
                limit,
                lease,
            )
        });
        let mut claimed = Vec::new();
        let mut failure: Option<anyhow::Error> = None;
        for channel in futures::future::join_all(claims).await {
            match channel {
                Ok(channel_claims) => claimed.extend(channel_claims),
                Err(error) => failure = failure.or(Some(error.into())),
            }
        }
        for &channel in paced {
            let left = most.saturating_sub(claimed.len());
            if left == 0 || failure.is_some() {
                break;
            }
            let bulk_taken = claimed.iter().filter(|c| c.class == Class::Bulk).count();
            let limit = Limit {
                total: batch.min(as_i64(left)),
                bulk: bulk.saturating_sub(as_i64(bulk_taken)).max(0),
            };
            let channel_claims =
                match queue::claim_paced(&mut db, channel, &self.worker_id, limit, lease).await {
                    Ok(channel_claims) => channel_claims,
                    Err(error) => {
                        failure = Some(error.into());
                        break;
                    }
                };
            // It took all it was allowed, a whole batch or a bulk notification for every
            // bulk place the lane held: tokens may be left for the next claim at once.
            let bulk_claims = channel_claims
                .iter()
                .filter(|c| c.class == Class::Bulk)
                .count();
            let took_all = channel_claims.len() as i64 >= limit.total
                || (limit.bulk > 0 && bulk_claims as i64 >= limit.bulk);
            self.pacing.claimed(channel, took_all);
            claimed.extend(channel_claims);
        }
        if let Some(error) = failure {
            // Each channel's claim committed on its own. Dropped here, what the others
            // took would wait out its lease with an attempt spent: it goes back untried.
            drop(db);
            let taken: Vec<&Claimed> = claimed.iter().collect();
            self.release(&taken).await;
            return Err(error);
        }
        // One batch in claim order across its channels (HIGH first, transactional before
        // bulk, the longest due first): the order the gate starts them and the rate limit
        // admits them in.
        claimed.sort_by_key(Claimed::claim_order);
        Ok(claimed)
    }
}
