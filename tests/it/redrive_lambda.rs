//! The `dlq-redrive` function against a real Scheduler API (moto) and a real PostgreSQL.
//!
//! `RedriveFunction` builds its Scheduler client from the environment only, so the tests
//! invoke what it invokes, `redrive::function::handle_request`, the same way: the event parsed as a
//! `RedriveRequest`, work stopping at `deadline::reserve(deadline, 0)`.

use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Utc};
use notify_shared::config::SchedulerConfig;
use notify_shared::deadline;
use notify_shared::redrive::function::handle_request;
use notify_shared::redrive::{RedriveRequest, RedriveResponse, Scheduler};
use notify_tests::{TestDb, factory, moto};
use serde_json::{Value, json};

const FUNCTION_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:dlq-redrive";
const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/notify-queue-scheduler";

struct Setup {
    db: TestDb,
    _moto: moto::Moto,
    scheduler: Scheduler,
    client: aws_sdk_scheduler::Client,
    group: String,
}

impl Setup {
    /// One `dlq-redrive` invocation with `payload` as its event, due to end at `deadline`.
    async fn invoke(&self, payload: Value, deadline: Instant) -> anyhow::Result<RedriveResponse> {
        let request: RedriveRequest =
            serde_json::from_value(payload).context("invalid redrive request")?;
        handle_request(
            &self.db.pool,
            &self.scheduler,
            request,
            FUNCTION_ARN,
            6,
            deadline::reserve(deadline, Duration::ZERO),
        )
        .await
    }
}

async fn setup(dead: usize) -> Setup {
    let db = TestDb::new().await;
    for _ in 0..dead {
        let notification = factory::create(&db.pool, factory::Spec::default()).await;
        factory::dead_letter(&db.pool, notification.id, "Simulated provider outage").await;
    }
    let moto = moto::start();
    let client = moto::scheduler_client(&moto);
    let group = format!("notify-queue-{}", uuid::Uuid::new_v4().simple());
    client
        .create_schedule_group()
        .name(&group)
        .send()
        .await
        .expect("schedule group");
    let config = SchedulerConfig {
        group: group.clone(),
        role_arn: Some(ROLE_ARN.to_string()),
    };
    Setup {
        db,
        _moto: moto,
        scheduler: Scheduler::with_client(client.clone(), config),
        client,
        group,
    }
}

async fn schedule_names(setup: &Setup) -> Vec<String> {
    let listed = setup
        .client
        .list_schedules()
        .group_name(&setup.group)
        .send()
        .await
        .expect("list schedules");
    listed
        .schedules()
        .iter()
        .filter_map(|s| s.name().map(String::from))
        .collect()
}

fn an_hour_from_now() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

#[tokio::test]
async fn a_deferred_redrive_creates_exactly_one_schedule_with_the_right_time_target_and_input() {
    let setup = setup(3).await;
    let at: DateTime<Utc> = (Utc::now() + chrono::TimeDelta::hours(2)).with_nanosecond_zero();
    let request = json!({"status": "DEAD_LETTERED", "batchSize": 50, "at": at.to_rfc3339()});
    let response = setup
        .invoke(request, an_hour_from_now())
        .await
        .expect("invoke");
    assert_eq!(response.retried, 0);
    assert_eq!(response.remaining, 3);
    assert_eq!(
        factory::count_where(&setup.db.pool, "status = 'DEAD_LETTERED'").await,
        3,
        "nothing redriven yet"
    );

    let names = schedule_names(&setup).await;
    assert_eq!(names.len(), 1);
    let scheduled = response.scheduled.expect("schedule reported");
    assert_eq!(names[0], scheduled.name);
    let schedule = setup
        .client
        .get_schedule()
        .name(&names[0])
        .group_name(&setup.group)
        .send()
        .await
        .expect("get");
    assert_eq!(
        schedule.schedule_expression(),
        Some(format!("at({})", at.format("%Y-%m-%dT%H:%M:%S")).as_str())
    );
    assert_eq!(schedule.schedule_expression_timezone(), Some("UTC"));
    let target = schedule.target().expect("target");
    assert_eq!(target.arn(), FUNCTION_ARN);
    assert_eq!(target.role_arn(), ROLE_ARN);
    let input: Value = serde_json::from_str(target.input().expect("input")).expect("json input");
    assert_eq!(input["status"], "DEAD_LETTERED");
    assert_eq!(input["batchSize"], 50);
    assert_eq!(input["scheduleName"], names[0].as_str());
    assert!(
        input.get("at").is_none(),
        "the scheduled run must not defer itself again: {input}"
    );
}

