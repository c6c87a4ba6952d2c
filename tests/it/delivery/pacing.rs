//! Pacing with token buckets in PostgreSQL: four sweeper processes share one honest rate
//! (measured by the provider's own clock), and bulk traffic never takes the part reserved
//! for transactional traffic.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use notify_local::aws_stub::AwsStub;
use notify_shared::channel;
use notify_shared::config::ChannelRate;
use notify_shared::provider::Provider;
use notify_shared::stop::StopSignal;
use notify_tests::process::{Children, worker_command};
use notify_tests::{TestDb, factory};

use super::{circuit, ses_only, sweeper};

/// The most calls that arrived within any one second.
fn busiest_second(times: &[DateTime<Utc>]) -> usize {
    let mut times = times.to_vec();
    times.sort();
    (0..times.len())
        .map(|i| {
            times[i..]
                .iter()
                .take_while(|t| **t - times[i] < TimeDelta::seconds(1))
                .count()
        })
        .max()
        .unwrap_or(0)
}

#[tokio::test]
async fn four_sweeper_processes_never_exceed_the_rate_and_its_burst_in_any_second() {
    let stub = AwsStub::start().await.expect("stub");
    let db = TestDb::new().await;
    factory::create_due_bulk(&db.pool, 1500).await;
    let url = stub.url();
    let environment = [
        ("EMAIL_PROVIDER", "ses"),
        ("SES_FROM_ADDRESS", "sender@example.com"),
        ("AWS_ENDPOINT_URL", url.as_str()),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("EMAIL_RATE_PER_SECOND", "50"),
        ("WORKER_POLL_INTERVAL_MS", "100"),
    ];
    let mut children = Children::default();
    for _ in 0..4 {
        children.start(&mut worker_command(&db.url, &environment));
    }
    tokio::time::sleep(Duration::from_secs(22)).await;
    drop(children);

    let calls = stub.calls();
    let times: Vec<DateTime<Utc>> = calls.iter().map(|c| c.at).collect();
    let busiest = busiest_second(&times);
    eprintln!(
        "pacing: {} calls over {:.1} s, at most {busiest} in any second",
        calls.len(),
        times
            .iter()
            .max()
            .zip(times.iter().min())
            .map_or(0.0, |(last, first)| (*last - *first).as_seconds_f64())
    );
    // As below: tokens are taken at the claim and calls arrive a few milliseconds later,
    // so a one-second window of arrivals may hold a few more: 10 % of slack, far below
    // what four unpaced sweepers send (hundreds a second).
    assert!(
        busiest <= 110,
        "{busiest} calls in one second (rate 50 + burst 50, + 10 % arrival jitter)"
    );
    assert!(
        calls.len() >= 700,
        "only {} calls in about 20 s",
        calls.len()
    );
}

#[tokio::test]
async fn bulk_traffic_never_takes_the_transactional_reservation() {
    let stub = AwsStub::start().await.expect("stub");
    let db = TestDb::new().await;
    for i in 0..300 {
        factory::create(
            &db.pool,
            factory::Spec::to(&format!("bulk{i}@example.com")).bulk(),
        )
        .await;
    }
    let providers = ses_only(&db.pool, &stub.url()).await;
    // 50 a second, 20 of them reserved for transactional traffic: bulk gets 30.
    let conn = db.pool.get().await.expect("connection");
    let rate = ChannelRate {
        transactional: 20.0,
        bulk: 30.0,
    };
    channel::configure_channels(&conn, &[Some(rate), None, None], |c| {
        providers.is_real_for(c)
    })
    .await
    .expect("rates");
    drop(conn);
    let sweeper = Arc::new(sweeper(&db.pool, providers, circuit()));
    let stop =
        StopSignal::never().with_deadline(std::time::Instant::now() + Duration::from_secs(5));
    notify_shared::sweeper::run(sweeper, notify_shared::wake::Wake::none().1, stop).await;

    let times: Vec<DateTime<Utc>> = stub.calls().iter().map(|c| c.at).collect();
    let busiest = busiest_second(&times);
    eprintln!(
        "bulk: {} calls in 5 s, at most {busiest} in any second",
        times.len()
    );
    // Tokens are taken at the claim; calls reach the stub a few milliseconds later, each
    // after its own delay, so a one-second window of arrivals may hold a few calls whose
    // tokens were taken just outside it: 10 % of slack, far below an unpaced 300.
    assert!(
        busiest <= 66,
        "{busiest} bulk calls in one second (30 + burst 30, + 10 % arrival jitter)"
    );
    assert!(
        times.len() <= 30 * 5 + 30,
        "{} bulk calls in 5 s",
        times.len()
    );
    assert!(times.len() >= 100, "bulk got only {} calls", times.len());
    // The transactional bucket was never spent.
    let transactional: f64 = db
        .scalar(
            "SELECT tokens FROM token_buckets WHERE channel = 'EMAIL' AND class = 'TRANSACTIONAL'",
            &[],
        )
        .await;
    assert!(
        transactional >= 19.0,
        "transactional tokens left: {transactional}"
    );
}

