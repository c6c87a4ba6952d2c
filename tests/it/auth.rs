//! API keys: who may call what, and what a client key can see.

use std::time::Duration;

use notify_shared::auth::{self, Authenticator, Caller, Refusal, Scope};
use notify_tests::{Reply, TestApp, TestDb, factory};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

struct Keys {
    client: String,
    other_client: String,
    operator: String,
}

async fn keys(db: &TestDb) -> Keys {
    let connection = db.pool.get().await.expect("db");
    Keys {
        client: auth::create_key(&connection, "client-a", Scope::Client)
            .await
            .expect("key")
            .1,
        other_client: auth::create_key(&connection, "client-b", Scope::Client)
            .await
            .expect("key")
            .1,
        operator: auth::create_key(&connection, "ops", Scope::Operator)
            .await
            .expect("key")
            .1,
    }
}

fn create_body(key: &str) -> Value {
    json!({"recipient": "ada@example.com", "channel": "EMAIL", "payload": {}, "priority": "LOW",
           "idempotencyKey": key, "delaySeconds": 60})
}

/// `method path` with `key` as the bearer token (none without) and `body` as JSON.
async fn call(
    app: &TestApp,
    method: Method,
    path: &str,
    key: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value, reqwest::header::HeaderMap) {
    let mut request = app.request(method, path);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let Reply {
        status,
        headers,
        body,
    } = app.send(request).await;
    (status, body, headers)
}

#[tokio::test]
async fn every_route_answers_by_key_and_scope_and_health_stays_open() {
    let app = TestApp::spawn_with_keys().await;
    let db = &app.db;
    let keys = keys(db).await;
    let dead = factory::create(&db.pool, factory::Spec::default()).await;
    factory::dead_letter(&db.pool, dead.id, "boom").await;
    let wrong = format!("{}x", &keys.operator[..keys.operator.len() - 1]);

    // (method, path, body, needs operator)
    let routes: Vec<(Method, String, Option<Value>, bool)> = vec![
        (
            Method::POST,
            "/notifications".into(),
            Some(create_body("k1")),
            false,
        ),
        (
            Method::POST,
            "/notifications/batch".into(),
            Some(json!({"notifications": [create_body("k2")]})),
            false,
        ),
        (Method::GET, "/notifications".into(), None, false),
        (
            Method::GET,
            format!("/notifications/{}", dead.id),
            None,
            false,
        ),
        (
            Method::DELETE,
            format!("/notifications/{}", uuid::Uuid::new_v4()),
            None,
            false,
        ),
        (
            Method::POST,
            format!("/notifications/{}/retry", dead.id),
            None,
            true,
        ),
        (
            Method::POST,
            "/notifications/retry".into(),
            Some(json!({"limit": 1})),
            true,
        ),
        (Method::GET, "/metrics".into(), None, true),
        (Method::GET, "/digest".into(), None, true),
        (
            Method::GET,
            format!("/notifications/{}/webhook-events", dead.id),
            None,
            false,
        ),
    ];
    for (method, path, body, operator_only) in &routes {
        for key in [None, Some(wrong.as_str()), Some("not-even-a-key")] {
            let (status, error, headers) =
                call(&app, method.clone(), path, key, body.clone()).await;
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "{method} {path} with {key:?}"
            );
            assert_eq!(error["statusCode"], 401);
            assert_eq!(headers["www-authenticate"], "Bearer");
        }
        let (status, error, _) =
            call(&app, method.clone(), path, Some(&keys.client), body.clone()).await;
        if *operator_only {
            assert_eq!(
                status,
                StatusCode::FORBIDDEN,
                "client key on {method} {path}"
            );
            assert_eq!(error["statusCode"], 403);
        } else {
            assert!(
                status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN,
                "client key on {method} {path}: {status}"
            );
        }
    }
    // The operator may do everything (the DELETE of an unknown id is a plain 404).
    for (method, path, body, _) in &routes {
        let body = body.clone().map(|mut b| {
            if b.get("idempotencyKey").is_some() {
                b["idempotencyKey"] = json!("operator-key");
            }
            b
        });
        let (status, _, _) = call(&app, method.clone(), path, Some(&keys.operator), body).await;
        assert!(
            status.is_success() || status == StatusCode::NOT_FOUND,
            "operator on {method} {path}: {status}"
        );
    }
    for open in ["/health", "/api/docs", "/api/docs-json", "/console"] {
        let (status, _, _) = call(&app, Method::GET, open, None, None).await;
        assert_eq!(status, StatusCode::OK, "{open} must stay open");
    }
}

