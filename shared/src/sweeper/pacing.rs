//! How often this process claims a channel whose provider is paced by token buckets.
//!
//! A paced claim holds the channel's row while it takes the buckets' tokens. Claims that
//! follow each other as fast as they can each find only the tokens refilled while the one
//! before ran: at 2,000 /s, about ten. The lanes of a busy process then queued on the row,
//! and every ten notifications cost a claim, a fence and a record. A process now claims a
//! paced channel at most once per turn, a turn being the time a batch's worth of tokens
//! takes to refill (capped at [`LONGEST_TURN`], the most this adds to a transactional
//! notification's wait), unless the last claim took all it was allowed (a whole batch, or
//! a bulk notification for every bulk place its lane held): then tokens are likely left,
//! and the next claim may go at once.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::ChannelRate;
use crate::notification::Channel;

/// The longest a process waits between two claims of a paced channel.
pub const LONGEST_TURN: Duration = Duration::from_millis(50);

#[derive(Debug, Default, Clone, Copy)]
struct Turn {
    /// When the next claim may go (`None`: now).
    next: Option<Instant>,
    /// A lane wanted to claim before `next` and was refused.
    refused: bool,
}

#[derive(Debug)]
pub struct ClaimPacing {
    /// Per channel, in [`Channel::ALL`] order; zero for a channel without a rate.
    turn_length: [Duration; 3],
    turns: Mutex<[Turn; 3]>,
}

impl ClaimPacing {
    /// Turns of `batch ÷ rate` for each channel with a rate, at most [`LONGEST_TURN`].
    pub fn new(rates: &[Option<ChannelRate>; 3], batch: i64) -> Self {
        let batch = batch.max(1) as f64;
        let turn_length = rates.map(|rate| match rate {
            Some(rate) if rate.transactional + rate.bulk > 0.0 => {
                Duration::from_secs_f64(batch / (rate.transactional + rate.bulk)).min(LONGEST_TURN)
            }
            _ => Duration::ZERO,
        });
        ClaimPacing {
            turn_length,
            turns: Mutex::default(),
        }
    }

    /// No pacing: every claim may go at once.
    pub fn none() -> Self {
        Self::new(&[None, None, None], 1)
    }

    /// Whether a lane may claim `channel` now; if so, it takes the turn.
    pub fn take_turn(&self, channel: Channel, now: Instant) -> bool {
        let index = channel.index();
        let length = self.turn_length[index];
        if length.is_zero() {
            return true;
        }
        let Ok(mut turns) = self.turns.lock() else {
            return true;
        };
        let turn = &mut turns[index];
        match turn.next {
            Some(next) if now < next => {
                turn.refused = true;
                false
            }
            _ => {
                turn.next = Some(now + length);
                turn.refused = false;
                true
            }
        }
    }

    /// After the claim of a turn: one that took all it was allowed leaves the next turn
    /// open now.
    pub fn claimed(&self, channel: Channel, took_all: bool) {
        if !took_all {
            return;
        }
        if let Ok(mut turns) = self.turns.lock() {
            turns[channel.index()].next = None;
        }
    }

    /// When a lane going idle should look again, if a lane was refused a turn since: the
    /// earliest such turn. Only the first lane to ask gets it, so one lane, not all the
    /// idle ones, wakes for each turn.
    pub fn take_retry(&self) -> Option<Instant> {
        let mut turns = self.turns.lock().ok()?;
        turns
            .iter_mut()
            .filter_map(|turn| std::mem::take(&mut turn.refused).then_some(turn.next)?)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn email_at(per_second: f64) -> ClaimPacing {
        let rate = ChannelRate {
            transactional: per_second / 4.0,
            bulk: per_second * 3.0 / 4.0,
        };
        ClaimPacing::new(&[Some(rate), None, None], 100)
    }

    #[test]
    fn a_turn_is_a_batch_of_tokens_and_at_most_the_longest_turn() {
        assert_eq!(email_at(4_000.0).turn_length[0], Duration::from_millis(25));
        assert_eq!(email_at(50.0).turn_length[0], LONGEST_TURN);
        assert_eq!(email_at(4_000.0).turn_length[1], Duration::ZERO);
    }

    #[test]
    fn one_claim_per_turn_unless_the_last_came_back_full() {
        let pacing = email_at(4_000.0);
        let start = Instant::now();
        assert!(pacing.take_turn(Channel::Email, start));
        assert!(!pacing.take_turn(Channel::Email, start + Duration::from_millis(10)));
        assert!(pacing.take_turn(Channel::Email, start + Duration::from_millis(25)));
        pacing.claimed(Channel::Email, true);
        assert!(pacing.take_turn(Channel::Email, start + Duration::from_millis(26)));
        pacing.claimed(Channel::Email, false);
        assert!(!pacing.take_turn(Channel::Email, start + Duration::from_millis(27)));
    }

    #[test]
    fn channels_without_a_rate_are_never_refused() {
        let pacing = email_at(4_000.0);
        let now = Instant::now();
        for _ in 0..3 {
            assert!(pacing.take_turn(Channel::Sms, now));
        }
        assert_eq!(pacing.take_retry(), None);
    }

    #[test]
    fn a_refused_turn_is_retried_by_one_lane() {
        let pacing = email_at(4_000.0);
        let start = Instant::now();
        assert_eq!(pacing.take_retry(), None);
        assert!(pacing.take_turn(Channel::Email, start));
        assert_eq!(pacing.take_retry(), None, "nobody was refused");
        assert!(!pacing.take_turn(Channel::Email, start));
        assert_eq!(pacing.take_retry(), Some(start + Duration::from_millis(25)));
        assert_eq!(pacing.take_retry(), None, "taken by the first lane");
    }
}
