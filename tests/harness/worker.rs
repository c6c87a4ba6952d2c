//! Worker settings, sweepers and webhook drainers as tests build them: the production
//! defaults where they do not matter, short waits where they would slow a test down.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;
use notify_shared::backoff::{Random, ThreadRandom};
use notify_shared::config::{MockProviderConfig, RateLimitConfig, RetryPolicy, WorkerConfig};
use notify_shared::notification::Channel;
use notify_shared::provider::simulated::SimulatedProvider;
use notify_shared::provider::{Call, Provider, ProviderOutcome};
use notify_shared::queue::{self, ClaimMode, Claimed, Disposition, RecordSummary, Settled};
use notify_shared::stop::StopSignal;
use notify_shared::sweeper::{SweepOutcome, Sweeper};
use notify_shared::webhook::destination::DestinationPolicy;
use notify_shared::webhook::{DrainOutcome, SigningKey, WebhookClient, WebhookDrainer};

use crate::doubles::Fixed;

/// The default visibility timeout (`JOB_VISIBILITY_TIMEOUT_SECONDS` = 300).
pub const LEASE: Duration = Duration::from_secs(300);

/// The default retry policy: 6 attempts, backoff from 0.5–1 s doubling up to 60 s.
pub const RETRY: RetryPolicy = RetryPolicy {
    max_retries: 5,
    base_delay_ms: 1000,
    max_delay_ms: 60_000,
};

/// A [`WorkerConfig`] for tests: batches of 100, one lane, a 100 ms poll, the default
/// 300 s lease and a 5 s provider time limit, each changeable.
#[derive(Debug, Clone)]
pub struct WorkerConfigBuilder(WorkerConfig);

pub fn worker_config() -> WorkerConfigBuilder {
    WorkerConfigBuilder(WorkerConfig {
        batch_size: 100,
        concurrency: 1,
        // As many lanes as `concurrency` allows.
        lanes: usize::MAX,
        poll_interval: Duration::from_millis(100),
        visibility_timeout: LEASE,
        provider_timeout: Duration::from_secs(5),
    })
}

impl WorkerConfigBuilder {
    pub fn batch_size(mut self, batch_size: i64) -> Self {
        self.0.batch_size = batch_size;
        self
    }
    /// Lanes of the sweeper loop, and deliveries in flight per process.
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.0.concurrency = concurrency;
        self
    }
    /// At most this many lanes, whatever `concurrency` allows.
    pub fn lanes(mut self, lanes: usize) -> Self {
        self.0.lanes = lanes;
        self
    }
    pub fn poll_interval(mut self, poll_interval: Duration) -> Self {
        self.0.poll_interval = poll_interval;
        self
    }
    pub fn visibility_timeout(mut self, lease: Duration) -> Self {
        self.0.visibility_timeout = lease;
        self
    }
    pub fn provider_timeout(mut self, timeout: Duration) -> Self {
        self.0.provider_timeout = timeout;
        self
    }
    pub fn build(self) -> WorkerConfig {
        self.0
    }
}

/// The simulated provider that never fails and answers at once.
pub fn simulated(pool: Pool) -> SimulatedProvider {
    SimulatedProvider::new(
        pool,
        MockProviderConfig {
            failure_rate: 0.0,
            latency: Duration::ZERO,
        },
        Arc::new(Fixed(0.0)),
    )
}

/// A sweeper over `pool` delivering through `provider`, with [`worker_config`],
/// [`RETRY`], thread randomness and no rate limit unless told otherwise.
pub fn sweeper(pool: &Pool, provider: Arc<dyn Provider>) -> SweeperBuilder {
    SweeperBuilder {
        pool: pool.clone(),
        provider,
        random: Arc::new(ThreadRandom),
        config: worker_config(),
        rate_limit: None,
        recover_on_every_step: false,
    }
}

pub struct SweeperBuilder {
    pool: Pool,
    provider: Arc<dyn Provider>,
    random: Arc<dyn Random>,
    config: WorkerConfigBuilder,
    rate_limit: Option<RateLimitConfig>,
    recover_on_every_step: bool,
}

impl SweeperBuilder {
    pub fn random(mut self, random: impl Random + 'static) -> Self {
        self.random = Arc::new(random);
        self
    }
    pub fn config(mut self, config: WorkerConfigBuilder) -> Self {
        self.config = config;
        self
    }
    /// At most `max` notifications per recipient in any `window`.
    pub fn rate_limit(mut self, max: i64, window: Duration) -> Self {
        self.rate_limit = Some(RateLimitConfig {
            max_notifications: max,
            window,
        });
        self
    }
    pub fn recover_on_every_step(mut self) -> Self {
        self.recover_on_every_step = true;
        self
    }
    pub fn build(self) -> Sweeper {
        let mut sweeper = Sweeper::new(
            self.pool,
            self.provider,
            self.random,
            self.config.build(),
            RETRY,
        );
        if let Some(limit) = self.rate_limit {
            sweeper = sweeper.with_rate_limit(limit);
        }
        if self.recover_on_every_step {
            sweeper = sweeper.recover_on_every_step();
        }
        sweeper
    }
}

