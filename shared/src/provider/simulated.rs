//! The simulated provider: behaves like a real one with idempotency keys, keeping its
//! store in PostgreSQL (`simulated_deliveries`) so every worker process sees it.

use std::sync::Arc;

use deadpool_postgres::Pool;
use futures::FutureExt;
use futures::future::BoxFuture;
use uuid::Uuid;

use super::{Delivery, Provider, ProviderOutcome};
use crate::backoff::Random;
use crate::config::MockProviderConfig;

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
    /// otherwise the key is stored and the delivery accepted. One statement per batch.
    async fn deliver(&self, batch: &[Delivery<'_>]) -> Result<Vec<ProviderOutcome>, String> {
        if !self.config.latency.is_zero() {
            tokio::time::sleep(self.config.latency).await;
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
        let channels: Vec<&str> = batch.iter().map(|d| d.channel.as_str()).collect();
        let recipients: Vec<&str> = batch.iter().map(|d| d.recipient).collect();
        let store: Vec<bool> = planned.iter().map(Option::is_none).collect();

        let db = self
            .pool
            .get()
            .await
            .map_err(|e| format!("simulated provider unavailable: {e}"))?;
        let statement = db
            .prepare_cached(
                "WITH input AS (
                    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bool[])
                        AS i(key, channel, recipient, store)
                ), seen AS (
                    UPDATE simulated_deliveries d SET calls = d.calls + 1
                    FROM input WHERE d.delivery_key = input.key
                    RETURNING d.delivery_key
                ), stored AS (
                    INSERT INTO simulated_deliveries (delivery_key, channel, recipient)
                    SELECT key, channel, recipient FROM input
                    WHERE store AND key NOT IN (SELECT delivery_key FROM seen)
                    ON CONFLICT (delivery_key) DO NOTHING
                    RETURNING delivery_key
                )
                SELECT input.key,
                       input.key IN (SELECT delivery_key FROM seen) AS already,
                       input.key IN (SELECT delivery_key FROM stored) AS stored
                FROM input",
            )
            .await
            .map_err(|e| format!("simulated provider unavailable: {e}"))?;
        let rows = db
            .query(&statement, &[&keys, &channels, &recipients, &store])
            .await
            .map_err(|e| format!("simulated provider unavailable: {e}"))?;

        let mut already = std::collections::HashSet::new();
        let mut stored = std::collections::HashSet::new();
        for row in &rows {
            let key: Uuid = row.try_get(0).map_err(|e| e.to_string())?;
            if row.try_get::<_, bool>(1).map_err(|e| e.to_string())? {
                already.insert(key);
            }
            if row.try_get::<_, bool>(2).map_err(|e| e.to_string())? {
                stored.insert(key);
            }
        }
        Ok(batch
            .iter()
            .zip(planned)
            .map(|(delivery, planned)| {
                if already.contains(&delivery.key) {
                    ProviderOutcome::Delivered { already: true }
                } else if let Some(outcome) = planned {
                    outcome
                } else if stored.contains(&delivery.key) {
                    ProviderOutcome::Delivered { already: false }
                } else {
                    // Stored by a concurrent call between our read and write: delivered once.
                    ProviderOutcome::Delivered { already: true }
                }
            })
            .collect())
    }
}

impl Provider for SimulatedProvider {
    fn send<'a>(&'a self, batch: &'a [Delivery<'a>]) -> BoxFuture<'a, Vec<ProviderOutcome>> {
        async move {
            match self.deliver(batch).await {
                Ok(outcomes) => outcomes,
                Err(error) => batch
                    .iter()
                    .map(|_| ProviderOutcome::Temporary(error.clone()))
                    .collect(),
            }
        }
        .boxed()
    }
}
