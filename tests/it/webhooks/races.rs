//! Races: several drainers, a drainer killed mid-POST, a stop mid-batch, and a lease that
//! expired with a drainer on it.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use notify_shared::stop::StopSignal;
use notify_shared::webhook::DrainOutcome;
use notify_shared::webhook::outbox::{
    self, ClaimedEvent, Destination, Dispatch, OutboxCounts, Subject,
};
use notify_tests::receiver::{Receiver, Reply};
use notify_tests::{TestDb, factory, worker};
use uuid::Uuid;

use super::{counts, event_row, insert_event};

#[tokio::test]
async fn six_drainers_deliver_sixty_events_each_exactly_once() {
    let db = TestDb::new().await;
    let receiver = Receiver::start(&[], Reply::After(Duration::from_millis(5), 200)).await;
    let notifications = factory::create_many(&db.pool, 60, |_| factory::Spec::default()).await;
    let events = factory::insert_events(&db.pool, &notifications).await;

    // Separate pools: six "processes" meeting only in the database. Small batches make
    // them interleave.
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let drainer = worker::drainer(&db.new_pool(2), &receiver.url, 10)
            .build()
            .with_batch_size(4)
            .with_concurrency(4);
        tasks.push(tokio::spawn(async move {
            let mut total = DrainOutcome::default();
            loop {
                let outcome = worker::drain(&drainer).await;
                total += outcome;
                if outcome.claimed == 0 {
                    return total;
                }
            }
        }));
    }
    let mut total = DrainOutcome::default();
    for task in futures::future::join_all(tasks).await {
        total += task.expect("drainer task");
    }
    assert_eq!(total.claimed, 60, "{total:?}");
    assert_eq!(total.delivered, 60, "{total:?}");

    let received: Vec<String> = receiver.event_ids();
    assert_eq!(received.len(), 60, "one POST per event");
    let distinct: HashSet<String> = received.into_iter().collect();
    let expected: HashSet<String> = events.iter().map(Uuid::to_string).collect();
    assert_eq!(distinct, expected);
    assert_eq!(
        counts(&db.pool).await,
        OutboxCounts {
            pending: 0,
            delivered: 60,
            given_up: 0
        }
    );
}

#[tokio::test]
async fn a_drainer_killed_mid_post_loses_its_lease_and_its_late_record_changes_nothing() {
    let db = TestDb::new().await;
    // The first POST is never answered; the resend is answered slowly, so the late record
    // can be tried while the second drainer holds the event.
    let receiver = Receiver::start(
        &[Reply::Hang, Reply::After(Duration::from_millis(600), 200)],
        Reply::Status(200),
    )
    .await;
    // Short lease so the test need not wait for the production margin.
    let lease = Duration::from_millis(1200);
    let drainer = |pool| {
        worker::drainer(&pool, &receiver.url, 10)
            .timeout(Duration::from_millis(1000))
            .build()
            .with_lease(lease)
    };
    let first = Arc::new(drainer(db.new_pool(2)));
    let second = drainer(db.new_pool(2));
    let notification = factory::create(&db.pool, factory::Spec::default()).await;
    let event = insert_event(&db.pool, &notification, "SENT").await;

    let killed = tokio::spawn({
        let first = first.clone();
        async move { first.drain_once(&StopSignal::never()).await }
    });
    receiver.wait_for_requests(1).await;
    killed.abort();
    assert!(killed.await.expect_err("aborted").is_cancelled());
    let row = event_row(&db.pool, event).await;
    assert_eq!(
        (row.state.as_str(), row.attempts, row.leased),
        ("DISPATCHING", 1, true)
    );

    // What the killed drainer held: its attempt number is the fence.
    let stale = ClaimedEvent {
        id: event,
        event_id: event,
        destination: Destination::Default,
        kind: "notification.sent".to_string(),
        subject: Subject::Notification {
            id: notification.id,
            status: "SENT".to_string(),
            attempt_count: 1,
        },
        occurred_at: Utc::now(),
        dispatch_attempts: 1,
    };

    assert_eq!(
        worker::drain(&second).await,
        DrainOutcome::default(),
        "lease still held"
    );
    tokio::time::sleep(lease + Duration::from_millis(100)).await;
    let resend = tokio::spawn(async move { worker::drain(&second).await });
    receiver.wait_for_requests(2).await;

    // The killed drainer's result arrives while the second one holds the event.
    let late = [
        (&stale, Dispatch::Delivered),
        (
            &stale,
            Dispatch::Retry {
                error: "late".to_string(),
                delay: Duration::ZERO,
            },
        ),
        (
            &stale,
            Dispatch::GivenUp {
                error: "late".to_string(),
            },
        ),
        (&stale, Dispatch::Released),
    ];
    for result in &late {
        let conn = db.pool.get().await.expect("connection");
        let changed = outbox::record(&conn, std::slice::from_ref(result))
            .await
            .expect("record");
        assert_eq!(changed, 0, "{:?} from the old attempt", result.1);
    }
    let row = event_row(&db.pool, event).await;
    assert_eq!(
        (row.state.as_str(), row.attempts, row.leased),
        ("DISPATCHING", 2, true)
    );

    let outcome = resend.await.expect("resend task");
    assert_eq!((outcome.claimed, outcome.delivered), (1, 1), "{outcome:?}");
    let delivered = event_row(&db.pool, event).await;
    assert_eq!(
        (delivered.state.as_str(), delivered.attempts),
        ("DELIVERED", 2)
    );

    // And after delivery, the late record still changes nothing.
    for result in &late {
        let conn = db.pool.get().await.expect("connection");
        let changed = outbox::record(&conn, std::slice::from_ref(result))
            .await
            .expect("record");
        assert_eq!(changed, 0);
    }
    assert_eq!(event_row(&db.pool, event).await, delivered);

    let ids: Vec<String> = receiver.event_ids();
    assert_eq!(ids, vec![event.to_string(); 2], "sent again, same eventId");
}

