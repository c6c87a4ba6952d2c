//! Which provider sends each channel, and what each real one needs. Checked at start-up
//! with the rest of the configuration.

use std::time::Duration;

use super::env::Env;

/// A channel's rate: tokens per second for each class (`…_RATE_PER_SECOND` split by
/// `…_TRANSACTIONAL_RESERVED_PER_SECOND`). `None`: not limited.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChannelRate {
    /// The part bulk traffic can never take.
    pub transactional: f64,
    /// The rest of the rate.
    pub bulk: f64,
}

/// The circuit breaker's thresholds, shared by every channel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CircuitConfig {
    /// `CIRCUIT_FAILURE_RATIO`: temporary failures per call that open the circuit.
    pub failure_ratio: f64,
    /// `CIRCUIT_MIN_CALLS`: calls in the window before the ratio counts.
    pub min_calls: i64,
    /// `CIRCUIT_WINDOW_SECONDS`: the rolling window.
    pub window: Duration,
    /// `CIRCUIT_OPEN_SECONDS`: how long an open circuit waits before a probe.
    pub open_for: Duration,
}

/// The provider of one channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderChoice {
    /// The simulated provider (the default): stores deliveries in PostgreSQL.
    Simulated,
    /// Amazon SES v2 (email) or Amazon SNS (SMS, push).
    Aws,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProvidersConfig {
    /// `EMAIL_PROVIDER`: `simulated` or `ses`.
    pub email: ProviderChoice,
    /// `SMS_PROVIDER`: `simulated` or `sns`.
    pub sms: ProviderChoice,
    /// `PUSH_PROVIDER`: `simulated` or `sns`.
    pub push: ProviderChoice,
    /// `SES_FROM_ADDRESS`: the verified identity email is sent from (required with `ses`).
    pub ses_from_address: Option<String>,
    /// `SES_CONFIGURATION_SET`: sends carry it, so SES publishes their events.
    pub ses_configuration_set: Option<String>,
    /// `SNS_SMS_SENDER_ID`.
    pub sns_sms_sender_id: Option<String>,
    /// `SNS_SMS_TYPE`: `Transactional` or `Promotional`; unset: from the notification's class.
    pub sns_sms_type: Option<String>,
    /// `SNS_PLATFORM_APPLICATION_ARN`: needed to turn raw device tokens into endpoints.
    pub sns_platform_application_arn: Option<String>,
    /// Per channel, indexed like `Channel::ALL`.
    pub rates: [Option<ChannelRate>; 3],
    pub circuit: CircuitConfig,
}

impl ProvidersConfig {
    /// Whether `channel` is sent by a real provider.
    pub fn is_real(&self, channel: crate::notification::Channel) -> bool {
        use crate::notification::Channel;
        let choice = match channel {
            Channel::Email => &self.email,
            Channel::Sms => &self.sms,
            Channel::Push => &self.push,
        };
        *choice == ProviderChoice::Aws
    }

    /// How `GET /providers` names each channel's provider, indexed like `Channel::ALL`.
    pub fn names(&self) -> [&'static str; 3] {
        let name = |choice: &ProviderChoice, real: &'static str| match choice {
            ProviderChoice::Simulated => "simulated",
            ProviderChoice::Aws => real,
        };
        [
            name(&self.email, "ses"),
            name(&self.sms, "sns"),
            name(&self.push, "sns"),
        ]
    }

    /// True when any channel sends through AWS (the clients are built only then).
    pub fn any_real(&self) -> bool {
        [&self.email, &self.sms, &self.push]
            .iter()
            .any(|choice| **choice == ProviderChoice::Aws)
    }
}

pub(super) fn read(env: &mut Env) -> ProvidersConfig {
    let mut choice = |name: &str, real: &str| match env.string(name).as_deref() {
        None | Some("simulated") => ProviderChoice::Simulated,
        Some(value) if value == real => ProviderChoice::Aws,
        Some(other) => {
            env.problems.push(format!(
                "{name} must be simulated or {real} (got {other:?})"
            ));
            ProviderChoice::Simulated
        }
    };
    let email = choice("EMAIL_PROVIDER", "ses");
    let sms = choice("SMS_PROVIDER", "sns");
    let push = choice("PUSH_PROVIDER", "sns");
    let ses_from_address = env.string("SES_FROM_ADDRESS");
    let ses_configuration_set = env.string("SES_CONFIGURATION_SET");
    let sns_sms_sender_id = env.string("SNS_SMS_SENDER_ID");
    let sns_sms_type = env.string("SNS_SMS_TYPE");
    let sns_platform_application_arn = env.string("SNS_PLATFORM_APPLICATION_ARN");

    if email == ProviderChoice::Aws {
        match &ses_from_address {
            None => env
                .problems
                .push("SES_FROM_ADDRESS is required with EMAIL_PROVIDER=ses".to_string()),
            Some(address) if !address.contains('@') => env.problems.push(format!(
                "SES_FROM_ADDRESS must be an email address (got {address:?})"
            )),
            Some(_) => {}
        }
    }
    if let Some(kind) = &sns_sms_type
        && !matches!(kind.as_str(), "Transactional" | "Promotional")
    {
        env.problems.push(format!(
            "SNS_SMS_TYPE must be Transactional or Promotional (got {kind:?})"
        ));
    }
    if let Some(sender) = &sns_sms_sender_id
        && !(1..=11).contains(&sender.len())
    {
        env.problems
            .push("SNS_SMS_SENDER_ID must be 1 to 11 characters".to_string());
    }
    if let Some(arn) = &sns_platform_application_arn
        && !arn.starts_with("arn:")
    {
        env.problems.push(format!(
            "SNS_PLATFORM_APPLICATION_ARN must be an ARN (got {arn:?})"
        ));
    }
    let rates = ["EMAIL", "SMS", "PUSH"].map(|channel| rate(env, channel));
    let circuit = CircuitConfig {
        failure_ratio: env.fraction("CIRCUIT_FAILURE_RATIO", 0.5),
        min_calls: env.number("CIRCUIT_MIN_CALLS", 20, 1, 1_000_000) as i64,
        window: Duration::from_secs(env.number("CIRCUIT_WINDOW_SECONDS", 30, 1, 3600)),
        open_for: Duration::from_secs(env.number("CIRCUIT_OPEN_SECONDS", 30, 1, 86_400)),
    };
    ProvidersConfig {
        rates,
        circuit,
        email,
        sms,
        push,
        ses_from_address,
        ses_configuration_set,
        sns_sms_sender_id,
        sns_sms_type,
        sns_platform_application_arn,
    }
}

/// `<CHANNEL>_RATE_PER_SECOND` (unset or 0: not limited) and
/// `<CHANNEL>_TRANSACTIONAL_RESERVED_PER_SECOND` (default 0), reserved ≤ rate.
fn rate(env: &mut Env, channel: &str) -> Option<ChannelRate> {
    let rate_name = format!("{channel}_RATE_PER_SECOND");
    let reserved_name = format!("{channel}_TRANSACTIONAL_RESERVED_PER_SECOND");
    let rate = env.positive(&rate_name, 0.0);
    let reserved = env.positive(&reserved_name, 0.0);
    if rate == 0.0 {
        if reserved > 0.0 {
            env.problems
                .push(format!("{reserved_name} needs {rate_name} to be set"));
        }
        return None;
    }
    if reserved > rate {
        env.problems.push(format!(
            "{reserved_name} ({reserved}) must not exceed {rate_name} ({rate})"
        ));
    }
    Some(ChannelRate {
        transactional: reserved.min(rate),
        bulk: rate - reserved.min(rate),
    })
}
