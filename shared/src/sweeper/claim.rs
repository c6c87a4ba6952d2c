//! Claiming a step's batch across the channels: the simulated provider's channels together,
//! each paced channel in its own short transaction with its token buckets.

use super::Sweeper;
use super::deliver::log_circuit;
use crate::channel::Circuit;
use crate::domain::Class;
use crate::notification::Channel;
use crate::queue::{self, ClaimMode, Claimed, Limit};

impl Sweeper {
    /// The due work of the `free` channels and of the `paced` ones whose turn this lane
    /// took, each claimed by its own statement, at most `most` in all (at most a batch on
    /// each channel) and at most `bulk_places` bulk notifications: the free channels (the
    /// simulated provider's) together on one connection, then each paced channel (sent by
    /// a real provider) in its own short transaction. (The channels claimed together may
    /// each take `bulk_places`, and each its share of `most` rounded up; what is claimed
    /// beyond them waits for a place at the gate.) Returned in claim order across the
    /// channels. When one channel's claim fails, the others' go back untried and the step
    /// fails.
    pub(super) async fn claim(
        &self,
        free: &[Channel],
        paced: &[Channel],
        most: usize,
        bulk_places: usize,
    ) -> anyhow::Result<Vec<Claimed>> {
        let mut db = self.connection().await?;
        let (batch, lease) = (self.config.batch_size, self.config.visibility_timeout);
        let as_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let bulk = as_i64(bulk_places);
        let each_free = if most < self.batch_places() {
            most.div_ceil(free.len().max(1))
        } else {
            most
        };
        let limit = Limit {
            total: batch.min(as_i64(each_free)),
            bulk,
        };
        let claims = free.iter().map(|channel| {
            queue::claim(
                &db,
                *channel,
                ClaimMode::Free,
                &self.worker_id,
                limit,
                lease,
            )
        });
        let mut claimed = Vec::new();
        let mut failure: Option<anyhow::Error> = None;
        for channel in futures::future::join_all(claims).await {
            match channel {
                Ok(channel_claims) => claimed.extend(channel_claims),
                Err(error) => failure = failure.or(Some(error.into())),
            }
        }
        for &channel in paced {
            let left = most.saturating_sub(claimed.len());
            if left == 0 || failure.is_some() {
                break;
            }
            let bulk_taken = claimed.iter().filter(|c| c.class == Class::Bulk).count();
            let limit = Limit {
                total: batch.min(as_i64(left)),
                bulk: bulk.saturating_sub(as_i64(bulk_taken)).max(0),
            };
            let channel_claims =
                match queue::claim_paced(&mut db, channel, &self.worker_id, limit, lease).await {
                    Ok(paced) => {
                        if paced.probe {
                            log_circuit(channel, Circuit::HalfOpen);
                        }
                        paced.claimed
                    }
                    Err(error) => {
                        failure = Some(error.into());
                        break;
                    }
                };
            // It took all it was allowed, a whole batch or a bulk notification for every
            // bulk place the lane held: tokens may be left for the next claim at once.
            let bulk_claims = channel_claims
                .iter()
                .filter(|c| c.class == Class::Bulk)
                .count();
            let took_all = channel_claims.len() as i64 >= limit.total
                || (limit.bulk > 0 && bulk_claims as i64 >= limit.bulk);
            self.pacing.claimed(channel, took_all);
            claimed.extend(channel_claims);
        }
        if let Some(error) = failure {
            // Each channel's claim committed on its own. Dropped here, what the others
            // took would wait out its lease with an attempt spent: it goes back untried.
            drop(db);
            let taken: Vec<&Claimed> = claimed.iter().collect();
            self.release(&taken).await;
            return Err(error);
        }
        // One batch in claim order across its channels (HIGH first, transactional before
        // bulk, the longest due first): the order the gate starts them and the rate limit
        // admits them in.
        claimed.sort_by_key(Claimed::claim_order);
        Ok(claimed)
    }
}
