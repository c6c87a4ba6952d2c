//! `GET /digest`: what needs attention now, ranked, each finding with its evidence and the
//! action that fixes it. Every figure is one indexed aggregate read by the module that
//! owns its table (queue, channel, webhook outbox, suppressions, keys, campaigns); this
//! module only decides what is a finding, how severe, and in which order.

mod findings;

pub use findings::{
    CAMPAIGN_STALLED_CRITICAL_SECONDS, CAMPAIGN_STALLED_LISTED, CAMPAIGN_STALLED_SECONDS,
    DEAD_LETTER_CRITICAL, DEAD_LETTER_WINDOW_SECONDS, QUEUE_LAG_CRITICAL_SECONDS,
    QUEUE_LAG_WARNING_SECONDS, SUPPRESSION_BASELINE_HOURS, SUPPRESSION_SPIKE_CRITICAL_FACTOR,
    SUPPRESSION_SPIKE_FACTOR, SUPPRESSION_SPIKE_MIN, UNUSED_KEY_DAYS,
    WEBHOOK_GIVEN_UP_WINDOW_SECONDS, WEBHOOK_LAG_CRITICAL_SECONDS, WEBHOOK_LAG_WARNING_SECONDS,
    WEBHOOK_LATE_SAMPLE,
};

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use serde_json::Value;

use crate::audience::suppressions;
use crate::auth;
use crate::channel;
use crate::config::CircuitConfig;
use crate::content::campaigns;
use crate::notification::Status;
use crate::queue::stats;
use crate::webhook::outbox;
use findings::{
    channel_findings, dead_letter_finding, lag_finding, outbox_findings, spike_finding,
    stalled_campaign_finding, unused_key_finding,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Critical,
    Warning,
    Info,
}

/// One thing that needs attention.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub severity: Severity,
    pub code: &'static str,
    pub title: String,
    pub evidence: Value,
    pub action: String,
    /// The API call that carries out the action, when one does (`{method, path, body}`):
    /// the console shows it as a button.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<Value>,
    /// Orders findings of one severity: the larger, the higher.
    #[serde(skip)]
    pub weight: f64,
}

/// The body of `GET /digest`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Digest {
    #[serde(serialize_with = "crate::notification::serialize_time")]
    pub generated_at: DateTime<Utc>,
    pub findings: Vec<Finding>,
}

/// Reads every source (the statements are sent together on one connection) and ranks the
/// findings: critical, then warning, then info; within a severity the heaviest first.
pub async fn read(
    db: &impl GenericClient,
    circuit: &CircuitConfig,
) -> Result<Digest, tokio_postgres::Error> {
    let (dead, lanes, breakdown, channels, outbox_health, spikes, keys, stalled) = tokio::join!(
        stats::dead_letter_growth(db, DEAD_LETTER_WINDOW_SECONDS),
        stats::lag_by_lane(db),
        stats::breakdown(db),
        channel::read(db, circuit),
        outbox::health(
            db,
            WEBHOOK_GIVEN_UP_WINDOW_SECONDS,
            WEBHOOK_LAG_WARNING_SECONDS,
            WEBHOOK_LATE_SAMPLE
        ),
        suppressions::hourly(db, SUPPRESSION_BASELINE_HOURS),
        auth::unused_keys(db, UNUSED_KEY_DAYS),
        campaigns::stalled(db, CAMPAIGN_STALLED_SECONDS, CAMPAIGN_STALLED_LISTED),
    );
    let now = Utc::now();
    let breakdown = breakdown?;
    let dead_lettered_total = breakdown
        .iter()
        .filter(|b| b.status == Status::DeadLettered)
        .map(|b| b.count)
        .sum();
    let mut findings = Vec::new();
    findings.extend(dead_letter_finding(&dead?, dead_lettered_total));
    findings.extend(channels?.iter().flat_map(channel_findings));
    findings.extend(lanes?.iter().filter_map(|lane| {
        let pending = breakdown
            .iter()
            .filter(|b| {
                b.status == Status::Pending
                    && b.channel == lane.channel
                    && b.priority == lane.priority
            })
            .map(|b| b.count)
            .sum();
        lag_finding(lane, pending)
    }));
    findings.extend(outbox_findings(&outbox_health?));
    findings.extend(spikes?.iter().filter_map(spike_finding));
    findings.extend(keys?.iter().map(unused_key_finding));
    findings.extend(stalled?.iter().filter_map(stalled_campaign_finding));
    Ok(Digest {
        generated_at: now,
        findings: rank(findings),
    })
}

/// Critical first, then warning, then info; the heaviest first within a severity; then by
/// code and title so equal findings keep one order.
pub fn rank(mut findings: Vec<Finding>) -> Vec<Finding> {
    findings.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then(b.weight.total_cmp(&a.weight))
            .then(a.code.cmp(b.code))
            .then(a.title.cmp(&b.title))
    });
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn finding(severity: Severity, code: &'static str, weight: f64) -> Finding {
        Finding {
            severity,
            code,
            title: code.to_string(),
            evidence: json!({}),
            action: String::new(),
            request: None,
            weight,
        }
    }

    #[test]
    fn ranking_is_by_severity_then_weight() {
        let ranked = rank(vec![
            finding(Severity::Info, "UNUSED_KEY", 500.0),
            finding(Severity::Warning, "QUEUE_LAG", 90.0),
            finding(Severity::Critical, "DLQ_GROWTH", 100.0),
            finding(Severity::Warning, "DLQ_GROWTH", 5.0),
            finding(Severity::Critical, "CIRCUIT_OPEN", 1.0),
        ]);
        let order: Vec<_> = ranked.iter().map(|f| (f.severity, f.code)).collect();
        assert_eq!(
            order,
            vec![
                (Severity::Critical, "DLQ_GROWTH"),
                (Severity::Critical, "CIRCUIT_OPEN"),
                (Severity::Warning, "QUEUE_LAG"),
                (Severity::Warning, "DLQ_GROWTH"),
                (Severity::Info, "UNUSED_KEY"),
            ]
        );
    }
}
