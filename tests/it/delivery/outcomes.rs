//! Every row of the outcome table, against a stand-in that answers like SES v2 (REST-JSON)
//! and SNS (query/XML); a throttle and a misconfiguration that pause a channel without
//! spending an attempt; a burst of 5xx that opens one channel's circuit while the others
//! drain, and the probe that closes it again.

use std::time::Duration;

use notify_local::aws_stub::{AwsStub, Reply, Rule, Service};
use notify_shared::channel::{self, Circuit};
use notify_shared::config::CircuitConfig;
use notify_shared::notification::{Channel, Status};
use notify_tests::worker::{sweep, sweep_until_idle};
use notify_tests::{TestDb, factory};
use serde_json::json;

use super::{aws_providers, circuit, ses_only, sweeper};

const ENDPOINT_ARN: &str = "arn:aws:sns:us-east-1:123456789012:endpoint/GCM/app/0b1c";

struct Row {
    channel: Channel,
    reply: Reply,
    status: Status,
    attempts: i32,
    outcome: &'static str,
    suppressed: bool,
    paused: bool,
}

fn row(
    channel: Channel,
    reply: Reply,
    status: Status,
    attempts: i32,
    outcome: &'static str,
) -> Row {
    Row {
        channel,
        reply,
        status,
        attempts,
        outcome,
        suppressed: outcome == "INVALID_RECIPIENT",
        paused: matches!(outcome, "THROTTLED" | "PROVIDER_MISCONFIGURED"),
    }
}

fn rows() -> Vec<Row> {
    use Channel::{Email, Push, Sms};
    use Status::{Failed, Pending, Sent};
    let error = Reply::error;
    let throttled = Reply::Error {
        status: 429,
        code: "TooManyRequestsException".into(),
        message: "Maximum sending rate exceeded".into(),
        retry_after: Some(3),
    };
    vec![
        row(Email, Reply::Accept, Sent, 1, "DELIVERED"),
        row(Email, throttled, Pending, 0, "THROTTLED"),
        row(
            Email,
            error(500, "InternalFailure", "oops"),
            Pending,
            1,
            "TEMPORARY",
        ),
        row(Email, error(503, "", ""), Pending, 1, "TEMPORARY"),
        row(
            Email,
            error(400, "MessageRejected", "Illegal header"),
            Failed,
            1,
            "PERMANENT",
        ),
        row(
            Email,
            error(
                400,
                "BadRequestException",
                "Address is on the account-level suppression list",
            ),
            Failed,
            1,
            "INVALID_RECIPIENT",
        ),
        row(
            Email,
            error(
                400,
                "MessageRejected",
                "Email address is not verified: sender@example.com, ADA@example.com",
            ),
            Pending,
            0,
            "PROVIDER_MISCONFIGURED",
        ),
        row(
            Email,
            error(403, "AccessDeniedException", "denied"),
            Pending,
            0,
            "PROVIDER_MISCONFIGURED",
        ),
        row(Sms, Reply::Accept, Sent, 1, "DELIVERED"),
        row(
            Sms,
            error(400, "Throttling", "Rate exceeded"),
            Pending,
            0,
            "THROTTLED",
        ),
        row(
            Sms,
            error(500, "InternalError", "oops"),
            Pending,
            1,
            "TEMPORARY",
        ),
        row(
            Sms,
            error(
                400,
                "InvalidParameter",
                "Invalid parameter: PhoneNumber Reason: +15555550100 is not valid",
            ),
            Failed,
            1,
            "INVALID_RECIPIENT",
        ),
        row(
            Sms,
            error(
                400,
                "InvalidParameter",
                "Invalid parameter: Message too long",
            ),
            Failed,
            1,
            "PERMANENT",
        ),
        row(
            Push,
            error(400, "EndpointDisabled", "Endpoint is disabled"),
            Failed,
            1,
            "INVALID_RECIPIENT",
        ),
        row(
            Push,
            error(403, "AuthorizationError", "not authorized"),
            Pending,
            0,
            "PROVIDER_MISCONFIGURED",
        ),
    ]
}