#[tokio::test]
async fn a_client_key_sees_only_its_own_notifications() {
    let app = TestApp::spawn_with_keys().await;
    let db = &app.db;
    let keys = keys(db).await;
    let (status, mine, _) = call(
        &app,
        Method::POST,
        "/notifications",
        Some(&keys.client),
        Some(create_body("mine")),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let path = format!("/notifications/{}", mine["id"].as_str().expect("id"));

    let (status, _, _) = call(&app, Method::GET, &path, Some(&keys.other_client), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = call(&app, Method::DELETE, &path, Some(&keys.other_client), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, list, _) = call(
        &app,
        Method::GET,
        "/notifications",
        Some(&keys.other_client),
        None,
    )
    .await;
    assert_eq!(list["items"], json!([]));
    // Idempotency keys belong to the key that used them: another client using the same
    // key creates its own notification, learning nothing of the first.
    let (status, theirs, _) = call(
        &app,
        Method::POST,
        "/notifications",
        Some(&keys.other_client),
        Some(create_body("mine")),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_ne!(theirs["id"], mine["id"]);

    let (status, fetched, _) = call(&app, Method::GET, &path, Some(&keys.client), None).await;
    assert_eq!(
        (status, fetched["id"].clone()),
        (StatusCode::OK, mine["id"].clone())
    );
    let (_, list, _) = call(
        &app,
        Method::GET,
        "/notifications",
        Some(&keys.client),
        None,
    )
    .await;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1));
    let (status, _, _) = call(&app, Method::GET, &path, Some(&keys.operator), None).await;
    assert_eq!(status, StatusCode::OK, "operators see everything");
}

#[tokio::test]
async fn keys_are_stored_only_as_hashes_and_revoked_keys_stop_working() {
    let db = TestDb::new().await;
    let connection = db.pool.get().await.expect("db");
    let (id, key) = auth::create_key(&connection, "short-lived", Scope::Operator)
        .await
        .expect("key");
    // nq_<32 hex id>_<secret>; the secret is URL-safe base64 and may itself contain '_'.
    let secret = key.splitn(3, '_').nth(2).expect("secret part");
    assert_eq!(secret.len(), 43, "{key}");
    let stored: String = connection
        .query_one("SELECT secret_hash FROM api_keys WHERE id = $1", &[&id])
        .await
        .expect("row")
        .get(0);
    assert!(!stored.contains(secret) && !key.contains(&stored));
    assert_eq!(stored.len(), 64);

    assert!(auth::revoke_key(&connection, id).await.expect("revoke"));
    let authenticator = Authenticator::with_keys(db.pool.clone());
    let header = format!("Bearer {key}");
    assert!(
        authenticator
            .authorize(Some(&header), Scope::Client)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn without_keys_the_api_refuses_to_start_unless_anonymous_access_is_allowed() {
    let db = TestDb::new().await;
    let Err(refused) = auth::authenticator_for(&db.pool, false).await else {
        panic!("started without keys although anonymous access was not allowed");
    };
    assert!(refused.to_string().contains("ALLOW_ANONYMOUS"), "{refused}");
    let open = auth::authenticator_for(&db.pool, true)
        .await
        .expect("allowed");
    assert!(open.is_open());
    assert_eq!(
        open.authorize(None, Scope::Operator).await,
        Ok(Caller::ANONYMOUS)
    );
    let connection = db.pool.get().await.expect("db");
    let (id, _) = auth::create_key(&connection, "first", Scope::Client)
        .await
        .expect("key");
    assert!(
        !auth::authenticator_for(&db.pool, true)
            .await
            .expect("keys")
            .is_open(),
        "keys, once they exist, are required from the start"
    );

    // The process that started open closes within a second of the first key.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        open.authorize(None, Scope::Operator).await,
        Err(Refusal::Unauthenticated),
        "a key created while the service runs is required within a second"
    );
    assert!(!open.is_open());
    // Revoking every key does not open it again.
    assert!(auth::revoke_key(&connection, id).await.expect("revoke"));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        open.authorize(None, Scope::Operator).await,
        Err(Refusal::Unauthenticated)
    );
    // Nor does a restart after every key was revoked, even where anonymous access is
    // allowed: the database once held a key, so keys stay required.
    for allow_anonymous in [true, false] {
        let restarted = auth::authenticator_for(&db.pool, allow_anonymous)
            .await
            .expect("a revoked key still makes key mode");
        assert!(!restarted.is_open(), "allow_anonymous {allow_anonymous}");
        assert_eq!(
            restarted.authorize(None, Scope::Operator).await,
            Err(Refusal::Unauthenticated),
            "allow_anonymous {allow_anonymous}"
        );
    }
}

/// A process that started open closes even when the only key it could have seen was
/// created and revoked between two of its looks at the keys.
#[tokio::test]
async fn a_key_created_and_revoked_between_two_looks_still_closes_an_open_process() {
    let db = TestDb::new().await;
    let open = auth::authenticator_for(&db.pool, true)
        .await
        .expect("allowed");
    // Its first look: no key.
    assert_eq!(
        open.authorize(None, Scope::Operator).await,
        Ok(Caller::ANONYMOUS)
    );
    let connection = db.pool.get().await.expect("db");
    let (id, _) = auth::create_key(&connection, "short-lived", Scope::Operator)
        .await
        .expect("key");
    assert!(auth::revoke_key(&connection, id).await.expect("revoke"));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        open.authorize(None, Scope::Operator).await,
        Err(Refusal::Unauthenticated),
        "no active key, but one was created: keys are required"
    );
    assert!(!open.is_open());
}

