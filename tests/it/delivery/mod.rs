//! Real delivery: SES and SNS end to end against moto, every outcome class against a
//! stand-in that answers in the AWS formats, pauses, the circuit breaker, pacing across
//! processes, and what the API shows of it all.

mod api;
mod moto;
mod outcomes;
mod pacing;

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;
use notify_shared::config::CircuitConfig;
use notify_shared::notification::Channel;
use notify_shared::provider::aws;
use notify_shared::provider::channels::ChannelProviders;
use notify_shared::provider::ses::SesProvider;
use notify_shared::provider::sns::{PushProvider, SmsProvider};
use notify_shared::sweeper::Sweeper;
use notify_tests::doubles::Fixed;
use notify_tests::worker::{self, simulated, worker_config};

pub const FROM: &str = "sender@example.com";

/// SES for email, SNS for SMS and push (device tokens of `platform_application`), all at
/// `endpoint`.
pub async fn aws_providers(
    pool: &Pool,
    endpoint: &str,
    platform_application: Option<String>,
) -> ChannelProviders {
    let sdk = aws::sdk_config_at(endpoint, Duration::from_secs(5)).await;
    ChannelProviders::simulated(simulated(pool.clone()))
        .with(
            Channel::Email,
            Arc::new(SesProvider::new(&sdk, FROM.to_string(), None)),
        )
        .with(Channel::Sms, Arc::new(SmsProvider::new(&sdk, None, None)))
        .with(
            Channel::Push,
            Arc::new(PushProvider::new(&sdk, platform_application)),
        )
}

/// Only email goes to SES at `endpoint`; SMS and push stay on the simulated provider.
pub async fn ses_only(pool: &Pool, endpoint: &str) -> ChannelProviders {
    let sdk = aws::sdk_config_at(endpoint, Duration::from_secs(5)).await;
    ChannelProviders::simulated(simulated(pool.clone())).with(
        Channel::Email,
        Arc::new(SesProvider::new(&sdk, FROM.to_string(), None)),
    )
}

/// A sweeper over `providers`: batches of 100, 10 in flight, backoff at the low end of its
/// window, the given circuit breaker.
pub fn sweeper(pool: &Pool, providers: ChannelProviders, circuit: CircuitConfig) -> Sweeper {
    worker::sweeper(pool, Arc::new(providers))
        .random(Fixed(0.0))
        .config(worker_config().concurrency(10))
        .build()
        .with_circuit(circuit)
}

/// The production thresholds.
pub fn circuit() -> CircuitConfig {
    CircuitConfig {
        failure_ratio: 0.5,
        min_calls: 20,
        window: Duration::from_secs(30),
        open_for: Duration::from_secs(30),
    }
}
