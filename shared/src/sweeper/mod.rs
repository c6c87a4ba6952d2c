//! The sweeper: one step function, [`Sweeper::sweep_once`], that recovers expired claims,
//! claims due work of every channel, fences it, delivers it and records every result in
//! one statement. [`run`] is the loop around it that the `sweeper` Lambda ([`function`])
//! and `notify-local` share.
//!
//! - [`admit`]: the start fence, the rate limit, handing claims back.
//! - [`deliver`]: the provider call, the dispositions, what a channel learnt.

mod admit;
mod deliver;
pub mod function;
mod outcome;
mod render;
mod run;

pub use function::SweeperFunction;
pub use outcome::SweepOutcome;
pub use run::run;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;

use crate::audience::address;
use crate::backoff::{Random, ThreadRandom};
use crate::config::{
    AudienceConfig, CircuitConfig, Config, RateLimitConfig, RetentionConfig, RetryPolicy,
    WorkerConfig,
};
use crate::content::VersionCache;
use crate::notification::Channel;
use crate::provider::channels::ChannelProviders;
use crate::provider::simulated::SimulatedProvider;
use crate::provider::{Attempt, Call, Gate, Places, Provider, ProviderOutcome};
use crate::queue::{self, ClaimMode, Claimed, Disposition, Settled, Stopped};
use crate::stop::StopSignal;
use crate::{channel, content, ratelimit, retention};

