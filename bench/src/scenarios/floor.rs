//! B8: the sweeper's statements back to back with no application in between — the
//! physical limit of this design on this PostgreSQL.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use notify_shared::backoff::ThreadRandom;
use notify_shared::config::{MockProviderConfig, RateLimitConfig};
use notify_shared::db::PipelinedTransaction;
use notify_shared::notification::Channel;
use notify_shared::provider::simulated::SimulatedProvider;
use notify_shared::provider::{Attempt, Call, Delivery, Gate, Provider, ProviderOutcome};
use notify_shared::queue::{self, ClaimMode, Claimed, Disposition, Due, NewNotification, Settled};
use notify_shared::ratelimit;
use serde::Serialize;

use super::{Ctx, queries};
use crate::stats::{self, Progress};

/// The worker's defaults: a 300 s lease, and a fence that renews only a lease with less
/// than the provider time limit (10 s) + 5 s left.
const LEASE: Duration = Duration::from_secs(300);
const FENCE_NEEDED: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Variant {
    pub batch: i64,
    pub connections: usize,
    /// The sweeper's fence transaction with rate-limit admission (advisory locks,
    /// reservation read and insert) instead of the bare fence statement.
    pub admission: bool,
}

impl Variant {
    pub fn name(&self) -> String {
        format!(
            "{} batch {} x {} conn",
            if self.admission {
                "sweeper statements"
            } else {
                "floor"
            },
            self.batch,
            self.connections
        )
    }
}

pub const VARIANTS: [Variant; 6] = [
    Variant {
        batch: 100,
        connections: 1,
        admission: false,
    },
    Variant {
        batch: 100,
        connections: 2,
        admission: false,
    },
    Variant {
        batch: 500,
        connections: 1,
        admission: false,
    },
    Variant {
        batch: 500,
        connections: 2,
        admission: false,
    },
    Variant {
        batch: 100,
        connections: 1,
        admission: true,
    },
    Variant {
        batch: 100,
        connections: 2,
        admission: true,
    },
];

/// Seconds spent in each statement, summed over connections.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct StatementTimes {
    pub claim_s: f64,
    pub fence_s: f64,
    pub provider_s: f64,
    pub record_s: f64,
    pub batches: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Floor {
    pub variant: Variant,
    pub name: String,
    pub notifications: u64,
    pub seconds: f64,
    pub per_s: f64,
    pub times: StatementTimes,
    /// notify-local is not involved; bench = the connections' client side.
    pub cpu: crate::sys::CpuUse,
}

/// Inserts `n` notifications due tomorrow with the intake's batch statement, then
/// releases them with the same UPDATE as B2.
async fn load(db: &crate::server::FreshDb, n: u64, label: &str) -> anyhow::Result<()> {
    let pool = db.pool(1)?;
    let client = pool.get().await?;
    let prefix = uuid::Uuid::new_v4().simple().to_string();
    let mut progress = Progress::new(label, n, "stored");
    let mut start = 0u64;
    while start < n {
        let end = (start + 5000).min(n);
        let items: Vec<NewNotification> = (start..end)
            .map(|i| {
                NewNotification::new(
                    format!("b8-{prefix}-{i}"),
                    format!("{prefix}{prefix}"),
                    format!("b8-{prefix}-{i}@bench.example"),
                    Channel::Email,
                    crate::load::payload(i),
                    Due::AfterSeconds(86_400),
                    6,
                )
            })
            .collect();
        queue::insert_batch(&client, &items).await?;
        start = end;
        progress.update(start);
    }
    let released = client.execute(queries::RELEASE, &[]).await?;
    ensure!(released == n, "released {released} of {n}");
    Ok(())
}

