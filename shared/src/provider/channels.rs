//! Which provider sends each channel, and the routing of a claimed batch to them: each
//! channel's deliveries go to its provider, all channels at once, started in the batch's
//! order, and the attempts come back in the batch's order.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;

use deadpool_postgres::Pool;

use super::aws;
use super::ses::SesProvider;
use super::simulated::SimulatedProvider;
use super::sns::{PushProvider, SmsProvider};
use super::{Attempt, Delivery, Gate, Provider};
use crate::backoff::ThreadRandom;
use crate::config::{Config, ProviderChoice};
use crate::notification::Channel;

/// One provider per channel, indexed like [`Channel::ALL`].
#[derive(Clone)]
pub struct ChannelProviders {
    providers: [Arc<dyn Provider>; 3],
}

impl ChannelProviders {
    /// The same provider for every channel (the simulated one, test doubles).
    pub fn all(provider: Arc<dyn Provider>) -> Self {
        ChannelProviders {
            providers: [provider.clone(), provider.clone(), provider],
        }
    }

    /// Every channel on the simulated provider.
    pub fn simulated(provider: SimulatedProvider) -> Self {
        Self::all(Arc::new(provider))
    }

    /// The providers configuration names: the simulated one, and SES or SNS where
    /// chosen (their AWS clients built once, here).
    pub async fn from_config(pool: &Pool, config: &Config) -> Self {
        let simulated = SimulatedProvider::new(pool.clone(), config.mock, Arc::new(ThreadRandom));
        let mut providers = Self::simulated(simulated);
        let chosen = &config.providers;
        if !chosen.any_real() {
            return providers;
        }
        let sdk = aws::sdk_config(config.worker.provider_timeout).await;
        if chosen.email == ProviderChoice::Aws
            && let Some(from) = &chosen.ses_from_address
        {
            let ses = SesProvider::new(&sdk, from.clone(), chosen.ses_configuration_set.clone());
            providers = providers.with(Channel::Email, Arc::new(ses));
        }
        if chosen.sms == ProviderChoice::Aws {
            let sms = SmsProvider::new(
                &sdk,
                chosen.sns_sms_sender_id.clone(),
                chosen.sns_sms_type.clone(),
            );
            providers = providers.with(Channel::Sms, Arc::new(sms));
        }
        if chosen.push == ProviderChoice::Aws {
            let push = PushProvider::new(&sdk, chosen.sns_platform_application_arn.clone());
            providers = providers.with(Channel::Push, Arc::new(push));
        }
        providers
    }

    /// Replaces the provider of one channel.
    pub fn with(mut self, channel: Channel, provider: Arc<dyn Provider>) -> Self {
        self.providers[channel.index()] = provider;
        self
    }

    pub fn of(&self, channel: Channel) -> &Arc<dyn Provider> {
        &self.providers[channel.index()]
    }
}

impl Provider for ChannelProviders {
    fn send<'a>(
        &'a self,
        batch: &'a [Delivery<'a>],
        gate: &'a Gate,
    ) -> BoxFuture<'a, Vec<Attempt>> {
        async move {
            // One provider for the whole batch: hand it over as it is.
            if batch
                .iter()
                .all(|d| Arc::ptr_eq(self.of(d.channel), self.of(batch[0].channel)))
            {
                return match batch.first() {
                    Some(first) => self.of(first.channel).send(batch, gate).await,
                    None => Vec::new(),
                };
            }
            // Runs of consecutive deliveries of one provider, each handed to it whole. The
            // runs are started in the batch's order and each takes its places at the gate
            // in its own order (first come, first served), so a batch in claim order
            // starts in claim order across providers: a HIGH SMS is not queued behind the
            // LOW EMAIL that follows it.
            let mut groups: Vec<(Channel, Vec<usize>, Vec<Delivery<'a>>)> = Vec::new();
            for (position, delivery) in batch.iter().enumerate() {
                match groups.last_mut() {
                    Some((channel, positions, deliveries))
                        if Arc::ptr_eq(self.of(*channel), self.of(delivery.channel)) =>
                    {
                        positions.push(position);
                        deliveries.push(*delivery);
                    }
                    _ => groups.push((delivery.channel, vec![position], vec![*delivery])),
                }
            }
            let sends = groups
                .iter()
                .map(|(channel, _, deliveries)| self.of(*channel).send(deliveries, gate));
            let answers = futures::future::join_all(sends).await;
            let mut attempts: Vec<Option<Attempt>> = vec![None; batch.len()];
            for ((_, positions, _), answer) in groups.iter().zip(answers) {
                for (position, attempt) in positions.iter().zip(answer) {
                    attempts[*position] = Some(attempt);
                }
            }
            attempts
                .into_iter()
                .map(|attempt| {
                    attempt.unwrap_or_else(|| {
                        Attempt::now(super::ProviderOutcome::Temporary(
                            "Provider answered fewer results than deliveries".into(),
                        ))
                    })
                })
                .collect()
        }
        .boxed()
    }

    fn name(&self) -> &'static str {
        "channels"
    }

    fn is_real(&self) -> bool {
        self.providers.iter().any(|p| p.is_real())
    }

    fn is_real_for(&self, channel: Channel) -> bool {
        self.of(channel).is_real()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use uuid::Uuid;

    use super::*;
    use crate::domain::Class;
    use crate::provider::{Places, ProviderOutcome};
    use crate::stop::StopSignal;

    /// Delivers everything, noting the order the calls started in (shared between
    /// instances).
    struct Recording(Arc<Mutex<Vec<Uuid>>>);

    impl Provider for Recording {
        fn send<'a>(
            &'a self,
            batch: &'a [Delivery<'a>],
            gate: &'a Gate,
        ) -> BoxFuture<'a, Vec<Attempt>> {
            gate.each(batch, move |delivery| async move {
                if let Ok(mut started) = self.0.lock() {
                    started.push(delivery.key);
                }
                ProviderOutcome::delivered()
            })
            .boxed()
        }

        fn name(&self) -> &'static str {
            "recording"
        }
    }

    #[tokio::test]
    async fn a_batch_over_two_providers_starts_in_its_own_order() {
        let started = Arc::new(Mutex::new(Vec::new()));
        let providers = ChannelProviders::all(Arc::new(Recording(started.clone())))
            .with(Channel::Sms, Arc::new(Recording(started.clone())));
        let payload = serde_json::json!({});
        let channels = [
            Channel::Sms,
            Channel::Email,
            Channel::Email,
            Channel::Sms,
            Channel::Push,
            Channel::Sms,
        ];
        let batch: Vec<Delivery<'_>> = channels
            .iter()
            .map(|channel| Delivery {
                key: Uuid::new_v4(),
                channel: *channel,
                class: Class::Transactional,
                recipient: "r",
                payload: &payload,
                rendered: false,
                unsubscribe_url: None,
            })
            .collect();
        // One place: the calls start one at a time, in the order they queued for it.
        let gate = Gate::new(Places::new(1), StopSignal::never(), Duration::from_secs(5));
        let attempts = providers.send(&batch, &gate).await;
        assert!(attempts.iter().all(|a| a.outcome().is_some()));
        let order: Vec<Uuid> = batch.iter().map(|d| d.key).collect();
        assert_eq!(*started.lock().expect("order"), order);
    }
}
