//! The provider call and what follows from each answer: the disposition of every
//! notification, and what a real provider's channel learnt (pauses, the circuit).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::Value;

use super::{SweepOutcome, Sweeper};
use crate::audience::unsubscribe::{Subject, Unsubscribe};
use crate::audience::{address, profiles};
use crate::backoff::retry_delay;
use crate::channel::{self, Circuit, Observation};
use crate::domain::Class;
use crate::notification::Channel;
use crate::provider::{Attempt, Call, Delivery, Gate, ProviderOutcome};
use crate::queue::{self, Claimed, Disposition, RecordSummary, Settled};

/// How long a channel pauses after a throttle without `Retry-After`.
const THROTTLE_PAUSE: Duration = Duration::from_secs(1);
/// How long a channel pauses after its provider said it cannot send for us.
const MISCONFIGURED_PAUSE: Duration = Duration::from_secs(60);
/// The pause between two tries at recording a batch's results.
const RECORD_RETRY_PAUSE: Duration = Duration::from_millis(200);

impl Sweeper {
    /// Hands the batch to the provider; each delivery passes `gate` before it starts. A
    /// rendered template (`payloads`, in order) replaces the stored payload.
    pub(super) async fn deliver(
        &self,
        held: &[&Claimed],
        payloads: &[Option<Value>],
        gate: &Gate,
    ) -> Vec<Attempt> {
        let links: Vec<Option<String>> = held.iter().map(|c| self.unsubscribe_link(c)).collect();
        let batch: Vec<Delivery<'_>> = held
            .iter()
            .zip(&links)
            .zip(payloads)
            .map(|((c, link), rendered)| Delivery {
                key: c.id,
                channel: c.channel,
                class: c.class,
                recipient: &c.recipient,
                payload: rendered.as_ref().unwrap_or(&c.payload),
                rendered: rendered.is_some(),
                unsubscribe_url: link.as_deref(),
            })
            .collect();
        let attempts = self.provider.send(&batch, gate).await;
        if attempts.len() == batch.len() {
            return attempts;
        }
        let error = format!(
            "Provider answered {} results for {} deliveries",
            attempts.len(),
            batch.len()
        );
        batch
            .iter()
            .map(|_| Attempt::now(ProviderOutcome::Temporary(error.clone())))
            .collect()
    }

    /// The one-click unsubscribe link a bulk email carries: for the profile it was
    /// addressed through, or for its bare address, and its category.
    fn unsubscribe_link(&self, claim: &Claimed) -> Option<String> {
        if claim.class != Class::Bulk || claim.channel != Channel::Email {
            return None;
        }
        let subject = match &claim.recipient_id {
            Some(id) => Subject::Profile {
                owner: profiles::owner(claim.owner_key_id),
                id: id.clone(),
            },
            None => Subject::Address(claim.recipient.clone()),
        };
        let unsubscribe = Unsubscribe {
            subject,
            channel: claim.channel,
            category: claim.category.clone(),
        };
        Some(unsubscribe.url(&self.audience.secret, &self.audience.public_base_url))
    }

    /// Decides what happens next from the provider's answer and the attempts left.
    pub(super) fn dispose(&self, claim: &Claimed, outcome: &ProviderOutcome) -> Disposition {
        match outcome.clone() {
            ProviderOutcome::Delivered { message_id, .. } => Disposition::Sent { message_id },
            ProviderOutcome::Permanent(error) => Disposition::Failed {
                error,
                suppress: false,
            },
            ProviderOutcome::InvalidRecipient(error) => Disposition::Failed {
                error,
                suppress: true,
            },
            ProviderOutcome::Temporary(error) if claim.is_last_attempt() => {
                Disposition::DeadLettered { error }
            }
            ProviderOutcome::Temporary(error) => {
                let attempt = u32::try_from(claim.attempt_count).unwrap_or(1);
                let delay = retry_delay(&self.retry, attempt, self.random.unit());
                Disposition::Retry { error, delay }
            }
            ProviderOutcome::Throttled {
                retry_after,
                reason,
            } => Disposition::Refund {
                error: reason,
                delay: retry_after.unwrap_or(THROTTLE_PAUSE),
            },
            ProviderOutcome::Misconfigured(error) => Disposition::Refund {
                error,
                delay: MISCONFIGURED_PAUSE,
            },
        }
    }

