//! The webhook drainer against a real PostgreSQL and a real HTTP receiver on 127.0.0.1:
//! retries, giving up, exactly-once claims across drainers, lease takeover after a crash,
//! the body contract and Standard Webhooks signatures.

mod common;

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use common::{factory, test_db};
use deadpool_postgres::Pool;
use hmac::{Hmac, Mac};
use notify_shared::backoff::Random;
use notify_shared::config::{RetryPolicy, WebhookConfig};
use notify_shared::notification::Notification;
use notify_shared::stop::StopSignal;
use notify_shared::webhook::outbox::{self, ClaimedEvent, Dispatch, OutboxCounts};
use notify_shared::webhook::{self, DrainOutcome, WebhookDrainer};
use serde_json::Value;
use sha2::Sha256;
use tokio::net::TcpListener;
use uuid::Uuid;

// ---------------------------------------------------------------------------------------
// A scripted receiver: records every request and answers from a script.
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Reply {
    Status(u16),
    /// Answers after a pause.
    After(Duration, u16),
    /// Holds the request forever.
    Hang,
}

#[derive(Debug, Clone)]
struct Received {
    headers: HeaderMap,
    body: Bytes,
}

impl Received {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("the body is JSON")
    }
    fn event_id(&self) -> String {
        self.json()["eventId"]
            .as_str()
            .expect("eventId is a string")
            .to_string()
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

struct Script {
    replies: Mutex<VecDeque<Reply>>,
    /// Answer once the script runs out.
    otherwise: Reply,
    received: Mutex<Vec<Received>>,
    arrivals: tokio::sync::watch::Sender<usize>,
}

struct Receiver {
    url: String,
    script: Arc<Script>,
}

impl Receiver {
    async fn start(replies: &[Reply], otherwise: Reply) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        Self::start_on(listener, replies, otherwise)
    }

    fn start_on(listener: TcpListener, replies: &[Reply], otherwise: Reply) -> Receiver {
        let address = listener.local_addr().expect("address");
        let script = Arc::new(Script {
            replies: Mutex::new(replies.iter().copied().collect()),
            otherwise,
            received: Mutex::new(Vec::new()),
            arrivals: tokio::sync::watch::Sender::new(0),
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(script.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver {
            url: format!("http://{address}/hooks"),
            script,
        }
    }

    fn received(&self) -> Vec<Received> {
        self.script.received.lock().expect("lock").clone()
    }

    async fn wait_for_requests(&self, count: usize) {
        let mut arrivals = self.script.arrivals.subscribe();
        tokio::time::timeout(Duration::from_secs(10), arrivals.wait_for(|n| *n >= count))
            .await
            .expect("requests arrive in time")
            .expect("receiver alive");
    }
}

async fn answer(State(script): State<Arc<Script>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    script
        .received
        .lock()
        .expect("lock")
        .push(Received { headers, body });
    let reply = script
        .replies
        .lock()
        .expect("lock")
        .pop_front()
        .unwrap_or(script.otherwise);
    script.arrivals.send_modify(|n| *n += 1);
    let code = match reply {
        Reply::Status(code) => code,
        Reply::After(pause, code) => {
            tokio::time::sleep(pause).await;
            code
        }
        Reply::Hang => std::future::pending().await,
    };
    StatusCode::from_u16(code).expect("valid status")
}

/// A URL where nothing listens: a port the OS just handed out, closed again.
async fn closed_port_url() -> (String, std::net::SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    drop(listener);
    (format!("http://{address}/hooks"), address)
}

// ---------------------------------------------------------------------------------------
// Outbox rows and drainers.
// ---------------------------------------------------------------------------------------

struct Fixed(f64);

impl Random for Fixed {
    fn unit(&self) -> f64 {
        self.0
    }
}

/// Backoff of 0.5–1 s for the first failure: tests make events due again by hand.
const RETRY: RetryPolicy = RetryPolicy {
    max_retries: 5,
    base_delay_ms: 1000,
    max_delay_ms: 60_000,
};

fn webhook_config(url: &str, max_attempts: i32) -> WebhookConfig {
    WebhookConfig {
        url: Some(url.to_string()),
        secret: None,
        timeout: Duration::from_secs(2),
        max_attempts,
    }
}

fn drainer(pool: &Pool, config: &WebhookConfig) -> WebhookDrainer {
    WebhookDrainer::new(
        pool.clone(),
        config,
        RETRY,
        Duration::from_millis(20),
        Arc::new(Fixed(0.0)),
    )
    .expect("drainer")
}

/// Writes the outbox row a final transition would have written for `notification`.
async fn insert_event(pool: &Pool, notification: &Notification, status: &str) -> Uuid {
    insert_event_at(pool, notification.id, status, 1, Utc::now()).await
}

async fn insert_event_at(
    pool: &Pool,
    notification_id: Uuid,
    status: &str,
    attempt_count: i32,
    occurred_at: DateTime<Utc>,
) -> Uuid {
    let db = pool.get().await.expect("connection");
    db.query_one(
        "INSERT INTO webhook_events (id, notification_id, status, attempt_count,
                                     redrive_generation, occurred_at)
         VALUES (gen_random_uuid(), $1, $2, $3, 0, $4) RETURNING id",
        &[&notification_id, &status, &attempt_count, &occurred_at],
    )
    .await
    .expect("insert event")
    .get(0)
}

/// One SENT event per notification, in one statement.
async fn insert_events(pool: &Pool, notifications: &[Notification]) -> Vec<Uuid> {
    let ids: Vec<Uuid> = notifications.iter().map(|n| n.id).collect();
    let db = pool.get().await.expect("connection");
    db.query(
        "INSERT INTO webhook_events (id, notification_id, status, attempt_count,
                                     redrive_generation, occurred_at)
         SELECT gen_random_uuid(), n, 'SENT', 1, 0, now() FROM unnest($1::uuid[]) AS n
         RETURNING id",
        &[&ids],
    )
    .await
    .expect("insert events")
    .iter()
    .map(|row| row.get(0))
    .collect()
}

/// Skips the backoff: every PENDING event is due now.
async fn make_due(pool: &Pool) {
    let db = pool.get().await.expect("connection");
    db.execute(
        "UPDATE webhook_events SET next_dispatch_at = now() WHERE dispatch_state = 'PENDING'",
        &[],
    )
    .await
    .expect("make due");
}

#[derive(Debug, Clone, PartialEq)]
struct EventRow {
    state: String,
    attempts: i32,
    leased: bool,
    last_error: Option<String>,
    next_dispatch_at: DateTime<Utc>,
    delivered_at: Option<DateTime<Utc>>,
    given_up_at: Option<DateTime<Utc>>,
}

async fn event_row(pool: &Pool, id: Uuid) -> EventRow {
    let db = pool.get().await.expect("connection");
    let row = db
        .query_one(
            "SELECT dispatch_state, dispatch_attempts, lease_expires_at IS NOT NULL, last_error,
                    next_dispatch_at, delivered_at, given_up_at
             FROM webhook_events WHERE id = $1",
            &[&id],
        )
        .await
        .expect("event row");
    EventRow {
        state: row.get(0),
        attempts: row.get(1),
        leased: row.get(2),
        last_error: row.get(3),
        next_dispatch_at: row.get(4),
        delivered_at: row.get(5),
        given_up_at: row.get(6),
    }
}

async fn counts(pool: &Pool) -> OutboxCounts {
    let db = pool.get().await.expect("connection");
    outbox::counts(&db).await.expect("counts")
}

async fn drain(drainer: &WebhookDrainer) -> DrainOutcome {
    drainer
        .drain_once(&StopSignal::never())
        .await
        .expect("drain step")
}

// ---------------------------------------------------------------------------------------
// An independent Standard Webhooks v1 verifier (not the crate's signing code).
// ---------------------------------------------------------------------------------------

const TOLERANCE_SECONDS: i64 = 5 * 60;

fn verify(secret: &str, headers: &HeaderMap, body: &[u8], now: i64) -> Result<(), String> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .ok_or(format!("missing {name}"))
    };
    let id = header("webhook-id")?;
    let timestamp_text = header("webhook-timestamp")?;
    let signatures = header("webhook-signature")?;
    let timestamp: i64 = timestamp_text
        .parse()
        .map_err(|_| "bad timestamp".to_string())?;
    if (now - timestamp).abs() > TOLERANCE_SECONDS {
        return Err("timestamp outside tolerance".to_string());
    }
    let key = match secret.strip_prefix("whsec_") {
        Some(encoded) => STANDARD.decode(encoded).map_err(|e| e.to_string())?,
        None => secret.as_bytes().to_vec(),
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).map_err(|e| e.to_string())?;
    let mut signed = format!("{id}.{timestamp_text}.").into_bytes();
    signed.extend_from_slice(body);
    mac.update(&signed);
    let expected = mac.finalize().into_bytes();
    let matched = signatures
        .split(' ')
        .filter_map(|candidate| candidate.split_once(','))
        .filter(|(version, _)| *version == "v1")
        .filter_map(|(_, encoded)| STANDARD.decode(encoded).ok())
        .any(|given| constant_time_eq(&given, &expected));
    if matched {
        Ok(())
    } else {
        Err("no matching signature".to_string())
    }
}

