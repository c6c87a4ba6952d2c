//! The enqueue decision, rule by rule and in order of precedence, for single and batch
//! intake alike and for both classes: one person with every reason not to be sent to, the
//! reasons taken away one at a time.

use chrono::{DateTime, Timelike, Utc};
use notify_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};

use super::{notification, patch_preferences, put_profile, suppress};

/// What became of one notification: its status, suppression reason, and whether quiet
/// hours moved it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fate {
    status: String,
    reason: Option<String>,
    moved: bool,
}

fn pending(moved: bool) -> Fate {
    Fate {
        status: "PENDING".into(),
        reason: None,
        moved,
    }
}

fn suppressed(reason: &str) -> Fate {
    Fate {
        status: "SUPPRESSED".into(),
        reason: Some(reason.into()),
        moved: false,
    }
}

fn fate(notification: &Value) -> Fate {
    Fate {
        status: notification["status"].as_str().expect("status").into(),
        reason: notification["suppressedReason"].as_str().map(Into::into),
        moved: !notification["quietHoursDeferredFrom"].is_null(),
    }
}

/// A case: (target, channel, class, category) and the fate expected.
type Case = (Value, &'static str, &'static str, &'static str, Fate);

/// Sends every case once on its own and once inside one batch; both must meet the
/// expected fate.
async fn check(app: &TestApp, stage: &str, cases: &[Case]) {
    let mut batch = Vec::new();
    for (i, (target, channel, class, category, expected)) in cases.iter().enumerate() {
        let key = format!("{stage}-single-{i}");
        let (status, body) = app
            .create(&notification(
                &key,
                target.clone(),
                channel,
                class,
                category,
                60,
            ))
            .await;
        assert_eq!(status, 201, "{stage} case {i}: {body}");
        assert_eq!(&fate(&body), expected, "{stage} case {i} (single): {body}");
        let key = format!("{stage}-batch-{i}");
        batch.push(notification(
            &key,
            target.clone(),
            channel,
            class,
            category,
            60,
        ));
    }
    let (status, body) = app.create_batch(&json!({ "notifications": batch })).await;
    assert_eq!(status, 200, "{body}");
    for (i, result) in body["results"]
        .as_array()
        .expect("results")
        .iter()
        .enumerate()
    {
        assert_eq!(result["status"], 201, "{stage} batch item {i}: {result}");
        let (_, stored) = app.get(result["id"].as_str().expect("id")).await;
        assert_eq!(
            fate(&stored),
            cases[i].4,
            "{stage} case {i} (batch): {stored}"
        );
    }
}

/// A quiet window of four hours around now, in UTC (it may cross midnight).
fn window_around(now: DateTime<Utc>) -> (String, String) {
    let start = now - chrono::TimeDelta::hours(2);
    let end = now + chrono::TimeDelta::hours(2);
    (
        format!("{:02}:{:02}", start.hour(), start.minute()),
        format!("{:02}:{:02}", end.hour(), end.minute()),
    )
}

#[tokio::test]
async fn each_rule_in_its_order_for_single_and_batch_intake_and_both_classes() {
    let app = TestApp::spawn().await;
    let (start, end) = window_around(Utc::now());
    put_profile(
        &app,
        "ada",
        json!({"email": "Ada@Example.com", "phone": "+15555550100", "timezone": "UTC",
               "quietHours": {"start": start, "end": end}, "unsubscribedAll": true}),
    )
    .await;
    patch_preferences(&app, "ada", json!({"promo": {"EMAIL": false}})).await;
    // Listed in another case than the profile's: email compares case-insensitively.
    suppress(&app, "EMAIL", "ada@example.COM").await;
    let ada = || json!({"recipientId": "ada"});

    // Every reason at once: the address rule first, then the suppression list.
    check(
        &app,
        "all",
        &[
            (
                ada(),
                "EMAIL",
                "BULK",
                "promo",
                suppressed("SUPPRESSED_ADDRESS"),
            ),
            (
                ada(),
                "EMAIL",
                "TRANSACTIONAL",
                "promo",
                suppressed("SUPPRESSED_ADDRESS"),
            ),
            (ada(), "PUSH", "BULK", "promo", suppressed("NO_ADDRESS")),
            (
                ada(),
                "PUSH",
                "TRANSACTIONAL",
                "general",
                suppressed("NO_ADDRESS"),
            ),
            (
                json!({"recipientId": "nobody"}),
                "EMAIL",
                "TRANSACTIONAL",
                "general",
                suppressed("NO_ADDRESS"),
            ),
            (
                json!({"recipient": "ADA@example.com"}),
                "EMAIL",
                "BULK",
                "general",
                suppressed("SUPPRESSED_ADDRESS"),
            ),
        ],
    )
    .await;

    // Off the list: the global unsubscribe stops bulk only; the category opt-out holds
    // for transactional traffic.
    let (status, _) = app
        .send(app.request(Method::DELETE, "/suppressions/EMAIL/ada@example.com"))
        .await
        .pair();
    assert_eq!(status, 204);
    check(
        &app,
        "unsubscribed",
        &[
            (ada(), "EMAIL", "BULK", "promo", suppressed("UNSUBSCRIBED")),
            (
                ada(),
                "EMAIL",
                "BULK",
                "general",
                suppressed("UNSUBSCRIBED"),
            ),
            (
                ada(),
                "EMAIL",
                "TRANSACTIONAL",
                "promo",
                suppressed("CATEGORY_OPT_OUT"),
            ),
            (ada(), "EMAIL", "TRANSACTIONAL", "general", pending(false)),
        ],
    )
    .await;

    // Subscribed again: the category opt-out (EMAIL only), then quiet hours for bulk.
    put_profile(
        &app,
        "ada",
        json!({"email": "Ada@Example.com", "phone": "+15555550100", "timezone": "UTC",
               "quietHours": {"start": start, "end": end}}),
    )
    .await;
    check(
        &app,
        "opted-out",
        &[
            (
                ada(),
                "EMAIL",
                "BULK",
                "promo",
                suppressed("CATEGORY_OPT_OUT"),
            ),
            (
                ada(),
                "EMAIL",
                "TRANSACTIONAL",
                "promo",
                suppressed("CATEGORY_OPT_OUT"),
            ),
            (ada(), "SMS", "BULK", "promo", pending(true)),
            (ada(), "EMAIL", "BULK", "general", pending(true)),
            (ada(), "SMS", "TRANSACTIONAL", "promo", pending(false)),
        ],
    )
    .await;

    // A one-click unsubscribe of every category ("*") is a global unsubscribe per channel.
    patch_preferences(
        &app,
        "ada",
        json!({"*": {"EMAIL": false}, "promo": {"EMAIL": true}}),
    )
    .await;
    check(
        &app,
        "star",
        &[
            (ada(), "EMAIL", "BULK", "promo", suppressed("UNSUBSCRIBED")),
            (ada(), "EMAIL", "TRANSACTIONAL", "promo", pending(false)),
            (ada(), "SMS", "BULK", "general", pending(true)),
        ],
    )
    .await;

    // Every suppressed one has its webhook event; none was ever claimed.
    let suppressed_rows = app
        .db
        .count(
            "SELECT count(*) FROM notifications WHERE status = 'SUPPRESSED' AND attempt_count = 0",
        )
        .await;
    let events = app
        .db
        .count("SELECT count(*) FROM webhook_events WHERE type = 'notification.suppressed' AND status = 'SUPPRESSED'")
        .await;
    assert_eq!(
        suppressed_rows,
        2 * 12,
        "twelve cases suppressed, each sent twice"
    );
    assert_eq!(events, suppressed_rows);
    assert_eq!(app.metrics().await["suppressed"], suppressed_rows);
}

#[tokio::test]
async fn quiet_hours_move_bulk_to_the_window_end_and_keep_the_original_due_time() {
    let app = TestApp::spawn().await;
    let now = Utc::now();
    let (start, end) = window_around(now);
    put_profile(
        &app,
        "bo",
        json!({"email": "bo@example.com", "quietHours": {"start": start, "end": end}}),
    )
    .await;
    let (_, bulk) = app
        .create(&notification(
            "q-bulk",
            json!({"recipientId": "bo"}),
            "EMAIL",
            "BULK",
            "news",
            60,
        ))
        .await;
    let (_, transactional) = app
        .create(&notification(
            "q-tx",
            json!({"recipientId": "bo"}),
            "EMAIL",
            "TRANSACTIONAL",
            "news",
            60,
        ))
        .await;
    let time = |v: &Value, field: &str| -> DateTime<Utc> {
        v[field].as_str().expect(field).parse().expect("time")
    };
    let moved_to = time(&bulk, "scheduledAt");
    let original = time(&bulk, "quietHoursDeferredFrom");
    assert!((original - now).num_seconds().abs() <= 65, "{bulk}");
    assert_eq!(
        format!("{:02}:{:02}", moved_to.hour(), moved_to.minute()),
        end
    );
    assert_eq!(moved_to.second(), 0);
    assert!(moved_to > original && moved_to - original <= chrono::TimeDelta::hours(2));
    assert_eq!(
        time(&bulk, "nextAttemptAt"),
        moved_to,
        "not claimable before the end"
    );
    assert!(transactional["quietHoursDeferredFrom"].is_null());
    assert!((time(&transactional, "scheduledAt") - now).num_seconds() <= 65);
}
