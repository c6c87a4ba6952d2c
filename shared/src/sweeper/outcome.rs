//! What a sweep step, an invocation or a whole run did.

use std::ops::AddAssign;

use serde::Serialize;

/// What one step (or a whole run) did. Serialised as the `sweeper` Lambda's summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepOutcome {
    pub claimed: u64,
    pub sent: u64,
    pub failed: u64,
    pub retried: u64,
    pub dead_lettered: u64,
    /// Refused by the per-recipient rate limit; due again when a slot frees.
    pub deferred: u64,
    /// Expired claims returned to the queue (or dead-lettered after reconciliation).
    pub recovered: u64,
    /// Claimed but handed back untried (shutdown, deadline, error before sending).
    pub released: u64,
    /// Claims found taken over by another worker: at the start fence, by a lease renewal
    /// before their call started, or by the record after it ended (the result is not
    /// recorded; the worker that holds the claim now sends it with the same key).
    pub lost: u64,
    /// Sent back untried with the attempt refunded: the provider throttled or could not
    /// send for us.
    pub refunded: u64,
    /// Stopped unsent by the audience re-check at send (suppressed or opted out since
    /// enqueue).
    pub suppressed: u64,
    /// Stopped unsent at send because their person was erased since the claim.
    pub cancelled: u64,
    /// Past their `expiresAt`: marked EXPIRED by the expiry step or stopped at send.
    pub expired: u64,
    /// Finished notifications deleted by the retention step (with their attempts and
    /// webhook events).
    pub purged: u64,
    /// Delivered or given-up webhook events deleted by the retention step.
    pub webhook_events_purged: u64,
    /// Steps that failed (database unreachable, login refused, missing schema, TLS): the
    /// alarm on `FailedSteps` sees what the invocation's success would hide.
    pub failed_steps: u64,
    /// Some channel had a full batch due: more work is likely waiting.
    #[serde(skip)]
    pub full: bool,
    /// The claim took as much bulk work as it had bulk places for, fewer than a batch:
    /// bulk work may be waiting for places to free.
    #[serde(skip)]
    pub bulk_capped: bool,
}

impl AddAssign for SweepOutcome {
    fn add_assign(&mut self, other: Self) {
        self.claimed += other.claimed;
        self.sent += other.sent;
        self.failed += other.failed;
        self.retried += other.retried;
        self.dead_lettered += other.dead_lettered;
        self.deferred += other.deferred;
        self.recovered += other.recovered;
        self.released += other.released;
        self.lost += other.lost;
        self.refunded += other.refunded;
        self.suppressed += other.suppressed;
        self.cancelled += other.cancelled;
        self.expired += other.expired;
        self.purged += other.purged;
        self.webhook_events_purged += other.webhook_events_purged;
        self.failed_steps += other.failed_steps;
        self.full |= other.full;
        self.bulk_capped |= other.bulk_capped;
    }
}
