//! The sweeper against a real PostgreSQL: exclusive claims under contention, claim order,
//! what each provider answer leads to, backoff on the database clock, recovery of dead
//! workers, release on shutdown, the outbox, and wake-ups by LISTEN/NOTIFY.

mod common;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use common::factory::{self, Spec};
use common::{TestDb, test_db};
use deadpool_postgres::Pool;
use futures::FutureExt;
use futures::future::{BoxFuture, join_all};
use notify_shared::backoff::{Random, ThreadRandom};
use notify_shared::config::{MockProviderConfig, RateLimitConfig, RetryPolicy, WorkerConfig};
use notify_shared::notification::Priority;
use notify_shared::provider::simulated::SimulatedProvider;
use notify_shared::provider::{Delivery, Provider, ProviderOutcome};
use notify_shared::queue::{self, Claimed, Disposition};
use notify_shared::stop::StopSignal;
use notify_shared::sweeper::{self, SweepOutcome, Sweeper};
use notify_shared::wake;
use tokio::sync::Barrier;
use uuid::Uuid;

/// The default visibility timeout (`JOB_VISIBILITY_TIMEOUT_SECONDS` = 300).
const LEASE: Duration = Duration::from_secs(300);
const RACERS: usize = 10;

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn worker_config() -> WorkerConfig {
    WorkerConfig {
        batch_size: 100,
        concurrency: 1,
        poll_interval: Duration::from_millis(100),
        visibility_timeout: LEASE,
        provider_timeout: Duration::from_secs(5),
    }
}

const RETRY: RetryPolicy = RetryPolicy {
    max_retries: 5,
    base_delay_ms: 1000,
    max_delay_ms: 60_000,
};

/// Randomness that always answers the same number.
struct Fixed(f64);

impl Random for Fixed {
    fn unit(&self) -> f64 {
        self.0
    }
}

fn simulated(pool: Pool) -> SimulatedProvider {
    SimulatedProvider::new(
        pool,
        MockProviderConfig {
            failure_rate: 0.0,
            latency: Duration::ZERO,
        },
        Arc::new(Fixed(0.0)),
    )
}

fn new_sweeper(
    pool: Pool,
    provider: Arc<dyn Provider>,
    random: Arc<dyn Random>,
    config: WorkerConfig,
) -> Sweeper {
    Sweeper::new(pool, provider, random, config, RETRY)
}

/// Wraps a provider and remembers every key it was asked to send and what it answered.
struct Counting {
    inner: Arc<dyn Provider>,
    keys: Arc<Mutex<Vec<Uuid>>>,
    answers: Arc<Mutex<Vec<(Uuid, ProviderOutcome)>>>,
}

impl Counting {
    fn new(inner: Arc<dyn Provider>, keys: Arc<Mutex<Vec<Uuid>>>) -> Self {
        Counting {
            inner,
            keys,
            answers: Arc::default(),
        }
    }
}

impl Provider for Counting {
    fn send<'a>(&'a self, batch: &'a [Delivery<'a>]) -> BoxFuture<'a, Vec<ProviderOutcome>> {
        async move {
            self.keys
                .lock()
                .unwrap()
                .extend(batch.iter().map(|d| d.key));
            let outcomes = self.inner.send(batch).await;
            self.answers
                .lock()
                .unwrap()
                .extend(batch.iter().map(|d| d.key).zip(outcomes.iter().cloned()));
            outcomes
        }
        .boxed()
    }
}

/// Answers from a programmed sequence, one outcome per delivery; `then` once it runs out.
struct Scripted {
    script: Mutex<VecDeque<ProviderOutcome>>,
    then: ProviderOutcome,
    calls: Mutex<Vec<Uuid>>,
}

impl Scripted {
    fn new(script: impl IntoIterator<Item = ProviderOutcome>, then: ProviderOutcome) -> Self {
        Scripted {
            script: Mutex::new(script.into_iter().collect()),
            then,
            calls: Mutex::default(),
        }
    }

    fn always(outcome: ProviderOutcome) -> Self {
        Self::new([], outcome)
    }

    fn calls(&self) -> Vec<Uuid> {
        self.calls.lock().unwrap().clone()
    }
}

impl Provider for Scripted {
    fn send<'a>(&'a self, batch: &'a [Delivery<'a>]) -> BoxFuture<'a, Vec<ProviderOutcome>> {
        let outcomes = batch
            .iter()
            .map(|d| {
                self.calls.lock().unwrap().push(d.key);
                self.script
                    .lock()
                    .unwrap()
                    .pop_front()
                    .unwrap_or_else(|| self.then.clone())
            })
            .collect();
        futures::future::ready(outcomes).boxed()
    }
}

/// Decides by the recipient's first word: `sent-`, `fail-`, anything else is temporary.
struct ByRecipient;

