use super::*;

fn drainer(timeout_ms: u64) -> WebhookDrainer {
    // The pool connects lazily; no database is needed here.
    let pool = crate::db::create_pool("postgres://user@127.0.0.1:1/none", 1).expect("pool");
    let client = WebhookClient::new(
        "http://127.0.0.1:1/hook",
        None,
        Duration::from_millis(timeout_ms),
    )
    .expect("client");
    let retry = RetryPolicy {
        max_retries: 5,
        base_delay_ms: 1000,
        max_delay_ms: 60_000,
    };
    let random = Arc::new(ThreadRandom);
    WebhookDrainer::new(pool, client, 10, retry, Duration::from_secs(1), random)
}

#[test]
fn the_lease_covers_every_round_of_a_batch_plus_the_margin() {
    // 100 events, 16 in flight: 7 rounds of at most 5 s each, then 30 s to record.
    assert_eq!(drainer(5000).lease(), Duration::from_secs(65));
    assert_eq!(
        drainer(5000).with_concurrency(100).lease(),
        Duration::from_secs(35)
    );
    assert_eq!(
        drainer(5000).with_lease(Duration::from_millis(300)).lease(),
        Duration::from_millis(300)
    );
}

#[test]
fn a_drainer_exists_without_a_default_url_and_a_bad_url_fails_at_start_up() {
    let pool = crate::db::create_pool("postgres://user@127.0.0.1:1/none", 1).expect("pool");
    let mut config = Config::from_vars(Default::default()).expect("defaults");
    let drainer = WebhookDrainer::from_config(&pool, &config).expect("drainer");
    assert!(drainer.default.is_none());
    config.webhook.url = Some("http://".to_string());
    assert!(WebhookDrainer::from_config(&pool, &config).is_err());
    config.webhook.url = Some("http://127.0.0.1:9/hook".to_string());
    let drainer = WebhookDrainer::from_config(&pool, &config).expect("drainer");
    assert!(drainer.default.is_some());
}
