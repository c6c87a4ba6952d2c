//! Erasure (`DELETE /recipients/{id}`): the person's profile and preferences go, their
//! notifications lose address and payload, and no column of any table keeps an address;
//! a suppressed address stays suppressed by its keyed hash.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;
use notify_shared::auth::Scope;
use notify_shared::provider::{Provider, ProviderOutcome};
use notify_tests::doubles::Scripted;
use notify_tests::{TestApp, worker};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{call, key, now_iso};

const PERSON: &str = "person-1";
const EMAIL: &str = "Ada.Lovelace@Example.com";
const PHONE: &str = "+15557654321";
const TOKENS: [&str; 2] = ["push-token-alpha", "push-token-beta"];

/// What must not survive erasure, as `ILIKE` fragments: the email's local part, the phone
/// digits and each push token.
const FRAGMENTS: [&str; 4] = ["ada.lovelace", "15557654321", TOKENS[0], TOKENS[1]];

/// Every `table.column (fragment)` in schema public whose text holds one of [`FRAGMENTS`]:
/// every text, varchar, json, jsonb and array column of every table, read in full.
async fn columns_holding_fragments(pool: &Pool) -> Vec<String> {
    let db = pool.get().await.expect("connection");
    let columns = db
        .query(
            "SELECT c.table_name::text, c.column_name::text FROM information_schema.columns c
             JOIN information_schema.tables t
               ON t.table_schema = c.table_schema AND t.table_name = c.table_name
             WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'
               AND c.data_type IN ('text', 'character varying', 'json', 'jsonb', 'ARRAY')
             ORDER BY 1, 2",
            &[],
        )
        .await
        .expect("columns");
    assert!(
        columns.len() > 20,
        "the scan reads the schema: {}",
        columns.len()
    );
    let mut hits = Vec::new();
    for row in columns {
        let (table, column): (String, String) = (row.get(0), row.get(1));
        for fragment in FRAGMENTS {
            let sql = format!(
                "SELECT count(*) FROM \"{table}\" WHERE \"{column}\"::text ILIKE '%' || $1 || '%'"
            );
            let count: i64 = db.query_one(&sql, &[&fragment]).await.expect(&sql).get(0);
            if count > 0 {
                hits.push(format!("{table}.{column} ({fragment})"));
            }
        }
    }
    hits
}

/// `POST /notifications` without a key; must answer 201.
async fn create(app: &TestApp, body: Value) -> Value {
    let (status, n) = app.create(&body).await;
    assert_eq!(status, StatusCode::CREATED, "{body}: {n}");
    n
}

/// A create body due now; `target` is (`"recipientId"`, id) or (`"recipient"`, address).
fn due_now(key: &str, channel: &str, target: (&str, &str), payload: Value) -> Value {
    json!({target.0: target.1, "channel": channel, "payload": payload, "priority": "HIGH",
           "idempotencyKey": key, "sendAt": now_iso()})
}

/// `PUT /recipients/{PERSON}` with [`EMAIL`]; must answer 200.
async fn put_person(app: &TestApp) {
    let put = call(
        app,
        Method::PUT,
        &format!("/recipients/{PERSON}"),
        None,
        Some(&json!({"email": EMAIL})),
    )
    .await;
    assert_eq!(put.status, StatusCode::OK, "{:?}", put.body);
}

/// `DELETE /recipients/{PERSON}`; must answer 204.
async fn erase_person(app: &TestApp) {
    let erased = call(
        app,
        Method::DELETE,
        &format!("/recipients/{PERSON}"),
        None,
        None,
    )
    .await;
    assert_eq!(erased.status, StatusCode::NO_CONTENT);
}

/// Sweeps until idle delivering through `provider`, optionally rate limited.
async fn sweep(app: &TestApp, provider: Arc<dyn Provider>, limited: bool) {
    let mut builder = worker::sweeper(app.pool(), provider);
    if limited {
        builder = builder.rate_limit(100, Duration::from_secs(3600));
    }
    worker::sweep_until_idle(&builder.build()).await;
}

