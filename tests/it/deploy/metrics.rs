//! The metrics the alarms watch: a sweeper whose database becomes unreachable mid-run
//! reports failed steps in its EMF line and no queue lag at all (an unknown lag is never 0).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use notify_local::embedded::{EmbeddedPostgres, default_base_dir};
use notify_shared::cold_start::{ColdStart, Needs};
use notify_shared::db;
use notify_shared::sweeper::SweeperFunction;
use serde_json::Value;

fn emf(line: &str) -> Value {
    let document: Value = serde_json::from_str(line).expect("the EMF line is JSON");
    let declared: Vec<&str> = document["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .expect("declared metrics")
        .iter()
        .filter_map(|metric| metric["Name"].as_str())
        .collect();
    for name in &declared {
        assert!(
            document[name].is_number(),
            "{name} declared without a value: {line}"
        );
    }
    document
}

#[tokio::test]
async fn a_database_made_unreachable_under_a_running_sweeper_raises_failed_steps_and_hides_the_lag()
{
    let mut server = tokio::task::spawn_blocking(|| EmbeddedPostgres::start(&default_base_dir()))
        .await
        .expect("start task")
        .expect("a private PostgreSQL");
    db::migrate(&server.url()).await.expect("migrate");
    let vars = HashMap::from([
        ("DATABASE_URL".to_string(), server.url()),
        ("DATABASE_POOL_MAX".to_string(), "2".to_string()),
        ("PROVIDER_TIMEOUT_MS".to_string(), "100".to_string()),
        ("WORKER_POLL_INTERVAL_MS".to_string(), "100".to_string()),
        ("MOCK_LATENCY_MS".to_string(), "0".to_string()),
    ]);
    let start = ColdStart::from_vars(vars, None, Needs::default())
        .await
        .expect("cold start");
    let function = SweeperFunction::new(&start).await.expect("sweeper");

    // Healthy: no failed step, and the lag is measured (0 with an empty queue).
    let (outcome, line) = function
        .invoke_reporting(Instant::now() + Duration::from_millis(3000))
        .await;
    let healthy = emf(&line);
    assert_eq!(outcome.failed_steps, 0, "{line}");
    assert_eq!(healthy["FailedSteps"], 0, "{line}");
    assert!(healthy["QueueLagSeconds"].is_number(), "{line}");

    // The database goes away one second into an invocation of about six.
    let running = tokio::spawn(async move {
        function
            .invoke_reporting(Instant::now() + Duration::from_millis(8000))
            .await
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    tokio::task::spawn_blocking(move || {
        server.stop();
        server
    })
    .await
    .expect("stop task");
    let (outcome, line) = running.await.expect("the invocation ends normally");
    let outage = emf(&line);
    assert!(outcome.failed_steps >= 1, "{outcome:?}");
    assert!(
        outage["FailedSteps"]
            .as_u64()
            .is_some_and(|n| n > outcome.failed_steps),
        "the failed steps and the failed end-of-run read are counted: {line}"
    );
    assert!(
        outage.get("QueueLagSeconds").is_none(),
        "an unknown lag is left out, never reported as 0: {line}"
    );
    let declared = outage["_aws"]["CloudWatchMetrics"][0]["Metrics"].to_string();
    assert!(
        declared.contains("FailedSteps") && !declared.contains("QueueLag"),
        "{declared}"
    );
}

#[tokio::test]
async fn the_drainer_reports_its_backlog_and_leaves_it_out_when_the_database_is_gone() {
    use notify_shared::metrics::emf;
    use notify_shared::webhook::DrainOutcome;
    use notify_tests::{TestDb, factory};

    let db = TestDb::new().await;
    let waiting = [
        factory::create(&db.pool, factory::Spec::default()).await,
        factory::create(&db.pool, factory::Spec::default()).await,
    ];
    factory::insert_events(&db.pool, &waiting).await;
    let given_up = DrainOutcome {
        given_up: 1,
        ..DrainOutcome::default()
    };
    let line = emf::emit_drainer(&given_up, &db.pool).await;
    let document = emf(&line);
    assert_eq!(document["Backlog"], 2.0, "{line}");
    assert_eq!(document["GivenUp"], 1, "{line}");
    assert_eq!(document["FailedSteps"], 0, "{line}");

    // A pool on a port nothing listens on: no backlog figure, one failed step.
    let nowhere =
        db::create_pool("postgres://postgres@127.0.0.1:9/none?connect_timeout=1", 1).expect("pool");
    let line = emf::emit_drainer(&DrainOutcome::default(), &nowhere).await;
    let document = emf(&line);
    assert!(document.get("Backlog").is_none(), "{line}");
    assert_eq!(document["FailedSteps"], 1, "{line}");
}
