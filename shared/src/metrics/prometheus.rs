//! The Prometheus text exposition of a [`Snapshot`], encoded by prometheus-client.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Snapshot;
use crate::channel::Circuit;
use crate::notification::Status;
use crate::queue::stats::LatencyHistogram;

impl Snapshot {
    /// Prometheus text exposition (OpenMetrics-compatible), encoded by prometheus-client.
    pub fn prometheus(&self) -> Result<String, std::fmt::Error> {
        type Labels = Vec<(String, String)>;
        let mut registry = Registry::with_prefix("notify");

        let notifications = Family::<Labels, Gauge>::default();
        let attempts = Family::<Labels, Gauge>::default();
        let deferrals = Family::<Labels, Gauge>::default();
        let by_status = Family::<Labels, Gauge>::default();
        let summary = self.summary();
        // Every status is always present, even at zero.
        for (status, value) in [
            (Status::Pending, summary.pending),
            (Status::Processing, summary.processing),
            (Status::Sent, summary.sent),
            (Status::Failed, summary.failed),
            (Status::DeadLettered, summary.dead_lettered),
            (Status::Cancelled, summary.cancelled),
            (Status::Suppressed, summary.suppressed),
            (Status::Expired, summary.expired),
        ] {
            by_status
                .get_or_create(&vec![("status".into(), status.as_str().into())])
                .set(value);
        }
        registry.register(
            "notifications_by_status",
            "Notifications by status",
            by_status,
        );
        for row in &self.breakdown {
            let labels = vec![
                ("status".to_string(), row.status.as_str().to_string()),
                ("channel".to_string(), row.channel.as_str().to_string()),
                ("priority".to_string(), row.priority.as_str().to_string()),
            ];
            notifications.get_or_create(&labels).inc_by(row.count);
            attempts.get_or_create(&labels).inc_by(row.attempts);
            deferrals.get_or_create(&labels).inc_by(row.deferrals);
        }
        registry.register(
            "notifications",
            "Notifications by status, channel and priority",
            notifications,
        );
        registry.register(
            "attempts",
            "Attempts counted by the notifications now in each status, channel and priority (a redrive starts a notification's count again; retention drops it)",
            attempts,
        );
        registry.register(
            "rate_limit_deferrals",
            "Times notifications were held back by the per-recipient rate limit",
            deferrals,
        );

        // A gauge, like the other running counts: the 0.0.4 text format names a counter's
        // samples as its TYPE line does, which prometheus-client's `_total` would not.
        let retention_deleted = Family::<Labels, Gauge>::default();
        for (table, deleted) in [
            ("notifications", self.retention.notifications_deleted),
            ("webhook_events", self.retention.webhook_events_deleted),
        ] {
            retention_deleted
                .get_or_create(&vec![("table".into(), table.into())])
                .set(i64::try_from(deleted).unwrap_or(i64::MAX));
        }
        registry.register(
            "retention_deleted_rows",
            "Rows deleted by the retention step so far, by table",
            retention_deleted,
        );

        let lag = Gauge::<f64, AtomicU64>::default();
        lag.set(self.queue_lag_seconds);
        registry.register(
            "queue_lag_seconds",
            "Age of the oldest due PENDING notification",
            lag,
        );

        registry.register(
            "delivery_latency_seconds",
            "Time from the scheduled moment to SENT, for every sent notification",
            PrecomputedHistogram(self.latency.clone()),
        );

        let webhooks = Family::<Labels, Gauge>::default();
        for (state, value) in [
            ("pending", self.webhooks.pending),
            ("delivered", self.webhooks.delivered),
            ("given_up", self.webhooks.given_up),
        ] {
            webhooks
                .get_or_create(&vec![("state".into(), state.into())])
                .set(value);
        }
        registry.register(
            "webhook_events",
            "Webhook outbox events by dispatch state",
            webhooks,
        );

        let circuit = Family::<Labels, Gauge>::default();
        let paused = Family::<Labels, Gauge>::default();
        let window_calls = Family::<Labels, Gauge>::default();
        let window_temporary = Family::<Labels, Gauge>::default();
        let circuit_since = Family::<Labels, Gauge>::default();
        let paused_until = Family::<Labels, Gauge>::default();
        let failure_ratio = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        let refused = Family::<Labels, Gauge>::default();
        let rate = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        let tokens = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        for state in &self.channels {
            let channel = vec![("channel".to_string(), state.channel.as_str().to_string())];
            for (outcome, calls) in [
                ("THROTTLED", state.throttled_total),
                ("PROVIDER_MISCONFIGURED", state.misconfigured_total),
            ] {
                let mut labels = channel.clone();
                labels.push(("outcome".to_string(), outcome.to_string()));
                refused.get_or_create(&labels).set(calls);
            }
            circuit.get_or_create(&channel).set(match state.circuit {
                Circuit::Closed => 0,
                Circuit::HalfOpen => 1,
                Circuit::Open => 2,
            });
            paused
                .get_or_create(&channel)
                .set(i64::from(state.paused_until.is_some()));
            window_calls.get_or_create(&channel).set(state.calls);
            window_temporary
                .get_or_create(&channel)
                .set(state.temporary);
            circuit_since
                .get_or_create(&channel)
                .set(state.circuit_since.timestamp());
            paused_until
                .get_or_create(&channel)
                .set(state.paused_until.map_or(0, |until| until.timestamp()));
            failure_ratio
                .get_or_create(&channel)
                .set(state.failure_ratio());
            for (class, per_second, now) in &state.budgets {
                let mut labels = channel.clone();
                labels.push(("class".to_string(), class.as_str().to_string()));
                rate.get_or_create(&labels).set(*per_second);
                tokens.get_or_create(&labels).set(*now);
            }
        }
        registry.register(
            "channel_circuit_state",
            "Circuit breaker per channel: 0 closed, 1 half-open, 2 open",
            circuit,
        );
        registry.register(
            "channel_circuit_since_seconds",
            "When the circuit entered its current state (Unix time)",
            circuit_since,
        );
        registry.register(
            "channel_paused_until_seconds",
            "When the channel's pause ends (Unix time; 0 when not paused)",
            paused_until,
        );
        registry.register(
            "channel_failure_ratio",
            "Temporary failures over calls in the circuit breaker's current window",
            failure_ratio,
        );
        registry.register(
            "channel_paused",
            "1 while the channel is paused (throttled or misconfigured provider)",
            paused,
        );
        registry.register(
            "provider_refused_calls",
            "Calls a channel's real provider throttled or refused for the account's configuration, running total by channel and outcome",
            refused,
        );
        registry.register(
            "channel_window_calls",
            "Provider calls in the circuit breaker's current window",
            window_calls,
        );
        registry.register(
            "channel_window_temporary_failures",
            "Temporary failures in the circuit breaker's current window",
            window_temporary,
        );
        registry.register(
            "channel_rate_per_second",
            "Configured rate of a channel's token bucket, per class",
            rate,
        );
        registry.register(
            "channel_tokens",
            "Tokens in a channel's bucket now, per class",
            tokens,
        );

        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry)?;
        Ok(text)
    }
}

/// A histogram whose buckets were counted by the database.
#[derive(Debug)]
struct PrecomputedHistogram(LatencyHistogram);

impl EncodeMetric for PrecomputedHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_histogram::<NoLabelSet>(self.0.sum, self.0.count, &self.0.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}