/// Compares without stopping at the first difference, so timing reveals nothing.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

// ---------------------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_failing_receiver_gets_the_same_event_until_it_answers_2xx() {
    let db = test_db().await;
    let receiver = Receiver::start(
        &[Reply::Status(503), Reply::Status(503), Reply::Status(200)],
        Reply::Status(500),
    )
    .await;
    let drainer = drainer(&db.pool, &webhook_config(&receiver.url, 10));
    let notification = factory::create(&db.pool, factory::Spec::default()).await;
    let event = insert_event(&db.pool, &notification, "SENT").await;

    let first = drain(&drainer).await;
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
        drain(&drainer).await,
        DrainOutcome::default(),
        "not due yet"
    );

    // Skip the backoff instead of sleeping through it.
    make_due(&db.pool).await;
    let second = drain(&drainer).await;
    assert_eq!((second.claimed, second.retried), (1, 1), "{second:?}");
    assert_eq!(event_row(&db.pool, event).await.attempts, 2);

    make_due(&db.pool).await;
    let third = drain(&drainer).await;
    assert_eq!((third.claimed, third.delivered), (1, 1), "{third:?}");
    let row = event_row(&db.pool, event).await;
    assert_eq!(
        (row.state.as_str(), row.attempts, row.leased),
        ("DELIVERED", 3, false)
    );
    assert!(row.delivered_at.is_some() && row.given_up_at.is_none());

    let ids: Vec<String> = receiver.received().iter().map(Received::event_id).collect();
    assert_eq!(ids, vec![event.to_string(); 3], "three POSTs of one event");
    make_due(&db.pool).await;
    assert_eq!(
        drain(&drainer).await,
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
    let db = test_db().await;
    let (url, _) = closed_port_url().await;
    let drainer = drainer(&db.pool, &webhook_config(&url, 3));
    let notification = factory::create(&db.pool, factory::Spec::default()).await;
    let before = factory::load(&db.pool, notification.id).await;
    let event = insert_event(&db.pool, &notification, "FAILED").await;

    for attempt in 1..=2 {
        let outcome = drain(&drainer).await;
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
    let last = drain(&drainer).await;
    assert_eq!((last.claimed, last.given_up), (1, 1), "{last:?}");
    let row = event_row(&db.pool, event).await;
    assert_eq!(
        (row.state.as_str(), row.attempts, row.leased),
        ("GIVEN_UP", 3, false)
    );
    assert!(row.given_up_at.is_some() && row.delivered_at.is_none());

    make_due(&db.pool).await;
    assert_eq!(
        drain(&drainer).await,
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
async fn six_drainers_deliver_sixty_events_each_exactly_once() {
    let db = test_db().await;
    let receiver = Receiver::start(&[], Reply::After(Duration::from_millis(5), 200)).await;
    let notifications = factory::create_many(&db.pool, 60, |_| factory::Spec::default()).await;
    let events = insert_events(&db.pool, &notifications).await;
    let config = webhook_config(&receiver.url, 10);

    // Separate pools: six "processes" meeting only in the database. Small batches make
    // them interleave.
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let drainer = drainer(&db.new_pool(2), &config)
            .with_batch_size(4)
            .with_concurrency(4);
        tasks.push(tokio::spawn(async move {
            let mut total = DrainOutcome::default();
            loop {
                let outcome = drain(&drainer).await;
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

    let received: Vec<String> = receiver.received().iter().map(Received::event_id).collect();
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
    let db = test_db().await;
    // The first POST is never answered; the resend is answered slowly, so the late record
    // can be tried while the second drainer holds the event.
    let receiver = Receiver::start(
        &[Reply::Hang, Reply::After(Duration::from_millis(600), 200)],
        Reply::Status(200),
    )
    .await;
    let mut config = webhook_config(&receiver.url, 10);
    config.timeout = Duration::from_millis(1000);
    // Short lease so the test need not wait for the production margin.
    let lease = Duration::from_millis(1200);
    let first = Arc::new(drainer(&db.new_pool(2), &config).with_lease(lease));
    let second = drainer(&db.new_pool(2), &config).with_lease(lease);
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
        notification_id: notification.id,
        status: "SENT".to_string(),
        attempt_count: 1,
        occurred_at: Utc::now(),
        dispatch_attempts: 1,
    };

    assert_eq!(
        drain(&second).await,
        DrainOutcome::default(),
        "lease still held"
    );
    tokio::time::sleep(lease + Duration::from_millis(100)).await;
    let resend = tokio::spawn(async move { drain(&second).await });
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

    let ids: Vec<String> = receiver.received().iter().map(Received::event_id).collect();
    assert_eq!(ids, vec![event.to_string(); 2], "sent again, same eventId");
}

#[tokio::test]
async fn a_receiver_down_for_the_whole_drain_gets_every_event_once_it_is_back() {
    let db = test_db().await;
    let (url, address) = closed_port_url().await;
    let notifications = factory::create_many(&db.pool, 5, |_| factory::Spec::default()).await;
    let events = insert_events(&db.pool, &notifications).await;
    // Backoff of 10–50 ms and plenty of attempts, so the real loop retries quickly.
    let retry = RetryPolicy {
        max_retries: 19,
        base_delay_ms: 20,
        max_delay_ms: 100,
    };
    let drainer = WebhookDrainer::new(
        db.pool.clone(),
        &webhook_config(&url, 20),
        retry,
        Duration::from_millis(10),
        Arc::new(Fixed(0.0)),
    )
    .expect("drainer");
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

    let mut received: Vec<String> = receiver.received().iter().map(Received::event_id).collect();
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

#[tokio::test]
async fn the_body_has_exactly_five_fields_and_the_event_id_header_matches() {
    let db = test_db().await;
    let receiver = Receiver::start(&[], Reply::Status(204)).await;
    let drainer = drainer(&db.pool, &webhook_config(&receiver.url, 10));
    let notification = factory::create(&db.pool, factory::Spec::default()).await;
    let occurred_at: DateTime<Utc> = "2026-01-02T03:04:05.678Z".parse().expect("time");
    let event = insert_event_at(&db.pool, notification.id, "DEAD_LETTERED", 6, occurred_at).await;

    assert_eq!(
        drain(&drainer).await.delivered,
        1,
        "204 counts as delivered"
    );
    let received = receiver.received();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    let body = request.json();
    let fields: HashSet<&str> = body
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        fields,
        HashSet::from(["eventId", "jobId", "status", "attemptCount", "timestamp"])
    );
    assert_eq!(body["eventId"], event.to_string());
    assert_eq!(body["jobId"], notification.id.to_string());
    assert_eq!(body["status"], "DEAD_LETTERED");
    assert_eq!(body["attemptCount"], 6);
    assert_eq!(body["timestamp"], "2026-01-02T03:04:05.678Z");
    assert_eq!(
        request.header("x-webhook-event-id"),
        Some(event.to_string().as_str())
    );
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert!(
        request.header("webhook-signature").is_none(),
        "no secret, no signature"
    );
}

#[tokio::test]
async fn signed_requests_pass_an_independent_standard_webhooks_check() {
    let db = test_db().await;
    let receiver = Receiver::start(&[], Reply::Status(200)).await;
    let secret = format!("whsec_{}", STANDARD.encode(Uuid::new_v4().as_bytes()));
    let mut config = webhook_config(&receiver.url, 10);
    config.secret = Some(secret.clone());
    let drainer = drainer(&db.pool, &config);
    let notification = factory::create(&db.pool, factory::Spec::default()).await;
    let event = insert_event(&db.pool, &notification, "SENT").await;

    assert_eq!(drain(&drainer).await.delivered, 1);
    let request = receiver.received().remove(0);
    assert_eq!(
        request.header("webhook-id"),
        Some(event.to_string().as_str())
    );
    let sent_at: i64 = request
        .header("webhook-timestamp")
        .expect("timestamp header")
        .parse()
        .expect("unix seconds");
    let now = Utc::now().timestamp();
    assert!((now - sent_at).abs() <= 5, "signed at send time");
    assert!(
        request
            .header("webhook-signature")
            .is_some_and(|s| s.starts_with("v1,")),
        "{:?}",
        request.headers
    );

    assert_eq!(
        verify(&secret, &request.headers, &request.body, now),
        Ok(())
    );

    let tampered = String::from_utf8(request.body.to_vec())
        .expect("utf-8")
        .replace("\"SENT\"", "\"FAILED\"");
    assert_ne!(tampered.as_bytes(), &request.body[..]);
    assert!(verify(&secret, &request.headers, tampered.as_bytes(), now).is_err());

    let outside = TOLERANCE_SECONDS + 1;
    assert_eq!(
        verify(&secret, &request.headers, &request.body, sent_at + outside),
        Err("timestamp outside tolerance".to_string())
    );
    assert!(verify(&secret, &request.headers, &request.body, sent_at - outside).is_err());
    let other_secret = format!("whsec_{}", STANDARD.encode(Uuid::new_v4().as_bytes()));
    assert!(verify(&other_secret, &request.headers, &request.body, now).is_err());

    // Receivers accept any of several space-separated signatures (key rotation).
    let mut rotated = request.headers.clone();
    let real = request.header("webhook-signature").expect("signature");
    rotated.insert(
        "webhook-signature",
        format!("v1,AAAA {real}").parse().expect("header"),
    );
    assert_eq!(verify(&secret, &rotated, &request.body, now), Ok(()));
}

#[tokio::test]
async fn a_stop_during_a_batch_hands_back_the_events_not_yet_sent() {
    let db = test_db().await;
    let receiver = Receiver::start(
        &[Reply::After(Duration::from_millis(300), 200)],
        Reply::Status(200),
    )
    .await;
    // One POST at a time, so two events are still waiting when the stop comes.
    let drainer = drainer(&db.pool, &webhook_config(&receiver.url, 10)).with_concurrency(1);
    let notifications = factory::create_many(&db.pool, 3, |_| factory::Spec::default()).await;
    let events = insert_events(&db.pool, &notifications).await;

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
    let db = test_db().await;
    let receiver = Receiver::start(&[], Reply::Status(200)).await;
    let drainer = drainer(&db.pool, &webhook_config(&receiver.url, 3));
    let notifications = factory::create_many(&db.pool, 2, |_| factory::Spec::default()).await;
    let events = insert_events(&db.pool, &notifications).await;
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

    let outcome = drain(&drainer).await;
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
    let ids: Vec<String> = receiver.received().iter().map(Received::event_id).collect();
    assert_eq!(ids, vec![events[1].to_string()]);
}