impl Provider for ByRecipient {
    fn send<'a>(&'a self, batch: &'a [Delivery<'a>]) -> BoxFuture<'a, Vec<ProviderOutcome>> {
        let outcomes = batch
            .iter()
            .map(|d| {
                if d.recipient.starts_with("sent-") {
                    ProviderOutcome::Delivered { already: false }
                } else if d.recipient.starts_with("fail-") {
                    ProviderOutcome::Permanent("no such mailbox".into())
                } else {
                    ProviderOutcome::Temporary("try later".into())
                }
            })
            .collect();
        futures::future::ready(outcomes).boxed()
    }
}

/// Takes `delay` before answering "delivered".
struct Slow(Duration);

impl Provider for Slow {
    fn send<'a>(&'a self, batch: &'a [Delivery<'a>]) -> BoxFuture<'a, Vec<ProviderOutcome>> {
        async move {
            tokio::time::sleep(self.0).await;
            batch
                .iter()
                .map(|_| ProviderOutcome::Delivered { already: false })
                .collect()
        }
        .boxed()
    }
}

async fn execute(
    pool: &Pool,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> u64 {
    pool.get()
        .await
        .expect("connection")
        .execute(sql, params)
        .await
        .expect(sql)
}

/// Moves a retried notification's next attempt to the database's `now()`. The backoff put
/// it up to seconds ahead *on the database clock*, and the claim compares with that clock;
/// waiting it out in the test would be slow and timing-dependent, so time is fast-forwarded
/// instead. Nothing else about the row changes.
async fn make_due_now(pool: &Pool, id: Uuid) {
    let changed = execute(
        pool,
        "UPDATE notifications SET next_attempt_at = now() WHERE id = $1 AND status = 'PENDING'",
        &[&id],
    )
    .await;
    assert_eq!(changed, 1, "{id} is not PENDING");
}

/// Makes every current claim look abandoned: its lease ended a second ago.
async fn expire_leases(pool: &Pool) -> u64 {
    execute(
        pool,
        "UPDATE notifications SET lease_expires_at = now() - interval '1 second'
         WHERE status = 'PROCESSING'",
        &[],
    )
    .await
}

/// The webhook events of one notification: (status, attempt count), oldest first.
async fn events(pool: &Pool, id: Uuid) -> Vec<(String, i32)> {
    pool.get()
        .await
        .expect("connection")
        .query(
            "SELECT status, attempt_count FROM webhook_events
             WHERE notification_id = $1 ORDER BY occurred_at, status",
            &[&id],
        )
        .await
        .expect("events")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

async fn scalar_i64(
    pool: &Pool,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> i64 {
    pool.get()
        .await
        .expect("connection")
        .query_one(sql, params)
        .await
        .expect(sql)
        .get(0)
}

/// Delay between the record statement and the next attempt, both stamped with the same
/// statement's `now()`, in milliseconds on the database clock.
async fn scheduled_delay_ms(pool: &Pool, id: Uuid) -> i64 {
    scalar_i64(
        pool,
        "SELECT (extract(epoch FROM next_attempt_at - updated_at) * 1000)::int8
         FROM notifications WHERE id = $1",
        &[&id],
    )
    .await
}

async fn claim(pool: &Pool, worker: &str, limit: i64) -> Vec<Claimed> {
    let db = pool.get().await.expect("connection");
    queue::claim(&db, worker, limit, LEASE)
        .await
        .expect("claim")
}

async fn sweep(sweeper: &Sweeper) -> SweepOutcome {
    tokio::time::timeout(
        Duration::from_secs(20),
        sweeper.sweep_once(&StopSignal::never()),
    )
    .await
    .expect("a step finishes in time")
    .expect("a step succeeds")
}

// ---------------------------------------------------------------------------------------
// Exactly one owner
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_connections_racing_for_one_due_notification_hand_it_to_exactly_one_and_only_its_token_records()
 {
    let db = test_db().await;
    let pools: Vec<Pool> = (0..RACERS).map(|_| db.new_pool(1)).collect();
    for round in 0..25 {
        let notification = factory::create(&db.pool, Spec::default()).await;

        let barrier = Arc::new(Barrier::new(RACERS));
        let racers = pools.iter().enumerate().map(|(i, pool)| {
            let (pool, barrier) = (pool.clone(), barrier.clone());
            tokio::spawn(async move {
                let conn = pool.get().await.expect("connection");
                barrier.wait().await;
                queue::claim(&conn, &format!("racer-{i}"), 1, LEASE)
                    .await
                    .expect("claim")
            })
        });
        let claims: Vec<Vec<Claimed>> = join_all(racers)
            .await
            .into_iter()
            .map(|r| r.expect("racer"))
            .collect();
        let winners: Vec<usize> = (0..RACERS).filter(|&i| !claims[i].is_empty()).collect();
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let winner_index = winners[0];
        let winner = claims[winner_index][0].clone();
        assert_eq!(claims[winner_index].len(), 1);
        assert_eq!(winner.id, notification.id, "round {round}");
        assert_eq!(winner.attempt_count, 1, "round {round}");

        // Everyone now records "sent": the winner with its token, the others with a copy
        // of the winner's claim carrying a token of their own making.
        let barrier = Arc::new(Barrier::new(RACERS));
        let recorders = pools.iter().enumerate().map(|(i, pool)| {
            let (pool, barrier) = (pool.clone(), barrier.clone());
            let claimed = if i == winner_index {
                winner.clone()
            } else {
                Claimed {
                    token: Uuid::new_v4(),
                    ..winner.clone()
                }
            };
            tokio::spawn(async move {
                let conn = pool.get().await.expect("connection");
                barrier.wait().await;
                queue::record(&conn, &[(&claimed, Disposition::Sent)])
                    .await
                    .expect("record")
            })
        });
        let summaries: Vec<_> = join_all(recorders)
            .await
            .into_iter()
            .map(|r| r.expect("recorder"))
            .collect();
        let recorded: u64 = summaries.iter().map(|s| s.recorded).sum();
        let written: u64 = summaries.iter().map(|s| s.events).sum();
        assert_eq!(recorded, 1, "round {round}: {summaries:?}");
        assert_eq!(written, 1, "round {round}: {summaries:?}");
        assert_eq!(
            summaries[winner_index].recorded, 1,
            "round {round}: the real token is the one that records"
        );

        let stored = factory::load(&db.pool, notification.id).await;
        assert_eq!((stored.status, stored.attempt_count), ("SENT", 1));
        assert_eq!(
            events(&db.pool, notification.id).await,
            [("SENT".into(), 1)]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_sweepers_drain_300_notifications_with_exactly_one_provider_call_each() {
    let db = test_db().await;
    let ids = factory::create_due_bulk(&db.pool, 300).await;
    let keys = Arc::new(Mutex::new(Vec::new()));
    let config = WorkerConfig {
        batch_size: 5,
        ..worker_config()
    };
    let barrier = Arc::new(Barrier::new(RACERS));
    let lanes = (0..RACERS).map(|_| {
        let pool = db.new_pool(2);
        let provider = Counting::new(Arc::new(simulated(pool.clone())), keys.clone());
        // As in production, with the per-recipient limit (every recipient here is distinct,
        // so nothing is deferred).
        let sweeper = new_sweeper(
            pool,
            Arc::new(provider),
            Arc::new(ThreadRandom),
            config.clone(),
        )
        .with_rate_limit(RateLimitConfig {
            max_notifications: 10,
            window: Duration::from_secs(3600),
        });
        let barrier = barrier.clone();
        tokio::spawn(async move {
            barrier.wait().await;
            let mut total = SweepOutcome::default();
            loop {
                let outcome = sweeper
                    .sweep_once(&StopSignal::never())
                    .await
                    .expect("step");
                total += outcome;
                if outcome.claimed == 0 {
                    return total;
                }
            }
        })
    });
    let totals = tokio::time::timeout(Duration::from_secs(30), join_all(lanes))
        .await
        .expect("drained in time");
    let mut total = SweepOutcome::default();
    for lane in totals {
        total += lane.expect("lane");
    }
    assert_eq!(
        (total.claimed, total.sent, total.lost, total.deferred),
        (300, 300, 0, 0),
        "{total:?}"
    );

    let keys = keys.lock().unwrap().clone();
    assert_eq!(keys.len(), 300, "provider calls");
    let distinct: HashSet<Uuid> = keys.iter().copied().collect();
    assert_eq!(distinct, ids.iter().copied().collect::<HashSet<_>>());
    assert_eq!(
        factory::count_where(&db.pool, "status = 'SENT' AND attempt_count = 1").await,
        300
    );
    assert_eq!(
        scalar_i64(
            &db.pool,
            "SELECT count(*) FROM simulated_deliveries WHERE calls = 1",
            &[]
        )
        .await,
        300
    );
    assert_eq!(
        scalar_i64(&db.pool, "SELECT count(*) FROM simulated_deliveries", &[]).await,
        300
    );
}

/// The control for the two tests above: the same race with a claim that reads first and
/// then updates without `SKIP LOCKED` or a status re-check. If this did not hand one
/// notification to several workers, the race tests could not tell right from wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_naive_claim_without_skip_locked_hands_one_notification_to_several_workers() {
    let db = test_db().await;
    let pools: Vec<Pool> = (0..RACERS).map(|_| db.new_pool(1)).collect();
    let mut owners_per_round = Vec::new();
    for _ in 0..5 {
        // Room for every racer's increment, so only the missing re-check is on trial.
        let notification = factory::create(&db.pool, Spec::default().max_attempts(1000)).await;
        let read_all = Arc::new(Barrier::new(RACERS));
        let racers = pools.iter().enumerate().map(|(i, pool)| {
            let (pool, read_all) = (pool.clone(), read_all.clone());
            tokio::spawn(async move {
                let conn = pool.get().await.expect("connection");
                let id: Option<Uuid> = conn
                    .query_opt(
                        "SELECT id FROM notifications
                         WHERE status = 'PENDING' AND next_attempt_at <= now()
                         ORDER BY priority, next_attempt_at, created_at LIMIT 1",
                        &[],
                    )
                    .await
                    .expect("read")
                    .map(|row| row.get(0));
                // Everyone has read before anyone writes.
                read_all.wait().await;
                let id = id?;
                conn.query_opt(
                    "UPDATE notifications
                     SET status = 'PROCESSING', claim_token = gen_random_uuid(), claimed_by = $2,
                         lease_expires_at = now() + interval '5 min',
                         attempt_count = attempt_count + 1
                     WHERE id = $1
                     RETURNING id",
                    &[&id, &format!("naive-{i}")],
                )
                .await
                .expect("update")
                .map(|row| row.get::<_, Uuid>(0))
            })
        });
        let owners = join_all(racers)
            .await
            .into_iter()
            .map(|r| r.expect("racer"))
            .filter(|id| *id == Some(notification.id))
            .count();
        owners_per_round.push(owners);
    }
    assert!(
        owners_per_round.iter().any(|&owners| owners > 1),
        "the naive claim never double-assigned: {owners_per_round:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Claim order
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn claims_take_high_then_normal_then_low_and_within_a_priority_the_longest_due_then_the_oldest()
 {
    let db = test_db().await;
    let now = Utc::now();
    let ago = |s: i64| now - TimeDelta::seconds(s);
    let shared_due = ago(40);
    let create = |priority: Priority, due| {
        let pool = db.pool.clone();
        async move {
            factory::create(&pool, Spec::default().priority(priority).due_at(due))
                .await
                .id
        }
    };
    // Created in an order that matches none of the expected ones.
    let low_long_due = create(Priority::Low, ago(100)).await;
    let normal_recent = create(Priority::Normal, ago(20)).await;
    let normal_shared_older = create(Priority::Normal, shared_due).await;
    let high_recent = create(Priority::High, ago(10)).await;
    let high_future = create(Priority::High, now + TimeDelta::seconds(600)).await;
    let normal_shared_newer = create(Priority::Normal, shared_due).await;
    let high_long_due = create(Priority::High, ago(30)).await;
    let low_recent = create(Priority::Low, ago(5)).await;

    let mut order = Vec::new();
    for _ in 0..10 {
        let claimed = claim(&db.pool, "order", 1).await;
        assert!(claimed.len() <= 1);
        match claimed.first() {
            Some(c) => order.push(c.id),
            None => break,
        }
    }
    assert_eq!(
        order,
        [
            high_long_due,
            high_recent,
            normal_shared_older,
            normal_shared_newer,
            normal_recent,
            low_long_due,
            low_recent,
        ]
    );
    assert!(!order.contains(&high_future));
    let future = factory::load(&db.pool, high_future).await;
    assert_eq!((future.status, future.attempt_count), ("PENDING", 0));
}

#[tokio::test]
async fn a_batch_claim_returns_its_rows_in_claim_order() {
    let db = test_db().await;
    let low = factory::create(&db.pool, Spec::default().priority(Priority::Low)).await;
    let normal = factory::create(&db.pool, Spec::default().priority(Priority::Normal)).await;
    let high = factory::create(&db.pool, Spec::default().priority(Priority::High)).await;
    let claimed: Vec<Uuid> = claim(&db.pool, "batch", 10)
        .await
        .iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(claimed, [high.id, normal.id, low.id]);
}

// ---------------------------------------------------------------------------------------
// What each provider answer leads to
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn two_temporary_failures_then_a_delivery_end_sent_on_the_third_attempt_with_no_error() {
    let db = test_db().await;
    let n = factory::create(&db.pool, Spec::default()).await;
    let provider = Arc::new(Scripted::new(
        [
            ProviderOutcome::Temporary("outage 1".into()),
            ProviderOutcome::Temporary("outage 2".into()),
            ProviderOutcome::Delivered { already: false },
        ],
        ProviderOutcome::Permanent("called too often".into()),
    ));
    let sweeper = new_sweeper(
        db.pool.clone(),
        provider.clone(),
        Arc::new(Fixed(0.5)),
        worker_config(),
    );

    for (attempt, error) in [(1, "outage 1"), (2, "outage 2")] {
        let outcome = sweep(&sweeper).await;
        assert_eq!((outcome.claimed, outcome.retried), (1, 1), "{outcome:?}");
        let stored = factory::load(&db.pool, n.id).await;
        assert_eq!(stored.status, "PENDING");
        assert_eq!(stored.attempt_count, attempt);
        assert_eq!(stored.last_error.as_deref(), Some(error));
        assert!(stored.next_attempt_at > stored.updated_at, "backed off");
        assert_eq!(
            sweep(&sweeper).await.claimed,
            0,
            "not due during its backoff"
        );
        make_due_now(&db.pool, n.id).await;
    }
    let outcome = sweep(&sweeper).await;
    assert_eq!((outcome.claimed, outcome.sent), (1, 1), "{outcome:?}");
    let stored = factory::load(&db.pool, n.id).await;
    assert_eq!(stored.status, "SENT");
    assert_eq!(stored.attempt_count, 3);
    assert_eq!(stored.last_error, None);
    assert!(stored.sent_at.is_some());
    assert_eq!(provider.calls(), [n.id, n.id, n.id]);
    assert_eq!(events(&db.pool, n.id).await, [("SENT".into(), 3)]);
}

#[tokio::test]
async fn temporary_failures_on_every_attempt_dead_letter_at_the_last_one_with_one_event() {
    let db = test_db().await;
    let n = factory::create(&db.pool, Spec::default().max_attempts(3)).await;
    let provider = Arc::new(Scripted::always(ProviderOutcome::Temporary("down".into())));
    let sweeper = new_sweeper(
        db.pool.clone(),
        provider.clone(),
        Arc::new(Fixed(0.0)),
        worker_config(),
    );

    for _ in 0..2 {
        assert_eq!(sweep(&sweeper).await.retried, 1);
        assert!(
            events(&db.pool, n.id).await.is_empty(),
            "no event for a retry"
        );
        make_due_now(&db.pool, n.id).await;
    }
    let outcome = sweep(&sweeper).await;
    assert_eq!(
        (outcome.claimed, outcome.dead_lettered),
        (1, 1),
        "{outcome:?}"
    );
    let stored = factory::load(&db.pool, n.id).await;
    assert_eq!(stored.status, "DEAD_LETTERED");
    assert_eq!((stored.attempt_count, stored.max_attempts), (3, 3));
    assert_eq!(stored.last_error.as_deref(), Some("down"));
    assert!(stored.dead_lettered_at.is_some());
    assert_eq!(provider.calls().len(), 3);
    assert_eq!(events(&db.pool, n.id).await, [("DEAD_LETTERED".into(), 3)]);

    // Final means final: nothing is claimed any more.
    assert_eq!(sweep(&sweeper).await.claimed, 0);
    assert_eq!(provider.calls().len(), 3);
}

#[tokio::test]
async fn a_permanent_failure_fails_at_once_with_the_providers_reason() {
    let db = test_db().await;
    let n = factory::create(&db.pool, Spec::default()).await;
    let provider = Arc::new(Scripted::always(ProviderOutcome::Permanent(
        "Recipient rejected by provider".into(),
    )));
    let sweeper = new_sweeper(
        db.pool.clone(),
        provider.clone(),
        Arc::new(Fixed(0.0)),
        worker_config(),
    );
    let outcome = sweep(&sweeper).await;
    assert_eq!((outcome.claimed, outcome.failed), (1, 1), "{outcome:?}");
    let stored = factory::load(&db.pool, n.id).await;
    assert_eq!(stored.status, "FAILED");
    assert_eq!(stored.attempt_count, 1);
    assert_eq!(
        stored.last_error.as_deref(),
        Some("Recipient rejected by provider")
    );
    assert!(stored.failed_at.is_some());
    assert_eq!(events(&db.pool, n.id).await, [("FAILED".into(), 1)]);
    assert_eq!(sweep(&sweeper).await.claimed, 0);
    assert_eq!(provider.calls().len(), 1);
}

#[tokio::test]
async fn a_provider_slower_than_the_time_limit_is_a_temporary_failure_that_says_so() {
    let db = test_db().await;
    let n = factory::create(&db.pool, Spec::default()).await;
    let config = WorkerConfig {
        provider_timeout: Duration::from_millis(100),
        ..worker_config()
    };
    let sweeper = new_sweeper(
        db.pool.clone(),
        Arc::new(Slow(Duration::from_secs(30))),
        Arc::new(Fixed(0.0)),
        config,
    );
    let started = std::time::Instant::now();
    let outcome = sweep(&sweeper).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the limit applies"
    );
    assert_eq!((outcome.claimed, outcome.retried), (1, 1), "{outcome:?}");
    let stored = factory::load(&db.pool, n.id).await;
    assert_eq!(stored.status, "PENDING");
    assert_eq!(stored.attempt_count, 1);
    assert_eq!(
        stored.last_error.as_deref(),
        Some("Provider timed out after 100ms")
    );
    assert!(events(&db.pool, n.id).await.is_empty());
}

// ---------------------------------------------------------------------------------------
// Backoff on the database clock
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn retries_are_scheduled_inside_the_equal_jitter_window_of_the_attempt_that_failed() {
    let db = test_db().await;
    let ids: Vec<Uuid> = factory::create_many(&db.pool, 20, |_| Spec::default())
        .await
        .iter()
        .map(|n| n.id)
        .collect();
    let sweeper = new_sweeper(
        db.pool.clone(),
        Arc::new(Scripted::always(ProviderOutcome::Temporary("busy".into()))),
        Arc::new(ThreadRandom),
        worker_config(),
    );
    // (attempt that failed, window in ms): c = 1000 * 2^(n-1), delay in [c/2, c].
    for (attempt, low, high) in [(1, 500, 1000), (2, 1000, 2000), (3, 2000, 4000)] {
        let outcome = sweep(&sweeper).await;
        assert_eq!(outcome.retried, 20, "{outcome:?}");
        for &id in &ids {
            let stored = factory::load(&db.pool, id).await;
            assert_eq!(stored.attempt_count, attempt);
            let delay = scheduled_delay_ms(&db.pool, id).await;
            assert!(
                (low..=high).contains(&delay),
                "attempt {attempt}: {delay} ms outside {low}..={high}"
            );
            make_due_now(&db.pool, id).await;
        }
    }
}

#[tokio::test]
async fn with_fixed_randomness_the_retry_delay_is_exact() {
    let db = test_db().await;
    for (random, expected) in [(0.0, [500, 1000, 2000]), (0.5, [750, 1500, 3000])] {
        let n = factory::create(&db.pool, Spec::default()).await;
        let sweeper = new_sweeper(
            db.pool.clone(),
            Arc::new(Scripted::always(ProviderOutcome::Temporary("busy".into()))),
            Arc::new(Fixed(random)),
            worker_config(),
        );
        for (attempt, expected) in (1..).zip(expected) {
            assert_eq!(sweep(&sweeper).await.retried, 1);
            assert_eq!(factory::load(&db.pool, n.id).await.attempt_count, attempt);
            assert_eq!(
                scheduled_delay_ms(&db.pool, n.id).await,
                expected,
                "random {random}, attempt {attempt}"
            );
            make_due_now(&db.pool, n.id).await;
        }
        // Leave it out of the next round's way.
        execute(
            &db.pool,
            "UPDATE notifications SET status = 'CANCELLED', cancelled_at = now() WHERE id = $1",
            &[&n.id],
        )
        .await;
    }
}

// ---------------------------------------------------------------------------------------
// Dead workers
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_delivery_accepted_before_its_worker_died_is_resent_with_the_same_key_and_not_delivered_twice()
 {
    let db = test_db().await;
    let n = factory::create(&db.pool, Spec::default()).await;

    // The old owner claims and the provider accepts; then the worker dies before recording.
    let old = claim(&db.pool, "doomed", 10).await;
    assert_eq!(old.len(), 1);
    let old = old[0].clone();
    let provider = simulated(db.pool.clone());
    let first = provider
        .send(&[Delivery {
            key: old.id,
            channel: old.channel,
            recipient: &old.recipient,
            payload: &old.payload,
        }])
        .await;
    assert_eq!(first, [ProviderOutcome::Delivered { already: false }]);
    assert_eq!(expire_leases(&db.pool).await, 1);

    let keys = Arc::new(Mutex::new(Vec::new()));
    let counting = Arc::new(Counting::new(
        Arc::new(simulated(db.pool.clone())),
        keys.clone(),
    ));
    let sweeper = new_sweeper(
        db.pool.clone(),
        counting.clone(),
        Arc::new(Fixed(0.0)),
        worker_config(),
    )
    .recover_on_every_step();
    let outcome = sweep(&sweeper).await;
    assert_eq!(
        (outcome.recovered, outcome.claimed, outcome.sent),
        (1, 1, 1),
        "{outcome:?}"
    );
    assert_eq!(*keys.lock().unwrap(), [n.id], "resent with the same key");
    assert_eq!(
        *counting.answers.lock().unwrap(),
        [(n.id, ProviderOutcome::Delivered { already: true })]
    );
    let stored = factory::load(&db.pool, n.id).await;
    assert_eq!((stored.status, stored.attempt_count), ("SENT", 2));
    assert_eq!(stored.last_error, None);
    assert_eq!(
        scalar_i64(
            &db.pool,
            "SELECT calls::int8 FROM simulated_deliveries WHERE delivery_key = $1",
            &[&n.id]
        )
        .await,
        2
    );
    assert_eq!(
        scalar_i64(&db.pool, "SELECT count(*) FROM simulated_deliveries", &[]).await,
        1
    );

    // The old owner wakes up and reports; its token is stale, so nothing changes.
    let conn = db.pool.get().await.expect("connection");
    for late in [
        Disposition::Failed {
            error: "late".into(),
        },
        Disposition::Retry {
            error: "late".into(),
            delay: Duration::from_secs(1),
        },
        Disposition::Sent,
    ] {
        let summary = queue::record(&conn, &[(&old, late)]).await.expect("record");
        assert_eq!((summary.recorded, summary.events), (0, 0));
    }
    assert_eq!(
        queue::release(&conn, &[(&old, None)])
            .await
            .expect("release"),
        0
    );
    let after = factory::load(&db.pool, n.id).await;
    assert_eq!(
        (after.status, after.attempt_count, after.last_error),
        ("SENT", 2, None)
    );
    assert_eq!(events(&db.pool, n.id).await, [("SENT".into(), 2)]);
}

#[tokio::test]
async fn a_claim_that_expires_on_its_final_attempt_gets_one_reconciliation_attempt_then_dead_letters()
 {
    let db = test_db().await;
    let n = factory::create(&db.pool, Spec::default().max_attempts(1)).await;
    let conn = db.pool.get().await.expect("connection");

    assert_eq!(claim(&db.pool, "doomed-1", 10).await.len(), 1);
    expire_leases(&db.pool).await;
    let recovered = queue::recover_expired(&conn, LEASE, 1000)
        .await
        .expect("recover");
    assert_eq!((recovered.requeued, recovered.dead_lettered), (1, 0));
    let stored = factory::load(&db.pool, n.id).await;
    assert_eq!(stored.status, "PENDING");
    assert_eq!((stored.attempt_count, stored.max_attempts), (1, 2));
    assert_eq!(
        stored.last_error.as_deref(),
        Some("Claim expired after 300s without completion")
    );
    let granted: bool = conn
        .query_one(
            "SELECT reconciliation_granted AND next_attempt_at <= now() AND claim_token IS NULL
             FROM notifications WHERE id = $1",
            &[&n.id],
        )
        .await
        .expect("flag")
        .get(0);
    assert!(granted, "reconciliation granted, due now, claim cleared");
    assert!(events(&db.pool, n.id).await.is_empty());

    let again = claim(&db.pool, "doomed-2", 10).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempt_count, 2);
    expire_leases(&db.pool).await;
    let recovered = queue::recover_expired(&conn, LEASE, 1000)
        .await
        .expect("recover");
    assert_eq!((recovered.requeued, recovered.dead_lettered), (0, 1));
    let stored = factory::load(&db.pool, n.id).await;
    assert_eq!(stored.status, "DEAD_LETTERED");
    assert_eq!((stored.attempt_count, stored.max_attempts), (2, 2));
    assert!(stored.dead_lettered_at.is_some());
    assert_eq!(events(&db.pool, n.id).await, [("DEAD_LETTERED".into(), 2)]);

    // Nothing left to recover or claim.
    let recovered = queue::recover_expired(&conn, LEASE, 1000)
        .await
        .expect("recover");
    assert_eq!((recovered.requeued, recovered.dead_lettered), (0, 0));
    assert!(claim(&db.pool, "late", 10).await.is_empty());
    assert_eq!(events(&db.pool, n.id).await.len(), 1);
}

// ---------------------------------------------------------------------------------------
// Release
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn releasing_an_untried_claim_refunds_the_attempt_and_makes_it_due_now() {
    let db = test_db().await;
    let n = factory::create(&db.pool, Spec::default().due_in_seconds(0)).await;
    let claimed = claim(&db.pool, "leaving", 10).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].attempt_count, 1);

    let conn = db.pool.get().await.expect("connection");
    let released = queue::release(&conn, &[(&claimed[0], None)])
        .await
        .expect("release");
    assert_eq!(released, 1);
    let state: (String, i32, bool) = conn
        .query_one(
            "SELECT status, attempt_count,
                    next_attempt_at <= now() AND claim_token IS NULL AND claimed_by IS NULL
                    AND lease_expires_at IS NULL
             FROM notifications WHERE id = $1",
            &[&n.id],
        )
        .await
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .expect("row");
    assert_eq!(state, ("PENDING".into(), 0, true));
    assert_eq!(
        queue::release(&conn, &[(&claimed[0], None)])
            .await
            .expect("release"),
        0,
        "a second release with the same token changes nothing"
    );
    assert!(events(&db.pool, n.id).await.is_empty());

    // And it is claimable again at once, as attempt 1.
    let again = claim(&db.pool, "next", 10).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempt_count, 1);
}

// ---------------------------------------------------------------------------------------
// The outbox
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn exactly_one_outbox_event_per_final_transition_and_none_for_retries_releases_or_lost_claims()
 {
    let db = test_db().await;
    let sent = factory::create(&db.pool, Spec::to("sent-a@example.com")).await;
    let failed = factory::create(&db.pool, Spec::to("fail-a@example.com")).await;
    let retried = factory::create(&db.pool, Spec::to("retry-a@example.com")).await;
    let dead = factory::create(&db.pool, Spec::to("retry-b@example.com").max_attempts(1)).await;

    let sweeper = new_sweeper(
        db.pool.clone(),
        Arc::new(ByRecipient),
        Arc::new(Fixed(0.0)),
        worker_config(),
    );
    let outcome = sweep(&sweeper).await;
    assert_eq!(
        (
            outcome.claimed,
            outcome.sent,
            outcome.failed,
            outcome.retried,
            outcome.dead_lettered
        ),
        (4, 1, 1, 1, 1),
        "{outcome:?}"
    );

    // Released: claimed and handed back untried.
    let released = factory::create(&db.pool, Spec::default()).await;
    let conn = db.pool.get().await.expect("connection");
    let claim_released = claim(&db.pool, "leaving", 10).await;
    assert_eq!(claim_released.len(), 1);
    assert_eq!(
        queue::release(&conn, &[(&claim_released[0], None)])
            .await
            .expect("release"),
        1
    );

    // Lost: claimed, presumed dead, recovered and claimed by someone else; the first
    // owner's result arrives late and is dropped.
    execute(
        &db.pool,
        "UPDATE notifications SET next_attempt_at = now() + interval '1 hour' WHERE id = $1",
        &[&released.id],
    )
    .await;
    let lost = factory::create(&db.pool, Spec::default()).await;
    let first = claim(&db.pool, "first", 10).await;
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].id, lost.id);
    expire_leases(&db.pool).await;
    queue::recover_expired(&conn, LEASE, 1000)
        .await
        .expect("recover");
    let second = claim(&db.pool, "second", 10).await;
    assert_eq!(second.len(), 1);
    assert_ne!(second[0].token, first[0].token);
    assert!(
        queue::start_fence(&conn, &[&first[0]], Duration::from_secs(1), LEASE)
            .await
            .expect("fence")
            .is_empty(),
        "the first owner's start fence reports the claim lost"
    );
    let late = queue::record(&conn, &[(&first[0], Disposition::Sent)])
        .await
        .expect("record");
    assert_eq!((late.recorded, late.events), (0, 0));

    // Recording the same final result again writes no second event.
    let again = queue::record(&conn, &[(&second[0], Disposition::Sent)])
        .await
        .expect("record");
    assert_eq!((again.recorded, again.events), (1, 1));
    let replay = queue::record(&conn, &[(&second[0], Disposition::Sent)])
        .await
        .expect("record");
    assert_eq!((replay.recorded, replay.events), (0, 0));

    let mut by_notification: HashMap<Uuid, Vec<(String, i32)>> = HashMap::new();
    for row in conn
        .query(
            "SELECT notification_id, status, count(*)::int4 FROM webhook_events
             GROUP BY notification_id, status",
            &[],
        )
        .await
        .expect("events")
    {
        by_notification
            .entry(row.get(0))
            .or_default()
            .push((row.get(1), row.get(2)));
    }
    let expected: HashMap<Uuid, Vec<(String, i32)>> = [
        (sent.id, vec![("SENT".to_string(), 1)]),
        (failed.id, vec![("FAILED".to_string(), 1)]),
        (dead.id, vec![("DEAD_LETTERED".to_string(), 1)]),
        // Sent once by its second owner; nothing from the first.
        (lost.id, vec![("SENT".to_string(), 1)]),
    ]
    .into();
    assert_eq!(by_notification, expected);
    assert!(!by_notification.contains_key(&retried.id));
    assert!(!by_notification.contains_key(&released.id));
}