#[tokio::test]
async fn every_outcome_class_does_what_the_table_says() {
    let stub = AwsStub::start().await.expect("stub");
    for row in rows() {
        stub.clear_rules();
        stub.push(Rule {
            service: None,
            recipient: None,
            times: None,
            reply: row.reply.clone(),
        });
        let db = TestDb::new().await;
        let (recipient, payload) = match row.channel {
            Channel::Email => ("ada@example.com", json!({"subject": "s", "text": "t"})),
            Channel::Sms => ("+15555550100", json!({"text": "t"})),
            Channel::Push => (ENDPOINT_ARN, json!({"title": "t"})),
        };
        let notification = factory::create(
            &db.pool,
            factory::Spec::to(recipient)
                .channel(row.channel)
                .payload(payload),
        )
        .await;
        let providers = aws_providers(&db.pool, &stub.url(), None).await;
        let outcome = sweep(&sweeper(&db.pool, providers, circuit())).await;
        let context = format!("{:?} {:?}: {outcome:?}", row.channel, row.reply);
        assert_eq!(outcome.claimed, 1, "{context}");

        let stored = factory::load(&db.pool, notification.id).await;
        assert_eq!(
            (stored.status, stored.attempt_count),
            (row.status, row.attempts),
            "{context}"
        );
        let outcomes: Vec<String> = db
            .pool
            .get()
            .await
            .expect("connection")
            .query("SELECT outcome FROM delivery_attempts", &[])
            .await
            .expect("attempts")
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(outcomes, [row.outcome], "{context}");
        assert_eq!(
            db.count("SELECT count(*) FROM suppressions WHERE reason = 'INVALID_RECIPIENT'")
                .await,
            i64::from(row.suppressed),
            "{context}"
        );
        let paused = db
            .count(&format!(
                "SELECT count(*) FROM channel_health
                 WHERE channel = '{}' AND paused_until > now()",
                row.channel.as_str()
            ))
            .await;
        assert_eq!(paused, i64::from(row.paused), "{context}");
        let state = channel::read(&db.pool.get().await.expect("db"), &circuit())
            .await
            .expect("channels")
            .into_iter()
            .find(|state| state.channel == row.channel)
            .expect("the channel's state");
        assert_eq!(state.paused_since.is_some(), row.paused, "{context}");
        assert_eq!(
            (state.throttled_total, state.misconfigured_total),
            (
                i64::from(row.outcome == "THROTTLED"),
                i64::from(row.outcome == "PROVIDER_MISCONFIGURED")
            ),
            "{context}"
        );
        if row.status == Status::Sent {
            assert!(stored.provider_message_id.is_some(), "{context}");
        }
        // Providers quote the address; what is kept of their answer does not.
        let quoting = db
            .count(&format!(
                "SELECT (SELECT count(*) FROM delivery_attempts WHERE error ILIKE '%{recipient}%')
                      + (SELECT count(*) FROM notifications WHERE last_error ILIKE '%{recipient}%')
                      + (SELECT count(*) FROM channel_health
                         WHERE pause_reason ILIKE '%{recipient}%')"
            ))
            .await;
        assert_eq!(quoting, 0, "{context}");
    }
}

/// A 429 with `Retry-After: 2` pauses email for 2 s: the notification waits with its
/// attempt refunded, nothing of the channel is claimed meanwhile, and it goes out after.
#[tokio::test]
async fn a_throttle_pauses_the_channel_until_retry_after_and_spends_no_attempt() {
    let stub = AwsStub::start().await.expect("stub");
    ses_throttles_once(&stub, 2);
    let db = TestDb::new().await;
    let first = factory::create(&db.pool, factory::Spec::to("a@example.com")).await;
    let providers = ses_only(&db.pool, &stub.url()).await;
    let sweeper = sweeper(&db.pool, providers, circuit());
    let outcome = sweep(&sweeper).await;
    assert_eq!((outcome.claimed, outcome.refunded), (1, 1), "{outcome:?}");

    // Paused: a second email due now is not claimed, and the provider hears nothing.
    factory::create(&db.pool, factory::Spec::to("b@example.com")).await;
    let outcome = sweep(&sweeper).await;
    assert_eq!(outcome.claimed, 0, "{outcome:?}");
    assert_eq!(stub.calls().len(), 1);
    let waiting = factory::load(&db.pool, first.id).await;
    assert_eq!(
        (waiting.status, waiting.attempt_count),
        (Status::Pending, 0)
    );

    tokio::time::sleep(Duration::from_millis(2100)).await;
    let outcome = sweep_until_idle(&sweeper).await;
    assert_eq!(outcome.sent, 2, "{outcome:?}");
    assert_eq!(factory::load(&db.pool, first.id).await.attempt_count, 1);
}

