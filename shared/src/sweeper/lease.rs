//! Keeping the claims of a batch while it is delivered. The start fence leases a batch for
//! the provider calls it expects, but a batch can take longer: its deliveries share the
//! process's `WORKER_CONCURRENCY` places with every other lane, and a slow provider or a
//! deep backlog makes each one wait. A lease that ran out would let another sweeper recover
//! a claim this one still means to send, and the provider would be called twice. So while a
//! batch is out, its leases are renewed before they could run out, and the gate starts no
//! call that could outlast its claim (see [`Holding`]).

use std::convert::Infallible;
use std::time::{Duration, Instant};

use super::Sweeper;
use crate::provider::Holding;
use crate::queue::{self, Claimed};

/// The most time a renewal is given before the calls it covers would have to stop
/// starting.
const MOST_HEADROOM: Duration = Duration::from_secs(5);
/// The least time between two renewals.
const LEAST_PAUSE: Duration = Duration::from_millis(20);
/// The pause after a renewal that failed.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

impl Sweeper {
    /// Renews the leases of `held` whenever a call that starts later would otherwise
    /// outlast them, and tells `holding`; runs until dropped (when the batch's calls have
    /// ended). A batch quicker than its first lease costs nothing here.
    pub(super) async fn keep_leases(&self, held: &[&Claimed], holding: &Holding) -> Infallible {
        let (lease, timeout) = (self.config.visibility_timeout, self.config.provider_timeout);
        // The time left, after the longest call, for the renewal itself.
        let headroom = (lease.saturating_sub(timeout) / 2).min(MOST_HEADROOM);
        let ids: Vec<uuid::Uuid> = held.iter().map(|c| c.id).collect();
        loop {
            let due = holding
                .held_until()
                .checked_sub(timeout + headroom)
                .unwrap_or_else(Instant::now)
                .max(Instant::now() + LEAST_PAUSE);
            tokio::time::sleep_until(due.into()).await;
            let asked_at = Instant::now();
            let renewed = match self.connection().await {
                // Asking for a whole lease renews every claim still held.
                Ok(db) => queue::start_fence(&db, held, lease, lease)
                    .await
                    .map_err(anyhow::Error::from),
                Err(error) => Err(error),
            };
            match renewed {
                Ok(kept) => {
                    if kept.len() < ids.len() {
                        tracing::debug!(
                            gone = ids.len() - kept.len(),
                            "claims of a batch being delivered no longer held (recorded in part, cancelled or erased)"
                        );
                    }
                    holding.renewed(asked_at + lease, &ids, &kept);
                }
                Err(error) => {
                    // The calls stop starting once the lease left would not cover one;
                    // the claims not sent are handed back or recovered.
                    tracing::warn!(error = %crate::telemetry::describe(&error), "could not renew the leases of a batch being delivered");
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
            }
        }
    }
}
