//! One CloudWatch Embedded Metric Format line per scheduled-function invocation, so an AWS
//! user gets metrics from the logs with no agent. Written to stdout, where Lambda ships it
//! as is. Namespace `NotifyQueue`, dimension `Function`.
//!
//! `FailedSteps` counts the steps that failed, so an invocation that ends normally while
//! the database is unreachable still raises an alarm. A figure read from the database at
//! the end (queue lag, webhook backlog) is left out when it cannot be read: a missing
//! point, never a reassuring 0; the failed read counts as a failed step.

use deadpool_postgres::Pool;
use serde_json::{Map, Value, json};

use crate::channel::{self, ChannelState, Circuit};
use crate::config::CircuitConfig;
use crate::notification::Channel;
use crate::queue::stats;
use crate::sweeper::SweepOutcome;
use crate::webhook::{DrainOutcome, outbox};

/// The EMF document for `function` with its counts, the queue lag when known, and other
/// figures read at the end (`gauges`, unit Count; left out by the caller when unknown).
pub fn line(
    function: &str,
    counts: &[(&str, u64)],
    queue_lag_seconds: Option<f64>,
    gauges: &[(&str, f64)],
    timestamp_ms: i64,
) -> String {
    let mut declared: Vec<Value> = counts
        .iter()
        .map(|(name, _)| json!({"Name": name, "Unit": "Count"}))
        .collect();
    let mut document = Map::new();
    document.insert("Function".into(), json!(function));
    for (name, value) in counts {
        document.insert((*name).into(), json!(value));
    }
    for (name, value) in gauges {
        declared.push(json!({"Name": name, "Unit": "Count"}));
        document.insert((*name).into(), json!(value));
    }
    if let Some(lag) = queue_lag_seconds {
        declared.push(json!({"Name": "QueueLagSeconds", "Unit": "Seconds"}));
        document.insert("QueueLagSeconds".into(), json!(lag));
    }
    document.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": "NotifyQueue",
                "Dimensions": [["Function"]],
                "Metrics": declared,
            }],
        }),
    );
    Value::Object(document).to_string()
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The counts a sweeper invocation reports.
pub fn sweeper_counts(outcome: &SweepOutcome) -> [(&'static str, u64); 13] {
    [
        ("Claimed", outcome.claimed),
        ("Sent", outcome.sent),
        ("Failed", outcome.failed),
        ("Retried", outcome.retried),
        ("DeadLettered", outcome.dead_lettered),
        ("Deferred", outcome.deferred),
        ("Recovered", outcome.recovered),
        ("Refunded", outcome.refunded),
        ("Suppressed", outcome.suppressed),
        ("Expired", outcome.expired),
        ("Purged", outcome.purged),
        ("WebhookEventsPurged", outcome.webhook_events_purged),
        ("FailedSteps", outcome.failed_steps),
    ]
}

/// The sweeper's line, with the queue lag and each channel's circuit and pause read at
/// the end of the invocation. Printed, and returned (tests read it).
pub async fn emit_sweeper(outcome: &SweepOutcome, pool: &Pool, circuit: &CircuitConfig) -> String {
    let mut outcome = *outcome;
    let (lag, channels) = match pool.get().await {
        Ok(db) => (
            stats::queue_lag_seconds(&db).await.ok(),
            channel::read(&db, circuit).await.unwrap_or_default(),
        ),
        Err(_) => (None, Vec::new()),
    };
    if lag.is_none() {
        outcome.failed_steps += 1;
    }
    let mut counts: Vec<(String, u64)> = sweeper_counts(&outcome)
        .iter()
        .map(|(name, value)| (name.to_string(), *value))
        .collect();
    counts.extend(channel_counts(&channels));
    let counts: Vec<(&str, u64)> = counts.iter().map(|(n, v)| (n.as_str(), *v)).collect();
    let gauges = channel_gauges(&channels);
    let gauges: Vec<(&str, f64)> = gauges.iter().map(|(n, v)| (n.as_str(), *v)).collect();
    let text = line("sweeper", &counts, lag, &gauges, now_ms());
    println!("{text}");
    text
}

fn channel_name(channel: Channel) -> &'static str {
    match channel {
        Channel::Email => "Email",
        Channel::Sms => "Sms",
        Channel::Push => "Push",
    }
}

/// Per channel: `EmailCircuitOpen` (1 while open or half-open) and `EmailPaused`.
fn channel_counts(channels: &[ChannelState]) -> Vec<(String, u64)> {
    let mut counts = Vec::new();
    for state in channels {
        let name = channel_name(state.channel);
        let open = state.circuit != Circuit::Closed;
        counts.push((format!("{name}CircuitOpen"), u64::from(open)));
        counts.push((
            format!("{name}Paused"),
            u64::from(state.paused_until.is_some()),
        ));
    }
    counts
}

