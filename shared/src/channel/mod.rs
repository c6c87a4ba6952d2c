//! What every sweeper shares about a channel: its token buckets (pacing, taken in the claim
//! statement) and its health (pauses and the circuit breaker). The only SQL on
//! `token_buckets`, `channel_health` and `channel_calls` outside the paced claim.

use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;

use crate::config::{ChannelRate, CircuitConfig};
use crate::domain::Class;
use crate::notification::Channel;
use crate::queue::millis;
use crate::sql::{Statement, statement};

const CONFIGURE: Statement = statement!("token_buckets/configure");
const REMOVE: Statement = statement!("token_buckets/remove");
const FORGET_HEALTH: Statement = statement!("channel_health/forget");
const READ_BUCKETS: Statement = statement!("token_buckets/read");
const OBSERVE: Statement = statement!("channel_health/observe");
const READ_HEALTH: Statement = statement!("channel_health/read");

/// Writes the configured rates of the channels sent by real providers (`paced`); a
/// channel without a rate loses its buckets, and a channel the simulated provider sends
/// loses any circuit or pause a real provider left. Every process should run with the
/// same providers and rates: the last to start wins.
pub async fn configure_channels(
    db: &impl GenericClient,
    rates: &[Option<ChannelRate>; 3],
    paced: impl Fn(Channel) -> bool,
) -> Result<(), tokio_postgres::Error> {
    for (channel, rate) in Channel::ALL.into_iter().zip(rates) {
        match rate.filter(|_| paced(channel)) {
            Some(rate) => {
                let statement = CONFIGURE.prepare(db).await?;
                db.execute(&statement, &[&channel, &rate.transactional, &rate.bulk])
                    .await?;
            }
            None => {
                let statement = REMOVE.prepare(db).await?;
                db.execute(&statement, &[&channel]).await?;
            }
        }
        if !paced(channel) {
            let statement = FORGET_HEALTH.prepare(db).await?;
            if let Some(cleared) = db.query_opt(&statement, &[&channel]).await? {
                let circuit: String = cleared.try_get("circuit_before")?;
                let pause: Option<String> = cleared.try_get("pause_before")?;
                tracing::warn!(
                    channel = channel.as_str(),
                    circuit,
                    pause = pause.as_deref().unwrap_or("none"),
                    "channel now on the simulated provider: circuit closed and pause lifted"
                );
            }
        }
    }
    Ok(())
}

/// What one batch of a channel's real provider showed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observation {
    pub calls: i64,
    pub temporary: i64,
    /// Calls the provider answered for the message itself (delivered, or rejected as
    /// undeliverable): what closes a half-open circuit. A throttle or a refusal for the
    /// account's configuration is neither this nor a temporary failure.
    pub answered: i64,
    /// Calls the provider throttled, and calls it refused for the account's configuration:
    /// added to the channel's running totals.
    pub throttled: i64,
    pub misconfigured: i64,
    /// Pause the channel until then, and why (a 429, a misconfiguration).
    pub pause: Option<(DateTime<Utc>, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Circuit {
    Closed,
    Open,
    HalfOpen,
}

impl Circuit {
    fn parse(text: &str) -> Circuit {
        match text {
            "OPEN" => Circuit::Open,
            "HALF_OPEN" => Circuit::HalfOpen,
            _ => Circuit::Closed,
        }
    }
}

/// Counts a batch in the channel's window, applies its pause and moves the circuit (see
/// the statement). Returns the circuit before and after.
pub async fn observe(
    db: &impl GenericClient,
    channel: Channel,
    seen: &Observation,
    circuit: &CircuitConfig,
) -> Result<(Circuit, Circuit), tokio_postgres::Error> {
    let statement = OBSERVE.prepare(db).await?;
    let (pause_until, pause_reason) = match &seen.pause {
        Some((until, reason)) => (Some(*until), Some(reason.as_str())),
        None => (None, None),
    };
    let row = db
        .query_one(
            &statement,
            &[
                &channel,
                &seen.calls,
                &seen.temporary,
                &circuit.failure_ratio,
                &circuit.min_calls,
                &seconds(circuit.window),
                &seconds(circuit.open_for),
                &pause_until,
                &pause_reason,
                &seen.answered,
                &seen.throttled,
                &seen.misconfigured,
            ],
        )
        .await?;
    let before: String = row.try_get("before")?;
    let after: String = row.try_get("after")?;
    Ok((Circuit::parse(&before), Circuit::parse(&after)))
}

/// A channel's state as `GET /providers` and the metrics show it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelState {
    pub channel: Channel,
    pub circuit: Circuit,
    pub circuit_since: DateTime<Utc>,
    pub paused_until: Option<DateTime<Utc>>,
    pub pause_reason: Option<String>,
    /// When the current pause began (None when not paused, or when a release that did not
    /// record it started the pause).
    pub paused_since: Option<DateTime<Utc>>,
    /// Calls the provider throttled, and refused for the account's configuration, since
    /// the channel was first served (running totals).
    pub throttled_total: i64,
    pub misconfigured_total: i64,
    /// Calls and temporary failures in the current window.
    pub calls: i64,
    pub temporary: i64,
    /// Per class: rate per second and tokens now (empty when the channel is not paced).
    pub budgets: Vec<(Class, f64, f64)>,
}

impl ChannelState {
    pub fn failure_ratio(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.temporary as f64 / self.calls as f64
        }
    }
}

/// Every channel's state.
pub async fn read(
    db: &impl GenericClient,
    circuit: &CircuitConfig,
) -> Result<Vec<ChannelState>, tokio_postgres::Error> {
    let health = READ_HEALTH.prepare(db).await?;
    let buckets = READ_BUCKETS.prepare(db).await?;
    let window = seconds(circuit.window);
    let health_parameters: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&window];
    let (health, buckets) = tokio::join!(
        db.query(&health, &health_parameters),
        db.query(&buckets, &[])
    );
    let buckets = buckets?;
    let mut states = Vec::new();
    for row in health? {
        let channel: Channel = row.try_get("channel")?;
        let mut budgets = Vec::new();
        for bucket in &buckets {
            if bucket.try_get::<_, Channel>("channel")? == channel {
                budgets.push((
                    bucket.try_get("class")?,
                    bucket.try_get("rate")?,
                    bucket.try_get("tokens")?,
                ));
            }
        }
        let circuit: String = row.try_get("circuit")?;
        states.push(ChannelState {
            channel,
            circuit: Circuit::parse(&circuit),
            circuit_since: row.try_get("circuit_since")?,
            paused_until: row.try_get("paused_until")?,
            pause_reason: row.try_get("pause_reason")?,
            paused_since: row.try_get("paused_since")?,
            throttled_total: row.try_get("throttled_total")?,
            misconfigured_total: row.try_get("misconfigured_total")?,
            calls: row.try_get("calls")?,
            temporary: row.try_get("temporary")?,
            budgets,
        });
    }
    Ok(states)
}

fn seconds(duration: Duration) -> i64 {
    millis(duration) / 1000
}
