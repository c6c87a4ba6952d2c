//! When a notification is due and when it expires: `sendAt` (bounded to a year ahead), and
//! `expiresAt` or `ttlSeconds`.

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use serde_json::Value;

use crate::intake::times::parse_iso;
use crate::problems::Problems;
use crate::queue::{Due, Expiry};

pub const SEND_AT_HORIZON_DAYS: i64 = 365;

pub const TTL_SECONDS_MAX: i64 = 2_592_000;

/// `expiresAt` (absolute, not before the due time; one at the due time itself expires when
/// due, since a claim takes only what has not expired) or `ttlSeconds` (from the due
/// time), not both: `Some(None)` when neither is given, `None` after a problem. Each is
/// checked when given, then that at most one is, so every failing field is reported.
pub(super) fn expiry(
    object: &serde_json::Map<String, Value>,
    now: DateTime<Utc>,
    due: Option<Due>,
    problems: &mut Problems,
) -> Option<Option<Expiry>> {
    let at = object
        .get("expiresAt")
        .map(|at| expires_at(at, now, due, problems));
    let ttl = object
        .get("ttlSeconds")
        .map(|ttl| ttl_seconds(ttl, problems));
    match (at, ttl) {
        (None, None) => Some(None),
        (Some(at), None) => at.map(|at| Some(Expiry::At(at))),
        (None, Some(ttl)) => ttl.map(|seconds| Some(Expiry::AfterSeconds(seconds))),
        (Some(_), Some(_)) => {
            problems.add(
                "expiresAt",
                "Provide at most one of expiresAt or ttlSeconds",
            );
            None
        }
    }
}

/// `expiresAt`: an ISO 8601 date-time not before the time the notification is due.
fn expires_at(
    at: &Value,
    now: DateTime<Utc>,
    due: Option<Due>,
    problems: &mut Problems,
) -> Option<DateTime<Utc>> {
    let parsed = at
        .as_str()
        .ok_or_else(|| "expiresAt must be a valid ISO 8601 date-time".to_string())
        .and_then(|text| parse_iso("expiresAt", text));
    let earliest = match due {
        Some(Due::At(at)) => at.max(now),
        Some(Due::AfterSeconds(seconds)) => now + TimeDelta::seconds(i64::from(seconds)),
        None => now,
    };
    match parsed {
        Ok(at) if at < earliest => {
            problems.add(
                "expiresAt",
                "expiresAt must not be before the time it is due",
            );
            None
        }
        Ok(at) => Some(at),
        Err(message) => {
            problems.add("expiresAt", message);
            None
        }
    }
}

/// `ttlSeconds`: a whole number of seconds from 1 to [`TTL_SECONDS_MAX`].
fn ttl_seconds(ttl: &Value, problems: &mut Problems) -> Option<i32> {
    match crate::problems::integer(ttl) {
        Some(seconds) if (1..=TTL_SECONDS_MAX).contains(&seconds) => Some(seconds as i32),
        _ => {
            problems.add(
                "ttlSeconds",
                format!("ttlSeconds must be an integer between 1 and {TTL_SECONDS_MAX}"),
            );
            None
        }
    }
}

/// Strict ISO-8601 date-time: `YYYY-MM-DDTHH:MM[:SS[.fraction]]` and an explicit offset.
pub(super) fn parse_send_at(value: &Value, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let Some(text) = value.as_str() else {
        return Err("sendAt must be a valid ISO 8601 date-time".into());
    };
    let at = to_milliseconds(parse_iso("sendAt", text)?);
    if at - now > TimeDelta::days(SEND_AT_HORIZON_DAYS) {
        return Err("sendAt must be within 365 days from now".into());
    }
    Ok(at)
}

/// `at` to the millisecond, the precision every time is shown with: a `sendAt` given to the
/// microsecond is stored as it is shown, and replayed as `…00.000Z` or `…00Z` it is the
/// same request.
pub fn to_milliseconds(at: DateTime<Utc>) -> DateTime<Utc> {
    at.duration_trunc(TimeDelta::milliseconds(1)).unwrap_or(at)
}