/// Per channel, the figures `GET /providers` and Prometheus show too: the circuit
/// breaker's window (`EmailWindowCalls`, `EmailFailureRatio`) and the running totals of
/// calls the provider throttled or refused for the account's configuration
/// (`EmailThrottledCalls`, `EmailMisconfiguredCalls`; read them with the Maximum
/// statistic: each line repeats the total).
fn channel_gauges(channels: &[ChannelState]) -> Vec<(String, f64)> {
    let mut gauges = Vec::new();
    for state in channels {
        let name = channel_name(state.channel);
        gauges.push((format!("{name}WindowCalls"), state.calls as f64));
        gauges.push((format!("{name}FailureRatio"), state.failure_ratio()));
        gauges.push((
            format!("{name}ThrottledCalls"),
            state.throttled_total as f64,
        ));
        gauges.push((
            format!("{name}MisconfiguredCalls"),
            state.misconfigured_total as f64,
        ));
    }
    gauges
}

/// The webhook drainer's line, with the backlog (events waiting or being sent) read at the
/// end of the invocation. Printed, and returned (tests read it).
pub async fn emit_drainer(outcome: &DrainOutcome, pool: &Pool) -> String {
    let backlog = match pool.get().await {
        Ok(db) => outbox::counts(&db).await.ok().map(|counts| counts.pending),
        Err(_) => None,
    };
    let failed_steps = outcome.failed_steps + u64::from(backlog.is_none());
    let counts = [
        ("Claimed", outcome.claimed),
        ("Delivered", outcome.delivered),
        ("Retried", outcome.retried),
        ("GivenUp", outcome.given_up),
        ("FailedSteps", failed_steps),
    ];
    let gauges: Vec<(&str, f64)> = backlog
        .map(|pending| ("Backlog", pending.max(0) as f64))
        .into_iter()
        .collect();
    let text = line("webhook-drainer", &counts, None, &gauges, now_ms());
    println!("{text}");
    text
}

/// The redrive function's line.
pub fn emit_redrive(retried: u64, remaining: u64) {
    let counts = [("Redriven", retried), ("Remaining", remaining)];
    println!("{}", line("dlq-redrive", &counts, None, &[], now_ms()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_declares_every_metric_it_carries() {
        let outcome = SweepOutcome {
            claimed: 5,
            sent: 3,
            failed: 1,
            dead_lettered: 1,
            ..SweepOutcome::default()
        };
        let text = line(
            "sweeper",
            &sweeper_counts(&outcome),
            Some(1.5),
            &[],
            1_700_000_000_000,
        );
        let document: Value = serde_json::from_str(&text).expect("json");
        let declared = document["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .expect("metrics");
        assert_eq!(declared.len(), 14);
        for metric in declared {
            let name = metric["Name"].as_str().expect("name");
            assert!(
                document.get(name).is_some_and(|v| v.is_number()),
                "{name} declared but missing"
            );
        }
        assert_eq!(document["Sent"], 3);
        assert_eq!(document["QueueLagSeconds"], 1.5);
        assert_eq!(document["Function"], "sweeper");
    }

    #[test]
    fn each_channel_carries_its_circuit_window_and_refused_calls() {
        let state = ChannelState {
            channel: Channel::Sms,
            circuit: Circuit::HalfOpen,
            circuit_since: chrono::Utc::now(),
            paused_until: Some(chrono::Utc::now()),
            pause_reason: Some("THROTTLED".into()),
            paused_since: None,
            throttled_total: 7,
            misconfigured_total: 2,
            calls: 8,
            temporary: 2,
            budgets: Vec::new(),
        };
        let counts = channel_counts(std::slice::from_ref(&state));
        let gauges = channel_gauges(std::slice::from_ref(&state));
        let counts: Vec<(&str, u64)> = counts.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        let gauges: Vec<(&str, f64)> = gauges.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        let document: Value =
            serde_json::from_str(&line("sweeper", &counts, None, &gauges, 0)).expect("json");
        assert_eq!(document["SmsCircuitOpen"], 1);
        assert_eq!(document["SmsPaused"], 1);
        assert_eq!(document["SmsWindowCalls"], 8.0);
        assert_eq!(document["SmsFailureRatio"], 0.25);
        assert_eq!(document["SmsThrottledCalls"], 7.0);
        assert_eq!(document["SmsMisconfiguredCalls"], 2.0);
        let declared = document["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .expect("metrics");
        assert_eq!(declared.len(), 6);
    }

    #[test]
    fn an_unknown_lag_is_left_out() {
        let document: Value =
            serde_json::from_str(&line("webhook-drainer", &[("Delivered", 2)], None, &[], 0))
                .expect("json");
        assert!(document.get("QueueLagSeconds").is_none());
        assert_eq!(
            document["_aws"]["CloudWatchMetrics"][0]["Metrics"]
                .as_array()
                .map(Vec::len),
            Some(1)
        );
    }
}
