//! What the scheduled Lambda functions do, as plain async functions on plain types, so
//! they are tested without Lambda. Each `main` in `functions/` builds a [`Worker`] once
//! per cold start and calls one of these per invocation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use deadpool_postgres::Pool;

use crate::backoff::ThreadRandom;
use crate::config::Config;
use crate::provider::simulated::SimulatedProvider;
use crate::redrive::{self, RedriveRequest, RedriveResponse};
use crate::schedule::Scheduler;
use crate::stop::StopSignal;
use crate::sweeper::{self, SweepOutcome, Sweeper};
use crate::wake::{self, Wake};
use crate::webhook::{self, WebhookDrainer};
use crate::{db, queue};

/// Time kept free at the end of an invocation to record results and return.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(2);

/// Everything a scheduled function needs, built once per container.
pub struct Worker {
    pub config: Config,
    pub pool: Pool,
    pub sweeper: Arc<Sweeper>,
    /// `None` when `WEBHOOK_URL` is not set: nothing is dispatched.
    pub drainer: Option<Arc<WebhookDrainer>>,
    wake: Wake,
}

impl Worker {
    /// Reads configuration, builds the pool (connections open lazily) and starts the
    /// wake-up listener. Deployed functions need `DATABASE_URL`.
    pub fn from_config(config: Config) -> anyhow::Result<Self> {
        let url = config
            .database_url
            .clone()
            .context("DATABASE_URL is required for the deployed functions")?;
        let pool = db::create_pool(&url, config.database_pool_max)?;
        let sweeper = build_sweeper(&pool, &config);
        let drainer = build_drainer(&pool, &config)?;
        // The listener lives for the container; it reconnects after a freeze by itself.
        let wake = wake::listen(url, queue::WAKE_CHANNEL, StopSignal::never());
        Ok(Worker {
            config,
            pool,
            sweeper,
            drainer,
            wake,
        })
    }

    /// When work must stop so that a provider call started just before still finishes and
    /// is recorded before `deadline`.
    pub fn stop_at(&self, deadline: Instant) -> Instant {
        let reserve = self.config.worker.provider_timeout + DEADLINE_MARGIN;
        deadline.checked_sub(reserve).unwrap_or_else(Instant::now)
    }

    /// One `sweeper` invocation: sweep until the deadline nears, then report.
    pub async fn sweep_until(&self, deadline: Instant) -> SweepOutcome {
        let stop = StopSignal::never().with_deadline(self.stop_at(deadline));
        let summary = sweeper::run(self.sweeper.clone(), self.wake.clone(), stop).await;
        emit_emf(&summary, &self.pool).await;
        summary
    }

    /// One `webhook-drainer` invocation: drain until the deadline nears (leaving room for
    /// a webhook POST started just before), then report. Without `WEBHOOK_URL` it says so.
    pub async fn drain_until(&self, deadline: Instant) -> serde_json::Value {
        let Some(drainer) = &self.drainer else {
            return serde_json::json!({"dispatched": false, "reason": "WEBHOOK_URL is not set"});
        };
        let reserve = self.config.webhook.timeout + DEADLINE_MARGIN;
        let stop_at = deadline.checked_sub(reserve).unwrap_or_else(Instant::now);
        let summary =
            webhook::run(drainer.clone(), StopSignal::never().with_deadline(stop_at)).await;
        serde_json::to_value(summary).unwrap_or_default()
    }
}

/// The sweeper every process runs: the simulated provider, the configured retry policy
/// and rate limit.
pub fn build_sweeper(pool: &Pool, config: &Config) -> Arc<Sweeper> {
    let provider = SimulatedProvider::new(pool.clone(), config.mock, Arc::new(ThreadRandom));
    Arc::new(
        Sweeper::new(
            pool.clone(),
            Arc::new(provider),
            Arc::new(ThreadRandom),
            config.worker.clone(),
            config.retry,
        )
        .with_rate_limit(config.rate_limit),
    )
}

/// The webhook drainer, or `None` without `WEBHOOK_URL` (events then stay in the outbox).
pub fn build_drainer(pool: &Pool, config: &Config) -> anyhow::Result<Option<Arc<WebhookDrainer>>> {
    if config.webhook.url.is_none() {
        return Ok(None);
    }
    let drainer = WebhookDrainer::new(
        pool.clone(),
        &config.webhook,
        config.retry,
        config.worker.poll_interval,
        Arc::new(ThreadRandom),
    )?;
    Ok(Some(Arc::new(drainer)))
}

/// The invocation deadline (wall-clock milliseconds since the epoch, as Lambda gives it)
/// as an `Instant`.
pub fn deadline_from_epoch_ms(deadline_ms: u64) -> Instant {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    Instant::now() + Duration::from_millis(deadline_ms.saturating_sub(now_ms))
}

