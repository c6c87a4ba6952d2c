//! The simulated provider: behaves like a real one with idempotency keys, keeping its
//! store in PostgreSQL (`simulated_deliveries`) so every worker process sees it.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use deadpool_postgres::Pool;
use futures::FutureExt;
use futures::future::BoxFuture;
use uuid::Uuid;

use super::{Attempt, Call, Delivery, Gate, Provider, ProviderOutcome};
use crate::backoff::Random;
use crate::config::MockProviderConfig;
use crate::sql::{Statement, statement};

const DELIVER: Statement = statement!("simulated_deliveries/deliver");

/// When a simulated call started and when the provider took the message.
type Span = (DateTime<Utc>, DateTime<Utc>);

pub const REJECTED: &str = "Recipient rejected by provider";
pub const OUTAGE: &str = "Simulated provider outage";

pub struct SimulatedProvider {
    pool: Pool,
    config: MockProviderConfig,
    random: Arc<dyn Random>,
}

impl SimulatedProvider {
    pub fn new(pool: Pool, config: MockProviderConfig, random: Arc<dyn Random>) -> Self {
        SimulatedProvider {
            pool,
            config,
            random,
        }
    }

    /// Per delivery, in this order: a stored key is "already delivered"; a recipient
    /// starting with `invalid` is rejected; with probability `failure_rate` an outage;
    /// otherwise the key is stored and the delivery accepted. One statement for the batch.
    async fn deliver(
        &self,
        batch: &[Delivery<'_>],
        taken_at: &[DateTime<Utc>],
    ) -> Result<Vec<ProviderOutcome>, String> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        // Decide chance before looking at the store, so the randomness consumed does not
        // depend on what other workers did.
        let planned: Vec<Option<ProviderOutcome>> = batch
            .iter()
            .map(|d| {
                if d.recipient.starts_with("invalid") {
                    Some(ProviderOutcome::Permanent(REJECTED.to_string()))
                } else if self.config.failure_rate > 0.0
                    && self.random.unit() < self.config.failure_rate
                {
                    Some(ProviderOutcome::Temporary(OUTAGE.to_string()))
                } else {
                    None
                }
            })
            .collect();
        let keys: Vec<Uuid> = batch.iter().map(|d| d.key).collect();
        let channels: Vec<crate::notification::Channel> = batch.iter().map(|d| d.channel).collect();
        let recipients: Vec<&str> = batch.iter().map(|d| d.recipient).collect();
        let store: Vec<bool> = planned.iter().map(Option::is_none).collect();
        let contents: Vec<Option<&serde_json::Value>> = batch
            .iter()
            .map(|d| d.rendered.then_some(d.payload))
            .collect();

        let db = self
            .pool
            .get()
            .await
            .map_err(|e| format!("simulated provider unavailable: {e}"))?;
        let statement = DELIVER
            .prepare(&db)
            .await
            .map_err(|e| format!("simulated provider unavailable: {e}"))?;
        let rows = db
            .query(
                &statement,
                &[&keys, &channels, &recipients, &store, &taken_at, &contents],
            )
            .await
            .map_err(|e| format!("simulated provider unavailable: {e}"))?;

        let mut already = std::collections::HashSet::new();
        let mut stored = std::collections::HashSet::new();
        for row in &rows {
            let key: Uuid = row.try_get("key").map_err(|e| e.to_string())?;
            if row
                .try_get::<_, bool>("already")
                .map_err(|e| e.to_string())?
            {
                already.insert(key);
            }
            if row
                .try_get::<_, bool>("stored")
                .map_err(|e| e.to_string())?
            {
                stored.insert(key);
            }
        }
        Ok(batch
            .iter()
            .zip(planned)
            .map(|(delivery, planned)| {
                if already.contains(&delivery.key) {
                    ProviderOutcome::Delivered {
                        already: true,
                        message_id: None,
                    }
                } else if let Some(outcome) = planned {
                    outcome
                } else if stored.contains(&delivery.key) {
                    ProviderOutcome::delivered()
                } else {
                    // Stored by a concurrent call between our read and write: delivered once.
                    ProviderOutcome::Delivered {
                        already: true,
                        message_id: None,
                    }
                }
            })
            .collect())
    }
}

impl Provider for SimulatedProvider {
    fn name(&self) -> &'static str {
        "simulated"
    }

    /// Each delivery takes its place at the gate and waits `MOCK_LATENCY_MS` (the call a
    /// real provider would make); the idempotency store then answers for every delivery
    /// that got through in one statement.
    fn send<'a>(
        &'a self,
        batch: &'a [Delivery<'a>],
        gate: &'a Gate,
    ) -> BoxFuture<'a, Vec<Attempt>> {
        async move {
            let latency = self.config.latency;
            // Each call ends with the time the "provider" took the message, or early
            // with what became of it.
            let calls = batch.iter().map(|delivery| async {
                let Some(_place) = gate.start(delivery.key, delivery.class).await else {
                    return Err(Attempt::NotStarted);
                };
                let started_at = Utc::now();
                if !latency.is_zero()
                    && tokio::time::timeout(gate.timeout(), tokio::time::sleep(latency))
                        .await
                        .is_err()
                {
                    return Err(Attempt::Finished(Call {
                        outcome: gate.timed_out(),
                        started_at,
                        finished_at: Utc::now(),
                    }));
                }
                Ok((started_at, Utc::now()))
            });
            let calls: Vec<Result<Span, Attempt>> = futures::future::join_all(calls).await;
            let (through, times): (Vec<Delivery<'_>>, Vec<DateTime<Utc>>) = batch
                .iter()
                .zip(&calls)
                .filter_map(|(delivery, call)| call.as_ref().ok().map(|(_, at)| (*delivery, *at)))
                .unzip();
            let mut stored = match self.deliver(&through, &times).await {
                Ok(outcomes) => outcomes,
                Err(error) => through
                    .iter()
                    .map(|_| ProviderOutcome::Temporary(error.clone()))
                    .collect(),
            }
            .into_iter();
            calls
                .into_iter()
                .map(|call| match call {
                    Err(attempt) => attempt,
                    // The call ended when the "provider" took the message, not when the
                    // batch's last call let the store answer for all of them.
                    Ok((started_at, taken_at)) => Attempt::Finished(Call {
                        outcome: stored.next().unwrap_or_else(|| {
                            ProviderOutcome::Temporary("simulated provider lost a result".into())
                        }),
                        started_at,
                        finished_at: taken_at,
                    }),
                })
                .collect()
        }
        .boxed()
    }
}
