//! What is a finding: the thresholds, and the finding each figure becomes (its severity,
//! evidence, action and weight).

use chrono::Utc;
use serde_json::json;

use super::{Finding, Severity};
use crate::audience::suppressions;
use crate::auth;
use crate::channel::{self, Circuit};
use crate::content::campaigns::StalledCampaign;
use crate::notification::format_time;
use crate::queue::stats;
use crate::webhook::outbox;

/// Dead-lettering is looked at over the last hour (and the hour before, for the trend).
pub const DEAD_LETTER_WINDOW_SECONDS: i64 = 3600;
/// This many dead-lettered in the window is critical.
pub const DEAD_LETTER_CRITICAL: i64 = 100;
/// A lane whose oldest due notification is this late is a warning, and critical at the
/// second figure.
pub const QUEUE_LAG_WARNING_SECONDS: f64 = 60.0;
pub const QUEUE_LAG_CRITICAL_SECONDS: f64 = 600.0;
/// A destination whose oldest due webhook event is this late has a backlog (warning;
/// critical at the second).
pub const WEBHOOK_LAG_WARNING_SECONDS: f64 = 300.0;
pub const WEBHOOK_LAG_CRITICAL_SECONDS: f64 = 3600.0;
/// Late events are counted per destination among this many of the oldest, so that the
/// digest reads a bounded range however large the backlog.
pub const WEBHOOK_LATE_SAMPLE: i64 = 10_000;
/// Webhook events given up in the last day.
pub const WEBHOOK_GIVEN_UP_WINDOW_SECONDS: i64 = 86_400;
/// A suppression spike: at least this many of one channel and reason in the last hour …
pub const SUPPRESSION_SPIKE_MIN: i64 = 10;
/// … and at least this many times the hourly average of the baseline (critical at the
/// second figure; an average under one an hour counts as one).
pub const SUPPRESSION_SPIKE_FACTOR: f64 = 3.0;
pub const SUPPRESSION_SPIKE_CRITICAL_FACTOR: f64 = 10.0;
pub const SUPPRESSION_BASELINE_HOURS: i64 = 168;
/// Keys neither used nor created for this many days.
pub const UNUSED_KEY_DAYS: i64 = 90;
/// A campaign EXPANDING without a chunk committed for this long is stalled (warning;
/// critical at the second figure): a sweeper expands chunks every few seconds while it
/// runs, so minutes without one mean no sweeper runs or its chunks keep failing.
pub const CAMPAIGN_STALLED_SECONDS: i64 = 300;
pub const CAMPAIGN_STALLED_CRITICAL_SECONDS: i64 = 1800;
/// At most this many stalled campaigns are listed, longest stalled first (they share a
/// cause as a rule: the oldest expanding campaign goes first, so one failing can hold up
/// the rest).
pub const CAMPAIGN_STALLED_LISTED: i64 = 20;

