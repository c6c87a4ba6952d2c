use super::*;

fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn defaults_match_the_documented_table() {
    let config = Config::from_vars(HashMap::new()).expect("defaults are valid");
    assert_eq!(config.database_pool_max, 10);
    assert_eq!(config.worker.batch_size, 100);
    assert_eq!((config.worker.concurrency, config.worker.lanes), (10, 4));
    assert_eq!(config.worker.visibility_timeout, Duration::from_secs(300));
    assert_eq!(config.retry.max_attempts(), 6);
    assert_eq!(config.rate_limit.max_notifications, 10);
    assert_eq!(config.port, 3000);
    assert_eq!(config.app_role, AppRole::All);
    assert_eq!(config.retention, RetentionConfig::default());
}

#[test]
fn retention_windows_go_down_to_one_second_and_no_further() {
    let config = Config::from_vars(vars(&[
        ("RETENTION_SECONDS", "1"),
        ("DLQ_RETENTION_SECONDS", "2"),
        ("WEBHOOK_RETENTION_SECONDS", "3"),
    ]))
    .expect("seconds are valid");
    assert_eq!(config.retention.notifications, Duration::from_secs(1));
    assert_eq!(config.retention.dead_letters, Duration::from_secs(2));
    assert_eq!(config.retention.webhook_events, Duration::from_secs(3));
    let err = Config::from_vars(vars(&[
        ("RETENTION_SECONDS", "0"),
        ("DLQ_RETENTION_SECONDS", "0"),
        ("WEBHOOK_RETENTION_SECONDS", "-5"),
    ]))
    .expect_err("zero is refused");
    assert_eq!(err.problems.len(), 3, "{err}");
}

#[test]
fn secrets_never_reach_debug_output() {
    let config = Config::from_vars(vars(&[
        ("DATABASE_URL", "postgres://u:hunter2@h/db"),
        ("WEBHOOK_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
    ]))
    .expect("valid");
    let debug = format!("{config:?}");
    assert!(
        !debug.contains("hunter2") && !debug.contains("MfKQ9r8G"),
        "{debug}"
    );
    assert!(config.webhook.signing_key.is_some());
}

#[test]
fn webhook_secrets_are_decoded_once_here() {
    assert!(signing_key("plain").is_err());
    assert_eq!(signing_key("whsec_aGk="), Ok(b"hi".to_vec()));
    assert!(signing_key("whsec_not base64!").is_err());
    assert!(signing_key("whsec_").is_err());
}

#[test]
fn webhook_destinations_are_strict_unless_allowed() {
    let strict = Config::from_vars(HashMap::new()).expect("defaults");
    assert_eq!(
        strict.webhook.allow_http, None,
        "the local runner picks its default"
    );
    assert_eq!(
        strict.webhook.destinations(),
        crate::webhook::destination::DestinationPolicy::default()
    );
    let open = Config::from_vars(vars(&[
        ("ALLOW_HTTP_WEBHOOKS", "true"),
        ("ALLOW_PRIVATE_WEBHOOKS", "true"),
    ]))
    .expect("valid");
    let policy = open.webhook.destinations();
    assert!(policy.allow_http && policy.allow_private);
    let err = Config::from_vars(vars(&[
        ("ALLOW_HTTP_WEBHOOKS", "yes"),
        ("ALLOW_PRIVATE_WEBHOOKS", "1"),
    ]))
    .expect_err("not true or false");
    assert_eq!(err.problems.len(), 2, "{err}");
}

#[test]
fn the_database_comes_from_a_url_or_from_a_secret_never_both() {
    let config = Config::from_vars(vars(&[
        (
            "DATABASE_SECRET_ARN",
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:db-AbCdEf",
        ),
        ("DATABASE_HOST", "proxy.example"),
        ("DATABASE_PORT", "6432"),
    ]))
    .expect("valid");
    let secret = config.database_secret.expect("secret settings");
    assert_eq!(secret.port, Some(6432));
    assert_eq!(secret.ssl_mode, "verify-full");
    let err = Config::from_vars(vars(&[
        ("DATABASE_URL", "postgres://u@h/db"),
        ("DATABASE_SECRET_ARN", "arn:aws:secretsmanager:x"),
        ("DATABASE_SSLMODE", "sometimes"),
    ]))
    .expect_err("both set");
    assert_eq!(err.problems.len(), 2, "{err}");
}

#[test]
fn a_webhook_secret_without_whsec_is_refused_with_the_expected_form() {
    let err =
        Config::from_vars(vars(&[("WEBHOOK_SECRET", "hunter2hunter2")])).expect_err("raw secret");
    assert!(err.to_string().contains("whsec_"), "{err}");
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

#[test]
fn every_problem_is_reported_at_once() {
    let err = Config::from_vars(vars(&[
        ("PROVIDER_TIMEOUT_MS", "5000"),
        ("JOB_VISIBILITY_TIMEOUT_SECONDS", "5"),
        ("BASE_RETRY_DELAY_MS", "9000"),
        ("MAX_RETRY_DELAY_MS", "100"),
        ("WORKER_BATCH_SIZE", "zero"),
        ("MOCK_FAILURE_RATE", "2"),
        ("APP_ROLE", "everything"),
    ]))
    .expect_err("invalid configuration");
    assert_eq!(err.problems.len(), 5, "{err}");
    let text = err.to_string();
    for needle in [
        "PROVIDER_TIMEOUT_MS",
        "BASE_RETRY_DELAY_MS",
        "WORKER_BATCH_SIZE",
        "MOCK_FAILURE_RATE",
        "APP_ROLE",
    ] {
        assert!(text.contains(needle), "{needle} missing from {text}");
    }
}

#[test]
fn worker_lanes_can_be_raised_and_zero_is_refused() {
    let config = Config::from_vars(vars(&[("WORKER_LANES", "9")])).expect("valid");
    assert_eq!(config.worker.lanes, 9);
    let err = Config::from_vars(vars(&[("WORKER_LANES", "0")])).expect_err("zero lanes");
    assert_eq!(err.problems.len(), 1, "{err}");
    assert!(err.to_string().contains("WORKER_LANES"), "{err}");
}
