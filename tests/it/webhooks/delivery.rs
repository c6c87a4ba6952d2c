//! Delivery: retries until a 2xx, giving up after the last attempt, and a receiver that
//! comes back after being down for a whole drain.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use notify_shared::config::RetryPolicy;
use notify_shared::stop::StopSignal;
use notify_shared::webhook::outbox::OutboxCounts;
use notify_shared::webhook::{self, DrainOutcome};
use notify_tests::receiver::{Receiver, Reply, closed_port_url};
use notify_tests::{TestDb, factory, worker};
use tokio::net::TcpListener;
use uuid::Uuid;

use super::{counts, event_row, insert_event, make_due};

#[tokio::test]
async fn a_failing_receiver_gets_the_same_event_until_it_answers_2xx() {
    let db = TestDb::new().await;
    let receiver = Receiver::start(
        &[Reply::Status(503), Reply::Status(503), Reply::Status(200)],
        Reply::Status(500),
    )
    .await;
    let drainer = worker::drainer(&db.pool, &receiver.url, 10).build();
    let notification = factory::create(&db.pool, factory::Spec::default()).await;
    let event = insert_event(&db.pool, &notification, "SENT").await;

    let first = worker::drain(&drainer).await;
    assert_eq!((first.claimed, first.retried), (1, 1), "{first:?}");
    let row = event_row(&db.pool, event).await;
    assert_eq!(
        (row.state.as_str(), row.attempts, row.leased),
        ("PENDING", 1, false)
    );
    assert_eq!(
        row.last_error.as_deref(),
        Some("Webhook receiver answered HTTP 503")
    );
    assert!(row.next_dispatch_at > Utc::now(), "backing off: {row:?}");
    assert_eq!(
        worker::drain(&drainer).await,
        DrainOutcome::default(),
        "not due yet"
    );

    // Skip the backoff instead of sleeping through it.
    make_due(&db.pool).await;
    let second = worker::drain(&drainer).await;
    assert_eq!((second.claimed, second.retried), (1, 1), "{second:?}");
    assert_eq!(event_row(&db.pool, event).await.attempts, 2);

    make_due(&db.pool).await;
    let third = worker::drain(&drainer).await;
    assert_eq!((third.claimed, third.delivered), (1, 1), "{third:?}");
    let row = event_row(&db.pool, event).await;
    assert_eq!(
        (row.state.as_str(), row.attempts, row.leased),
        ("DELIVERED", 3, false)
    );
    assert!(row.delivered_at.is_some() && row.given_up_at.is_none());

    let ids: Vec<String> = receiver.event_ids();
    assert_eq!(ids, vec![event.to_string(); 3], "three POSTs of one event");
    make_due(&db.pool).await;
    assert_eq!(
        worker::drain(&drainer).await,
        DrainOutcome::default(),
        "nothing left"
    );
    assert_eq!(
        counts(&db.pool).await,
        OutboxCounts {
            pending: 0,
            delivered: 1,
            given_up: 0
        }
    );
}

#[tokio::test]
async fn an_unreachable_receiver_is_given_up_after_the_maximum_attempts_and_the_notification_is_untouched()
 {
    let db = TestDb::new().await;
    let (url, _) = closed_port_url().await;
    let drainer = worker::drainer(&db.pool, &url, 3).build();
    let notification = factory::create(&db.pool, factory::Spec::default()).await;
    let before = factory::load(&db.pool, notification.id).await;
    let event = insert_event(&db.pool, &notification, "FAILED").await;

    for attempt in 1..=2 {
        let outcome = worker::drain(&drainer).await;
        assert_eq!((outcome.claimed, outcome.retried), (1, 1), "{outcome:?}");
        let row = event_row(&db.pool, event).await;
        assert_eq!((row.state.as_str(), row.attempts), ("PENDING", attempt));
        assert!(
            row.last_error
                .as_deref()
                .is_some_and(|e| e.starts_with("Webhook request failed")),
            "{row:?}"
        );
        make_due(&db.pool).await;
    }
    let last = worker::drain(&drainer).await;
    assert_eq!((last.claimed, last.given_up), (1, 1), "{last:?}");
    let row = event_row(&db.pool, event).await;
    assert_eq!(
        (row.state.as_str(), row.attempts, row.leased),
        ("GIVEN_UP", 3, false)
    );
    assert!(row.given_up_at.is_some() && row.delivered_at.is_none());

    make_due(&db.pool).await;
    assert_eq!(
        worker::drain(&drainer).await,
        DrainOutcome::default(),
        "given up stays given up"
    );
    assert_eq!(
        counts(&db.pool).await,
        OutboxCounts {
            pending: 0,
            delivered: 0,
            given_up: 1
        }
    );
    // A webhook failure never changes the notification.
    assert_eq!(factory::load(&db.pool, notification.id).await, before);
}

#[tokio::test]
async fn a_receiver_down_for_the_whole_drain_gets_every_event_once_it_is_back() {
    let db = TestDb::new().await;
    let (url, address) = closed_port_url().await;
    let notifications = factory::create_many(&db.pool, 5, |_| factory::Spec::default()).await;
    let events = factory::insert_events(&db.pool, &notifications).await;
    // Backoff of 10–50 ms and plenty of attempts, so the real loop retries quickly.
    let retry = RetryPolicy {
        max_retries: 19,
        base_delay_ms: 20,
        max_delay_ms: 100,
    };
    let drainer = worker::drainer(&db.pool, &url, 20)
        .retry(retry)
        .poll_interval(Duration::from_millis(10))
        .build();
    let (stop_handle, stop) = StopSignal::new();
    let running = tokio::spawn(webhook::run(Arc::new(drainer), stop));

    // Several failed rounds for every event while nothing listens.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let conn = db.pool.get().await.expect("connection");
        let fewest: i32 = conn
            .query_one("SELECT min(dispatch_attempts) FROM webhook_events", &[])
            .await
            .expect("attempts")
            .get(0);
        if fewest >= 3 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no retries happened"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let listener = TcpListener::bind(address).await.expect("rebind the port");
    let receiver = Receiver::start_on(listener, &[], Reply::Status(200));

    while counts(&db.pool).await.delivered < 5 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not delivered in time"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop_handle.stop();
    let total = running.await.expect("drainer loop");
    assert_eq!(total.delivered, 5, "{total:?}");
    assert_eq!(total.given_up, 0, "{total:?}");
    assert!(
        total.retried >= 15,
        "at least three failed rounds each: {total:?}"
    );

    let mut received: Vec<String> = receiver.event_ids();
    received.sort();
    let mut expected: Vec<String> = events.iter().map(Uuid::to_string).collect();
    expected.sort();
    assert_eq!(
        received, expected,
        "each event once, after the receiver came back"
    );
    for event in events {
        let row = event_row(&db.pool, event).await;
        assert_eq!(row.state, "DELIVERED");
        assert!(row.attempts >= 4, "{row:?}");
    }
}