/// The next SES call answers 429 with `Retry-After: seconds`.
fn ses_throttles_once(stub: &AwsStub, seconds: u64) {
    stub.push(Rule {
        service: Some(Service::Ses),
        recipient: None,
        times: Some(1),
        reply: Reply::Error {
            status: 429,
            code: "TooManyRequestsException".into(),
            message: "slow down".into(),
            retry_after: Some(seconds),
        },
    });
}

/// Every SES call answers 503 until the rules are cleared.
fn ses_is_down(stub: &AwsStub) {
    stub.push(Rule {
        service: Some(Service::Ses),
        recipient: None,
        times: None,
        reply: Reply::error(503, "ServiceUnavailable", "down"),
    });
}

/// Temporary failures of email open its circuit: email stops being claimed while SMS and
/// push keep draining; after the open time one probe goes out, and its success closes the
/// circuit again. Both changes are webhook events.
#[tokio::test]
async fn a_burst_of_5xx_opens_one_channels_circuit_and_a_probe_closes_it() {
    let stub = AwsStub::start().await.expect("stub");
    ses_is_down(&stub);
    let db = TestDb::new().await;
    for i in 0..6 {
        factory::create(&db.pool, factory::Spec::to(&format!("e{i}@example.com"))).await;
        factory::create(
            &db.pool,
            factory::Spec::to(&format!("s{i}")).channel(Channel::Sms),
        )
        .await;
    }
    let fast = CircuitConfig {
        min_calls: 4,
        open_for: Duration::from_secs(2),
        ..circuit()
    };
    let providers = ses_only(&db.pool, &stub.url()).await;
    let sweeper = sweeper(&db.pool, providers, fast);
    let outcome = sweep(&sweeper).await;
    assert_eq!((outcome.sent, outcome.retried), (6, 6), "{outcome:?}");
    assert_eq!(
        db.count(
            "SELECT count(*) FROM channel_health WHERE channel = 'EMAIL' AND circuit = 'OPEN'"
        )
        .await,
        1
    );

    // Open: new work of every channel arrives; only SMS is sent.
    stub.clear_rules();
    for i in 0..3 {
        factory::create(
            &db.pool,
            factory::Spec::to(&format!("late-e{i}@example.com")),
        )
        .await;
        factory::create(
            &db.pool,
            factory::Spec::to(&format!("late-s{i}")).channel(Channel::Sms),
        )
        .await;
    }
    let calls_before = stub.calls().len();
    let outcome = sweep_until_idle(&sweeper).await;
    assert_eq!(outcome.sent, 3, "only SMS: {outcome:?}");
    assert_eq!(stub.calls().len(), calls_before, "email was not claimed");

    // After the open time: one probe, which succeeds and closes the circuit.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let probe = sweep(&sweeper).await;
    assert_eq!((probe.claimed, probe.sent), (1, 1), "{probe:?}");
    assert_eq!(
        db.count(
            "SELECT count(*) FROM channel_health WHERE channel = 'EMAIL' AND circuit = 'CLOSED'"
        )
        .await,
        1
    );
    // The rest drains (the first six once their backoff is over).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    sweep_until_idle(&sweeper).await;
    assert_eq!(
        db.count("SELECT count(*) FROM notifications WHERE status = 'SENT'")
            .await,
        18
    );
    let events: Vec<String> = db
        .pool
        .get()
        .await
        .expect("connection")
        .query(
            "SELECT type FROM webhook_events WHERE notification_id IS NULL ORDER BY occurred_at",
            &[],
        )
        .await
        .expect("events")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(events, ["circuit.opened", "circuit.closed"]);
}