/// A notification made with a key does not lock the key's row: with a foreign key, every
/// open intake transaction of a client held a share lock on that one row, and their
/// concurrent locks became a new multixact for nearly every insert (V23).
#[tokio::test]
async fn a_notification_made_with_a_key_leaves_the_keys_row_unlocked() {
    use notify_shared::notification::Channel;
    use notify_shared::queue::{self, Due, InsertOutcome, NewNotification};

    let db = TestDb::new().await;
    let setup = db.pool.get().await.expect("db");
    let (key_id, _) = auth::create_key(&setup, "busy-client", Scope::Client)
        .await
        .expect("key");
    let mut intake = db.pool.get().await.expect("db");
    let open = intake.transaction().await.expect("begin");
    let mut new = NewNotification::new(
        "unlocked".into(),
        "0".repeat(64),
        "ada@example.com".into(),
        Channel::Email,
        json!({}),
        Due::AfterSeconds(60),
        3,
    );
    new.owner_key_id = Some(key_id);
    let outcome = queue::insert(&open, &new).await.expect("insert");
    assert!(matches!(outcome, InsertOutcome::Created(_)), "{outcome:?}");

    // While that insert is uncommitted, another session can take any lock on the key.
    let other = db.pool.get().await.expect("db");
    let locked = other
        .query(
            "SELECT 1 FROM api_keys WHERE id = $1 FOR UPDATE NOWAIT",
            &[&key_id],
        )
        .await;
    assert!(locked.is_ok(), "the key's row is locked: {locked:?}");
    open.commit().await.expect("commit");
}
