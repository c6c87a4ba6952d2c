//! The deploy's custom resource, invoked as a plain function with the fixture events: it
//! migrates an empty database, creates the first operator key in a Secrets Manager secret
//! (moto), answers CloudFormation at the pre-signed URL (a local server here), and leaves
//! keys and schema alone on later events.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::put;
use notify_shared::auth::{Authenticator, Scope};
use notify_shared::db::{self, Database};
use notify_shared::deploy_setup::{BOOTSTRAP_KEY_NAME, PHYSICAL_RESOURCE_ID, SetupFunction};
use notify_tests::db::{scalar, server_url, with_database};
use notify_tests::moto;
use serde_json::Value;

use super::{create_secret, secrets_at};

/// Stands in for the pre-signed S3 URL: records every PUT body.
struct ResponseUrl {
    url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl ResponseUrl {
    async fn start() -> ResponseUrl {
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let app = axum::Router::new()
            .route(
                "/cloudformation-response",
                put(
                    |State(bodies): State<Arc<Mutex<Vec<Value>>>>, body: Bytes| async move {
                        let json = serde_json::from_slice(&body).expect("the answer is JSON");
                        bodies.lock().expect("lock").push(json);
                    },
                ),
            )
            .with_state(bodies.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        ResponseUrl {
            url: format!("http://{address}/cloudformation-response"),
            bodies,
        }
    }

    fn answers(&self) -> Vec<Value> {
        self.bodies.lock().expect("lock").clone()
    }
}

/// A fixture event with the response URL and the secret of this test.
fn event(kind: &str, response_url: &str, secret_arn: &str) -> Value {
    let path = format!(
        "{}/tests/events/deploy-setup-{kind}.json",
        notify_tests::WORKSPACE
    );
    let mut event: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json");
    event["ResponseURL"] = Value::from(response_url);
    event["ResourceProperties"]["OperatorKeySecretArn"] = Value::from(secret_arn);
    event
}

/// An empty database (no schema): the first deploy's situation.
async fn empty_database() -> (String, String) {
    let name = format!("notify_setup_{}", uuid::Uuid::new_v4().simple());
    let admin = db::connect(&server_url()).await.expect("admin");
    admin
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .await
        .expect("create database");
    (name.clone(), with_database(&server_url(), &name))
}

fn migration_count() -> usize {
    std::fs::read_dir(format!("{}/migrations", notify_tests::WORKSPACE))
        .expect("migrations")
        .count()
}

#[tokio::test]
async fn create_migrates_and_stores_the_first_operator_key_update_and_delete_change_nothing() {
    let moto = moto::start();
    let (secrets, client) = secrets_at(&moto).await;
    // As the template creates it: a placeholder until the setup writes the key.
    let secret_arn = create_secret(&client, "notify/operator-key", "not created yet").await;
    let (name, url) = empty_database().await;
    let responses = ResponseUrl::start().await;
    let function = SetupFunction::with(Database::from_url(&url).expect("url"), Some(secrets))
        .expect("function");

    let created = function
        .invoke(event("create", &responses.url, &secret_arn))
        .await
        .expect("create answered");
    assert_eq!(created.status, "SUCCESS", "{created:?}");
    let answer = responses.answers().remove(0);
    assert_eq!(answer["Status"], "SUCCESS");
    assert_eq!(answer["PhysicalResourceId"], PHYSICAL_RESOURCE_ID);
    assert_eq!(answer["LogicalResourceId"], "DeploySetup");
    assert_eq!(answer["RequestId"], "0d6bd3f2-7c57-4b1c-9e67-3a1f1f6a2f10");
    assert!(
        answer["StackId"]
            .as_str()
            .is_some_and(|s| s.starts_with("arn:aws:cloudformation:"))
    );
    assert_eq!(
        answer["Data"]["MigrationsApplied"],
        migration_count().to_string()
    );
    assert_eq!(answer["Data"]["OperatorKeyCreated"], "true");

    // The secret holds a working operator key, and it is the only key.
    let key = client
        .get_secret_value()
        .secret_id(&secret_arn)
        .send()
        .await
        .expect("read the secret")
        .secret_string
        .expect("text");
    assert!(key.starts_with("nq_"), "{key}");
    let pool = db::create_pool(&url, 2).expect("pool");
    let caller = Authenticator::with_keys(pool.clone())
        .authorize(Some(&format!("Bearer {key}")), Scope::Operator)
        .await;
    assert!(
        caller.is_ok(),
        "the stored key authorizes operator requests"
    );
    let keys: i64 = scalar(
        &pool,
        "SELECT count(*) FROM api_keys WHERE name = $1",
        &[&BOOTSTRAP_KEY_NAME],
    )
    .await;
    assert_eq!(keys, 1);

    // A later deploy: nothing left to migrate, a key exists, the secret is untouched.
    let updated = function
        .invoke(event("update", &responses.url, &secret_arn))
        .await
        .expect("update answered");
    assert_eq!(updated.status, "SUCCESS", "{updated:?}");
    assert_eq!(updated.data.migrations_applied, "0");
    assert_eq!(updated.data.operator_key_created, "false");
    let still: i64 = scalar(&pool, "SELECT count(*) FROM api_keys", &[]).await;
    assert_eq!(still, 1);
    let unchanged = client
        .get_secret_value()
        .secret_id(&secret_arn)
        .send()
        .await
        .expect("read the secret")
        .secret_string;
    assert_eq!(unchanged.as_deref(), Some(key.as_str()));

    // sam delete: answered, and the data stays.
    let deleted = function
        .invoke(event("delete", &responses.url, &secret_arn))
        .await
        .expect("delete answered");
    assert_eq!(deleted.status, "SUCCESS");
    assert_eq!(responses.answers().len(), 3);
    let still: i64 = scalar(&pool, "SELECT count(*) FROM api_keys", &[]).await;
    assert_eq!(still, 1, "a deleted stack leaves the database alone");

    drop(pool);
    let _ = notify_local::scratch::drop_database(&server_url(), &name).await;
}

#[tokio::test]
async fn a_key_that_cannot_be_stored_is_not_created_and_cloudformation_hears_why() {
    let moto = moto::start();
    let (secrets, client) = secrets_at(&moto).await;
    let existing = create_secret(&client, "notify/other", "x").await;
    let missing = existing.replace("notify/other", "notify/missing");
    let (name, url) = empty_database().await;
    let responses = ResponseUrl::start().await;
    let function = SetupFunction::with(Database::from_url(&url).expect("url"), Some(secrets))
        .expect("function");

    let response = function
        .invoke(event("create", &responses.url, &missing))
        .await
        .expect("answered");
    assert_eq!(response.status, "FAILED");
    let answer = responses.answers().remove(0);
    assert_eq!(answer["Status"], "FAILED");
    let reason = answer["Reason"].as_str().expect("reason");
    assert!(
        reason.contains("first operator key") && reason.contains("notify/missing"),
        "{reason}"
    );
    // The migrations went in; the key did not (nobody could have read it).
    let pool = db::create_pool(&url, 1).expect("pool");
    let keys: i64 = scalar(&pool, "SELECT count(*) FROM api_keys", &[]).await;
    assert_eq!(keys, 0);

    drop(pool);
    let _ = notify_local::scratch::drop_database(&server_url(), &name).await;
}

#[tokio::test]
async fn an_event_without_a_response_url_is_an_error_not_a_panic() {
    let function = SetupFunction::with(Database::from_url(&server_url()).expect("url"), None)
        .expect("function");
    let error = function
        .invoke(serde_json::json!({"RequestType": "Create"}))
        .await
        .expect_err("nothing to answer");
    assert!(
        error.to_string().contains("custom resource event"),
        "{error}"
    );
}
