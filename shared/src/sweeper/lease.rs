//! A batch while it is out: its leases kept, and the calls that have ended recorded in
//! parts.
//!
//! The start fence leases a batch for the provider calls it expects, but a batch can take
//! longer: its deliveries share the process's `WORKER_CONCURRENCY` places with every other
//! lane, and a slow provider or a deep backlog makes each one wait. A lease that ran out
//! would let another sweeper recover a claim this one still means to send, and the
//! provider would be called twice. So the leases are renewed before a call that starts
//! later could outlast them, and the gate starts no call that could outlast its claim (see
//! [`Holding`]).
//!
//! A provider without an idempotency key (SES, SNS) has taken each message when its call
//! ends. Recorded only once the batch's last call ended, a crash before that would have
//! every call of the batch made again by the sweeper that recovers it; so every
//! `RECORD_PART_INTERVAL` the final results that came in meanwhile are recorded, and a
//! crash repeats at most those of the last interval and the calls in flight.
//!
//! The renewal and the part records take turns on one task: two statements updating the
//! same rows at once from two connections could deadlock each other. A batch that ends
//! within one interval and well within its lease, the usual case, costs neither.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::sync::mpsc::UnboundedReceiver;
use uuid::Uuid;

use super::{SweepOutcome, Sweeper};
use crate::provider::{Call, Holding};
use crate::queue::{self, Claimed, Disposition, Settled};

/// The most time a renewal is given before the calls it covers would have to stop
/// starting.
const MOST_HEADROOM: Duration = Duration::from_secs(5);
/// The least time between two renewals.
const LEAST_PAUSE: Duration = Duration::from_millis(20);
/// The pause after a renewal that failed.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// How often a batch still being delivered records the final results that came in.
const RECORD_PART_INTERVAL: Duration = Duration::from_millis(500);

/// What a batch recorded while it was still being delivered.
#[derive(Debug, Default)]
pub(super) struct RecordedParts {
    pub outcome: SweepOutcome,
    pub recorded: HashSet<Uuid>,
}

impl Sweeper {
    /// Until `delivered`: renews the leases of `claims` (every claim the batch holds) when
    /// due, and records in parts the final results of `sendable` that the gate reports on
    /// `finished`. Returns what it recorded.
    pub(super) async fn mind_batch(
        &self,
        claims: &[&Claimed],
        sendable: &[&Claimed],
        holding: &Holding,
        mut finished: UnboundedReceiver<(Uuid, Call)>,
        delivered: &Notify,
    ) -> RecordedParts {
        let by_id: HashMap<Uuid, &Claimed> = sendable.iter().map(|c| (c.id, *c)).collect();
        let mut parts = RecordedParts::default();
        let mut next_part = Instant::now() + RECORD_PART_INTERVAL;
        let mut next_renewal = Instant::now();
        loop {
            next_renewal = next_renewal.max(self.renewal_due(holding));
            tokio::select! {
                biased;
                () = delivered.notified() => return parts,
                () = tokio::time::sleep_until(next_part.min(next_renewal).into()) => {}
            }
            if Instant::now() >= next_part {
                self.record_part(&by_id, &mut finished, &mut parts).await;
                next_part = Instant::now() + RECORD_PART_INTERVAL;
            }
            if Instant::now() >= next_renewal {
                let open: Vec<&Claimed> = claims
                    .iter()
                    .copied()
                    .filter(|c| !parts.recorded.contains(&c.id))
                    .collect();
                if !self.renew(&open, holding).await {
                    next_renewal = Instant::now() + RETRY_PAUSE;
                }
            }
        }
    }

    /// Renews the leases of `claims` whenever a call that starts later would otherwise
    /// outlast them, and tells `holding`; runs until dropped.
    pub(super) async fn keep_leases(&self, claims: &[&Claimed], holding: &Holding) -> Infallible {
        loop {
            tokio::time::sleep_until(self.renewal_due(holding).into()).await;
            if !self.renew(claims, holding).await {
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }

    /// When the leases must be renewed: before a call started then, lasting the provider
    /// time limit, could outlast them, leaving the renewal time for itself.
    fn renewal_due(&self, holding: &Holding) -> Instant {
        let (lease, timeout) = (self.config.visibility_timeout, self.config.provider_timeout);
        let headroom = (lease.saturating_sub(timeout) / 2).min(MOST_HEADROOM);
        holding
            .held_until()
            .checked_sub(timeout + headroom)
            .unwrap_or_else(Instant::now)
            .max(Instant::now() + LEAST_PAUSE)
    }

    /// One renewal of `claims` to a whole lease; false when it failed. The calls stop
    /// starting once the lease left would not cover one; the claims not sent are handed
    /// back or recovered.
    async fn renew(&self, claims: &[&Claimed], holding: &Holding) -> bool {
        if claims.is_empty() {
            return true;
        }
        let lease = self.config.visibility_timeout;
        let asked_at = Instant::now();
        let renewed = match self.connection().await {
            // Asking for a whole lease renews every claim still held.
            Ok(db) => queue::start_fence(&db, claims, lease, lease)
                .await
                .map_err(anyhow::Error::from),
            Err(error) => Err(error),
        };
        match renewed {
            Ok(kept) => {
                let asked: Vec<Uuid> = claims.iter().map(|c| c.id).collect();
                if kept.len() < asked.len() {
                    tracing::warn!(
                        lost = asked.len() - kept.len(),
                        "claims of a batch being delivered were recovered by another sweeper; they will not be sent from here"
                    );
                }
                holding.renewed(asked_at + lease, &asked, &kept);
                true
            }
            Err(error) => {
                tracing::warn!(error = %crate::telemetry::describe(&error), "could not renew the leases of a batch being delivered");
                false
            }
        }
    }

    /// Records the final results (sent, failed, dead-lettered) reported on `finished`
    /// since the last part. A retry or a refund waits for the batch's record, which comes
    /// after the channel has learnt of it (a pause, the circuit): recorded now, it could
    /// be claimed and called again before then. A part that cannot be recorded is left to
    /// the batch's record too.
    async fn record_part(
        &self,
        by_id: &HashMap<Uuid, &Claimed>,
        finished: &mut UnboundedReceiver<(Uuid, Call)>,
        parts: &mut RecordedParts,
    ) {
        let mut calls = Vec::new();
        while let Ok((id, call)) = finished.try_recv() {
            let Some(claim) = by_id.get(&id) else {
                continue;
            };
            let is_final = matches!(
                self.dispose(claim, &call.outcome),
                Disposition::Sent { .. }
                    | Disposition::Failed { .. }
                    | Disposition::DeadLettered { .. }
            );
            if is_final {
                calls.push((*claim, call));
            }
        }
        if calls.is_empty() {
            return;
        }
        let settled: Vec<Settled<'_>> = calls
            .iter()
            .map(|(claim, call)| self.settle(claim, call))
            .collect();
        let recorded = match self.pool.get().await {
            Ok(db) => queue::record(&db, &self.worker_id, &settled)
                .await
                .map_err(anyhow::Error::from),
            Err(error) => Err(error.into()),
        };
        match recorded {
            Ok(summary) => {
                super::deliver::count_recorded(&mut parts.outcome, &settled, &summary);
                parts
                    .recorded
                    .extend(calls.iter().map(|(claim, _)| claim.id));
            }
            Err(error) => {
                tracing::debug!(error = %crate::telemetry::describe(&error), results = settled.len(), "could not record part of a batch; it is recorded with the batch");
            }
        }
    }
}
