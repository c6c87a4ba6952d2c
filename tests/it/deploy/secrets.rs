//! The database login, `UNSUBSCRIBE_SECRET` and the webhook secret come from Secrets
//! Manager at cold start; a rotated database password reaches the next invocation of a
//! running container without a restart or deploy.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use notify_local::embedded::{EmbeddedPostgres, default_base_dir};
use notify_shared::cold_start::{ColdStart, Needs};
use notify_shared::db;
use notify_shared::feedback::ProviderEventsFunction;
use notify_tests::moto;
use serde_json::{Value, json};

use super::{create_secret, secrets_at};

const ROLE: &str = "notify_rotating";
/// Characters that break a URL: the login is never put into one.
const FIRST_PASSWORD: &str = "first p@ss/w:rd?#%&=";
const SECOND_PASSWORD: &str = "second p@ss/w:rd?#%&=";
const UNSUBSCRIBE: &str = "an unsubscribe secret of at least thirty-two characters";

fn delivery_event() -> Value {
    let path = format!(
        "{}/tests/events/provider-events-delivery.json",
        notify_tests::WORKSPACE
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json")
}

/// A private server with password authentication (the shared test server trusts everyone,
/// so a wrong password would go unnoticed there), migrated, with a role of its own.
async fn server_with_role() -> (EmbeddedPostgres, tokio_postgres::Client, u16) {
    let server = tokio::task::spawn_blocking(|| EmbeddedPostgres::start(&default_base_dir()))
        .await
        .expect("start task")
        .expect("a private PostgreSQL");
    db::migrate(&server.url()).await.expect("migrate");
    let admin = db::connect(&server.url()).await.expect("admin connection");
    admin
        .batch_execute(&format!(
            "CREATE ROLE {ROLE} LOGIN PASSWORD '{FIRST_PASSWORD}';
             GRANT ALL ON ALL TABLES IN SCHEMA public TO {ROLE};
             GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {ROLE};"
        ))
        .await
        .expect("role");
    let port = tokio_postgres::Config::from_str(&server.url())
        .expect("url")
        .get_ports()[0];
    (server, admin, port)
}

fn login(password: &str) -> String {
    json!({"username": ROLE, "password": password, "engine": "postgres"}).to_string()
}

fn deployed_vars(database_arn: &str, port: u16) -> HashMap<String, String> {
    HashMap::from([
        ("DATABASE_SECRET_ARN".to_string(), database_arn.to_string()),
        ("DATABASE_HOST".to_string(), "127.0.0.1".to_string()),
        ("DATABASE_PORT".to_string(), port.to_string()),
        ("DATABASE_NAME".to_string(), "postgres".to_string()),
        ("DATABASE_SSLMODE".to_string(), "disable".to_string()),
        ("DATABASE_POOL_MAX".to_string(), "1".to_string()),
    ])
}

#[tokio::test]
async fn a_password_rotated_mid_run_reaches_the_next_invocation_of_a_running_container() {
    let moto = moto::start();
    let (secrets, client) = secrets_at(&moto).await;
    let (_server, admin, port) = server_with_role().await;
    let database_arn = create_secret(&client, "notify/database", &login(FIRST_PASSWORD)).await;
    let unsubscribe_arn = create_secret(&client, "notify/unsubscribe", UNSUBSCRIBE).await;
    let mut vars = deployed_vars(&database_arn, port);
    vars.insert("UNSUBSCRIBE_SECRET_ARN".to_string(), unsubscribe_arn);

    // The cold start: both secrets read, the function built once.
    let start = ColdStart::from_vars(
        vars,
        Some(secrets),
        Needs {
            unsubscribe_secret: true,
        },
    )
    .await
    .expect("cold start");
    assert_eq!(start.config.audience.secret, UNSUBSCRIBE.as_bytes());
    assert!(!start.config.audience.development_secret);
    let function = ProviderEventsFunction::new(&start).expect("function");
    let first = function.invoke(delivery_event()).await.expect("invocation");
    assert_eq!(first.ignored, 1, "no attempt sent this message: {first:?}");
    assert_eq!(start.database.login_reads(), 1);

    // Rotation as Secrets Manager's rotation does it: the role's password, then the
    // secret's value. The container's connections end (as they do when it is frozen).
    admin
        .batch_execute(&format!(
            "ALTER ROLE {ROLE} PASSWORD '{SECOND_PASSWORD}';
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{ROLE}';"
        ))
        .await
        .expect("rotate the role's password");
    client
        .put_secret_value()
        .secret_id(&database_arn)
        .secret_string(login(SECOND_PASSWORD))
        .send()
        .await
        .expect("rotate the secret");
    // The old password is refused now: without reading the secret again, nothing connects.
    let mut stale = start.database.base_config().clone();
    stale.user(ROLE).password(FIRST_PASSWORD);
    let refused = stale
        .connect(tokio_postgres::NoTls)
        .await
        .err()
        .expect("the old password is refused");
    assert_eq!(
        refused.code(),
        Some(&tokio_postgres::error::SqlState::INVALID_PASSWORD)
    );
    // The pool notices its connection ended.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let second = function
        .invoke(delivery_event())
        .await
        .expect("the invocation after the rotation connects");
    assert_eq!(second.ignored, 1);
    assert_eq!(
        start.database.login_reads(),
        2,
        "the secret was read again once"
    );
    let third = function.invoke(delivery_event()).await.expect("and after");
    assert_eq!(third.ignored, 1);
    assert_eq!(
        start.database.login_reads(),
        2,
        "no read while the login works"
    );
}

#[tokio::test]
async fn a_wrong_password_is_read_again_once_per_connection_and_then_reported() {
    let moto = moto::start();
    let (secrets, client) = secrets_at(&moto).await;
    let (_server, _admin, port) = server_with_role().await;
    let database_arn = create_secret(&client, "notify/wrong", &login("not the password")).await;
    let start = ColdStart::from_vars(
        deployed_vars(&database_arn, port),
        Some(secrets),
        Needs::default(),
    )
    .await
    .expect("the cold start reads the secret; it connects to nothing yet");
    let error = start
        .database
        .connect()
        .await
        .expect_err("the password is wrong");
    assert!(
        format!("{error:#}").contains("password authentication failed"),
        "{error:#}"
    );
    assert!(
        !format!("{error:#}").contains("not the password"),
        "{error:#}"
    );
    assert_eq!(
        start.database.login_reads(),
        2,
        "one read at cold start, one after the refusal"
    );
}

#[tokio::test]
async fn secrets_named_by_arn_fill_their_settings_and_a_missing_one_stops_the_cold_start() {
    let moto = moto::start();
    let (secrets, client) = secrets_at(&moto).await;
    let webhook = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let unsubscribe_arn = create_secret(&client, "notify/unsubscribe", UNSUBSCRIBE).await;
    let webhook_arn = create_secret(&client, "notify/webhook", &format!("{webhook}\n")).await;
    let url = notify_tests::db::server_url();
    let vars = HashMap::from([
        ("DATABASE_URL".to_string(), url.clone()),
        (
            "UNSUBSCRIBE_SECRET_ARN".to_string(),
            unsubscribe_arn.clone(),
        ),
        ("WEBHOOK_SECRET_ARN".to_string(), webhook_arn),
        (
            "WEBHOOK_URL".to_string(),
            "https://hooks.example/notify".to_string(),
        ),
    ]);
    let start = ColdStart::from_vars(
        vars,
        Some(secrets.clone()),
        Needs {
            unsubscribe_secret: true,
        },
    )
    .await
    .expect("cold start");
    assert_eq!(start.config.audience.secret, UNSUBSCRIBE.as_bytes());
    assert!(start.config.webhook.signing_key.is_some());
    assert_eq!(
        start.database.login_reads(),
        0,
        "DATABASE_URL: no secret to read"
    );

    // A secret that does not exist: the cold start fails and names the setting.
    let missing = unsubscribe_arn.replace("notify/unsubscribe", "notify/nothing");
    let vars = HashMap::from([
        ("DATABASE_URL".to_string(), url.clone()),
        ("UNSUBSCRIBE_SECRET_ARN".to_string(), missing),
    ]);
    let error = ColdStart::from_vars(
        vars,
        Some(secrets),
        Needs {
            unsubscribe_secret: true,
        },
    )
    .await
    .err()
    .expect("missing secret");
    assert!(
        format!("{error:#}").contains("UNSUBSCRIBE_SECRET_ARN"),
        "{error:#}"
    );

    // Without any unsubscribe secret a function that signs links refuses to start; one
    // that does not need it starts.
    let vars = HashMap::from([("DATABASE_URL".to_string(), url)]);
    let error = ColdStart::from_vars(
        vars.clone(),
        None,
        Needs {
            unsubscribe_secret: true,
        },
    )
    .await
    .err()
    .expect("development secret refused");
    assert!(
        format!("{error:#}").contains("UNSUBSCRIBE_SECRET"),
        "{error:#}"
    );
    assert!(
        ColdStart::from_vars(vars, None, Needs::default())
            .await
            .is_ok()
    );
}