    /// Records what became of a batch the provider was called for. Giving up here would
    /// leave the claims to expire and be sent again, so a failure that passes (no
    /// connection free in time under load, a lost connection, a restarting server) is
    /// retried until the lease would be over; recording is idempotent: a row changes only
    /// while this claim still holds it. Any other failure is the step's at once.
    pub(super) async fn record(&self, settled: &[Settled<'_>]) -> anyhow::Result<RecordSummary> {
        let give_up = Instant::now() + self.config.visibility_timeout;
        let mut retried = false;
        loop {
            let (error, passes) = match self.pool.get().await {
                Ok(db) => match queue::record(&db, &self.worker_id, settled).await {
                    // An earlier try may have committed while this one waited for its
                    // rows: then this statement's snapshot could not see that try's
                    // attempt rows and names its results as taken over. Recording once
                    // more changes nothing and reads a snapshot that does see them.
                    Ok(summary) if retried && !summary.taken_over.is_empty() => {
                        return Ok(queue::record(&db, &self.worker_id, settled)
                            .await
                            .unwrap_or(summary));
                    }
                    Ok(summary) => return Ok(summary),
                    Err(error) => {
                        let passes = passes(&error);
                        (anyhow::Error::from(error), passes)
                    }
                },
                Err(error) => (anyhow::Error::from(error), true),
            };
            if !passes || Instant::now() + RECORD_RETRY_PAUSE >= give_up {
                return Err(error);
            }
            tracing::warn!(error = %crate::telemetry::describe(&error), results = settled.len(), "could not record a batch's results; retrying");
            tokio::time::sleep(RECORD_RETRY_PAUSE).await;
            retried = true;
        }
    }

    /// The disposition of `claim` after `call`, ready to record.
    pub(super) fn settle<'a>(&self, claim: &'a Claimed, call: &'a Call) -> Settled<'a> {
        let disposition = self.dispose(claim, &call.outcome);
        let suppress_hash = matches!(disposition, Disposition::Failed { suppress: true, .. })
            .then(|| address::hash(&self.audience.secret, claim.channel, &claim.recipient));
        Settled {
            claim,
            disposition,
            call,
            suppress_hash,
        }
    }

    /// Tells each channel sent by a real provider what this batch showed: calls and
    /// temporary failures for its circuit, and a pause after a throttle or a
    /// misconfiguration. A change of circuit is logged once, here.
    pub(super) async fn observe(&self, held: &[&Claimed], attempts: &[Attempt]) {
        let mut seen: HashMap<Channel, Observation> = HashMap::new();
        for (claim, attempt) in held.iter().zip(attempts) {
            let Some(outcome) = attempt.outcome() else {
                continue;
            };
            if !self.provider.is_real_for(claim.channel) {
                continue;
            }
            let observation = seen.entry(claim.channel).or_default();
            observation.calls += 1;
            let pause = match outcome {
                ProviderOutcome::Temporary(_) => {
                    observation.temporary += 1;
                    None
                }
                ProviderOutcome::Throttled {
                    retry_after,
                    reason,
                } => {
                    observation.throttled += 1;
                    Some((retry_after.unwrap_or(THROTTLE_PAUSE), reason.as_str()))
                }
                ProviderOutcome::Misconfigured(reason) => {
                    observation.misconfigured += 1;
                    tracing::error!(channel = claim.channel.as_str(), %reason, "provider misconfigured; channel paused");
                    Some((MISCONFIGURED_PAUSE, reason.as_str()))
                }
                ProviderOutcome::Delivered { .. }
                | ProviderOutcome::Permanent(_)
                | ProviderOutcome::InvalidRecipient(_) => {
                    observation.answered += 1;
                    None
                }
            };
            if let Some((wait, reason)) = pause {
                let until = Utc::now() + chrono::TimeDelta::from_std(wait).unwrap_or_default();
                if observation.pause.as_ref().is_none_or(|(at, _)| *at < until) {
                    observation.pause = Some((until, reason.to_string()));
                }
            }
        }
        for (channel, observation) in seen {
            let moved = match self.pool.get().await {
                Ok(db) => channel::observe(&db, channel, &observation, &self.circuit)
                    .await
                    .map_err(anyhow::Error::from),
                Err(error) => Err(error.into()),
            };
            match moved {
                Ok((before, after)) if before != after => log_circuit(channel, after),
                Ok(_) => {}
                Err(error) => tracing::warn!(
                    error = %crate::telemetry::describe(&error),
                    channel = channel.as_str(),
                    "could not record the channel's health"
                ),
            }
        }
    }
}

/// Whether a database failure passes by itself: no answer from the server, or one of the
/// classes of a connection lost, a server shutting down or short of resources, a conflict
/// with another transaction or a lock or statement timeout.
fn passes(error: &tokio_postgres::Error) -> bool {
    error.as_db_error().is_none_or(|answer| {
        matches!(
            answer.code().code().get(..2),
            Some("08" | "40" | "53" | "55" | "57")
        )
    })
}

/// Every state change of a circuit is logged once: opened and closed where a batch's
/// outcomes are observed, half-open where the claim takes the probe.
pub(super) fn log_circuit(channel: Channel, circuit: Circuit) {
    match circuit {
        Circuit::Open => tracing::error!(channel = channel.as_str(), "circuit opened"),
        Circuit::Closed => tracing::warn!(channel = channel.as_str(), "circuit closed"),
        Circuit::HalfOpen => tracing::info!(channel = channel.as_str(), "circuit half-open"),
    }
}

/// Counts in `outcome` what a record did: each result under its disposition, except those
/// another sweeper took over while their calls were out, which are `lost` (that sweeper
/// sends them again, with the same delivery key).
pub(super) fn count_recorded(
    outcome: &mut SweepOutcome,
    settled: &[Settled<'_>],
    summary: &RecordSummary,
) {
    for result in settled {
        if summary.was_taken_over(result.claim.id) {
            outcome.lost += 1;
        } else {
            tally(outcome, result.claim, &result.disposition);
        }
    }
    if !summary.taken_over.is_empty() {
        tracing::warn!(
            lost = summary.taken_over.len(),
            "results not recorded: another sweeper took their claims over while the calls were out"
        );
    }
}

/// Counts a disposition in the step's outcome and logs it.
fn tally(outcome: &mut SweepOutcome, claim: &Claimed, disposition: &Disposition) {
    match disposition {
        Disposition::Sent { .. } => {
            outcome.sent += 1;
            tracing::debug!(notification_id = %claim.id, attempt = claim.attempt_count, "sent")
        }
        Disposition::Retry { delay, .. } => {
            outcome.retried += 1;
            tracing::info!(
                notification_id = %claim.id, attempt = claim.attempt_count,
                retry_in_ms = delay.as_millis() as u64, "temporary failure; will retry"
            )
        }
        Disposition::Failed { suppress, .. } => {
            outcome.failed += 1;
            tracing::warn!(
                notification_id = %claim.id, attempt = claim.attempt_count,
                address_suppressed = suppress, "permanent failure"
            )
        }
        Disposition::DeadLettered { .. } => {
            outcome.dead_lettered += 1;
            tracing::warn!(notification_id = %claim.id, attempt = claim.attempt_count, "dead-lettered")
        }
        Disposition::Refund { delay, .. } => {
            outcome.refunded += 1;
            tracing::info!(
                notification_id = %claim.id, due_in_ms = delay.as_millis() as u64,
                "provider refused to work; attempt refunded"
            )
        }
    }
}
