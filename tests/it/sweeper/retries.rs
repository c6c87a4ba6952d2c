//! What each provider answer leads to, the provider time limit, and backoff on the
//! database clock.

use std::sync::Arc;
use std::time::Duration;

use notify_shared::notification::Status;
use notify_shared::provider::ProviderOutcome;
use notify_tests::TestDb;
use notify_tests::doubles::{ByRecipient, DELIVERED, Fixed, Scripted, Slow};
use notify_tests::factory::{self, Spec};
use notify_tests::worker::{self, sweep, worker_config};
use uuid::Uuid;

use super::{make_due_now, scheduled_delay_ms};

#[tokio::test]
async fn two_temporary_failures_then_a_delivery_end_sent_on_the_third_attempt_with_no_error() {
    let db = TestDb::new().await;
    let n = factory::create(&db.pool, Spec::default()).await;
    let provider = Arc::new(Scripted::new(
        [
            ProviderOutcome::Temporary("outage 1".into()),
            ProviderOutcome::Temporary("outage 2".into()),
            DELIVERED,
        ],
        ProviderOutcome::Permanent("called too often".into()),
    ));
    let sweeper = worker::sweeper(&db.pool, provider.clone())
        .random(Fixed(0.5))
        .build();

    for (attempt, error) in [(1, "outage 1"), (2, "outage 2")] {
        let outcome = sweep(&sweeper).await;
        assert_eq!((outcome.claimed, outcome.retried), (1, 1), "{outcome:?}");
        let stored = factory::load(&db.pool, n.id).await;
        assert_eq!(stored.status, Status::Pending);
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
    assert_eq!(stored.status, Status::Sent);
    assert_eq!(stored.attempt_count, 3);
    assert_eq!(stored.last_error, None);
    assert!(stored.sent_at.is_some());
    assert_eq!(provider.calls(), [n.id, n.id, n.id]);
    assert_eq!(factory::events(&db.pool, n.id).await, [("SENT".into(), 3)]);
}

#[tokio::test]
async fn temporary_failures_on_every_attempt_dead_letter_at_the_last_one_with_one_event() {
    let db = TestDb::new().await;
    let n = factory::create(&db.pool, Spec::default().max_attempts(3)).await;
    let provider = Arc::new(Scripted::always(ProviderOutcome::Temporary("down".into())));
    let sweeper = worker::sweeper(&db.pool, provider.clone())
        .random(Fixed(0.0))
        .build();

    for _ in 0..2 {
        assert_eq!(sweep(&sweeper).await.retried, 1);
        assert!(
            factory::events(&db.pool, n.id).await.is_empty(),
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
    assert_eq!(stored.status, Status::DeadLettered);
    assert_eq!((stored.attempt_count, stored.max_attempts), (3, 3));
    assert_eq!(stored.last_error.as_deref(), Some("down"));
    assert!(stored.dead_lettered_at.is_some());
    assert_eq!(provider.calls().len(), 3);
    assert_eq!(
        factory::events(&db.pool, n.id).await,
        [("DEAD_LETTERED".into(), 3)]
    );

    // Final means final: nothing is claimed any more.
    assert_eq!(sweep(&sweeper).await.claimed, 0);
    assert_eq!(provider.calls().len(), 3);
}

#[tokio::test]
async fn a_permanent_failure_fails_at_once_with_the_providers_reason() {
    let db = TestDb::new().await;
    let n = factory::create(&db.pool, Spec::default()).await;
    let provider = Arc::new(Scripted::always(ProviderOutcome::Permanent(
        "Recipient rejected by provider".into(),
    )));
    let sweeper = worker::sweeper(&db.pool, provider.clone())
        .random(Fixed(0.0))
        .build();
    let outcome = sweep(&sweeper).await;
    assert_eq!((outcome.claimed, outcome.failed), (1, 1), "{outcome:?}");
    let stored = factory::load(&db.pool, n.id).await;
    assert_eq!(stored.status, Status::Failed);
    assert_eq!(stored.attempt_count, 1);
    assert_eq!(
        stored.last_error.as_deref(),
        Some("Recipient rejected by provider")
    );
    assert!(stored.failed_at.is_some());
    assert_eq!(
        factory::events(&db.pool, n.id).await,
        [("FAILED".into(), 1)]
    );
    assert_eq!(sweep(&sweeper).await.claimed, 0);
    assert_eq!(provider.calls().len(), 1);
}

#[tokio::test]
async fn a_provider_slower_than_the_time_limit_is_a_temporary_failure_that_says_so() {
    let db = TestDb::new().await;
    let n = factory::create(&db.pool, Spec::default()).await;
    let sweeper = worker::sweeper(&db.pool, Arc::new(Slow::new(Duration::from_secs(30))))
        .random(Fixed(0.0))
        .config(worker_config().provider_timeout(Duration::from_millis(100)))
        .build();
    let started = std::time::Instant::now();
    let outcome = sweep(&sweeper).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the limit applies"
    );
    assert_eq!((outcome.claimed, outcome.retried), (1, 1), "{outcome:?}");
    let stored = factory::load(&db.pool, n.id).await;
    assert_eq!(stored.status, Status::Pending);
    assert_eq!(stored.attempt_count, 1);
    assert_eq!(
        stored.last_error.as_deref(),
        Some("Provider timed out after 100ms")
    );
    assert!(factory::events(&db.pool, n.id).await.is_empty());
}

/// The time limit applies to each delivery, not to the batch: one delivery that never
/// answers is retried, and the others of its batch are sent.
#[tokio::test]
async fn a_delivery_that_never_answers_times_out_alone_and_its_batch_mates_are_sent() {
    let db = TestDb::new().await;
    let slow = factory::create(&db.pool, Spec::to("slow-a@example.com")).await;
    let quick =
        factory::create_many(&db.pool, 3, |i| Spec::to(&format!("sent-{i}@example.com"))).await;
    let sweeper = worker::sweeper(&db.pool, Arc::new(ByRecipient))
        .random(Fixed(0.0))
        .config(
            worker_config()
                .concurrency(4)
                .provider_timeout(Duration::from_millis(200)),
        )
        .build();
    let outcome = sweep(&sweeper).await;
    assert_eq!(
        (outcome.claimed, outcome.sent, outcome.retried),
        (4, 3, 1),
        "{outcome:?}"
    );
    let stored = factory::load(&db.pool, slow.id).await;
    assert_eq!((stored.status, stored.attempt_count), (Status::Pending, 1));
    assert_eq!(
        stored.last_error.as_deref(),
        Some("Provider timed out after 200ms")
    );
    for n in &quick {
        let stored = factory::load(&db.pool, n.id).await;
        assert_eq!((stored.status, stored.last_error), (Status::Sent, None));
    }
}

// ---------------------------------------------------------------------------------------
// Backoff on the database clock
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn retries_are_scheduled_inside_the_equal_jitter_window_of_the_attempt_that_failed() {
    let db = TestDb::new().await;
    let ids: Vec<Uuid> = factory::create_many(&db.pool, 20, |_| Spec::default())
        .await
        .iter()
        .map(|n| n.id)
        .collect();
    let sweeper = worker::sweeper(
        &db.pool,
        Arc::new(Scripted::always(ProviderOutcome::Temporary("busy".into()))),
    )
    .build();
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
    let db = TestDb::new().await;
    for (random, expected) in [(0.0, [500, 1000, 2000]), (0.5, [750, 1500, 3000])] {
        let n = factory::create(&db.pool, Spec::default()).await;
        let sweeper = worker::sweeper(
            &db.pool,
            Arc::new(Scripted::always(ProviderOutcome::Temporary("busy".into()))),
        )
        .random(Fixed(random))
        .build();
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
        factory::mark_cancelled(&db.pool, n.id).await;
    }
}