/// One step that must finish within 20 s and succeed.
pub async fn sweep(sweeper: &Sweeper) -> SweepOutcome {
    tokio::time::timeout(
        Duration::from_secs(20),
        sweeper.sweep_once(&StopSignal::never()),
    )
    .await
    .expect("a step finishes in time")
    .expect("a step succeeds")
}

/// Steps until one claims nothing; returns what they did together.
pub async fn sweep_until_idle(sweeper: &Sweeper) -> SweepOutcome {
    let mut total = SweepOutcome::default();
    for _ in 0..1000 {
        let outcome = sweep(sweeper).await;
        total += outcome;
        if outcome.claimed == 0 {
            return total;
        }
    }
    panic!("still claiming after 1000 steps: {total:?}");
}

/// A webhook drainer POSTing to `url`: unsigned, a 2 s time limit, [`RETRY`], a 20 ms poll
/// and backoff at the low end of its window (tests make events due again by hand).
pub fn drainer(pool: &Pool, url: &str, max_attempts: i32) -> DrainerBuilder {
    DrainerBuilder {
        pool: pool.clone(),
        url: url.to_string(),
        key: None,
        timeout: Duration::from_secs(2),
        max_attempts,
        retry: RETRY,
        poll_interval: Duration::from_millis(20),
        destinations: None,
    }
}

pub struct DrainerBuilder {
    pool: Pool,
    url: String,
    key: Option<SigningKey>,
    timeout: Duration,
    max_attempts: i32,
    retry: RetryPolicy,
    poll_interval: Duration,
    destinations: Option<DestinationPolicy>,
}

impl DrainerBuilder {
    /// The SSRF rules of registered endpoints (the deployed rules when not called).
    pub fn destinations(mut self, policy: DestinationPolicy) -> Self {
        self.destinations = Some(policy);
        self
    }
    pub fn signing_key(mut self, key: Vec<u8>) -> Self {
        self.key = Some(SigningKey::new(key));
        self
    }
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }
    pub fn poll_interval(mut self, poll_interval: Duration) -> Self {
        self.poll_interval = poll_interval;
        self
    }
    pub fn build(self) -> WebhookDrainer {
        let client = WebhookClient::new(&self.url, self.key, self.timeout).expect("webhook client");
        let drainer = WebhookDrainer::new(
            self.pool,
            client,
            self.max_attempts,
            self.retry,
            self.poll_interval,
            Arc::new(Fixed(0.0)),
        );
        match self.destinations {
            Some(policy) => drainer.with_destinations(policy),
            None => drainer,
        }
    }
}

/// One drain step that must succeed.
pub async fn drain(drainer: &WebhookDrainer) -> DrainOutcome {
    drainer
        .drain_once(&StopSignal::never())
        .await
        .expect("drain step")
}

/// Claims like a sweeper step: due work of every channel, each with the claim of the
/// simulated provider, in claim order.
pub async fn claim(
    db: &impl deadpool_postgres::GenericClient,
    worker: &str,
    limit: i64,
    lease: Duration,
) -> Result<Vec<Claimed>, tokio_postgres::Error> {
    let mut claimed = Vec::new();
    for channel in Channel::ALL {
        claimed.extend(
            queue::claim(
                db,
                channel,
                ClaimMode::Free,
                worker,
                queue::Limit::of(limit),
                lease,
            )
            .await?,
        );
    }
    claimed.sort_by_key(|c| (c.priority, c.next_attempt_at, c.created_at));
    claimed.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok(claimed)
}

/// Records results as a sweeper does, each as a provider call that took no time.
pub async fn record(
    db: &impl deadpool_postgres::GenericClient,
    results: &[(&Claimed, Disposition)],
) -> Result<RecordSummary, tokio_postgres::Error> {
    let now = chrono::Utc::now();
    let calls: Vec<Call> = results
        .iter()
        .map(|(_, disposition)| Call {
            outcome: match disposition {
                Disposition::Sent { message_id } => ProviderOutcome::Delivered {
                    already: false,
                    message_id: message_id.clone(),
                },
                Disposition::Failed { error, .. } => ProviderOutcome::Permanent(error.clone()),
                other => ProviderOutcome::Temporary(other.error().unwrap_or_default().to_string()),
            },
            started_at: now,
            finished_at: now,
        })
        .collect();
    let settled: Vec<Settled<'_>> = results
        .iter()
        .zip(&calls)
        .map(|((claim, disposition), call)| Settled {
            claim,
            disposition: disposition.clone(),
            call,
            // What the sweeper does: an invalid recipient's address joins the list.
            suppress_hash: matches!(disposition, Disposition::Failed { suppress: true, .. }).then(
                || {
                    notify_shared::audience::address::hash(
                        notify_shared::config::DEVELOPMENT_SECRET,
                        claim.channel,
                        &claim.recipient,
                    )
                },
            ),
        })
        .collect();
    queue::record(db, "test-worker", &settled).await
}
