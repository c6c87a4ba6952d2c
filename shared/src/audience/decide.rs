//! The decision at enqueue, in this order: a recipient profile must have an address for
//! the channel; a suppressed address is never sent to (whatever the class); bulk traffic
//! does not reach a person who unsubscribed from everything; a category opt-out holds for
//! both classes; bulk traffic due inside quiet hours waits until they end. Everything it
//! reads comes from [`Facts`], read once for a whole batch.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::address;
use super::quiet::{self, QuietHours};
use crate::domain::{Class, RECIPIENT_MAX, SuppressionReason};
use crate::notification::Channel;

/// Who a notification is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// An address given by the client.
    Address(&'a str),
    /// A recipient profile, by its id.
    Profile(&'a str),
}

/// What the rules need to know of one notification.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub channel: Channel,
    pub class: Class,
    pub category: &'a str,
    pub target: Target<'a>,
    /// When it would be due (the database clock decides the exact instant later).
    pub due: DateTime<Utc>,
}

/// A recipient profile as the rules read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub email: Option<String>,
    pub phone: Option<String>,
    pub push_tokens: Vec<String>,
    pub timezone: Tz,
    /// The language tag templates are rendered in.
    pub locale: String,
    pub quiet_hours: Option<QuietHours>,
    pub unsubscribed_all: bool,
    /// (category, channel) pairs opted out of; category `*` means every bulk category.
    pub opt_outs: HashSet<(String, Channel)>,
}

impl Profile {
    /// The address of `channel` (the first device token for push; one longer than a
    /// recipient may be, kept from before profiles were held to that, is passed over).
    pub fn address(&self, channel: Channel) -> Option<&str> {
        match channel {
            Channel::Email => self.email.as_deref(),
            Channel::Sms => self.phone.as_deref(),
            Channel::Push => self
                .push_tokens
                .iter()
                .map(String::as_str)
                .find(|token| token.len() <= RECIPIENT_MAX),
        }
    }
}

/// Everything the rules read for a batch: the profiles it names and which of its
/// addresses are suppressed (by keyed hash).
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub profiles: HashMap<String, Profile>,
    pub suppressed: HashSet<(Channel, String)>,
}

/// What becomes of one notification.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Queued for `address`; `deferred` is the end of the quiet hours it fell in.
    Queue {
        address: String,
        deferred: Option<DateTime<Utc>>,
    },
    /// Stored as SUPPRESSED, never sent. `address` is what the row records.
    Suppress {
        address: String,
        reason: SuppressionReason,
    },
}

/// What a notification addressed through a profile without an address records.
pub const NO_ADDRESS: &str = "[no address]";