#[tokio::test]
async fn finished_work_deletes_the_schedule_that_started_it() {
    let setup = setup(4).await;
    let at = Utc::now() + chrono::TimeDelta::minutes(5);
    setup
        .invoke(json!({"at": at.to_rfc3339()}), an_hour_from_now())
        .await
        .expect("defer");
    let names = schedule_names(&setup).await;
    assert_eq!(names.len(), 1);
    // moto never fires schedules: invoke the function as the schedule would.
    let schedule = setup
        .client
        .get_schedule()
        .name(&names[0])
        .group_name(&setup.group)
        .send()
        .await
        .expect("get");
    let input: Value =
        serde_json::from_str(schedule.target().expect("target").input().expect("input"))
            .expect("json");
    let response = setup
        .invoke(input, an_hour_from_now())
        .await
        .expect("scheduled run");
    assert_eq!((response.retried, response.remaining), (4, 0));
    assert!(response.scheduled.is_none());
    assert!(
        schedule_names(&setup).await.is_empty(),
        "a finished redrive leaves no schedule behind"
    );
    assert_eq!(
        factory::count_where(&setup.db.pool, "status = 'PENDING' AND redrive_count = 1").await,
        4
    );
}

#[tokio::test]
async fn an_invocation_that_runs_out_of_time_schedules_its_continuation() {
    let setup = setup(5).await;
    // A deadline that has already passed: one batch runs, then time is up.
    let before = Utc::now();
    let response = setup
        .invoke(json!({"batchSize": 2}), Instant::now())
        .await
        .expect("invoke");
    assert_eq!((response.retried, response.remaining), (2, 3));
    let scheduled = response.scheduled.expect("continuation scheduled");
    let at = DateTime::parse_from_rfc3339(&scheduled.at)
        .expect("time")
        .with_timezone(&Utc);
    let delay = (at - before).num_seconds();
    assert!(
        (59..=62).contains(&delay),
        "continuation one minute later, got {delay}s"
    );
    let names = schedule_names(&setup).await;
    assert_eq!(names, vec![scheduled.name.clone()]);

    // The continuation finishes the work and removes its own schedule.
    let schedule = setup
        .client
        .get_schedule()
        .name(&names[0])
        .group_name(&setup.group)
        .send()
        .await
        .expect("get");
    let input: Value =
        serde_json::from_str(schedule.target().expect("target").input().expect("input"))
            .expect("json");
    let response = setup
        .invoke(input, an_hour_from_now())
        .await
        .expect("continuation");
    assert_eq!((response.retried, response.remaining), (3, 0));
    assert!(schedule_names(&setup).await.is_empty());
}

#[tokio::test]
async fn invalid_requests_are_refused_with_every_problem_named() {
    let setup = setup(1).await;
    for (request, needle) in [
        (json!({"status": "SENT"}), "status"),
        (json!({"batchSize": 1001}), "batchSize"),
        (json!({"batchSize": 0, "channel": "FAX"}), "channel"),
        (json!({"perSecond": 0}), "perSecond"),
        (json!({"colour": "red"}), "colour"),
    ] {
        let error = setup
            .invoke(request.clone(), an_hour_from_now())
            .await
            .expect_err("refused");
        assert!(
            format!("{error:#}").contains(needle),
            "{request}: {error:#}"
        );
    }
    assert_eq!(
        factory::count_where(&setup.db.pool, "status = 'DEAD_LETTERED'").await,
        1
    );
}

trait WithoutNanos {
    fn with_nanosecond_zero(self) -> Self;
}

impl WithoutNanos for DateTime<Utc> {
    fn with_nanosecond_zero(self) -> Self {
        chrono::Timelike::with_nanosecond(&self, 0).expect("valid")
    }
}
