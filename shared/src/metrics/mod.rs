//! Metrics: the JSON summary of the API contract, the same figures and more in the
//! Prometheus text exposition format ([`prometheus`]), and one CloudWatch Embedded Metric
//! Format line per scheduled-function invocation ([`emf`]). Everything the API serves is
//! computed by SQL aggregates at scrape time, so any process (or Lambda container)
//! answers the same.

pub mod emf;
mod prometheus;

use deadpool_postgres::GenericClient;
use serde::Serialize;

use crate::channel::{self, ChannelState};
use crate::config::CircuitConfig;
use crate::notification::Status;
use crate::queue::stats::{self, LatencyHistogram};
use crate::retention::{self, Deleted};
use crate::webhook::outbox::{self, OutboxCounts};

/// The JSON body of `GET /metrics`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub pending: i64,
    pub processing: i64,
    pub sent: i64,
    pub failed: i64,
    pub dead_lettered: i64,
    pub cancelled: i64,
    pub suppressed: i64,
    pub expired: i64,
    pub queue_lag_seconds: f64,
    pub webhooks: OutboxCounts,
    /// Rows the retention step deleted so far.
    pub retention: Deleted,
}

/// Everything one scrape reads from the database.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub breakdown: Vec<stats::Breakdown>,
    pub queue_lag_seconds: f64,
    pub latency: LatencyHistogram,
    pub webhooks: OutboxCounts,
    /// Every channel's circuit, pause and budgets.
    pub channels: Vec<ChannelState>,
    pub retention: Deleted,
}

impl Snapshot {
    /// One scrape: each figure is one statement, all sent together on one connection.
    pub async fn read(
        db: &impl GenericClient,
        circuit: &CircuitConfig,
    ) -> Result<Self, tokio_postgres::Error> {
        let (breakdown, lag, latency, webhooks, channels, retention) = tokio::join!(
            stats::breakdown(db),
            stats::queue_lag_seconds(db),
            stats::delivery_latency(db),
            outbox::counts(db),
            channel::read(db, circuit),
            retention::deleted_so_far(db),
        );
        Ok(Snapshot {
            breakdown: breakdown?,
            queue_lag_seconds: lag?,
            latency: latency?,
            webhooks: webhooks?,
            channels: channels?,
            retention: retention?,
        })
    }

    pub fn summary(&self) -> Summary {
        let count = |status: Status| {
            self.breakdown
                .iter()
                .filter(|b| b.status == status)
                .map(|b| b.count)
                .sum()
        };
        Summary {
            pending: count(Status::Pending),
            processing: count(Status::Processing),
            sent: count(Status::Sent),
            failed: count(Status::Failed),
            dead_lettered: count(Status::DeadLettered),
            cancelled: count(Status::Cancelled),
            suppressed: count(Status::Suppressed),
            expired: count(Status::Expired),
            queue_lag_seconds: self.queue_lag_seconds,
            webhooks: self.webhooks,
            retention: self.retention,
        }
    }
}
