//! Dead workers: resends with the same key, reconciliation of an expired final attempt,
//! release of untried claims, and exactly one outbox event per final transition.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use notify_shared::notification::Status;
use notify_shared::provider::{Attempt, Call, Delivery, Provider, ProviderOutcome};
use notify_shared::queue::{self, Disposition, Settled};
use notify_tests::TestDb;
use notify_tests::doubles::{ByRecipient, Counting, DELIVERED, Fixed, open_gate};
use notify_tests::factory::{self, Spec};
use notify_tests::worker::{self, LEASE, simulated, sweep};
use uuid::Uuid;

use super::{claim, expire_leases};

#[tokio::test]
async fn a_delivery_accepted_before_its_worker_died_is_resent_with_the_same_key_and_not_delivered_twice()
 {
    let db = TestDb::new().await;
    let n = factory::create(&db.pool, Spec::default()).await;

    // The old owner claims and the provider accepts; then the worker dies before recording.
    let old = claim(&db.pool, "doomed", 10).await;
    assert_eq!(old.len(), 1);
    let old = old[0].clone();
    let provider = simulated(db.pool.clone());
    let first = provider
        .send(
            &[Delivery {
                key: old.id,
                channel: old.channel,
                class: old.class,
                recipient: &old.recipient,
                payload: &old.payload,
                rendered: false,
                unsubscribe_url: None,
            }],
            &open_gate(),
        )
        .await;
    let answers: Vec<Option<&ProviderOutcome>> = first.iter().map(Attempt::outcome).collect();
    assert_eq!(answers, [Some(&DELIVERED)]);
    assert_eq!(expire_leases(&db.pool).await, 1);

    let counting = Arc::new(Counting::new(Arc::new(simulated(db.pool.clone()))));
    let sweeper = worker::sweeper(&db.pool, counting.clone())
        .random(Fixed(0.0))
        .recover_on_every_step()
        .build();
    let outcome = sweep(&sweeper).await;
    assert_eq!(
        (outcome.recovered, outcome.claimed, outcome.sent),
        (1, 1, 1),
        "{outcome:?}"
    );
    assert_eq!(counting.log().keys(), [n.id], "resent with the same key");
    assert_eq!(
        counting.log().answers(),
        [(
            n.id,
            ProviderOutcome::Delivered {
                already: true,
                message_id: None
            }
        )]
    );
    let stored = factory::load(&db.pool, n.id).await;
    assert_eq!((stored.status, stored.attempt_count), (Status::Sent, 2));
    assert_eq!(stored.last_error, None);
    assert_eq!(
        db.scalar::<i64>(
            "SELECT calls::int8 FROM simulated_deliveries WHERE delivery_key = $1",
            &[&n.id]
        )
        .await,
        2
    );
    assert_eq!(
        db.count("SELECT count(*) FROM simulated_deliveries").await,
        1
    );

    // The old owner wakes up and reports; its token is stale, so nothing changes.
    let conn = db.pool.get().await.expect("connection");
    for late in [
        Disposition::Failed {
            error: "late".into(),
            suppress: false,
        },
        Disposition::Retry {
            error: "late".into(),
            delay: Duration::from_secs(1),
        },
        Disposition::sent(),
    ] {
        let summary = notify_tests::worker::record(&conn, &[(&old, late)])
            .await
            .expect("record");
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
        (Status::Sent, 2, None)
    );
    assert_eq!(factory::events(&db.pool, n.id).await, [("SENT".into(), 2)]);
}