#[tokio::test]
async fn erasure_leaves_no_address_in_any_column_and_keeps_the_suppression() {
    let app = TestApp::spawn().await;
    let profile = json!({"email": EMAIL, "phone": PHONE, "pushTokens": TOKENS});
    let path = format!("/recipients/{PERSON}");
    let reply = call(&app, Method::PUT, &path, None, Some(&profile)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);

    // Through the profile on every channel, and to the email by address in other case;
    // payloads quote the addresses, as real ones do.
    let person = ("recipientId", PERSON);
    let mut ids: Vec<Value> = Vec::new();
    for (key, channel, target, payload) in [
        (
            "e-1",
            "EMAIL",
            person,
            json!({"subject": "hi", "text": EMAIL}),
        ),
        (
            "s-1",
            "SMS",
            person,
            json!({"text": format!("code for {PHONE}")}),
        ),
        ("p-1", "PUSH", person, json!({"title": TOKENS[0]})),
        (
            "e-2",
            "EMAIL",
            ("recipient", "ADA.LOVELACE@EXAMPLE.COM"),
            json!({"subject": EMAIL}),
        ),
    ] {
        ids.push(create(&app, due_now(key, channel, target, payload)).await["id"].clone());
    }
    // Delivered by the simulated provider (it keeps a copy), rate limited (reservations).
    let simulated = Arc::new(worker::simulated(app.pool().clone()));
    sweep(&app, simulated, true).await;
    for id in &ids {
        assert_eq!(
            app.get(id.as_str().unwrap_or_default()).await.1["status"],
            "SENT"
        );
    }

    // Two failures whose provider error quotes the address.
    for (key, channel, target, error) in [
        ("s-2", "SMS", person, format!("{PHONE} is not reachable")),
        (
            "p-2",
            "PUSH",
            ("recipient", TOKENS[1]),
            format!("endpoint {} disabled", TOKENS[1]),
        ),
    ] {
        let payload = json!({"text": target.1});
        ids.push(create(&app, due_now(key, channel, target, payload)).await["id"].clone());
        let failing = Arc::new(Scripted::always(ProviderOutcome::Permanent(error)));
        sweep(&app, failing, false).await;
        let failed = app
            .get(ids.last().and_then(Value::as_str).unwrap_or_default())
            .await
            .1;
        assert_eq!(failed["status"], "FAILED", "{failed}");
    }

    // One still waiting, a suppression of the email, preferences.
    let mut later = due_now("e-3", "EMAIL", person, json!({"subject": EMAIL}));
    later.as_object_mut().expect("object").remove("sendAt");
    later["delaySeconds"] = json!(3600);
    let pending = create(&app, later).await["id"].clone();
    ids.push(pending.clone());
    let suppression = json!({"channel": "EMAIL", "address": EMAIL});
    let reply = call(
        &app,
        Method::POST,
        "/suppressions",
        None,
        Some(&suppression),
    )
    .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    let preferences = json!({"categories": {"news": {"EMAIL": false}}});
    let prefs_path = format!("{path}/preferences");
    let reply = call(&app, Method::PATCH, &prefs_path, None, Some(&preferences)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);

    // The rate limit holds their reservations, under a hash of each address.
    let reservations = "SELECT count(*) FROM rate_limit_reservations";
    assert!(app.db.count(reservations).await > 0);
    // The scan can fail: before erasure it finds the addresses everywhere they were put.
    let before = columns_holding_fragments(app.pool()).await;
    for expected in [
        "recipients.email",
        "recipients.phone",
        "recipients.push_tokens",
        "notifications.recipient",
        "notifications.payload",
        "notifications.last_error",
        "delivery_attempts.error",
        "simulated_deliveries.recipient",
        "suppressions.address",
    ] {
        assert!(
            before
                .iter()
                .any(|h| h.starts_with(&format!("{expected} "))),
            "{expected} not in {before:?}"
        );
    }

    let reply = call(&app, Method::DELETE, &path, None, None).await;
    assert_eq!(reply.status, StatusCode::NO_CONTENT, "{}", reply.body);
    assert_eq!(
        call(&app, Method::GET, &path, None, None).await.status,
        StatusCode::NOT_FOUND
    );
    let reply = call(&app, Method::GET, &prefs_path, None, None).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.db
            .count("SELECT count(*) FROM recipient_preferences")
            .await,
        0
    );

    let (_, waiting) = app.get(pending.as_str().unwrap_or_default()).await;
    assert_eq!(waiting["status"], "CANCELLED", "{waiting}");
    assert!(waiting["cancelledAt"].is_string(), "{waiting}");
    let ids: Vec<Uuid> = ids
        .iter()
        .filter_map(|id| id.as_str()?.parse().ok())
        .collect();
    let redacted: i64 = app
        .db
        .scalar(
            "SELECT count(*) FROM notifications WHERE id = ANY($1)
               AND recipient = '[erased]' AND payload = '{}'::jsonb AND last_error IS NULL",
            &[&ids],
        )
        .await;
    assert_eq!(redacted, ids.len() as i64);

    assert_eq!(app.db.count(reservations).await, 0, "their reservations go");
    let after = columns_holding_fragments(app.pool()).await;
    assert!(
        after.is_empty(),
        "addresses left after erasure in: {after:?}"
    );

    // The suppression survives as a keyed hash: the address is still refused.
    let again = due_now(
        "e-4",
        "EMAIL",
        ("recipient", "ada.lovelace@example.com"),
        json!({}),
    );
    let n = create(&app, again).await;
    assert_eq!(
        (&n["status"], &n["suppressedReason"]),
        (&json!("SUPPRESSED"), &json!("SUPPRESSED_ADDRESS"))
    );
    let listing = "/suppressions?channel=EMAIL&address=ada.lovelace@example.com";
    let (status, page) = call(&app, Method::GET, listing, None, None).await.pair();
    assert_eq!(status, StatusCode::OK, "{page}");
    let items = page["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{page}");
    assert_eq!(
        (&items[0]["address"], &items[0]["channel"]),
        (&Value::Null, &json!("EMAIL"))
    );
}

