//! Webhook endpoints per client: each client receives only its own events, event types
//! choose what an endpoint gets, a rotated secret signs twice for its overlap, given-up
//! events are replayed with their eventId, and the SSRF rules hold at registration and at
//! dispatch (loopback, private, link-local, IPv6 loopback, a name resolving to loopback; no
//! redirect followed). Every receiver listens on 127.0.0.1: no traffic leaves the machine.

use std::collections::{BTreeSet, HashMap};

use chrono::{TimeDelta, Utc};
use notify_shared::auth::{self, Scope};
use notify_shared::config::Config;
use notify_shared::webhook::destination::DestinationPolicy;
use notify_shared::webhook::drainer::ENDPOINT_DELETED;
use notify_shared::webhook::outbox::{NO_DESTINATION, NOT_SUBSCRIBED};
use notify_tests::db::execute;
use notify_tests::receiver::{Receiver, Reply, closed_port_url};
use notify_tests::{TestApp, TestDb, factory, worker};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use super::signing::verify;
use super::{event_row, make_due};

/// Loopback receivers are reachable: what the local runner and these tests allow.
pub(super) const OPEN: DestinationPolicy = DestinationPolicy {
    allow_http: true,
    allow_private: true,
};

/// The deployed rules, except that http is allowed so that a refusal is about the address.
pub(super) const GUARDED: DestinationPolicy = DestinationPolicy {
    allow_http: true,
    allow_private: false,
};

/// The API with keys, registering endpoints under the loopback-friendly rules.
pub(super) async fn open_app() -> TestApp {
    let config = Config::from_vars(HashMap::from([
        ("ALLOW_HTTP_WEBHOOKS".to_string(), "true".to_string()),
        ("ALLOW_PRIVATE_WEBHOOKS".to_string(), "true".to_string()),
    ]))
    .expect("configuration");
    TestApp::spawn_with_keys_and_config(config).await
}

pub(super) async fn key(db: &TestDb, name: &str, scope: Scope) -> (Uuid, String) {
    let connection = db.pool.get().await.expect("db");
    auth::create_key(&connection, name, scope)
        .await
        .expect("key")
}

pub(super) async fn call(
    app: &TestApp,
    method: Method,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = app.request(method, path).bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    app.send(request).await.pair()
}