#[tokio::test]
async fn a_claim_that_expires_on_its_final_attempt_gets_one_reconciliation_attempt_then_dead_letters()
 {
    let db = TestDb::new().await;
    let n = factory::create(&db.pool, Spec::default().max_attempts(1)).await;
    let conn = db.pool.get().await.expect("connection");

    assert_eq!(claim(&db.pool, "doomed-1", 10).await.len(), 1);
    expire_leases(&db.pool).await;
    let recovered = queue::recover_expired(&conn, LEASE, 1000)
        .await
        .expect("recover");
    assert_eq!((recovered.requeued, recovered.dead_lettered), (1, 0));
    let stored = factory::load(&db.pool, n.id).await;
    assert_eq!(stored.status, Status::Pending);
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
    assert!(factory::events(&db.pool, n.id).await.is_empty());

    let again = claim(&db.pool, "doomed-2", 10).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempt_count, 2);
    expire_leases(&db.pool).await;
    let recovered = queue::recover_expired(&conn, LEASE, 1000)
        .await
        .expect("recover");
    assert_eq!((recovered.requeued, recovered.dead_lettered), (0, 1));
    let stored = factory::load(&db.pool, n.id).await;
    assert_eq!(stored.status, Status::DeadLettered);
    assert_eq!((stored.attempt_count, stored.max_attempts), (2, 2));
    assert!(stored.dead_lettered_at.is_some());
    assert_eq!(
        factory::events(&db.pool, n.id).await,
        [("DEAD_LETTERED".into(), 2)]
    );

    // Each expired claim left its attempt in the history, under the worker that held it.
    let attempts: Vec<(i32, String, String)> = conn
        .query(
            "SELECT attempt, worker, outcome FROM delivery_attempts
             WHERE notification_id = $1 AND started_at <= finished_at ORDER BY id",
            &[&n.id],
        )
        .await
        .expect("attempts")
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    assert_eq!(
        attempts,
        [
            (1, "doomed-1".to_string(), "TEMPORARY".to_string()),
            (2, "doomed-2".to_string(), "TEMPORARY".to_string())
        ]
    );

    // Nothing left to recover or claim.
    let recovered = queue::recover_expired(&conn, LEASE, 1000)
        .await
        .expect("recover");
    assert_eq!((recovered.requeued, recovered.dead_lettered), (0, 0));
    assert!(claim(&db.pool, "late", 10).await.is_empty());
    assert_eq!(factory::events(&db.pool, n.id).await.len(), 1);
}

// ---------------------------------------------------------------------------------------
// Release
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn releasing_an_untried_claim_refunds_the_attempt_and_makes_it_due_now() {
    let db = TestDb::new().await;
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
    assert!(factory::events(&db.pool, n.id).await.is_empty());

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
    let db = TestDb::new().await;
    let sent = factory::create(&db.pool, Spec::to("sent-a@example.com")).await;
    let failed = factory::create(&db.pool, Spec::to("fail-a@example.com")).await;
    let retried = factory::create(&db.pool, Spec::to("retry-a@example.com")).await;
    let dead = factory::create(&db.pool, Spec::to("retry-b@example.com").max_attempts(1)).await;

    let sweeper = worker::sweeper(&db.pool, Arc::new(ByRecipient))
        .random(Fixed(0.0))
        .build();
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
    db.execute(
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
    let late = notify_tests::worker::record(&conn, &[(&first[0], Disposition::sent())])
        .await
        .expect("record");
    assert_eq!((late.recorded, late.events), (0, 0));

    // Recording the same final result again writes no second event.
    let again = notify_tests::worker::record(&conn, &[(&second[0], Disposition::sent())])
        .await
        .expect("record");
    assert_eq!((again.recorded, again.events), (1, 1));
    let replay = notify_tests::worker::record(&conn, &[(&second[0], Disposition::sent())])
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

/// A record names the results it left unrecorded because their claims were taken over
/// while the calls were out, so the sweeper counts them lost and not sent. A retry of the
/// same record (its first answer lost on the way back) does not name what the first try
/// recorded: that worker's attempt row for that call is there.
#[tokio::test]
async fn a_record_names_the_results_whose_claims_were_taken_over_but_not_its_own_earlier_ones() {
    let db = TestDb::new().await;
    factory::create_due_bulk(&db.pool, 2).await;
    let claims = claim(&db.pool, "first", 10).await;
    assert_eq!(claims.len(), 2);
    let (kept, taken) = (&claims[0], &claims[1]);
    db.execute(
        "UPDATE notifications SET claim_token = gen_random_uuid(), claimed_by = 'second'
         WHERE id = $1",
        &[&taken.id],
    )
    .await;

    let now = chrono::Utc::now();
    let call = Call {
        outcome: ProviderOutcome::Delivered {
            already: false,
            message_id: None,
        },
        started_at: now,
        finished_at: now,
    };
    let settled: Vec<Settled<'_>> = claims
        .iter()
        .map(|claim| Settled {
            claim,
            disposition: Disposition::sent(),
            call: &call,
            suppress_hash: None,
        })
        .collect();
    let conn = db.pool.get().await.expect("connection");
    let first = queue::record(&conn, "first", &settled)
        .await
        .expect("record");
    assert_eq!(first.recorded, 1);
    assert_eq!(first.taken_over, [taken.id]);
    assert!(!first.was_taken_over(kept.id));

    let retried = queue::record(&conn, "first", &settled)
        .await
        .expect("record again");
    assert_eq!(retried.recorded, 0);
    assert_eq!(retried.taken_over, [taken.id]);
    assert_eq!(
        factory::load(&db.pool, taken.id).await.status,
        Status::Processing
    );
}