// ---------------------------------------------------------------------------------------
// Wake-ups
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inserted_due_notification_wakes_an_idle_sweeper_long_before_its_next_poll() {
    let db: TestDb = test_db().await;
    let (handle, stop) = StopSignal::new();
    let wake = wake::listen(db.url.clone(), queue::WAKE_CHANNEL, stop.clone());
    // The listener bumps once when its LISTEN is in place.
    let mut connected = wake.clone();
    tokio::time::timeout(Duration::from_secs(10), connected.notified())
        .await
        .expect("the listener connects");

    let config = WorkerConfig {
        concurrency: 1,
        poll_interval: Duration::from_secs(10),
        ..worker_config()
    };
    let sweeper = Arc::new(new_sweeper(
        db.pool.clone(),
        Arc::new(simulated(db.pool.clone())),
        Arc::new(Fixed(0.0)),
        config,
    ));
    let running = tokio::spawn(sweeper::run(sweeper, wake, stop.clone()));
    // Let the loop finish its first steps and settle into waiting. This can only make the
    // test stricter: if the insert were picked up by a start-up step, it would pass anyway.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let inserted_at = std::time::Instant::now();
    let n = factory::create(&db.pool, Spec::default()).await;
    let mut status = "PENDING";
    while inserted_at.elapsed() < Duration::from_secs(1) {
        status = factory::load(&db.pool, n.id).await.status;
        if status == "SENT" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let waited = inserted_at.elapsed();
    handle.stop();
    let total = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the loop stops")
        .expect("the loop ends cleanly");
    assert_eq!(status, "SENT", "not sent {waited:?} after insertion");
    assert_eq!(total.sent, 1, "{total:?}");
}

#[tokio::test]
async fn the_start_fence_only_writes_when_the_lease_would_not_outlast_the_provider_call() {
    let db = test_db().await;
    factory::create_many(&db.pool, 2, |_| Spec::default()).await;
    let conn = db.pool.get().await.expect("db");
    let claimed = queue::claim(&conn, "fencer", 2, Duration::from_secs(20))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 2);
    let version = |id: uuid::Uuid| {
        let conn = &conn;
        async move {
            let row = conn
                .query_one(
                    "SELECT xmin::text, extract(epoch FROM lease_expires_at - now())::float8 FROM notifications WHERE id = $1",
                    &[&id],
                )
                .await
                .expect("row");
            (row.get::<_, String>(0), row.get::<_, f64>(1))
        }
    };
    let before = version(claimed[0].id).await;

    // 20 s left covers a 10 s call: nothing is written.
    let held = queue::start_fence(
        &conn,
        &[&claimed[0]],
        Duration::from_secs(10),
        Duration::from_secs(300),
    )
    .await
    .expect("fence");
    assert_eq!(held, vec![claimed[0].id]);
    let after = version(claimed[0].id).await;
    assert_eq!(
        before.0, after.0,
        "the row was rewritten although the lease sufficed"
    );

    // 20 s left does not cover a 60 s call: the lease is renewed to a full 300 s.
    let held = queue::start_fence(
        &conn,
        &[&claimed[1]],
        Duration::from_secs(60),
        Duration::from_secs(300),
    )
    .await
    .expect("fence");
    assert_eq!(held, vec![claimed[1].id]);
    let renewed = version(claimed[1].id).await;
    assert!(renewed.1 > 290.0, "lease not renewed: {renewed:?}");
}