#[tokio::test]
async fn erasing_one_keys_recipient_leaves_another_keys_namesake_alone() {
    let app = TestApp::spawn_with_keys().await;
    let a = key(&app, "client-a", Scope::Client).await;
    let b = key(&app, "client-b", Scope::Client).await;
    let profile = json!({"email": "same@example.com"});
    let preferences = json!({"categories": {"news": {"EMAIL": false}}});
    let mut created = Vec::new();
    for key in [&a, &b] {
        let reply = call(
            &app,
            Method::PUT,
            "/recipients/x",
            Some(key),
            Some(&profile),
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        let reply = call(
            &app,
            Method::PATCH,
            "/recipients/x/preferences",
            Some(key),
            Some(&preferences),
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        for (i, target) in [("recipientId", "x"), ("recipient", "same@example.com")]
            .into_iter()
            .enumerate()
        {
            let mut body = due_now(
                &format!("later-{i}"),
                "EMAIL",
                target,
                json!({"subject": "s"}),
            );
            body.as_object_mut().expect("object").remove("sendAt");
            body["delaySeconds"] = json!(3600);
            let (status, n) = call(&app, Method::POST, "/notifications", Some(key), Some(&body))
                .await
                .pair();
            assert_eq!(status, StatusCode::CREATED, "{n}");
            created.push((key.clone(), n));
        }
    }

    let reply = call(&app, Method::DELETE, "/recipients/x", Some(&a), None).await;
    assert_eq!(reply.status, StatusCode::NO_CONTENT, "{}", reply.body);
    assert_eq!(
        call(&app, Method::GET, "/recipients/x", Some(&a), None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let (status, kept) = call(&app, Method::GET, "/recipients/x", Some(&b), None)
        .await
        .pair();
    assert_eq!(
        (status, &kept["email"]),
        (StatusCode::OK, &json!("same@example.com"))
    );
    let (status, kept) = call(
        &app,
        Method::GET,
        "/recipients/x/preferences",
        Some(&b),
        None,
    )
    .await
    .pair();
    assert_eq!(
        (status, &kept["categories"]["news"]["EMAIL"]),
        (StatusCode::OK, &json!(false))
    );

    for (key, before) in created {
        let id: Uuid = before["id"]
            .as_str()
            .and_then(|id| id.parse().ok())
            .expect("id");
        let path = format!("/notifications/{id}");
        let (_, now) = call(&app, Method::GET, &path, Some(&key), None)
            .await
            .pair();
        let payload: Value = app
            .db
            .scalar("SELECT payload FROM notifications WHERE id = $1", &[&id])
            .await;
        if key == a {
            assert_eq!(
                (&now["status"], &now["recipient"]),
                (&json!("CANCELLED"), &json!("[erased]"))
            );
            assert_eq!(payload, json!({}));
        } else {
            assert_eq!(now, before, "key B's notification is untouched");
            assert_eq!(payload, json!({"subject": "s"}));
        }
    }
}

/// A person erased while their notification is in flight: the result, recorded after the
/// erasure, brings no address back (no error text quoting it, no clear-text suppression).
#[tokio::test]
async fn a_result_recorded_after_erasure_keeps_no_address() {
    let app = TestApp::spawn().await;
    put_person(&app).await;
    let body = due_now(
        "in-flight",
        "EMAIL",
        ("recipientId", PERSON),
        json!({"subject": "s", "text": "t"}),
    );
    assert_eq!(create(&app, body).await["status"], "PENDING");
    let conn = app.pool().get().await.expect("connection");
    let claimed = worker::claim(&conn, "test-worker", 10, worker::LEASE)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1);

    erase_person(&app).await;
    let failure = notify_shared::queue::Disposition::Failed {
        error: format!("550 mailbox {EMAIL} does not exist"),
        suppress: true,
    };
    let recorded = worker::record(&conn, &[(&claimed[0], failure)])
        .await
        .expect("record");
    assert_eq!(recorded.recorded, 1);
    assert_eq!(
        columns_holding_fragments(app.pool()).await,
        Vec::<String>::new()
    );
    // FAILED, but with no one left to send it to: neither redrive takes it.
    let id = claimed[0].id;
    let (status, body) = app.retry(id).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["message"],
        format!("Notification {id} belonged to an erased recipient; it cannot be retried")
    );
    let (status, body) = app.retry_bulk(&json!({"status": "FAILED"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body, json!({"retried": 0, "remaining": 0}));
    assert_eq!(app.get(id).await.1["status"], "FAILED");
}

/// Four notifications of one person are claimed, then the person is erased: whichever way
/// each claim ends (a retry recorded, handed back untried, the re-check at send, an expired
/// lease), it ends CANCELLED, never PENDING again, and no provider call is made for it.
#[tokio::test]
async fn a_claim_whose_person_is_erased_meanwhile_is_cancelled_not_sent_again() {
    let app = TestApp::spawn().await;
    put_person(&app).await;
    for key in ["retry", "release", "recheck", "expire"] {
        let body = due_now(
            key,
            "EMAIL",
            ("recipientId", PERSON),
            json!({"subject": "s", "text": "t"}),
        );
        create(&app, body).await;
    }
    let conn = app.pool().get().await.expect("connection");
    let claimed = worker::claim(&conn, "test-worker", 10, worker::LEASE)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 4);
    erase_person(&app).await;
    let mut by_key = std::collections::HashMap::new();
    for claim in &claimed {
        let key: String = app
            .db
            .scalar(
                "SELECT idempotency_key FROM notifications WHERE id = $1",
                &[&claim.id],
            )
            .await;
        by_key.insert(key, claim.clone());
    }
    let keyed = |key: &str| by_key[key].clone();

    let retry = keyed("retry");
    let failure = notify_shared::queue::Disposition::Retry {
        error: "try again".into(),
        delay: Duration::ZERO,
    };
    worker::record(&conn, &[(&retry, failure)])
        .await
        .expect("record");

    let release = keyed("release");
    notify_shared::queue::release(&conn, &[(&release, None)])
        .await
        .expect("release");

    let recheck = keyed("recheck");
    let stopped = notify_shared::queue::recheck(&conn, &[&recheck], &["no-hash".to_string()])
        .await
        .expect("recheck");
    assert_eq!(
        stopped,
        [(recheck.id, notify_shared::queue::Stopped::Cancelled)]
    );

    let expire = keyed("expire");
    app.db
        .execute(
            "UPDATE notifications SET lease_expires_at = now() - interval '1 second'
             WHERE id = $1",
            &[&expire.id],
        )
        .await;
    notify_shared::queue::recover_expired(&conn, worker::LEASE, 10)
        .await
        .expect("recover");

    for claim in [&retry, &release, &recheck, &expire] {
        let (status, body) = app.get(claim.id).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["status"], "CANCELLED", "{body}");
        assert!(body["cancelledAt"].is_string(), "{body}");
    }
    // Nothing is left to claim, and nothing reached the provider.
    assert!(
        worker::claim(&conn, "test-worker", 10, worker::LEASE)
            .await
            .expect("claim")
            .is_empty()
    );
    assert_eq!(
        app.db
            .count("SELECT count(*) FROM simulated_deliveries")
            .await,
        0
    );
}

/// A request's fingerprint is a SHA-256 over its address and payload, against which a guess
/// could be tested: erasure keys it (HMAC under the service's secret). A replay of the very
/// request is still recognised, alone and in a batch; a different one under the key is
/// still a conflict.
#[tokio::test]
async fn erasure_keys_the_fingerprint_and_a_replay_is_still_recognised() {
    let app = TestApp::spawn().await;
    put_person(&app).await;
    let content = json!({"subject": "s", "text": "t"});
    let requests = [
        due_now("by-address", "EMAIL", ("recipient", EMAIL), content.clone()),
        due_now(
            "by-profile",
            "EMAIL",
            ("recipientId", PERSON),
            content.clone(),
        ),
    ];
    for request in &requests {
        create(&app, request.clone()).await;
    }
    let fingerprints = || async {
        let found: Vec<String> = app
            .db
            .scalar(
                "SELECT array_agg(fingerprint ORDER BY idempotency_key) FROM notifications",
                &[],
            )
            .await;
        found
    };
    let before = fingerprints().await;
    erase_person(&app).await;
    let after = fingerprints().await;
    assert_eq!(after.len(), 2);
    for (old, new) in before.iter().zip(&after) {
        assert_ne!(old, new, "the fingerprint was left as it was");
        assert_eq!(new.len(), 64);
    }

    for request in &requests {
        let (status, body) = app.create(request).await;
        assert_eq!(status, StatusCode::OK, "a replay after erasure: {body}");
        let mut different = request.clone();
        different["priority"] = json!("LOW");
        let (status, body) = app.create(&different).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
    }
    let (status, body) = app.create_batch(&json!({"notifications": requests})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let statuses: Vec<i64> = body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["status"].as_i64().expect("status"))
        .collect();
    assert_eq!(statuses, [200, 200], "{body}");
}

/// A person erased while the simulated provider is still taking their message: the copy it
/// writes after the erasure keeps no address, once the result is recorded.
#[tokio::test]
async fn a_copy_the_simulated_provider_writes_after_the_erasure_keeps_no_address() {
    let app = TestApp::spawn().await;
    put_person(&app).await;
    let body = due_now(
        "slow-provider",
        "EMAIL",
        ("recipientId", PERSON),
        json!({"subject": "s", "text": "t"}),
    );
    create(&app, body).await;
    let conn = app.pool().get().await.expect("connection");
    let claimed = worker::claim(&conn, "test-worker", 10, worker::LEASE)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1);
    let claim = &claimed[0];

    erase_person(&app).await;
    // The call had started with the address in hand; its copy lands after the erasure.
    let provider = worker::simulated(app.pool().clone());
    let answers = provider
        .send(
            &[notify_shared::provider::Delivery {
                key: claim.id,
                channel: claim.channel,
                class: claim.class,
                recipient: &claim.recipient,
                payload: &claim.payload,
                rendered: false,
                unsubscribe_url: None,
            }],
            &notify_tests::doubles::open_gate(),
        )
        .await;
    assert_eq!(answers.len(), 1);
    assert!(
        !columns_holding_fragments(app.pool()).await.is_empty(),
        "the provider's copy holds the address until the result is recorded"
    );
    let sent = notify_shared::queue::Disposition::Sent { message_id: None };
    let recorded = worker::record(&conn, &[(claim, sent)])
        .await
        .expect("record");
    assert_eq!(recorded.recorded, 1);
    assert_eq!(
        columns_holding_fragments(app.pool()).await,
        Vec::<String>::new()
    );
}