/// Claims racing back to back on four connections get what the bucket holds: its burst
/// plus the rate for the time they ran, neither less (the time spent inside each claim
/// statement must be refilled too, or busy claimers starve the bucket) nor more.
#[tokio::test]
async fn racing_claims_get_the_burst_plus_the_rate_for_the_time_they_ran() {
    const RATE: f64 = 2_000.0;
    const RUN: Duration = Duration::from_secs(2);
    let db = TestDb::new().await;
    factory::create_due_bulk(&db.pool, 10_000).await;
    db.pool
        .get()
        .await
        .expect("connection")
        .execute(
            "INSERT INTO token_buckets (channel, class, rate, burst, tokens, refilled_at)
             VALUES ('EMAIL', 'TRANSACTIONAL', $1, $1, $1, now()), ('EMAIL', 'BULK', 0, 0, 0, now())",
            &[&RATE],
        )
        .await
        .expect("buckets");

    let started = std::time::Instant::now();
    let claimers = (0..4).map(|n| {
        let pool = db.pool.clone();
        tokio::spawn(async move {
            let mut db = pool.get().await.expect("connection");
            let (mut claimed, mut asked) = (0usize, 0usize);
            while started.elapsed() < RUN {
                asked += 100;
                claimed += notify_shared::queue::claim_paced(
                    &mut db,
                    notify_shared::domain::Channel::Email,
                    &format!("racer-{n}"),
                    notify_shared::queue::Limit::of(100),
                    Duration::from_secs(60),
                )
                .await
                .expect("claim")
                .claimed
                .len();
            }
            (claimed, asked)
        })
    });
    let (mut claimed, mut asked) = (0, 0);
    for claimer in claimers {
        let (got, wanted) = claimer.await.expect("claimer");
        claimed += got;
        asked += wanted;
    }
    let ran = started.elapsed().as_secs_f64();
    let most = RATE + RATE * ran;
    eprintln!(
        "racing claims: {claimed} of {asked} asked in {ran:.2} s (burst {RATE} + {RATE}/s: at most {most:.0})"
    );
    assert!(
        claimed as f64 <= most + 1.0,
        "{claimed} claimed, more than {most:.0}"
    );
    // The last claims may end a few milliseconds before the clock is read: 5 % below. On a
    // machine too busy for four claimers to ask for the rate, they get what they asked for.
    let owed = (RATE + RATE * RUN.as_secs_f64()).min(asked as f64);
    assert!(
        claimed as f64 >= 0.95 * owed,
        "only {claimed} claimed of {asked} asked in {ran:.2} s: the bucket was not refilled for the time claims ran"
    );
}

/// Transactional work borrows only the bulk budget bulk work leaves: with both backlogged,
/// each class gets its own tokens; once bulk work is gone, transactional work takes the
/// bulk tokens too.
#[tokio::test]
async fn transactional_work_borrows_only_the_bulk_budget_bulk_work_leaves() {
    let stub = AwsStub::start().await.expect("stub");
    let db = TestDb::new().await;
    for i in 0..20 {
        factory::create(&db.pool, factory::Spec::to(&format!("t{i}@example.com"))).await;
    }
    for i in 0..3 {
        factory::create(
            &db.pool,
            factory::Spec::to(&format!("b{i}@example.com")).bulk(),
        )
        .await;
    }
    let providers = ses_only(&db.pool, &stub.url()).await;
    let conn = db.pool.get().await.expect("connection");
    let rate = ChannelRate {
        transactional: 2.0,
        bulk: 3.0,
    };
    channel::configure_channels(&conn, &[Some(rate), None, None], |c| {
        providers.is_real_for(c)
    })
    .await
    .expect("rates");
    let sweeper = sweeper(&db.pool, providers, circuit());
    let sent_by_class = || async {
        let rows = conn
            .query(
                "SELECT class, count(*) FROM notifications WHERE status = 'SENT' GROUP BY class ORDER BY class",
                &[],
            )
            .await
            .expect("counts");
        rows.iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
            .collect::<Vec<_>>()
    };

    // Both buckets full (a second of each rate): 2 transactional, 3 bulk.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    notify_tests::worker::sweep(&sweeper).await;
    assert_eq!(
        sent_by_class().await,
        [("BULK".to_string(), 3), ("TRANSACTIONAL".to_string(), 2)]
    );
    // Bulk work is done: its tokens are unused, and transactional work borrows them.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    notify_tests::worker::sweep(&sweeper).await;
    assert_eq!(
        sent_by_class().await,
        [("BULK".to_string(), 3), ("TRANSACTIONAL".to_string(), 7)]
    );
}
