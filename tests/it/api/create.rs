//! Create, get and cancel: the representation, the lifecycle, and cancel racing claims.

use std::collections::HashSet;

use futures::future::join_all;
use notify_shared::notification::Status;
use notify_shared::queue;
use notify_tests::app::assert_envelope;
use notify_tests::factory;
use notify_tests::worker::LEASE;
use notify_tests::{TestApp, TestDb};
use reqwest::StatusCode;
use serde_json::json;

use super::body;

#[tokio::test]
async fn create_returns_201_and_get_returns_the_same_representation() {
    let app = TestApp::spawn().await;
    let reply = app.post_notification(&body("k-1")).await;
    assert_eq!(reply.status, StatusCode::CREATED);
    assert_eq!(reply.headers["idempotent-replayed"], "false");
    let created = reply.body;
    let expected_fields: HashSet<&str> = [
        "id",
        "idempotencyKey",
        "recipient",
        "channel",
        "priority",
        "status",
        "scheduledAt",
        "nextAttemptAt",
        "attemptCount",
        "maxAttempts",
        "lastError",
        "sentAt",
        "failedAt",
        "deadLetteredAt",
        "cancelledAt",
        "redriveCount",
        "lastRedrivenAt",
        "createdAt",
        "updatedAt",
        "providerMessageId",
        "class",
        "category",
        "recipientId",
        "expiresAt",
        "suppressedAt",
        "suppressedReason",
        "expiredAt",
        "quietHoursDeferredFrom",
    ]
    .into();
    let fields: HashSet<&str> = created
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        fields, expected_fields,
        "exactly the documented fields; never the payload"
    );
    assert_eq!(created["status"], "PENDING");
    assert_eq!(created["attemptCount"], 0);
    assert_eq!(created["maxAttempts"], 6);
    assert!(
        created["createdAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z') && t.len() == 24),
        "{created}"
    );

    let (status, fetched) = app.get(created["id"].as_str().expect("id")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(fetched, created);
}

#[tokio::test]
async fn get_and_cancel_answer_400_for_a_bad_id_and_404_for_an_unknown_one() {
    let app = TestApp::spawn().await;
    for cancel in [false, true] {
        let (status, error) = if cancel {
            app.cancel("not-a-uuid").await
        } else {
            app.get("not-a-uuid").await
        };
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_envelope(&error, 400, "/notifications/not-a-uuid");

        let id = uuid::Uuid::new_v4();
        let (status, error) = if cancel {
            app.cancel(id).await
        } else {
            app.get(id).await
        };
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(error["message"], format!("Notification {id} not found"));
    }

    // An id has one spelling: the other forms a UUID parser reads are not it.
    let (_, created) = app.create(&body("one-spelling")).await;
    let id = uuid::Uuid::parse_str(created["id"].as_str().expect("id")).expect("uuid");
    for spelling in [
        id.braced().to_string(),
        id.urn().to_string(),
        id.simple().to_string(),
    ] {
        let (status, error) = app.get(&spelling).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{spelling}: {error}");
    }
    let upper = id.hyphenated().to_string().to_uppercase();
    assert_eq!(app.get(&upper).await.0, StatusCode::OK);
}

#[tokio::test]
async fn cancel_moves_pending_to_cancelled_once_and_refuses_other_statuses() {
    let app = TestApp::spawn().await;
    let (_, created) = app.create(&body("c-1")).await;
    let id = created["id"].as_str().expect("id");

    let (status, cancelled) = app.cancel(id).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(cancelled["status"], "CANCELLED");
    assert!(cancelled["cancelledAt"].is_string());

    let (status, again) = app.cancel(id).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again, cancelled, "unchanged");

    let sent = factory::create(app.pool(), factory::Spec::default()).await;
    app.db
        .execute(
            "UPDATE notifications SET status = 'SENT', sent_at = now() WHERE id = $1",
            &[&sent.id],
        )
        .await;
    let (status, error) = app.cancel(sent.id).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        error["message"],
        format!(
            "Notification {} is SENT; only PENDING jobs can be cancelled",
            sent.id
        )
    );
}

#[tokio::test]
async fn cancel_racing_claims_never_leaves_a_notification_both_cancelled_and_claimed() {
    let db = TestDb::new().await;
    let created = factory::create_many(&db.pool, 200, |_| factory::Spec::default()).await;
    let cancel_pool = db.new_pool(1);
    let canceller = tokio::spawn(async move {
        let connection = cancel_pool.get().await.expect("db");
        let mut cancelled = HashSet::new();
        for notification in &created {
            if let Some(after) = queue::cancel(&connection, notification.id, None)
                .await
                .expect("cancel")
                && after.status == Status::Cancelled
            {
                cancelled.insert(after.id);
            }
        }
        cancelled
    });
    let claimers = (0..5).map(|i| {
        let pool = db.new_pool(1);
        tokio::spawn(async move {
            let connection = pool.get().await.expect("db");
            let mut claimed = HashSet::new();
            for _ in 0..40 {
                let batch =
                    notify_tests::worker::claim(&connection, &format!("racer-{i}"), 5, LEASE)
                        .await
                        .expect("claim");
                claimed.extend(batch.iter().map(|c| c.id));
            }
            claimed
        })
    });
    let claimed: Vec<HashSet<uuid::Uuid>> = join_all(claimers)
        .await
        .into_iter()
        .map(|r| r.expect("claimer"))
        .collect();
    let cancelled = canceller.await.expect("canceller");
    let all_claimed: HashSet<uuid::Uuid> = claimed.iter().flatten().copied().collect();
    assert_eq!(
        all_claimed.len(),
        claimed.iter().map(HashSet::len).sum::<usize>(),
        "claimed twice"
    );
    assert!(
        all_claimed.is_disjoint(&cancelled),
        "a notification was both cancelled and claimed"
    );
    assert_eq!(all_claimed.len() + cancelled.len(), 200);
    assert_eq!(
        factory::count_where(&db.pool, "status = 'CANCELLED'").await as usize,
        cancelled.len()
    );
    assert_eq!(
        factory::count_where(&db.pool, "status = 'PROCESSING'").await as usize,
        all_claimed.len()
    );
}

/// A `sendAt` far in the past means "due now": stored as the moment it was accepted, so it
/// neither jumps ahead of work due before it nor reports a lag of centuries.
#[tokio::test]
async fn a_send_at_far_in_the_past_is_due_now_and_reports_no_lag_of_centuries() {
    let app = TestApp::spawn().await;
    let (status, created) = app
        .create(
            &json!({"recipient": "old@example.com", "channel": "EMAIL", "payload": {},
                        "priority": "HIGH", "idempotencyKey": "ancient",
                        "sendAt": "0001-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["scheduledAt"], created["createdAt"]);
    assert_eq!(created["nextAttemptAt"], created["createdAt"]);
    let lag = app.metrics().await["queueLagSeconds"]
        .as_f64()
        .expect("lag");
    assert!(lag < 5.0, "queue lag {lag}");
    // The same request again is a replay: the fingerprint keeps sendAt as given.
    let (status, replayed) = app
        .create(
            &json!({"recipient": "old@example.com", "channel": "EMAIL", "payload": {},
                        "priority": "HIGH", "idempotencyKey": "ancient",
                        "sendAt": "0001-01-01T00:00:00.000+00:00"}),
        )
        .await;
    assert_eq!((status, &replayed["id"]), (StatusCode::OK, &created["id"]));
}
