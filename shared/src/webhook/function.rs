//! The `webhook-drainer` function: its state, built once per container, and one
//! invocation.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use super::{DrainOutcome, WebhookDrainer, run};
use crate::cold_start::ColdStart;
use crate::stop::StopSignal;
use crate::{deadline, metrics};

/// What one `webhook-drainer` invocation reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainReport {
    #[serde(flatten)]
    pub outcome: DrainOutcome,
}

pub struct DrainerFunction {
    pool: deadpool_postgres::Pool,
    drainer: Arc<WebhookDrainer>,
    timeout: std::time::Duration,
}

impl DrainerFunction {
    /// Builds the pool (connections open lazily) and the drainer.
    pub fn new(start: &ColdStart) -> anyhow::Result<Self> {
        let config = &start.config;
        let pool = start.pool()?;
        let drainer = Arc::new(WebhookDrainer::from_config(&pool, config)?);
        Ok(DrainerFunction {
            pool,
            drainer,
            timeout: config.webhook.timeout,
        })
    }

    /// Drains until the deadline nears (leaving room for a POST started just before), then
    /// writes its metrics line and reports.
    pub async fn invoke(&self, deadline: Instant) -> DrainReport {
        let stop = StopSignal::never().with_deadline(deadline::reserve(deadline, self.timeout));
        let outcome = run(self.drainer.clone(), stop).await;
        metrics::emf::emit_drainer(&outcome, &self.pool).await;
        DrainReport { outcome }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_is_the_outcome() {
        let report = DrainReport {
            outcome: DrainOutcome {
                delivered: 2,
                ..DrainOutcome::default()
            },
        };
        let json = serde_json::to_value(report).expect("json");
        assert_eq!(json["delivered"], 2);
    }
}