/// How often expired claims are looked for.
pub const RECOVERY_INTERVAL: Duration = Duration::from_secs(1);
/// Expired claims returned per recovery statement.
const RECOVERY_BATCH: i64 = 1000;
/// Lease a claim must still have at the start fence beyond the provider time limits.
const FENCE_MARGIN: Duration = Duration::from_secs(5);
/// How often PENDING notifications past their `expiresAt` are marked EXPIRED (the claim
/// skips them meanwhile), and how many per statement.
const EXPIRY_INTERVAL: Duration = Duration::from_secs(1);
const EXPIRY_BATCH: i64 = 1000;
/// Time a step may spend expanding campaigns (at least one chunk when one is expanding),
/// and how often finished campaigns are looked for.
const EXPANSION_BUDGET: Duration = Duration::from_millis(250);
const FINISH_INTERVAL: Duration = Duration::from_secs(1);
/// After finding no campaign to expand, steps do not look again for this long (so steps
/// without campaigns pay nothing for them).
const EXPANSION_IDLE_INTERVAL: Duration = Duration::from_secs(1);
/// How often reservations of recipients no batch has seen lately are swept away.
const PRUNE_INTERVAL: Duration = Duration::from_secs(60);

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
    recovery_interval: Duration,
    last_recovery: Mutex<Option<Instant>>,
    last_prune: Mutex<Option<Instant>>,
    last_expiry: Mutex<Option<Instant>>,
    last_retention: Mutex<Option<Instant>>,
    /// Template versions read so far (they never change).
    templates: VersionCache,
    /// One lane of a process expands campaigns at a time.
    expanding: AtomicBool,
    /// When a look for a campaign to expand last found none.
    nothing_to_expand: Mutex<Option<Instant>>,
    last_finish: Mutex<Option<Instant>>,
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
    }

    /// The configured providers, with each paced channel's rate written to its token
    /// buckets (a database that cannot be reached now leaves the buckets as they were; the
    /// claim still works from them).
    pub async fn start(pool: &Pool, config: &Config) -> Self {
        let providers = ChannelProviders::from_config(pool, config).await;
        let configured = match pool.get().await {
            Ok(db) => channel::configure_rates(&db, &config.providers.rates, |channel| {
                providers.is_real_for(channel)
            })
            .await
            .map_err(anyhow::Error::from),
            Err(error) => Err(error.into()),
        };
        if let Err(error) = configured {
            tracing::warn!(error = %crate::telemetry::describe(&error), "could not write the channels' rates; the last ones written stay in force");
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
            worker_id: format!(
                "sweeper-{}-{}",
                std::process::id(),
                uuid::Uuid::new_v4().simple()
            ),
            places: Places::new(config.concurrency),
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
            last_retention: Mutex::new(None),
            templates: VersionCache::default(),
            expanding: AtomicBool::new(false),
            nothing_to_expand: Mutex::new(None),
            last_finish: Mutex::new(None),
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

    /// One step: maybe recover, claim due work of every channel, deliver, record.
    pub async fn sweep_once(&self, stop: &StopSignal) -> anyhow::Result<SweepOutcome> {
        let mut outcome = self.maintain().await?;
        if stop.is_stopped() {
            return Ok(outcome);
        }
        let claimed = self.claim().await?;
        outcome.claimed = claimed.len() as u64;
        outcome.full = claimed.len() as u64 >= self.config.batch_size as u64;
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
        outcome.deferred = admitted.deferred;
        for (id, stopped) in &admitted.stopped {
            match stopped {
                Stopped::Expired => outcome.expired += 1,
                Stopped::Suppressed(_) => outcome.suppressed += 1,
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

        let gate = Gate::new(
            self.places.clone(),
            stop.clone(),
            self.config.provider_timeout,
        );
        let attempts = self.deliver(&held, &payloads, &gate).await;
        let mut settled: Vec<Settled<'_>> = Vec::with_capacity(held.len() + unrenderable.len());
        for (claim, call) in &unrenderable {
            let disposition = self.dispose(claim, &call.outcome);
            deliver::tally(&mut outcome, claim, &disposition);
            settled.push(Settled {
                claim,
                disposition,
                call,
                suppress_hash: None,
            });
        }
        let mut unstarted: Vec<&Claimed> = Vec::new();
        for (claim, attempt) in held.iter().zip(&attempts) {
            match attempt {
                Attempt::NotStarted => unstarted.push(claim),
                Attempt::Finished(call) => {
                    let disposition = self.dispose(claim, &call.outcome);
                    deliver::tally(&mut outcome, claim, &disposition);
                    let suppress_hash = matches!(
                        disposition,
                        Disposition::Failed { suppress: true, .. }
                    )
                    .then(|| address::hash(&self.audience.secret, claim.channel, &claim.recipient));
                    settled.push(Settled {
                        claim,
                        disposition,
                        call,
                        suppress_hash,
                    });
                }
            }
        }
        // Stopped before these started: the provider never saw them.
        outcome.released += self.release(&unstarted).await;
        self.observe(&held, &attempts).await;
        if settled.is_empty() {
            return Ok(outcome);
        }
        // After the provider was called nothing is refunded but what the provider refused
        // to work on: if recording fails, the lease expires and recovery resends with the
        // same key.
        self.record(&settled).await?;
        Ok(outcome)
    }

    /// Every channel's due work, each claimed by its own statement: the channels of the
    /// simulated provider together on one connection, then each channel sent by a real
    /// provider, paced, in its own short transaction.
    async fn claim(&self) -> anyhow::Result<Vec<Claimed>> {
        let mut db = self.pool.get().await?;
        let (paced, free): (Vec<Channel>, Vec<Channel>) = Channel::ALL
            .into_iter()
            .partition(|channel| self.provider.is_real_for(*channel));
        let (batch, lease) = (self.config.batch_size, self.config.visibility_timeout);
        let claims = free.into_iter().map(|channel| {
            queue::claim(&db, channel, ClaimMode::Free, &self.worker_id, batch, lease)
        });
        let mut claimed = Vec::new();
        for channel in futures::future::join_all(claims).await {
            claimed.extend(channel?);
        }
        for channel in paced {
            claimed
                .extend(queue::claim_paced(&mut db, channel, &self.worker_id, batch, lease).await?);
        }
        Ok(claimed)
    }

    /// The housekeeping a step does now and then: pruning old reservations, expiring
    /// notifications past their `expiresAt`, recovering expired claims, deleting what
    /// finished longer ago than the retention.
    async fn maintain(&self) -> anyhow::Result<SweepOutcome> {
        let mut outcome = SweepOutcome::default();
        if let Some(limit) = &self.rate_limit
            && due(&self.last_prune, PRUNE_INTERVAL)
        {
            let db = self.pool.get().await?;
            ratelimit::prune_expired(&db, limit.window).await?;
        }
        if due(&self.last_expiry, EXPIRY_INTERVAL) {
            let db = self.pool.get().await?;
            outcome.expired += queue::expire(&db, EXPIRY_BATCH).await?;
        }
        if due(&self.last_retention, retention::INTERVAL) {
            let deleted = retention::step(&self.pool, &self.retention).await?;
            outcome.purged += deleted.notifications_deleted;
            outcome.webhook_events_purged += deleted.webhook_events_deleted;
            if deleted != retention::Deleted::default() {
                tracing::info!(
                    notifications = deleted.notifications_deleted,
                    webhook_events = deleted.webhook_events_deleted,
                    "retention deleted finished work"
                );
            }
        }
        self.expand_campaigns().await;
        if due(&self.last_finish, FINISH_INTERVAL) {
            let db = self.pool.get().await?;
            let finished = content::campaigns::finish(&db).await?;
            if finished > 0 {
                tracing::info!(finished, "campaigns done");
            }
        }
        if due(&self.last_recovery, self.recovery_interval) {
            let db = self.pool.get().await?;
            let recovered =
                queue::recover_expired(&db, self.config.visibility_timeout, RECOVERY_BATCH).await?;
            outcome.recovered = recovered.requeued + recovered.dead_lettered;
            outcome.dead_lettered += recovered.dead_lettered;
            if outcome.recovered > 0 {
                tracing::warn!(
                    requeued = recovered.requeued,
                    dead_lettered = recovered.dead_lettered,
                    "recovered expired claims"
                );
            }
        }
        Ok(outcome)
    }
}

impl Sweeper {
    /// Expands campaign chunks for at most [`EXPANSION_BUDGET`], in one lane at a time. A
    /// failure is logged, not the step's: sending goes on, and the chunk that failed is
    /// expanded again by a later step.
    async fn expand_campaigns(&self) {
        let idle = self
            .nothing_to_expand
            .lock()
            .ok()
            .and_then(|at| *at)
            .is_some_and(|at| at.elapsed() < EXPANSION_IDLE_INTERVAL);
        if idle || self.expanding.swap(true, Ordering::AcqRel) {
            return;
        }
        let started = Instant::now();
        let mut recipients = 0;
        while started.elapsed() < EXPANSION_BUDGET {
            match content::campaigns::expand_chunk(
                &self.pool,
                &self.audience.secret,
                self.retry.max_attempts(),
            )
            .await
            {
                Ok(Some(chunk)) => recipients += chunk,
                Ok(None) => {
                    if let Ok(mut at) = self.nothing_to_expand.lock() {
                        *at = Some(Instant::now());
                    }
                    break;
                }
                Err(error) => {
                    tracing::warn!(error = %crate::telemetry::describe(&error), "campaign expansion failed; a later step resumes it");
                    break;
                }
            }
        }
        if recipients > 0 {
            tracing::info!(recipients, "campaign recipients expanded");
        }
        self.expanding.store(false, Ordering::Release);
    }
}

/// True (and remembered) when `interval` has passed since the last time this said true.
fn due(last: &Mutex<Option<Instant>>, interval: Duration) -> bool {
    let Ok(mut last) = last.lock() else {
        return true;
    };
    let now = Instant::now();
    match *last {
        Some(at) if now.duration_since(at) < interval => false,
        _ => {
            *last = Some(now);
            true
        }
    }
}