/// `POST /webhook-endpoints` that must answer 201; returns (id, secret).
pub(super) async fn register(app: &TestApp, key: &str, body: Value) -> (Uuid, String) {
    let (status, reply) = call(app, Method::POST, "/webhook-endpoints", key, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{reply}");
    let id = reply["id"].as_str().expect("id").parse().expect("uuid");
    let secret = reply["secret"].as_str().expect("secret").to_string();
    assert!(secret.starts_with("whsec_"), "{reply}");
    (id, secret)
}

/// A notification of `owner` (created by factory, owned as the API would own it) and the
/// `status` event its final transition writes.
pub(super) async fn owned_event(db: &TestDb, owner: Option<Uuid>, status: &str) -> Uuid {
    let notification = factory::create(&db.pool, factory::Spec::default()).await;
    execute(
        &db.pool,
        "UPDATE notifications SET owner_key_id = $2 WHERE id = $1",
        &[&notification.id, &owner],
    )
    .await;
    factory::insert_event(&db.pool, notification.id, status, 1, Utc::now()).await
}

/// An endpoint row as registration would have written it when the name still resolved
/// elsewhere (the check at dispatch is what is under test).
pub(super) async fn endpoint_row(db: &TestDb, owner: Uuid, url: &str) -> Uuid {
    let id = Uuid::new_v4();
    execute(
        &db.pool,
        "INSERT INTO webhook_endpoints (id, owner_key_id, operator, url, secret)
         VALUES ($1, $2, false, $3, 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0')",
        &[&id, &owner, &url],
    )
    .await;
    id
}

pub(super) fn event_ids(receiver: &Receiver) -> BTreeSet<String> {
    receiver.event_ids().into_iter().collect()
}

pub(super) fn ids(events: &[Uuid]) -> BTreeSet<String> {
    events.iter().map(Uuid::to_string).collect()
}

#[tokio::test]
async fn two_clients_each_receive_only_their_own_events_and_the_default_url_the_rest() {
    let app = open_app().await;
    let db = &app.db;
    let (a_id, a_key) = key(db, "client-a", Scope::Client).await;
    let (b_id, b_key) = key(db, "client-b", Scope::Client).await;
    let (c_id, _) = key(db, "client-c-without-endpoints", Scope::Client).await;
    let a = Receiver::start(&[], Reply::Status(200)).await;
    let a_failures = Receiver::start(&[], Reply::Status(200)).await;
    let b = Receiver::start(&[], Reply::Status(200)).await;
    let default = Receiver::start(&[], Reply::Status(200)).await;
    let (a_endpoint, _) = register(&app, &a_key, json!({"url": a.url})).await;
    let (a_failures_endpoint, _) = register(
        &app,
        &a_key,
        json!({"url": a_failures.url, "eventTypes": ["notification.failed"]}),
    )
    .await;
    let (b_endpoint, _) = register(
        &app,
        &b_key,
        json!({"url": b.url, "eventTypes": ["notification.sent"]}),
    )
    .await;

    let a_sent = owned_event(db, Some(a_id), "SENT").await;
    let a_failed = owned_event(db, Some(a_id), "FAILED").await;
    let b_sent = owned_event(db, Some(b_id), "SENT").await;
    let b_failed = owned_event(db, Some(b_id), "FAILED").await;
    let c_sent = owned_event(db, Some(c_id), "SENT").await;

    let drainer = worker::drainer(&db.pool, &default.url, 10)
        .destinations(OPEN)
        .build();
    let outcome = worker::drain(&drainer).await;
    // a_failed goes to both of A's endpoints; b_failed to none of B's.
    assert_eq!((outcome.claimed, outcome.delivered), (5, 5), "{outcome:?}");

    assert_eq!(event_ids(&a), ids(&[a_sent, a_failed]));
    assert_eq!(event_ids(&a_failures), ids(&[a_failed]));
    assert_eq!(event_ids(&b), ids(&[b_sent]));
    assert_eq!(event_ids(&default), ids(&[c_sent]));
    // The copy for A's second endpoint carries the event's own id and fields.
    let copy = a_failures.received().remove(0).json();
    assert_eq!(copy["eventId"], a_failed.to_string());
    assert_eq!(copy["type"], "notification.failed");
    assert_eq!(copy["status"], "FAILED");
    assert!(
        copy["jobId"].is_string() && copy["attemptCount"] == 1,
        "{copy}"
    );

    let unsent = event_row(&db.pool, b_failed).await;
    assert_eq!(
        (unsent.state.as_str(), unsent.attempts),
        ("DELIVERED", 0),
        "no endpoint of B subscribes to notification.failed"
    );
    assert_eq!(unsent.last_error.as_deref(), Some(NOT_SUBSCRIBED));
    assert_eq!(b.received().len(), 1);

    // Each client sees and manages only its own endpoints and their events.
    let (status, listed) = call(&app, Method::GET, "/webhook-endpoints", &b_key, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        listed["items"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    assert_eq!(listed["items"][0]["id"], b_endpoint.to_string());
    assert!(listed["items"][0].get("secret").is_none(), "{listed}");
    let (status, events) = call(&app, Method::GET, "/webhook-events", &a_key, None).await;
    assert_eq!(status, StatusCode::OK, "{events}");
    let items = events["items"].as_array().expect("items");
    assert_eq!(items.len(), 3, "{events}");
    for item in items {
        assert_eq!(item["status"], "DELIVERED", "{item}");
        let endpoint = item["endpointId"].as_str().expect("endpointId");
        assert!(
            [a_endpoint.to_string(), a_failures_endpoint.to_string()]
                .contains(&endpoint.to_string()),
            "{item}"
        );
    }
    // Keyset pages: 2, then the last one.
    let (_, first) = call(&app, Method::GET, "/webhook-events?limit=2", &a_key, None).await;
    assert_eq!(first["items"].as_array().map(Vec::len), Some(2), "{first}");
    let cursor = first["nextCursor"].as_str().expect("a next page");
    let (_, second) = call(
        &app,
        Method::GET,
        &format!("/webhook-events?limit=2&cursor={cursor}"),
        &a_key,
        None,
    )
    .await;
    assert_eq!(
        second["items"].as_array().map(Vec::len),
        Some(1),
        "{second}"
    );
    assert_eq!(second["nextCursor"], Value::Null);
    assert_ne!(first["items"][1], second["items"][0]);
    // Filtered by its own endpoint a client sees that endpoint's events; by another's, the
    // endpoint is not found, as in a replay.
    let (status, own) = call(
        &app,
        Method::GET,
        &format!("/webhook-events?endpointId={a_failures_endpoint}"),
        &a_key,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{own}");
    assert_eq!(own["items"].as_array().map(Vec::len), Some(1), "{own}");
    let (status, other) = call(
        &app,
        Method::GET,
        &format!("/webhook-events?endpointId={a_endpoint}"),
        &b_key,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{other}");
    assert_eq!(
        other["message"],
        format!("Webhook endpoint {a_endpoint} not found")
    );

    let path = format!("/webhook-endpoints/{a_endpoint}");
    let (status, _) = call(&app, Method::DELETE, &path, &b_key, None).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "B may not delete A's endpoint"
    );
    let (status, _) = call(
        &app,
        Method::POST,
        &format!("{path}/rotate-secret"),
        &b_key,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nor rotate its secret");
    let (status, _) = call(&app, Method::DELETE, &path, &a_key, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // An event routed to an endpoint deleted before it was sent is given up, not sent
    // elsewhere.
    let late = owned_event(db, Some(b_id), "SENT").await;
    execute(
        &db.pool,
        "UPDATE webhook_events SET routed_at = now(), endpoint_id = $2 WHERE id = $1",
        &[&late, &a_endpoint],
    )
    .await;
    let outcome = worker::drain(&drainer).await;
    assert_eq!(outcome.given_up, 1, "{outcome:?}");
    let row = event_row(&db.pool, late).await;
    assert_eq!(row.last_error.as_deref(), Some(ENDPOINT_DELETED));
    assert_eq!(a.received().len(), 2);
}

#[tokio::test]
async fn a_rotated_secret_signs_next_to_the_new_one_during_the_overlap_and_not_after() {
    let app = open_app().await;
    let db = &app.db;
    let (owner, client) = key(db, "client", Scope::Client).await;
    let receiver = Receiver::start(&[], Reply::Status(200)).await;
    let (endpoint, old_secret) = register(&app, &client, json!({"url": receiver.url})).await;
    let drainer = worker::drainer(&db.pool, &closed_port_url().await.0, 10)
        .destinations(OPEN)
        .build();

    let before = owned_event(db, Some(owner), "SENT").await;
    assert_eq!(worker::drain(&drainer).await.delivered, 1);

    let (status, rotated) = call(
        &app,
        Method::POST,
        &format!("/webhook-endpoints/{endpoint}/rotate-secret"),
        &client,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{rotated}");
    assert_eq!(rotated["id"], endpoint.to_string());
    let new_secret = rotated["secret"].as_str().expect("secret").to_string();
    assert_ne!(new_secret, old_secret);
    let until: chrono::DateTime<Utc> = rotated["previousSecretValidUntil"]
        .as_str()
        .expect("until")
        .parse()
        .expect("time");
    let overlap = until - Utc::now();
    assert!(
        overlap > TimeDelta::hours(23) && overlap <= TimeDelta::hours(24),
        "{overlap}"
    );

    let during = owned_event(db, Some(owner), "SENT").await;
    assert_eq!(worker::drain(&drainer).await.delivered, 1);

    // A second rotation inside the first one's day keeps the promise of the first: the
    // original secret still signs until its own end, beside both newer ones.
    let rotate = || async {
        let (status, rotated) = call(
            &app,
            Method::POST,
            &format!("/webhook-endpoints/{endpoint}/rotate-secret"),
            &client,
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{rotated}");
        rotated
    };
    let newest_secret = rotate().await["secret"]
        .as_str()
        .expect("secret")
        .to_string();
    let twice = owned_event(db, Some(owner), "SENT").await;
    assert_eq!(worker::drain(&drainer).await.delivered, 1);

    // The overlaps end (as 24 hours later).
    execute(
        &db.pool,
        "UPDATE webhook_endpoints
         SET previous_secrets_valid_until =
                 array_fill(now() - interval '1 second', ARRAY[cardinality(previous_secrets)]),
             previous_secret_valid_until = now() - interval '1 second'
         WHERE id = $1",
        &[&endpoint],
    )
    .await;
    let after = owned_event(db, Some(owner), "SENT").await;
    assert_eq!(worker::drain(&drainer).await.delivered, 1);

    let received = receiver.received();
    assert_eq!(received.len(), 4);
    let now = Utc::now().timestamp();
    let signatures = |i: usize| {
        received[i]
            .header("webhook-signature")
            .expect("signed")
            .split(' ')
            .count()
    };
    let check =
        |i: usize, secret: &str| verify(secret, &received[i].headers, &received[i].body, now);

    assert_eq!(received[0].event_id(), before.to_string());
    assert_eq!(signatures(0), 1);
    assert!(check(0, &old_secret).is_ok());
    assert!(check(0, &new_secret).is_err());

    assert_eq!(received[1].event_id(), during.to_string());
    assert_eq!(signatures(1), 2, "two v1 signatures during the overlap");
    assert_eq!(
        check(1, &old_secret),
        Ok(()),
        "the old secret still verifies"
    );
    assert_eq!(check(1, &new_secret), Ok(()), "the new secret verifies");

    assert_eq!(received[2].event_id(), twice.to_string());
    assert_eq!(signatures(2), 3, "every secret inside its day signs");
    for secret in [&old_secret, &new_secret, &newest_secret] {
        assert_eq!(check(2, secret), Ok(()));
    }

    assert_eq!(received[3].event_id(), after.to_string());
    assert_eq!(signatures(3), 1, "one signature after the overlaps");
    assert_eq!(check(3, &newest_secret), Ok(()));
    for secret in [&old_secret, &new_secret] {
        assert!(
            check(3, secret).is_err(),
            "a rotated secret no longer verifies"
        );
    }

    // A burst of rotations keeps the ten newest rotated-out secrets, no more.
    let mut last_secret = String::new();
    for _ in 0..12 {
        last_secret = rotate().await["secret"]
            .as_str()
            .expect("secret")
            .to_string();
    }
    let kept = |secret: String| async move {
        let row = db
            .pool
            .get()
            .await
            .expect("connection")
            .query_one(
                "SELECT cardinality(previous_secrets), $2 = ANY (previous_secrets)
                 FROM webhook_endpoints WHERE id = $1",
                &[&endpoint, &secret],
            )
            .await
            .expect("row");
        (row.get::<_, i32>(0), row.get::<_, bool>(1))
    };
    assert_eq!(kept(last_secret.clone()).await, (10, false));

    // During a rollout a process of the release before V27 rotates as it did, into the
    // single previous_secret: that secret still signs, and the next rotation keeps it.
    let rolled = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    execute(
        &db.pool,
        "UPDATE webhook_endpoints
         SET previous_secret = secret, previous_secret_valid_until = now() + interval '1 day',
             secret = $2
         WHERE id = $1",
        &[&endpoint, &rolled],
    )
    .await;
    let rollout = owned_event(db, Some(owner), "SENT").await;
    assert_eq!(worker::drain(&drainer).await.delivered, 1);
    let received = receiver.received();
    let last = received.last().expect("delivered");
    assert_eq!(last.event_id(), rollout.to_string());
    let now = Utc::now().timestamp();
    for secret in [rolled, last_secret.as_str()] {
        assert_eq!(verify(secret, &last.headers, &last.body, now), Ok(()));
    }
    rotate().await;
    assert_eq!(kept(last_secret).await, (10, true));
}

#[tokio::test]
async fn a_given_up_event_is_listed_and_replayed_with_its_event_id() {
    let app = open_app().await;
    let db = &app.db;
    let (owner, client) = key(db, "client", Scope::Client).await;
    let (_, other) = key(db, "other", Scope::Client).await;
    let (url, address) = closed_port_url().await;
    let (endpoint, _) = register(&app, &client, json!({"url": url})).await;
    let drainer = worker::drainer(&db.pool, &closed_port_url().await.0, 1)
        .destinations(OPEN)
        .build();

    let event = owned_event(db, Some(owner), "DEAD_LETTERED").await;
    let outcome = worker::drain(&drainer).await;
    assert_eq!(outcome.given_up, 1, "{outcome:?}");
    let row = event_row(&db.pool, event).await;
    assert_eq!(row.state, "GIVEN_UP");

    let (status, listed) = call(
        &app,
        Method::GET,
        "/webhook-events?status=GIVEN_UP",
        &client,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(
        listed["items"],
        json!([{
            "eventId": event.to_string(), "type": "notification.dead_lettered",
            "status": "GIVEN_UP", "attempts": 1, "endpointId": endpoint.to_string(),
            "createdAt": listed["items"][0]["createdAt"], "lastError": row.last_error,
        }])
    );
    assert_eq!(listed["nextCursor"], Value::Null);
    let (_, delivered) = call(
        &app,
        Method::GET,
        "/webhook-events?status=DELIVERED",
        &client,
        None,
    )
    .await;
    assert_eq!(delivered["items"], json!([]));
    let (_, others) = call(&app, Method::GET, "/webhook-events", &other, None).await;
    assert_eq!(
        others["items"],
        json!([]),
        "another client sees none of them"
    );
    let replay = json!({"endpointId": endpoint});
    let (status, _) = call(
        &app,
        Method::POST,
        "/webhook-events/retry",
        &other,
        Some(replay.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nor replays them");
    let (status, _) = call(
        &app,
        Method::POST,
        "/webhook-events/retry",
        &other,
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(event_row(&db.pool, event).await.state, "GIVEN_UP");

    // The receiver comes up; the client replays.
    let receiver = Receiver::accepting_on(address.port()).await;
    let (status, replayed) = call(
        &app,
        Method::POST,
        "/webhook-events/retry",
        &client,
        Some(replay),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{replayed}");
    assert_eq!(replayed, json!({"replayed": 1}));
    let row = event_row(&db.pool, event).await;
    assert_eq!((row.state.as_str(), row.attempts), ("PENDING", 0));

    let outcome = worker::drain(&drainer).await;
    assert_eq!(outcome.delivered, 1, "{outcome:?}");
    assert_eq!(receiver.event_ids(), vec![event.to_string()]);
    assert_eq!(event_row(&db.pool, event).await.state, "DELIVERED");
    make_due(&db.pool).await;
    assert_eq!(worker::drain(&drainer).await.claimed, 0, "sent once");
}

/// Work created without a key goes to `WEBHOOK_URL`, its default endpoint, even once an
/// endpoint was registered without a key (a local runner has no keys): that endpoint gets
/// a copy of each event type it subscribes to, and takes nothing from the default URL.
#[tokio::test]
async fn work_created_without_a_key_still_goes_to_the_default_url_beside_endpoints_registered_without_a_key()
 {
    let db = TestDb::new().await;
    let default = Receiver::start(&[], Reply::Status(200)).await;
    let registered = Receiver::start(&[], Reply::Status(200)).await;
    let endpoint = endpoint_row(&db, Uuid::nil(), &registered.url).await;
    let drainer = worker::drainer(&db.pool, &default.url, 10)
        .destinations(OPEN)
        .build();

    let sent = owned_event(&db, None, "SENT").await;
    let outcome = worker::drain(&drainer).await;
    assert_eq!(outcome.delivered, 2, "{outcome:?}");
    assert_eq!(event_ids(&default), ids(&[sent]));
    assert_eq!(event_ids(&registered), ids(&[sent]));

    // Subscribed to circuit events only: the notification's events still reach the
    // default URL, and none is closed unsent.
    execute(
        &db.pool,
        "UPDATE webhook_endpoints SET event_types = ARRAY['circuit.opened'] WHERE id = $1",
        &[&endpoint],
    )
    .await;
    let failed = owned_event(&db, None, "FAILED").await;
    let outcome = worker::drain(&drainer).await;
    assert_eq!(outcome.delivered, 1, "{outcome:?}");
    assert_eq!(event_ids(&default), ids(&[sent, failed]));
    assert_eq!(event_ids(&registered), ids(&[sent]));
    let row = event_row(&db.pool, failed).await;
    assert_eq!((row.state.as_str(), row.attempts), ("DELIVERED", 1));
    assert_eq!(row.last_error, None);
}

#[tokio::test]
async fn without_a_default_url_events_wait_until_an_endpoint_exists_then_those_without_one_are_closed()
 {
    let db = TestDb::new().await;
    let config = Config::from_vars(HashMap::new()).expect("configuration");
    let drainer =
        notify_shared::webhook::WebhookDrainer::from_config(&db.pool, &config).expect("drainer");
    let anonymous = owned_event(&db, None, "SENT").await;
    assert_eq!(worker::drain(&drainer).await, Default::default());
    let row = event_row(&db.pool, anonymous).await;
    assert_eq!(
        (row.state.as_str(), row.attempts, row.last_error),
        ("PENDING", 0, None),
        "nowhere to send anything: the outbox keeps it"
    );

    // A client registers an endpoint: its events go there, the others are closed unsent.
    let receiver = Receiver::start(&[], Reply::Status(200)).await;
    let (owner, _) = key(&db, "client", Scope::Client).await;
    endpoint_row(&db, owner, &receiver.url).await;
    let owned = owned_event(&db, Some(owner), "SENT").await;
    let drainer = drainer.with_destinations(OPEN);
    let outcome = worker::drain(&drainer).await;
    assert_eq!((outcome.claimed, outcome.delivered), (1, 1), "{outcome:?}");
    assert_eq!(receiver.event_ids(), vec![owned.to_string()]);
    let row = event_row(&db.pool, anonymous).await;
    assert_eq!((row.state.as_str(), row.attempts), ("DELIVERED", 0));
    assert_eq!(row.last_error.as_deref(), Some(NO_DESTINATION));
}

/// Events nobody receives are closed as fast as they can be routed, not one batch per
/// poll: a backlog of them would otherwise hold up the events behind it for minutes.
#[tokio::test]
async fn a_backlog_of_events_nobody_receives_is_closed_without_a_poll_between_batches() {
    let db = TestDb::new().await;
    let slow_poll = HashMap::from([("WORKER_POLL_INTERVAL_MS".to_string(), "10000".to_string())]);
    let config = Config::from_vars(slow_poll).expect("configuration");
    let drainer =
        notify_shared::webhook::WebhookDrainer::from_config(&db.pool, &config).expect("drainer");
    // Some client has an endpoint, so routing runs; these events are nobody's.
    let (owner, _) = key(&db, "client", Scope::Client).await;
    endpoint_row(&db, owner, "https://hooks.example.com/in").await;
    let nobodys = factory::create_many(&db.pool, 350, |_| factory::Spec::default()).await;
    factory::insert_events(&db.pool, &nobodys).await;

    let stop = notify_shared::stop::StopSignal::never()
        .with_deadline(std::time::Instant::now() + std::time::Duration::from_secs(3));
    let outcome = notify_shared::webhook::run(std::sync::Arc::new(drainer), stop).await;
    assert_eq!(outcome.routed, 350, "{outcome:?}");
    assert_eq!(
        db.count("SELECT count(*) FROM webhook_events WHERE routed_at IS NULL")
            .await,
        0
    );
}

#[tokio::test]
async fn six_drainers_route_and_deliver_every_event_once_to_each_of_its_endpoints() {
    let db = TestDb::new().await;
    let (a, _) = key(&db, "client-a", Scope::Client).await;
    let (b, _) = key(&db, "client-b", Scope::Client).await;
    let slow = Reply::After(std::time::Duration::from_millis(2), 200);
    let a_all = Receiver::start(&[], slow).await;
    let a_sent = Receiver::start(&[], slow).await;
    let b_all = Receiver::start(&[], slow).await;
    endpoint_row(&db, a, &a_all.url).await;
    let sent_only = endpoint_row(&db, a, &a_sent.url).await;
    execute(
        &db.pool,
        "UPDATE webhook_endpoints SET event_types = '{notification.sent}' WHERE id = $1",
        &[&sent_only],
    )
    .await;
    endpoint_row(&db, b, &b_all.url).await;

    let (mut a_events, mut a_sent_events, mut b_events) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..60 {
        let status = if i % 3 == 0 { "FAILED" } else { "SENT" };
        let event = owned_event(&db, Some(a), status).await;
        a_events.push(event);
        if status == "SENT" {
            a_sent_events.push(event);
        }
        if i % 2 == 0 {
            b_events.push(owned_event(&db, Some(b), status).await);
        }
    }

    // Separate pools: six "processes" meeting only in the database, in small batches.
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let drainer = worker::drainer(&db.new_pool(2), &closed_port_url().await.0, 10)
            .destinations(OPEN)
            .build()
            .with_batch_size(4)
            .with_concurrency(4);
        tasks.push(tokio::spawn(async move {
            let mut total = notify_shared::webhook::DrainOutcome::default();
            let mut idle = 0;
            // A step may find nothing while another drainer holds the rows it routes.
            while idle < 3 {
                let outcome = worker::drain(&drainer).await;
                total += outcome;
                idle = if outcome.claimed == 0 { idle + 1 } else { 0 };
            }
            total
        }));
    }
    let mut total = notify_shared::webhook::DrainOutcome::default();
    for task in futures::future::join_all(tasks).await {
        total += task.expect("drainer task");
    }
    let expected = a_events.len() + a_sent_events.len() + b_events.len();
    assert_eq!(total.claimed, expected as u64, "{total:?}");
    assert_eq!(total.delivered, expected as u64, "{total:?}");
    for (receiver, events) in [
        (&a_all, &a_events),
        (&a_sent, &a_sent_events),
        (&b_all, &b_events),
    ] {
        let received = receiver.event_ids();
        assert_eq!(
            received.len(),
            events.len(),
            "one POST per event and endpoint"
        );
        assert_eq!(received.into_iter().collect::<BTreeSet<_>>(), ids(events));
    }
    let rows = db
        .count("SELECT count(*) FROM webhook_events WHERE dispatch_state = 'DELIVERED'")
        .await;
    assert_eq!(rows, expected as i64, "one row per event and endpoint");
}

/// Registered without `eventTypes`, an endpoint receives every type its registrant may:
/// the answer and the listing name them, circuit events for an operator's only.
#[tokio::test]
async fn an_endpoint_registered_without_event_types_lists_every_type_it_receives() {
    let app = open_app().await;
    let db = &app.db;
    let (_, operator) = key(db, "ops", Scope::Operator).await;
    let (_, client) = key(db, "client", Scope::Client).await;
    let client_types = json!([
        "notification.sent",
        "notification.failed",
        "notification.dead_lettered",
        "notification.suppressed",
        "notification.expired",
        "campaign.done"
    ]);
    let mut operator_types = client_types.clone();
    if let Some(types) = operator_types.as_array_mut() {
        types.extend([json!("circuit.opened"), json!("circuit.closed")]);
    }
    for (key, expected) in [(&client, &client_types), (&operator, &operator_types)] {
        let body = json!({"url": "http://127.0.0.1:9/hook"});
        let (status, created) =
            call(&app, Method::POST, "/webhook-endpoints", key, Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        assert_eq!(&created["eventTypes"], expected, "{created}");
        let (_, listed) = call(&app, Method::GET, "/webhook-endpoints", key, None).await;
        let found = listed["items"]
            .as_array()
            .and_then(|items| items.iter().find(|e| e["id"] == created["id"]))
            .cloned()
            .unwrap_or_default();
        assert_eq!(&found["eventTypes"], expected, "{listed}");
    }
    // What is stored is still "every type": the column is NULL for both.
    assert_eq!(
        db.count("SELECT count(*) FROM webhook_endpoints WHERE event_types IS NULL")
            .await,
        2
    );
}

#[tokio::test]
async fn circuit_events_reach_operator_endpoints_only() {
    let app = open_app().await;
    let db = &app.db;
    let (_, operator) = key(db, "ops", Scope::Operator).await;
    let (_, client) = key(db, "client", Scope::Client).await;
    let ops = Receiver::start(&[], Reply::Status(200)).await;
    let ops_failures = Receiver::start(&[], Reply::Status(200)).await;
    let clients = Receiver::start(&[], Reply::Status(200)).await;
    register(
        &app,
        &operator,
        json!({"url": ops.url, "eventTypes": ["circuit.opened", "circuit.closed"]}),
    )
    .await;
    register(
        &app,
        &operator,
        json!({"url": ops_failures.url, "eventTypes": ["notification.failed"]}),
    )
    .await;
    register(&app, &client, json!({"url": clients.url})).await;
    // What the circuit breaker writes when a channel's circuit opens.
    let circuit: Uuid = db
        .pool
        .get()
        .await
        .expect("connection")
        .query_one(
            "INSERT INTO webhook_events (id, type, body, occurred_at)
             VALUES (gen_random_uuid(), 'circuit.opened',
                     '{\"channel\": \"EMAIL\", \"circuit\": \"OPEN\"}', now())
             RETURNING id",
            &[],
        )
        .await
        .expect("circuit event")
        .get(0);

    let drainer = worker::drainer(&db.pool, &closed_port_url().await.0, 10)
        .destinations(OPEN)
        .build();
    let outcome = worker::drain(&drainer).await;
    assert_eq!((outcome.claimed, outcome.delivered), (1, 1), "{outcome:?}");
    let received = ops.received();
    assert_eq!(received.len(), 1);
    let body = received[0].json();
    assert_eq!(body["eventId"], circuit.to_string());
    assert_eq!(
        (&body["type"], &body["channel"]),
        (&json!("circuit.opened"), &json!("EMAIL"))
    );
    assert!(ops_failures.received().is_empty() && clients.received().is_empty());
}

/// `campaign.done` belongs to the client that created the campaign: its endpoints get it,
/// another client's and the operators' do not.
#[tokio::test]
async fn a_campaigns_done_event_reaches_the_endpoints_of_the_client_that_created_it() {
    let app = open_app().await;
    let db = &app.db;
    let (_, operator) = key(db, "ops", Scope::Operator).await;
    let (creator, client) = key(db, "client", Scope::Client).await;
    let (_, other) = key(db, "other", Scope::Client).await;
    let ops = Receiver::start(&[], Reply::Status(200)).await;
    let creators = Receiver::start(&[], Reply::Status(200)).await;
    let others = Receiver::start(&[], Reply::Status(200)).await;
    register(&app, &operator, json!({"url": ops.url})).await;
    register(&app, &client, json!({"url": creators.url})).await;
    register(&app, &other, json!({"url": others.url})).await;
    let campaign = Uuid::new_v4();
    execute(
        &db.pool,
        "INSERT INTO templates (template_id, channel, latest_version) VALUES ('news', 'EMAIL', 1)",
        &[],
    )
    .await;
    execute(
        &db.pool,
        "INSERT INTO template_versions (template_id, version, default_locale, locales, sample_data)
         VALUES ('news', 1, 'en', '{\"en\": {\"subject\": \"News\", \"text\": \"News\"}}', '{}')",
        &[],
    )
    .await;
    execute(
        &db.pool,
        "INSERT INTO campaigns (id, owner, idempotency_key, fingerprint, name, channel,
                                template_id, template_version, data, category, priority,
                                recipient_ids, audience_size, expanded, status, finished_at)
         VALUES ($1, $2, 'spring', repeat('0', 64), 'spring', 'EMAIL', 'news', 1, '{}',
                 'general', 2, ARRAY['a'], 1, 1, 'DONE', now())",
        &[&campaign, &creator],
    )
    .await;
    // What finishing the campaign writes (campaigns/finish.sql).
    execute(
        &db.pool,
        "INSERT INTO webhook_events (id, type, body, occurred_at)
         VALUES (gen_random_uuid(), 'campaign.done',
                 jsonb_build_object('campaignId', $1::uuid, 'status', 'DONE'), now())",
        &[&campaign],
    )
    .await;

    let drainer = worker::drainer(&db.pool, &closed_port_url().await.0, 10)
        .destinations(OPEN)
        .build();
    let outcome = worker::drain(&drainer).await;
    assert_eq!((outcome.claimed, outcome.delivered), (1, 1), "{outcome:?}");
    let received = creators.received();
    assert_eq!(received.len(), 1);
    let body = received[0].json();
    assert_eq!(
        (&body["type"], &body["campaignId"]),
        (&json!("campaign.done"), &json!(campaign))
    );
    assert!(ops.received().is_empty() && others.received().is_empty());
}

#[tokio::test]
async fn a_notifications_events_show_each_endpoints_delivery() {
    let app = open_app().await;
    let db = &app.db;
    let (owner, client) = key(db, "client", Scope::Client).await;
    let accepting = Receiver::start(&[], Reply::Status(200)).await;
    let refusing = Receiver::start(&[], Reply::Status(500)).await;
    let (accepted_by, _) = register(&app, &client, json!({"url": accepting.url})).await;
    let (refused_by, _) = register(&app, &client, json!({"url": refusing.url})).await;
    let notification = factory::create(&db.pool, factory::Spec::default()).await;
    execute(
        &db.pool,
        "UPDATE notifications SET owner_key_id = $2 WHERE id = $1",
        &[&notification.id, &owner],
    )
    .await;
    let event = factory::insert_event(&db.pool, notification.id, "SENT", 1, Utc::now()).await;

    let drainer = worker::drainer(&db.pool, &closed_port_url().await.0, 10)
        .destinations(OPEN)
        .build();
    let mut claimed = 0;
    for _ in 0..3 {
        claimed += worker::drain(&drainer).await.claimed;
    }
    assert_eq!(claimed, 2, "one dispatch per endpoint");

    let (status, reply) = call(
        &app,
        Method::GET,
        &format!("/notifications/{}/webhook-events", notification.id),
        &client,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let items = reply["items"].as_array().expect("items");
    assert_eq!(items.len(), 2, "a row per endpoint: {reply}");
    let by_endpoint: HashMap<String, &Value> = items
        .iter()
        .map(|item| {
            (
                item["endpointId"].as_str().expect("endpointId").to_string(),
                item,
            )
        })
        .collect();
    let accepted = by_endpoint[&accepted_by.to_string()];
    let refused = by_endpoint[&refused_by.to_string()];
    for item in [accepted, refused] {
        assert_eq!(item["eventId"], event.to_string(), "{item}");
        assert_eq!(item["type"], "notification.sent", "{item}");
        assert_eq!(
            item["status"], "SENT",
            "a copy shows the transition: {item}"
        );
    }
    assert_eq!(accepted["dispatchState"], "DELIVERED", "{accepted}");
    assert_eq!(refused["dispatchState"], "PENDING", "{refused}");
    assert_eq!(refused["dispatchAttempts"], 1, "{refused}");
    // A row still waiting says when it is tried next; a delivered one has no next try.
    assert!(refused["nextDispatchAt"].is_string(), "{refused}");
    assert!(accepted["nextDispatchAt"].is_null(), "{accepted}");
    assert!(
        refused["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("500")),
        "{refused}"
    );
}