/// A probe that is throttled says nothing about the provider's health: the circuit stays
/// half-open (no `circuit.closed`), and the next probe, once the throttle's pause is over,
/// decides.
#[tokio::test]
async fn a_throttled_probe_neither_closes_nor_reopens_the_circuit() {
    let stub = AwsStub::start().await.expect("stub");
    ses_is_down(&stub);
    let db = TestDb::new().await;
    for i in 0..4 {
        factory::create(&db.pool, factory::Spec::to(&format!("e{i}@example.com"))).await;
    }
    let fast = CircuitConfig {
        min_calls: 4,
        open_for: Duration::from_secs(1),
        ..circuit()
    };
    let providers = ses_only(&db.pool, &stub.url()).await;
    let sweeper = sweeper(&db.pool, providers, fast);
    sweep(&sweeper).await;
    let circuit_is = |state: &'static str| {
        let db = &db;
        async move {
            db.count(&format!(
                "SELECT count(*) FROM channel_health WHERE channel = 'EMAIL' AND circuit = '{state}'"
            ))
            .await
                == 1
        }
    };
    assert!(circuit_is("OPEN").await);

    stub.clear_rules();
    ses_throttles_once(&stub, 1);
    factory::create(&db.pool, factory::Spec::to("probe@example.com")).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // Its open time is up: the state shown is half-open before any probe is claimed.
    let shown = channel::read(&db.pool.get().await.expect("db"), &fast)
        .await
        .expect("states");
    let email = shown
        .iter()
        .find(|state| state.channel == Channel::Email)
        .expect("email");
    assert_eq!(email.circuit, Circuit::HalfOpen);
    let probe = sweep(&sweeper).await;
    assert_eq!((probe.claimed, probe.refunded), (1, 1), "{probe:?}");
    assert!(circuit_is("HALF_OPEN").await, "a throttle closes nothing");

    // After the throttle's pause, the next probe is answered and closes the circuit.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let probe = sweep(&sweeper).await;
    assert_eq!((probe.claimed, probe.sent), (1, 1), "{probe:?}");
    assert!(circuit_is("CLOSED").await);
    let closed = db
        .count("SELECT count(*) FROM webhook_events WHERE type = 'circuit.closed'")
        .await;
    assert_eq!(closed, 1);
}

/// A pause keeps the moment it began while batches lengthen it, a pause after a gap
/// begins anew, and the throttled and misconfigured calls of every batch add up.
#[tokio::test]
async fn a_pause_keeps_its_start_while_it_lengthens_and_refused_calls_add_up() {
    let db = TestDb::new().await;
    let conn = db.pool.get().await.expect("db");
    let config = circuit();
    let state_of = |channel: Channel| {
        let (conn, config) = (&conn, &config);
        async move {
            channel::read(conn, config)
                .await
                .expect("read")
                .into_iter()
                .find(|state| state.channel == channel)
                .expect("the channel's state")
        }
    };
    // One batch of EMAIL with `calls` calls, `refused` of them throttled (or refused for
    // the configuration), pausing the channel for `seconds`; the state it leaves.
    let report = |calls: i64, refused: i64, reason: &'static str, seconds: i64| {
        let observation = channel::Observation {
            calls,
            throttled: if reason == "THROTTLED" { refused } else { 0 },
            misconfigured: if reason == "THROTTLED" { 0 } else { refused },
            pause: Some((
                chrono::Utc::now() + chrono::TimeDelta::seconds(seconds),
                reason.to_string(),
            )),
            ..Default::default()
        };
        let (conn, config) = (&conn, &config);
        async move {
            channel::observe(conn, Channel::Email, &observation, config)
                .await
                .expect("observe");
        }
    };

    report(3, 2, "THROTTLED", 60).await;
    let first = state_of(Channel::Email).await;
    let began = first.paused_since.expect("paused since");
    assert_eq!((first.throttled_total, first.misconfigured_total), (2, 0));

    tokio::time::sleep(Duration::from_millis(50)).await;
    report(1, 1, "PROVIDER_MISCONFIGURED", 120).await;
    let longer = state_of(Channel::Email).await;
    assert_eq!(
        longer.paused_since,
        Some(began),
        "a longer pause keeps its start"
    );
    assert_eq!(
        longer.pause_reason.as_deref(),
        Some("PROVIDER_MISCONFIGURED")
    );
    assert_eq!((longer.throttled_total, longer.misconfigured_total), (2, 1));

    // The pause ends; the next one starts anew.
    conn.execute(
        "UPDATE channel_health SET paused_until = now() - interval '1 second'
         WHERE channel = 'EMAIL'",
        &[],
    )
    .await
    .expect("end the pause");
    let ended = state_of(Channel::Email).await;
    assert_eq!((ended.paused_until, ended.paused_since), (None, None));
    report(3, 2, "THROTTLED", 60).await;
    let again = state_of(Channel::Email).await;
    assert!(again.paused_since.expect("paused since") > began);
    assert_eq!((again.throttled_total, again.misconfigured_total), (4, 1));
    // Other channels counted nothing.
    let sms = state_of(Channel::Sms).await;
    assert_eq!((sms.throttled_total, sms.misconfigured_total), (0, 0));
}
