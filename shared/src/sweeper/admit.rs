//! Between the claim and the provider: the start fence, admission against the
//! per-recipient rate limit, and handing claims back untried.

use chrono::{DateTime, Utc};

use super::{FENCE_MARGIN, Sweeper};
use crate::audience::address;
use crate::db::PipelinedTransaction;
use crate::queue::{self, Claimed, Stopped};
use crate::ratelimit;

/// What passed the fence: the claims to send, until when they are held, and how many were
/// deferred or stopped.
pub(super) struct Admitted<'a> {
    pub send: Vec<&'a Claimed>,
    pub held_until: std::time::Instant,
    pub deferred: u64,
    pub stopped: Vec<(uuid::Uuid, Stopped)>,
}

/// How often handing claims back is tried, and the pause between tries.
const RELEASE_TRIES: u32 = 5;
const RELEASE_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(200);

impl Sweeper {
    /// In one short transaction of two round trips: renew the lease of every claim still
    /// held (the start fence), re-check the audience rules (expired, suppressed or opted
    /// out since enqueue: finished here, unsent), then admit the rest against the rate
    /// limit; refused ones go back to PENDING, due when a slot frees, attempt refunded.
    /// No lock outlives the transaction.
    ///
    /// The first round trip is `BEGIN`, the recipients' locks and their reservations, the
    /// fence and the re-check; the second the new reservations, the deferrals and
    /// `COMMIT` (see [`PipelinedTransaction`] for why the order holds).
    pub(super) async fn fence_and_admit<'a>(
        &self,
        claimed: &'a [Claimed],
    ) -> anyhow::Result<Admitted<'a>> {
        let tx = PipelinedTransaction::new(self.connection().await?);
        let db = tx.client();
        tokio::try_join!(queue::prepare_fence(db), ratelimit::prepare(db))?;
        let all: Vec<&Claimed> = claimed.iter().collect();
        let recipients: Vec<&str> = all.iter().map(|c| c.recipient.as_str()).collect();
        // The lease must outlast the first calls: one provider time limit and a margin,
        // capped at a whole lease. Later calls are covered by renewals while the batch is
        // out (see `lease`), so a claim just taken, with its whole lease, is not written
        // again here, however many rounds of WORKER_CONCURRENCY the batch will take.
        let needed =
            (self.config.provider_timeout + FENCE_MARGIN).min(self.config.visibility_timeout);
        // Read before the fence runs: each claim is held at least its lease left from here.
        let fenced_at = std::time::Instant::now();
        let hashes: Vec<String> = all
            .iter()
            .map(|c| address::hash(&self.audience.secret, c.channel, &c.recipient))
            .collect();
        // The re-check reads only claims this worker holds, so it needs no lock; the
        // reservations are read for every claimed recipient (a superset of what is
        // admitted below, which costs nothing and keeps them in this round trip).
        let (begun, reservations, still_held, stopped) = tokio::join!(
            tx.begin(),
            async {
                match &self.rate_limit {
                    Some(limit) => ratelimit::lock_and_read(db, &recipients, limit.window)
                        .await
                        .map(Some),
                    None => Ok(None),
                }
            },
            queue::fence(db, &all, needed, self.config.visibility_timeout),
            queue::recheck(db, &all, &hashes),
        );
        let read = begun
            .and(reservations)
            .and_then(|reservations| Ok((reservations, still_held?, stopped?)));
        let (reservations, fenced, stopped) = match read {
            Ok(read) => read,
            Err(error) => {
                tx.roll_back().await;
                return Err(error.into());
            }
        };
        let held_until = fenced_at + fenced.least_left.unwrap_or(needed).max(needed);
        let still_held = fenced.held;
        let held: Vec<&Claimed> = all
            .into_iter()
            .filter(|c| still_held.contains(&c.id) && !stopped.iter().any(|(id, _)| *id == c.id))
            .collect();
        let admission = match (&self.rate_limit, reservations) {
            (Some(limit), Some(reservations)) => ratelimit::admit(limit, reservations, &held),
            _ => ratelimit::Admission {
                admitted: held,
                ..Default::default()
            },
        };
        let deferred: Vec<(&Claimed, Option<DateTime<Utc>>)> = admission
            .deferred
            .iter()
            .map(|(c, at)| (*c, Some(*at)))
            .collect();
        let (reserved, released, committed) = tokio::join!(
            ratelimit::reserve(db, &admission.reserve),
            queue::release(db, &deferred),
            tx.commit(),
        );
        tx.ended(&committed);
        reserved?;
        released?;
        committed?;
        for (claim, at) in &admission.deferred {
            tracing::info!(notification_id = %claim.id, due_at = %at, "rate limited; deferred");
        }
        Ok(Admitted {
            send: admission.admitted,
            held_until,
            deferred: deferred.len() as u64,
            stopped,
        })
    }

    /// Hands claims back untried, due now. A failure is tried again a few times (a pool
    /// that cannot serve in time under load is the usual cause); what still cannot be
    /// released is recovered when its lease expires.
    pub(super) async fn release(&self, claimed: &[&Claimed]) -> u64 {
        self.release_tries(claimed, RELEASE_TRIES).await
    }

    /// [`Self::release`] with at most `most` tries.
    pub(super) async fn release_tries(&self, claimed: &[&Claimed], most: u32) -> u64 {
        if claimed.is_empty() {
            return 0;
        }
        let batch: Vec<(&Claimed, _)> = claimed.iter().map(|c| (*c, None)).collect();
        let mut tries = 0;
        loop {
            tries += 1;
            let released = match self.pool.get().await {
                Ok(db) => queue::release(&db, &batch)
                    .await
                    .map_err(anyhow::Error::from),
                Err(error) => Err(error.into()),
            };
            match released {
                Ok(count) => return count,
                Err(error) if tries < most => {
                    tracing::debug!(error = %crate::telemetry::describe(&error), "could not release claims; retrying");
                    tokio::time::sleep(RELEASE_RETRY_PAUSE).await;
                }
                Err(error) => {
                    tracing::warn!(error = %crate::telemetry::describe(&error), count = claimed.len(), "could not release claims; their lease will expire");
                    return 0;
                }
            }
        }
    }
}