/// One connection's loop: claim, fence, provider statement, record — until nothing is due.
async fn lane(
    pool: deadpool_postgres::Pool,
    variant: Variant,
    done: Arc<AtomicU64>,
) -> anyhow::Result<StatementTimes> {
    let provider = SimulatedProvider::new(
        pool.clone(),
        MockProviderConfig {
            failure_rate: 0.0,
            latency: Duration::ZERO,
        },
        Arc::new(ThreadRandom),
    );
    let limit = RateLimitConfig {
        max_notifications: 10,
        window: Duration::from_secs(3600),
    };
    // As many places as a batch has messages: the floor measures statements, not pacing.
    let gate = Gate::new(
        notify_shared::provider::Places::new(10_000),
        notify_shared::stop::StopSignal::never(),
        Duration::from_secs(10),
    );
    let worker = format!("bench-floor-{}", uuid::Uuid::new_v4().simple());
    let mut times = StatementTimes::default();
    loop {
        let t0 = Instant::now();
        let claimed = {
            let db = pool.get().await?;
            queue::claim(
                &db,
                Channel::Email,
                ClaimMode::Free,
                &worker,
                queue::Limit::of(variant.batch),
                LEASE,
            )
            .await?
        };
        if claimed.is_empty() {
            return Ok(times);
        }
        let t1 = Instant::now();
        let all: Vec<&Claimed> = claimed.iter().collect();
        let held: Vec<&Claimed> = if variant.admission {
            // As the sweeper does: two round trips, BEGIN and COMMIT among the statements.
            let tx = PipelinedTransaction::new(pool.get().await?);
            let db = tx.client();
            tokio::try_join!(queue::prepare_fence(db), ratelimit::prepare(db))?;
            let recipients: Vec<&str> = all.iter().map(|c| c.recipient.as_str()).collect();
            let (begun, reservations, still) = tokio::join!(
                tx.begin(),
                ratelimit::lock_and_read(db, &recipients, limit.window),
                queue::start_fence(db, &all, FENCE_NEEDED, LEASE),
            );
            begun?;
            let (reservations, still) = (reservations?, still?);
            let held: Vec<&Claimed> = all.into_iter().filter(|c| still.contains(&c.id)).collect();
            let admission = ratelimit::admit(&limit, reservations, &held);
            ensure!(admission.deferred.is_empty(), "the rate limit bit");
            let (reserved, committed) =
                tokio::join!(ratelimit::reserve(db, &admission.reserve), tx.commit());
            tx.ended(&committed);
            reserved?;
            committed?;
            admission.admitted
        } else {
            let db = pool.get().await?;
            let still = queue::start_fence(&db, &all, FENCE_NEEDED, LEASE).await?;
            all.into_iter().filter(|c| still.contains(&c.id)).collect()
        };
        let t2 = Instant::now();
        let deliveries: Vec<Delivery<'_>> = held
            .iter()
            .map(|c| Delivery {
                key: c.id,
                channel: c.channel,
                class: c.class,
                recipient: &c.recipient,
                payload: &c.payload,
                rendered: false,
                unsubscribe_url: None,
            })
            .collect();
        let outcomes = provider.send(&deliveries, &gate).await;
        let calls: Vec<&Call> = outcomes
            .iter()
            .filter_map(|o| match o {
                Attempt::Finished(call)
                    if matches!(call.outcome, ProviderOutcome::Delivered { .. }) =>
                {
                    Some(call)
                }
                _ => None,
            })
            .collect();
        ensure!(
            calls.len() == held.len(),
            "the simulated provider refused a delivery: {:?}",
            outcomes.first()
        );
        let t3 = Instant::now();
        let results: Vec<Settled<'_>> = held
            .iter()
            .zip(calls)
            .map(|(claim, call)| Settled {
                claim,
                disposition: Disposition::sent(),
                call,
                suppress_hash: None,
            })
            .collect();
        {
            let db = pool.get().await?;
            queue::record(&db, &worker, &results).await?;
        }
        let t4 = Instant::now();
        times.claim_s += (t1 - t0).as_secs_f64();
        times.fence_s += (t2 - t1).as_secs_f64();
        times.provider_s += (t3 - t2).as_secs_f64();
        times.record_s += (t4 - t3).as_secs_f64();
        times.batches += 1;
        done.fetch_add(results.len() as u64, Ordering::Relaxed);
    }
}

pub async fn floor(ctx: &Ctx, run: u32, variant: Variant) -> anyhow::Result<Floor> {
    let n = ctx.options.bulk();
    let db = ctx.server.fresh_database().await?;
    load(&db, n, &format!("B8 run {run} load for {}", variant.name())).await?;

    let done = Arc::new(AtomicU64::new(0));
    let mut lanes = tokio::task::JoinSet::new();
    let before = crate::sys::snapshot(&[], ctx.postmaster);
    let started = Instant::now();
    for _ in 0..variant.connections {
        // One connection per lane: every statement of the lane runs on it.
        lanes.spawn(lane(db.pool(1)?, variant, done.clone()));
    }
    let mut progress = Progress::new(format!("B8 run {run} {}", variant.name()), n, "sent");
    let mut times = StatementTimes::default();
    let deadline = started + ctx.drain_timeout(n);
    loop {
        tokio::select! {
            joined = lanes.join_next() => match joined {
                Some(result) => {
                    let t = result.context("a floor lane failed")??;
                    times.claim_s += t.claim_s;
                    times.fence_s += t.fence_s;
                    times.provider_s += t.provider_s;
                    times.record_s += t.record_s;
                    times.batches += t.batches;
                }
                None => break,
            },
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                progress.update(done.load(Ordering::Relaxed));
                ensure!(Instant::now() < deadline, "the floor run did not finish in time");
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu = crate::sys::cpu_use(before, crate::sys::snapshot(&[], ctx.postmaster), seconds);
    let client = db.connect().await?;
    let sent = queries::count(&client, queries::SENT).await?;
    ensure!(sent == n, "the floor sent {sent} of {n}");
    drop(client);
    progress.finish(&format!("{} /s", stats::int(n as f64 / seconds)));
    db.drop_now().await?;
    Ok(Floor {
        variant,
        name: variant.name(),
        notifications: n,
        seconds,
        per_s: n as f64 / seconds,
        times,
        cpu,
    })
}