fn round(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

pub(super) fn dead_letter_finding(
    growth: &stats::DeadLetterGrowth,
    dead_lettered_total: i64,
) -> Option<Finding> {
    if growth.count == 0 {
        return None;
    }
    let severity = if growth.count >= DEAD_LETTER_CRITICAL {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let top_error = growth.top_errors[0]["error"].as_str().unwrap_or_default();
    let mut body = json!({"status": "DEAD_LETTERED", "limit": 1000});
    if !top_error.is_empty() {
        body["errorContains"] = json!(top_error);
    }
    Some(Finding {
        severity,
        code: "DLQ_GROWTH",
        title: format!(
            "{} notification{} dead-lettered in the last hour",
            growth.count,
            if growth.count == 1 { "" } else { "s" }
        ),
        evidence: json!({
            "lastHour": growth.count,
            "previousHour": growth.previous,
            "deadLetteredTotal": dead_lettered_total,
            "topErrors": growth.top_errors,
            "channels": growth.channels,
        }),
        action: format!(
            "Fix the cause of the top error, then redrive: POST /notifications/retry {body}"
        ),
        request: Some(json!({"method": "POST", "path": "/notifications/retry", "body": body})),
        weight: growth.count as f64,
    })
}

pub(super) fn channel_findings(state: &channel::ChannelState) -> Vec<Finding> {
    let mut findings = Vec::new();
    let channel = state.channel.as_str();
    if state.circuit != Circuit::Closed {
        let open = state.circuit == Circuit::Open;
        findings.push(Finding {
            severity: if open {
                Severity::Critical
            } else {
                Severity::Warning
            },
            code: "CIRCUIT_OPEN",
            title: format!(
                "{channel} circuit is {}",
                if open { "open" } else { "half-open (probing)" }
            ),
            evidence: json!({
                "channel": channel,
                "circuit": state.circuit,
                "since": format_time(&state.circuit_since),
                "failureRatio": round(state.failure_ratio()),
                "calls": state.calls,
            }),
            action: format!(
                "Check the {channel} provider's status and error logs (GET /providers); the \
                 circuit closes by itself when a probe succeeds"
            ),
            request: None,
            weight: 1.0,
        });
    }
    if let (Some(until), Some(reason)) = (&state.paused_until, &state.pause_reason) {
        findings.push(Finding {
            severity: Severity::Warning,
            code: "CHANNEL_PAUSED",
            title: format!("{channel} is paused until {}", format_time(until)),
            evidence: json!({
                "channel": channel,
                "since": state.paused_since.as_ref().map(format_time),
                "pausedUntil": format_time(until),
                "reason": reason,
                "failureRatio": round(state.failure_ratio()),
                "calls": state.calls,
                "throttledTotal": state.throttled_total,
                "misconfiguredTotal": state.misconfigured_total,
            }),
            action: format!(
                "A throttle pauses briefly and needs nothing; a misconfiguration needs the \
                 {channel} provider's settings fixed (see the reason and GET /providers)"
            ),
            request: None,
            weight: 1.0,
        });
    }
    findings
}

pub(super) fn lag_finding(lane: &stats::LaneLag, pending: i64) -> Option<Finding> {
    if lane.lag_seconds < QUEUE_LAG_WARNING_SECONDS {
        return None;
    }
    let severity = if lane.lag_seconds >= QUEUE_LAG_CRITICAL_SECONDS {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let (channel, priority) = (lane.channel.as_str(), lane.priority.as_str());
    Some(Finding {
        severity,
        code: "QUEUE_LAG",
        title: format!(
            "{channel} {priority} is {:.0} s behind",
            lane.lag_seconds.floor()
        ),
        evidence: json!({
            "channel": channel,
            "priority": priority,
            "oldestDue": format_time(&lane.oldest_due),
            "lagSeconds": round(lane.lag_seconds),
            "pending": pending,
        }),
        action: format!(
            "Scale the sweepers (more invocations or WORKER_CONCURRENCY), or check the \
             {channel} pacing ({channel}_RATE_PER_SECOND, pauses and circuit in GET /providers)"
        ),
        request: None,
        weight: lane.lag_seconds,
    })
}

pub(super) fn outbox_findings(health: &outbox::OutboxHealth) -> Vec<Finding> {
    fn destinations(list: &serde_json::Value) -> &[serde_json::Value] {
        list.as_array().map(Vec::as_slice).unwrap_or_default()
    }
    let mut findings: Vec<Finding> = destinations(&health.late_by_destination)
        .iter()
        .map(backlog_finding)
        .collect();
    findings.extend(
        destinations(&health.given_up_by_destination)
            .iter()
            .map(given_up_finding),
    );
    findings
}

/// One destination's events due more than `WEBHOOK_LAG_WARNING_SECONDS` ago (counted
/// among the `WEBHOOK_LATE_SAMPLE` oldest): nothing to replay, they are still waiting; the
/// action says what holds them up.
fn backlog_finding(destination: &serde_json::Value) -> Finding {
    let lag = destination["lagSeconds"].as_f64().unwrap_or(0.0).max(0.0);
    let count = destination["count"].as_i64().unwrap_or(0);
    let endpoint = destination["endpointId"].as_str();
    let routed = destination["routed"].as_bool().unwrap_or(true);
    let behind = format!("{:.0} s behind", lag.floor());
    let (title, action) = match (routed, endpoint) {
        (false, _) => (
            format!("Webhook events wait to be routed, {behind}"),
            "Check that the webhook-drainer runs: routing events to their endpoints is its \
             first step"
                .to_string(),
        ),
        (true, Some(id)) => (
            format!("Webhook events to endpoint {id} are {behind}"),
            format!(
                "Check that the receiver at {} answers 2xx quickly, and that the \
                 webhook-drainer runs (the waiting events: GET \
                 /webhook-events?endpointId={id}&status=PENDING)",
                destination["url"].as_str().unwrap_or("the endpoint's URL")
            ),
        ),
        (true, None) => (
            format!("Webhook events to WEBHOOK_URL are {behind}"),
            "Check that the webhook-drainer runs and that WEBHOOK_URL answers 2xx quickly"
                .to_string(),
        ),
    };
    Finding {
        severity: if lag >= WEBHOOK_LAG_CRITICAL_SECONDS {
            Severity::Critical
        } else {
            Severity::Warning
        },
        code: "WEBHOOK_BACKLOG",
        title,
        evidence: json!({
            "endpointId": endpoint,
            "routed": routed,
            "late": count,
            "lateCountedUpTo": WEBHOOK_LATE_SAMPLE,
            "oldestDue": destination["oldestDue"],
            "lagSeconds": round(lag),
        }),
        action,
        request: None,
        weight: lag,
    }
}

/// One destination's given-up events: fix the receiver, then replay them (the request).
fn given_up_finding(destination: &serde_json::Value) -> Finding {
    let count = destination["count"].as_i64().unwrap_or(0);
    let endpoint = destination["endpointId"].as_str();
    let plural = if count == 1 { "" } else { "s" };
    let (title, action, mut body) = match endpoint {
        Some(id) => (
            format!("{count} webhook event{plural} to endpoint {id} given up in the last 24 h"),
            format!(
                "Fix the receiver at {} (see the errors), then replay: given-up events are \
                 not sent again by themselves",
                destination["url"].as_str().unwrap_or("the endpoint's URL")
            ),
            json!({"endpointId": id}),
        ),
        None => (
            format!("{count} webhook event{plural} to WEBHOOK_URL given up in the last 24 h"),
            "Fix the receiver at WEBHOOK_URL (see the errors), then replay: given-up events \
             are not sent again by themselves (this replay takes every destination's \
             given-up events since then)"
                .to_string(),
            json!({}),
        ),
    };
    body["since"] = destination["since"].clone();
    body["limit"] = json!(1000);
    Finding {
        severity: Severity::Warning,
        code: "WEBHOOK_GIVEN_UP",
        title,
        evidence: json!({
            "endpointId": endpoint,
            "lastDay": count,
            "since": destination["since"],
            "topErrors": destination["topErrors"],
        }),
        action,
        request: Some(json!({"method": "POST", "path": "/webhook-events/retry", "body": body})),
        weight: count as f64,
    }
}

pub(super) fn spike_finding(hourly: &suppressions::HourlySuppressions) -> Option<Finding> {
    let baseline_per_hour = hourly.baseline as f64 / SUPPRESSION_BASELINE_HOURS as f64;
    let factor = hourly.last_hour as f64 / baseline_per_hour.max(1.0);
    if hourly.last_hour < SUPPRESSION_SPIKE_MIN || factor < SUPPRESSION_SPIKE_FACTOR {
        return None;
    }
    let channel = hourly.channel.as_str();
    Some(Finding {
        severity: if factor >= SUPPRESSION_SPIKE_CRITICAL_FACTOR {
            Severity::Critical
        } else {
            Severity::Warning
        },
        code: "SUPPRESSION_SPIKE",
        title: format!(
            "{} {channel} {} suppressions in the last hour",
            hourly.last_hour,
            hourly.reason.to_lowercase().replace('_', " ")
        ),
        evidence: json!({
            "channel": channel,
            "reason": hourly.reason,
            "lastHour": hourly.last_hour,
            "baselinePerHour": round(baseline_per_hour),
            "baselineHours": SUPPRESSION_BASELINE_HOURS,
        }),
        action: format!(
            "Protect the sender's reputation: pause the {channel} campaign traffic that \
             causes it, check the list's source, and the provider's reputation dashboard"
        ),
        request: None,
        weight: factor,
    })
}

pub(super) fn unused_key_finding(key: &auth::UnusedKey) -> Finding {
    let since = key.last_used_at.unwrap_or(key.created_at);
    let days = (Utc::now() - since).num_days();
    Finding {
        severity: Severity::Info,
        code: "UNUSED_KEY",
        title: format!("{} key {:?} unused for {days} days", key.scope, key.name),
        evidence: json!({
            "keyId": key.id,
            "name": key.name,
            "scope": key.scope,
            "createdAt": format_time(&key.created_at),
            "lastUsedAt": key.last_used_at.as_ref().map(format_time),
        }),
        action: format!(
            "Revoke it if nobody needs it: notify-local keys revoke {}",
            key.id
        ),
        request: None,
        weight: days as f64,
    }
}

pub(super) fn stalled_campaign_finding(campaign: &StalledCampaign) -> Option<Finding> {
    let seconds = campaign.stalled_seconds;
    if seconds < CAMPAIGN_STALLED_SECONDS as f64 {
        return None;
    }
    Some(Finding {
        severity: if seconds >= CAMPAIGN_STALLED_CRITICAL_SECONDS as f64 {
            Severity::Critical
        } else {
            Severity::Warning
        },
        code: "CAMPAIGN_STALLED",
        title: format!(
            "Campaign {:?} has not expanded for {:.0} s ({} of {} recipients)",
            campaign.name,
            seconds.floor(),
            campaign.expanded,
            campaign.audience_size
        ),
        evidence: json!({
            "campaignId": campaign.id,
            "name": campaign.name,
            "expanded": campaign.expanded,
            "audienceSize": campaign.audience_size,
            "stalledSeconds": round(seconds),
            "lastProgressAt": format_time(&campaign.progressed_at),
        }),
        action: format!(
            "Check that the sweeper runs, and its log for \"campaign expansion failed\" (a \
             failing chunk is retried every 250 ms and can hold up the campaigns created after \
             it); to give the campaign up: DELETE /campaigns/{}",
            campaign.id
        ),
        // Cancelling gives up the rest of the audience: the operator decides, so no button.
        request: None,
        weight: seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn stalled(seconds: f64) -> StalledCampaign {
        StalledCampaign {
            id: Uuid::nil(),
            name: "Spring".into(),
            expanded: 1000,
            audience_size: 2500,
            progressed_at: Utc::now(),
            stalled_seconds: seconds,
        }
    }

    #[test]
    fn a_campaign_is_stalled_from_five_minutes_and_critical_from_thirty() {
        assert_eq!(stalled_campaign_finding(&stalled(299.9)), None);
        let warning = stalled_campaign_finding(&stalled(300.0)).expect("stalled");
        assert_eq!(warning.severity, Severity::Warning);
        assert_eq!(warning.code, "CAMPAIGN_STALLED");
        assert_eq!(
            warning.title,
            "Campaign \"Spring\" has not expanded for 300 s (1000 of 2500 recipients)"
        );
        assert!(warning.action.contains("DELETE /campaigns/"));
        assert_eq!(warning.request, None);
        let critical = stalled_campaign_finding(&stalled(1800.0)).expect("stalled");
        assert_eq!(critical.severity, Severity::Critical);
    }
}