pub fn decide(request: &Request<'_>, facts: &Facts, secret: &[u8]) -> Decision {
    let suppress = |address: &str, reason| Decision::Suppress {
        address: address.to_string(),
        reason,
    };
    let (address, profile) = match request.target {
        Target::Address(address) => (address, None),
        Target::Profile(id) => match facts
            .profiles
            .get(id)
            .and_then(|p| p.address(request.channel).map(|a| (a, p)))
        {
            Some((address, profile)) => (address, Some(profile)),
            None => return suppress(NO_ADDRESS, SuppressionReason::NoAddress),
        },
    };
    let hashed = address::hash(secret, request.channel, address);
    if facts.suppressed.contains(&(request.channel, hashed)) {
        return suppress(address, SuppressionReason::SuppressedAddress);
    }
    let Some(profile) = profile else {
        return Decision::Queue {
            address: address.to_string(),
            deferred: None,
        };
    };
    let opted_out = |category: &str| {
        profile
            .opt_outs
            .contains(&(category.to_string(), request.channel))
    };
    let bulk = request.class == Class::Bulk;
    if bulk && (profile.unsubscribed_all || opted_out("*")) {
        return suppress(address, SuppressionReason::Unsubscribed);
    }
    if opted_out(request.category) {
        return suppress(address, SuppressionReason::CategoryOptOut);
    }
    let deferred = match (bulk, profile.quiet_hours) {
        (true, Some(hours)) => quiet::deferred(request.due, profile.timezone, hours),
        _ => None,
    };
    Decision::Queue {
        address: address.to_string(),
        deferred,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveTime;

    const KEY: &[u8] = b"key";

    fn profile() -> Profile {
        Profile {
            email: Some("ada@example.com".into()),
            phone: None,
            push_tokens: vec![],
            timezone: chrono_tz::UTC,
            locale: "en".into(),
            quiet_hours: Some(QuietHours {
                start: NaiveTime::from_hms_opt(22, 0, 0).expect("time"),
                end: NaiveTime::from_hms_opt(8, 0, 0).expect("time"),
            }),
            unsubscribed_all: false,
            opt_outs: HashSet::new(),
        }
    }

    fn request(class: Class, target: Target<'static>) -> Request<'static> {
        Request {
            channel: Channel::Email,
            class,
            category: "news",
            target,
            due: DateTime::parse_from_rfc3339("2026-07-10T23:00:00Z")
                .expect("time")
                .to_utc(),
        }
    }

    fn facts(profile: Profile) -> Facts {
        Facts {
            profiles: HashMap::from([("ada".to_string(), profile)]),
            suppressed: HashSet::new(),
        }
    }

    fn reason(decision: Decision) -> Option<SuppressionReason> {
        match decision {
            Decision::Suppress { reason, .. } => Some(reason),
            Decision::Queue { .. } => None,
        }
    }

    #[test]
    fn the_rules_apply_in_their_order_and_to_their_classes() {
        use SuppressionReason::*;
        let ada = Target::Profile("ada");
        // 1. No address for the channel, or no profile at all.
        let mut sms = request(Class::Transactional, ada);
        sms.channel = Channel::Sms;
        assert_eq!(
            reason(decide(&sms, &facts(profile()), KEY)),
            Some(NoAddress)
        );
        let nobody = request(Class::Transactional, Target::Profile("nobody"));
        assert_eq!(
            reason(decide(&nobody, &facts(profile()), KEY)),
            Some(NoAddress)
        );
        // 2. A suppressed address beats everything after it, for both classes.
        let mut everything = profile();
        everything.unsubscribed_all = true;
        everything.opt_outs.insert(("news".into(), Channel::Email));
        let mut suppressed = facts(everything.clone());
        suppressed.suppressed.insert((
            Channel::Email,
            address::hash(KEY, Channel::Email, "ADA@example.com"),
        ));
        for class in Class::ALL {
            assert_eq!(
                reason(decide(&request(class, ada), &suppressed, KEY)),
                Some(SuppressedAddress)
            );
        }
        // 3. Unsubscribed from everything: bulk only; transactional then meets 4.
        assert_eq!(
            reason(decide(
                &request(Class::Bulk, ada),
                &facts(everything.clone()),
                KEY
            )),
            Some(Unsubscribed)
        );
        assert_eq!(
            reason(decide(
                &request(Class::Transactional, ada),
                &facts(everything),
                KEY
            )),
            Some(CategoryOptOut)
        );
        // 4. The category opt-out holds for both classes; 5. quiet hours only move bulk.
        let mut opted_out = profile();
        opted_out.opt_outs.insert(("news".into(), Channel::Email));
        assert_eq!(
            reason(decide(
                &request(Class::Transactional, ada),
                &facts(opted_out),
                KEY
            )),
            Some(CategoryOptOut)
        );
        assert_eq!(
            decide(&request(Class::Bulk, ada), &facts(profile()), KEY),
            Decision::Queue {
                address: "ada@example.com".into(),
                deferred: Some(
                    DateTime::parse_from_rfc3339("2026-07-11T08:00:00Z")
                        .expect("time")
                        .to_utc()
                )
            }
        );
        assert_eq!(
            decide(&request(Class::Transactional, ada), &facts(profile()), KEY),
            Decision::Queue {
                address: "ada@example.com".into(),
                deferred: None
            }
        );
    }

    #[test]
    fn an_address_alone_is_only_checked_against_the_suppression_list() {
        let mut facts = Facts::default();
        let target = Target::Address("grace@example.com");
        assert!(matches!(
            decide(&request(Class::Bulk, target), &facts, KEY),
            Decision::Queue { deferred: None, .. }
        ));
        facts.suppressed.insert((
            Channel::Email,
            address::hash(KEY, Channel::Email, "grace@example.com"),
        ));
        assert_eq!(
            reason(decide(&request(Class::Transactional, target), &facts, KEY)),
            Some(SuppressionReason::SuppressedAddress)
        );
    }
}
