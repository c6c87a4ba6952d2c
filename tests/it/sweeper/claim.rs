//! Exactly one owner per claim under contention, the order claims take, and the start
//! fence.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use deadpool_postgres::Pool;
use futures::future::join_all;
use notify_shared::notification::{Channel, Priority, Status};
use notify_shared::queue::{self, Claimed, Disposition};
use notify_shared::stop::StopSignal;
use notify_shared::sweeper::SweepOutcome;
use notify_tests::TestDb;
use notify_tests::doubles::{CallLog, Counting, Scripted};
use notify_tests::factory::{self, Spec};
use notify_tests::worker::{self, LEASE, simulated, worker_config};
use tokio::sync::Barrier;
use uuid::Uuid;

use super::claim;

const RACERS: usize = 10;

// ---------------------------------------------------------------------------------------
// Exactly one owner
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_connections_racing_for_one_due_notification_hand_it_to_exactly_one_and_only_its_token_records()
 {
    let db = TestDb::new().await;
    let pools: Vec<Pool> = (0..RACERS).map(|_| db.new_pool(1)).collect();
    for round in 0..25 {
        let notification = factory::create(&db.pool, Spec::default()).await;

        let barrier = Arc::new(Barrier::new(RACERS));
        let racers = pools.iter().enumerate().map(|(i, pool)| {
            let (pool, barrier) = (pool.clone(), barrier.clone());
            tokio::spawn(async move {
                let conn = pool.get().await.expect("connection");
                barrier.wait().await;
                notify_tests::worker::claim(&conn, &format!("racer-{i}"), 1, LEASE)
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
                notify_tests::worker::record(&conn, &[(&claimed, Disposition::sent())])
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
        assert_eq!((stored.status, stored.attempt_count), (Status::Sent, 1));
        assert_eq!(
            factory::events(&db.pool, notification.id).await,
            [("SENT".into(), 1)]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_sweepers_drain_300_notifications_with_exactly_one_provider_call_each() {
    let db = TestDb::new().await;
    let ids = factory::create_due_bulk(&db.pool, 300).await;
    let log = CallLog::default();
    let barrier = Arc::new(Barrier::new(RACERS));
    let lanes = (0..RACERS).map(|_| {
        let pool = db.new_pool(2);
        let provider = Counting::with_log(Arc::new(simulated(pool.clone())), log.clone());
        // As in production, with the per-recipient limit (every recipient here is distinct,
        // so nothing is deferred).
        let sweeper = worker::sweeper(&pool, Arc::new(provider))
            .config(worker_config().batch_size(5))
            .rate_limit(10, Duration::from_secs(3600))
            .build();
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

    let keys = log.keys();
    assert_eq!(keys.len(), 300, "provider calls");
    let distinct: HashSet<Uuid> = keys.iter().copied().collect();
    assert_eq!(distinct, ids.iter().copied().collect::<HashSet<_>>());
    assert_eq!(
        factory::count_where(&db.pool, "status = 'SENT' AND attempt_count = 1").await,
        300
    );
    assert_eq!(
        db.count("SELECT count(*) FROM simulated_deliveries WHERE calls = 1")
            .await,
        300
    );
    assert_eq!(
        db.count("SELECT count(*) FROM simulated_deliveries").await,
        300
    );
}

/// The control for the two tests above: the same race with a claim that reads first and
/// then updates without `SKIP LOCKED` or a status re-check. If this did not hand one
/// notification to several workers, the race tests could not tell right from wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_naive_claim_without_skip_locked_hands_one_notification_to_several_workers() {
    let db = TestDb::new().await;
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
    let db = TestDb::new().await;
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
    assert_eq!((future.status, future.attempt_count), (Status::Pending, 0));
}

#[tokio::test]
async fn a_batch_claim_returns_its_rows_in_claim_order() {
    let db = TestDb::new().await;
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

#[tokio::test]
async fn the_start_fence_only_writes_when_the_lease_would_not_outlast_the_provider_call() {
    let db = TestDb::new().await;
    factory::create_many(&db.pool, 2, |_| Spec::default()).await;
    let conn = db.pool.get().await.expect("db");
    let claimed = notify_tests::worker::claim(&conn, "fencer", 2, Duration::from_secs(20))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 2);
    let version = |id: Uuid| {
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

/// The start fence judges a lease by the clock when it runs, not by when its transaction
/// began: a fence that waited (on recipient locks, say) renews a lease that would no
/// longer outlast the provider call.
#[tokio::test]
async fn the_start_fence_reads_the_clock_when_it_runs() {
    let db = TestDb::new().await;
    factory::create(&db.pool, Spec::default()).await;
    let conn = db.pool.get().await.expect("connection");
    let claimed = notify_tests::worker::claim(&conn, "fence", 1, Duration::from_secs(10))
        .await
        .expect("claim");
    let before: chrono::DateTime<Utc> = db
        .scalar("SELECT lease_expires_at FROM notifications", &[])
        .await;

    // 10 s of lease; the transaction waits 2 s before the fence asks for 9 s.
    let mut conn = db.pool.get().await.expect("connection");
    let tx = conn.transaction().await.expect("begin");
    tx.execute("SELECT pg_sleep(2)", &[]).await.expect("wait");
    let held = queue::start_fence(
        &tx,
        &claimed.iter().collect::<Vec<_>>(),
        Duration::from_secs(9),
        Duration::from_secs(10),
    )
    .await
    .expect("fence");
    tx.commit().await.expect("commit");
    assert_eq!(held.len(), 1);
    let after: chrono::DateTime<Utc> = db
        .scalar("SELECT lease_expires_at FROM notifications", &[])
        .await;
    assert!(
        after - before >= TimeDelta::milliseconds(1900),
        "the lease was not renewed: {before} → {after}"
    );
}

// ---------------------------------------------------------------------------------------
// One step over several channels
// ---------------------------------------------------------------------------------------

/// Each channel is claimed by its own statement, but a step's batch is started in claim
/// order across them: a HIGH SMS due after a LOW EMAIL backlog is called first, not after
/// the EMAIL channel's whole share.
#[tokio::test]
async fn a_step_over_several_channels_starts_high_work_first_whatever_its_channel() {
    let db = TestDb::new().await;
    let mut low_email = Vec::new();
    for _ in 0..3 {
        low_email.push(factory::create(&db.pool, Spec::default().priority(Priority::Low)).await);
    }
    let high_sms = factory::create(
        &db.pool,
        Spec::default()
            .priority(Priority::High)
            .channel(Channel::Sms),
    )
    .await;
    let provider = Arc::new(Scripted::delivering());
    let sweeper = worker::sweeper(&db.pool, provider.clone())
        .config(worker_config().concurrency(1))
        .build();
    let outcome = worker::sweep(&sweeper).await;
    assert_eq!(outcome.sent, 4, "{outcome:?}");
    let calls = provider.calls();
    assert_eq!(calls.len(), 4);
    assert_eq!(calls[0], high_sms.id, "HIGH first: {calls:?}");
    assert_eq!(
        calls[1..].iter().copied().collect::<HashSet<_>>(),
        low_email.iter().map(|n| n.id).collect::<HashSet<_>>()
    );
}

/// Each channel's claim commits on its own. When one of them fails, what the others
/// claimed in that step is handed back at once with the attempt refunded, not left
/// PROCESSING until its lease expires (with an attempt spent on a call never made).
#[tokio::test]
async fn when_one_channels_claim_fails_the_others_claims_go_back_untried() {
    let db = TestDb::new().await;
    let email = factory::create(&db.pool, Spec::default()).await;
    let push = factory::create(&db.pool, Spec::default().channel(Channel::Push)).await;
    let conn = db.pool.get().await.expect("connection");
    conn.batch_execute(
        "CREATE FUNCTION refuse_push_claims() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF NEW.channel = 'PUSH' AND NEW.status = 'PROCESSING' THEN
                 RAISE EXCEPTION 'push claims refused';
             END IF;
             RETURN NEW;
         END $$;
         CREATE TRIGGER refuse_push_claims BEFORE UPDATE ON notifications
             FOR EACH ROW EXECUTE FUNCTION refuse_push_claims();",
    )
    .await
    .expect("install the refusal");
    let provider = Arc::new(Scripted::delivering());
    let sweeper = worker::sweeper(&db.pool, provider.clone()).build();
    let step = sweeper.sweep_once(&StopSignal::never()).await;
    assert!(step.is_err(), "the step fails: {step:?}");
    assert!(provider.calls().is_empty(), "nothing was called");
    for id in [email.id, push.id] {
        let stored = factory::load(&db.pool, id).await;
        assert_eq!(
            (stored.status, stored.attempt_count),
            (Status::Pending, 0),
            "{id}"
        );
    }

    conn.batch_execute("DROP TRIGGER refuse_push_claims ON notifications")
        .await
        .expect("drop the refusal");
    assert_eq!(worker::sweep(&sweeper).await.sent, 2);
}