#[tokio::test]
async fn a_stop_during_a_batch_hands_back_the_events_not_yet_sent() {
    let db = TestDb::new().await;
    let receiver = Receiver::start(
        &[Reply::After(Duration::from_millis(300), 200)],
        Reply::Status(200),
    )
    .await;
    // One POST at a time, so two events are still waiting when the stop comes.
    let drainer = worker::drainer(&db.pool, &receiver.url, 10)
        .build()
        .with_concurrency(1);
    let notifications = factory::create_many(&db.pool, 3, |_| factory::Spec::default()).await;
    let events = factory::insert_events(&db.pool, &notifications).await;

    let (stop_handle, stop) = StopSignal::new();
    let step = tokio::spawn(async move { drainer.drain_once(&stop).await });
    receiver.wait_for_requests(1).await;
    stop_handle.stop();
    let outcome = step.await.expect("task").expect("step");
    assert_eq!(
        (outcome.claimed, outcome.delivered, outcome.released),
        (3, 1, 2),
        "{outcome:?}"
    );
    assert_eq!(receiver.received().len(), 1);

    let mut states = Vec::new();
    for event in &events {
        let row = event_row(&db.pool, *event).await;
        assert!(!row.leased);
        if row.state == "PENDING" {
            assert!(row.next_dispatch_at <= Utc::now(), "due now: {row:?}");
        }
        states.push((row.state, row.attempts));
    }
    states.sort();
    assert_eq!(
        states,
        vec![
            ("DELIVERED".to_string(), 1),
            ("PENDING".to_string(), 0),
            ("PENDING".to_string(), 0)
        ],
        "released events get their attempt back"
    );
}

#[tokio::test]
async fn an_expired_lease_on_the_final_attempt_is_given_up_and_an_earlier_one_is_resent() {
    let db = TestDb::new().await;
    let receiver = Receiver::start(&[], Reply::Status(200)).await;
    let drainer = worker::drainer(&db.pool, &receiver.url, 3).build();
    let notifications = factory::create_many(&db.pool, 2, |_| factory::Spec::default()).await;
    let events = factory::insert_events(&db.pool, &notifications).await;
    // Both look like a drainer died holding them: one on its final attempt, one before.
    let conn = db.pool.get().await.expect("connection");
    for (event, attempts) in [(events[0], 3), (events[1], 1)] {
        conn.execute(
            "UPDATE webhook_events
             SET dispatch_state = 'DISPATCHING', dispatch_attempts = $2,
                 lease_expires_at = now() - interval '1 second',
                 next_dispatch_at = now() - interval '1 second'
             WHERE id = $1",
            &[&event, &attempts],
        )
        .await
        .expect("fake a dead drainer");
    }

    let outcome = worker::drain(&drainer).await;
    assert_eq!(
        (outcome.claimed, outcome.delivered, outcome.given_up),
        (1, 1, 1),
        "{outcome:?}"
    );
    let given_up = event_row(&db.pool, events[0]).await;
    assert_eq!(
        (given_up.state.as_str(), given_up.attempts),
        ("GIVEN_UP", 3)
    );
    assert_eq!(
        given_up.last_error.as_deref(),
        Some(outbox::LEASE_EXPIRED_ON_FINAL_ATTEMPT)
    );
    let resent = event_row(&db.pool, events[1]).await;
    assert_eq!((resent.state.as_str(), resent.attempts), ("DELIVERED", 2));
    let ids: Vec<String> = receiver.event_ids();
    assert_eq!(ids, vec![events[1].to_string()]);
}