/// Lambda's deadline (epoch milliseconds) as an `Instant`. `cargo lambda watch` sends the
/// placeholder 600000 instead of a wall-clock time, which would end the invocation before
/// it starts: a deadline before 2001 means "emulator", and the invocation gets
/// `AWS_LAMBDA_FUNCTION_TIMEOUT` seconds (the emulators' name for the timeout; default 30).
pub fn invocation_deadline(deadline_ms: u64) -> Instant {
    const PLAUSIBLE_AFTER_MS: u64 = 978_307_200_000; // 2001-01-01T00:00:00Z
    if deadline_ms >= PLAUSIBLE_AFTER_MS {
        return deadline_from_epoch_ms(deadline_ms);
    }
    let seconds = std::env::var("AWS_LAMBDA_FUNCTION_TIMEOUT")
        .ok()
        .and_then(|value| value.trim().parse::<u64>().ok())
        .unwrap_or(30);
    Instant::now() + Duration::from_secs(seconds)
}

/// What `dlq-redrive` needs, built once per container.
pub struct Redriver {
    pub pool: Pool,
    pub scheduler: Scheduler,
    pub max_attempts: i32,
}

impl Redriver {
    pub async fn from_config(config: &Config) -> anyhow::Result<Self> {
        let url = config
            .database_url
            .as_deref()
            .context("DATABASE_URL is required for the deployed functions")?;
        Ok(Redriver {
            pool: db::create_pool(url, config.database_pool_max)?,
            scheduler: Scheduler::from_env(config.scheduler.clone()).await,
            max_attempts: config.retry.max_attempts(),
        })
    }

    /// One invocation: `payload` is the event (an operator's request or the input of a
    /// schedule this function created); `function_arn` is this function, the target of
    /// any schedule it creates.
    pub async fn invoke(
        &self,
        payload: serde_json::Value,
        function_arn: &str,
        deadline: Instant,
    ) -> anyhow::Result<RedriveResponse> {
        let request: RedriveRequest =
            serde_json::from_value(payload).context("invalid redrive request")?;
        let stop_at = deadline
            .checked_sub(DEADLINE_MARGIN)
            .unwrap_or_else(Instant::now);
        redrive::handle_request(
            &self.pool,
            &self.scheduler,
            request,
            function_arn,
            self.max_attempts,
            stop_at,
        )
        .await
    }
}

/// One CloudWatch Embedded Metric Format line per sweeper invocation, so an AWS user gets
/// metrics from the logs with no agent. Written to stdout, where Lambda ships it as is.
async fn emit_emf(summary: &SweepOutcome, pool: &Pool) {
    let lag = match pool.get().await {
        Ok(db) => crate::queue::stats::queue_lag_seconds(&db)
            .await
            .unwrap_or(0.0),
        Err(_) => 0.0,
    };
    println!(
        "{}",
        emf_line(summary, lag, chrono::Utc::now().timestamp_millis())
    );
}

/// The EMF document: namespace `NotifyQueue`, dimension `Function`.
pub fn emf_line(summary: &SweepOutcome, queue_lag_seconds: f64, timestamp_ms: i64) -> String {
    let count = |name: &str| serde_json::json!({"Name": name, "Unit": "Count"});
    serde_json::json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": "NotifyQueue",
                "Dimensions": [["Function"]],
                "Metrics": [
                    count("Claimed"), count("Sent"), count("Failed"), count("Retried"),
                    count("DeadLettered"), count("Deferred"), count("Recovered"),
                    {"Name": "QueueLagSeconds", "Unit": "Seconds"},
                ],
            }],
        },
        "Function": "sweeper",
        "Claimed": summary.claimed,
        "Sent": summary.sent,
        "Failed": summary.failed,
        "Retried": summary.retried,
        "DeadLettered": summary.dead_lettered,
        "Deferred": summary.deferred,
        "Recovered": summary.recovered,
        "QueueLagSeconds": queue_lag_seconds,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_emf_line_declares_every_metric_it_carries() {
        let summary = SweepOutcome {
            claimed: 5,
            sent: 3,
            failed: 1,
            dead_lettered: 1,
            ..SweepOutcome::default()
        };
        let line: serde_json::Value =
            serde_json::from_str(&emf_line(&summary, 1.5, 1_700_000_000_000)).expect("json");
        let declared = line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .expect("metrics");
        for metric in declared {
            let name = metric["Name"].as_str().expect("name");
            assert!(
                line.get(name).is_some_and(|v| v.is_number()),
                "{name} declared but missing"
            );
        }
        assert_eq!(line["Sent"], 3);
        assert_eq!(line["QueueLagSeconds"], 1.5);
        assert_eq!(line["Function"], "sweeper");
    }

    #[test]
    fn a_real_deadline_is_kept_and_the_emulator_placeholder_gets_a_budget() {
        let in_a_minute = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after 1970")
            .as_millis() as u64
            + 60_000;
        let real = invocation_deadline(in_a_minute);
        assert!(real > Instant::now() + Duration::from_secs(55));
        assert!(real <= Instant::now() + Duration::from_secs(61));
        // cargo lambda watch: Lambda-Runtime-Deadline-Ms: 600000
        assert!(invocation_deadline(600_000) > Instant::now() + Duration::from_secs(1));
    }

    #[test]
    fn a_deadline_in_the_past_means_now() {
        assert!(deadline_from_epoch_ms(0) <= Instant::now());
    }
}
