//! SMS and mobile push through Amazon SNS `Publish`, one call per message, each through
//! the gate. Push recipients are platform endpoint ARNs, or device tokens turned into
//! endpoints of `SNS_PLATFORM_APPLICATION_ARN` with `CreatePlatformEndpoint` (idempotent
//! for the same token) and cached for the life of the process.

use std::collections::HashMap;
use std::sync::Mutex;

use aws_sdk_sns::Client;
use aws_sdk_sns::types::MessageAttributeValue;
use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::aws::{ServiceAnswer, classify, common, describe};
use super::{Attempt, Delivery, Gate, Provider, ProviderOutcome};
use crate::domain::Class;

pub struct SmsProvider {
    client: Client,
    sender_id: Option<String>,
    /// `Transactional` or `Promotional`; `None`: from the notification's class.
    sms_type: Option<String>,
}

impl SmsProvider {
    pub fn new(
        sdk: &aws_config::SdkConfig,
        sender_id: Option<String>,
        sms_type: Option<String>,
    ) -> Self {
        SmsProvider {
            client: Client::new(sdk),
            sender_id,
            sms_type,
        }
    }

    async fn send_one(&self, delivery: &Delivery<'_>) -> ProviderOutcome {
        let Some(text) = delivery.payload.get("text").and_then(Value::as_str) else {
            return ProviderOutcome::Permanent("The payload has no text".into());
        };
        let sms_type = self.sms_type.clone().unwrap_or_else(|| {
            match delivery.class {
                Class::Transactional => "Transactional",
                Class::Bulk => "Promotional",
            }
            .to_string()
        });
        let mut request = self
            .client
            .publish()
            .phone_number(delivery.recipient)
            .message(text);
        for (name, value) in [
            ("AWS.SNS.SMS.SMSType", Some(sms_type)),
            ("AWS.SNS.SMS.SenderID", self.sender_id.clone()),
        ] {
            let Some(value) = value else { continue };
            match string_attribute(&value) {
                Ok(attribute) => request = request.message_attributes(name, attribute),
                Err(problem) => return ProviderOutcome::Permanent(problem),
            }
        }
        match request.send().await {
            Ok(sent) => ProviderOutcome::Delivered {
                already: false,
                message_id: sent.message_id().map(str::to_string),
            },
            Err(error) => classify(&error, &[delivery.recipient], sns_answer),
        }
    }
}

impl Provider for SmsProvider {
    fn send<'a>(
        &'a self,
        batch: &'a [Delivery<'a>],
        gate: &'a Gate,
    ) -> BoxFuture<'a, Vec<Attempt>> {
        async move {
            gate.each(batch, |delivery: &'a Delivery<'a>| self.send_one(delivery))
                .await
        }
        .boxed()
    }

    fn name(&self) -> &'static str {
        "sns"
    }

    fn is_real(&self) -> bool {
        true
    }
}

pub struct PushProvider {
    client: Client,
    platform_application_arn: Option<String>,
    /// Device token → endpoint ARN.
    endpoints: Mutex<HashMap<String, String>>,
}

impl PushProvider {
    pub fn new(sdk: &aws_config::SdkConfig, platform_application_arn: Option<String>) -> Self {
        PushProvider {
            client: Client::new(sdk),
            platform_application_arn,
            endpoints: Mutex::default(),
        }
    }

    async fn send_one(&self, delivery: &Delivery<'_>) -> ProviderOutcome {
        let endpoint = match self.endpoint(delivery.recipient).await {
            Ok(endpoint) => endpoint,
            Err(outcome) => return outcome,
        };
        let message = push_message(delivery.payload);
        match self
            .client
            .publish()
            .target_arn(&endpoint)
            .message_structure("json")
            .message(message)
            .send()
            .await
        {
            Ok(sent) => ProviderOutcome::Delivered {
                already: false,
                message_id: sent.message_id().map(str::to_string),
            },
            Err(error) => classify(&error, &[delivery.recipient, &endpoint], sns_answer),
        }
    }

    /// The endpoint ARN of a recipient: an ARN as it is, a device token through
    /// `CreatePlatformEndpoint` (once per token and process).
    async fn endpoint(&self, recipient: &str) -> Result<String, ProviderOutcome> {
        if recipient.starts_with("arn:") {
            return Ok(recipient.to_string());
        }
        if let Some(known) = self
            .endpoints
            .lock()
            .ok()
            .and_then(|e| e.get(recipient).cloned())
        {
            return Ok(known);
        }
        // Without a platform application only this notification cannot go (endpoint ARNs
        // still can), so the channel does not pause: it fails, and a redrive sends it once
        // SNS_PLATFORM_APPLICATION_ARN is set. Intake refuses such a recipient given as an
        // address; one taken from a profile's push tokens fails here.
        let Some(application) = &self.platform_application_arn else {
            return Err(ProviderOutcome::Permanent(
                "A device token needs SNS_PLATFORM_APPLICATION_ARN, which is not set".into(),
            ));
        };
        let created = self
            .client
            .create_platform_endpoint()
            .platform_application_arn(application)
            .token(recipient)
            .send()
            .await
            .map_err(|error| classify(&error, &[recipient], sns_answer))?;
        let arn = created.endpoint_arn().map(str::to_string).ok_or_else(|| {
            ProviderOutcome::Temporary("CreatePlatformEndpoint returned no endpoint".into())
        })?;
        if let Ok(mut endpoints) = self.endpoints.lock() {
            endpoints.insert(recipient.to_string(), arn.clone());
        }
        Ok(arn)
    }
}

impl Provider for PushProvider {
    fn send<'a>(
        &'a self,
        batch: &'a [Delivery<'a>],
        gate: &'a Gate,
    ) -> BoxFuture<'a, Vec<Attempt>> {
        async move {
            gate.each(batch, |delivery: &'a Delivery<'a>| self.send_one(delivery))
                .await
        }
        .boxed()
    }

    fn name(&self) -> &'static str {
        "sns"
    }

    fn is_real(&self) -> bool {
        true
    }
}

/// The `message_structure = json` body: a default text and the FCM and APNs payloads
/// built from `title`, `body` and `data`.
fn push_message(payload: &Value) -> String {
    let title = payload.get("title").and_then(Value::as_str);
    let body = payload.get("body").and_then(Value::as_str);
    let data = payload.get("data").cloned().unwrap_or_else(|| json!({}));
    let default = body.or(title).unwrap_or_default();
    let fcm = json!({"notification": {"title": title, "body": body}, "data": data});
    let mut apns = json!({"aps": {"alert": {"title": title, "body": body}}});
    if let (Some(fields), Some(target)) = (data.as_object(), apns.as_object_mut()) {
        for (key, value) in fields {
            target.insert(key.clone(), value.clone());
        }
    }
    json!({
        "default": default,
        "GCM": fcm.to_string(),
        "APNS": apns.to_string(),
        "APNS_SANDBOX": apns.to_string(),
    })
    .to_string()
}

fn string_attribute(value: &str) -> Result<MessageAttributeValue, String> {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .map_err(|error| format!("Cannot build the message: {error}"))
}

/// SNS's own codes first, then the rules every AWS service shares.
fn sns_answer(answer: &ServiceAnswer<'_>) -> ProviderOutcome {
    let text = describe(answer);
    match answer.code {
        "EndpointDisabled" => ProviderOutcome::InvalidRecipient(text),
        "InvalidParameter" | "InvalidParameterValue"
            if answer.message.contains("PhoneNumber") || answer.message.contains("TargetArn") =>
        {
            ProviderOutcome::InvalidRecipient(text)
        }
        "PlatformApplicationDisabled"
        | "KMSAccessDenied"
        | "KMSDisabled"
        | "KMSInvalidState"
        | "KMSNotFound"
        | "KMSOptInRequired"
        | "OptedOut" => ProviderOutcome::Misconfigured(text),
        "NotFound" if answer.message.contains("PlatformApplication") => {
            ProviderOutcome::Misconfigured(text)
        }
        "NotFound" => ProviderOutcome::InvalidRecipient(text),
        "KMSThrottling" => ProviderOutcome::Throttled {
            retry_after: answer.retry_after,
            reason: text,
        },
        _ => common(answer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, code: &'static str, message: &'static str) -> ServiceAnswer<'static> {
        ServiceAnswer {
            status,
            code,
            message,
            retry_after: None,
        }
    }

    #[test]
    fn sns_answers_are_classified_by_what_the_worker_must_do() {
        assert!(matches!(
            sns_answer(&answer(400, "EndpointDisabled", "Endpoint is disabled")),
            ProviderOutcome::InvalidRecipient(_)
        ));
        assert!(matches!(
            sns_answer(&answer(
                400,
                "InvalidParameter",
                "Invalid parameter: PhoneNumber Reason: +1 is not valid"
            )),
            ProviderOutcome::InvalidRecipient(_)
        ));
        assert!(matches!(
            sns_answer(&answer(
                400,
                "InvalidParameter",
                "Invalid parameter: Message too long"
            )),
            ProviderOutcome::Permanent(_)
        ));
        assert!(matches!(
            sns_answer(&answer(400, "Throttling", "Rate exceeded")),
            ProviderOutcome::Throttled { .. }
        ));
        assert!(matches!(
            sns_answer(&answer(403, "AuthorizationError", "")),
            ProviderOutcome::Misconfigured(_)
        ));
    }

    #[test]
    fn a_push_message_carries_every_platform() {
        let message = push_message(&json!({"title": "Hi", "body": "There", "data": {"k": "v"}}));
        let parsed: Value = serde_json::from_str(&message).expect("json");
        assert_eq!(parsed["default"], "There");
        let apns: Value =
            serde_json::from_str(parsed["APNS"].as_str().expect("apns")).expect("json");
        assert_eq!(apns["aps"]["alert"]["title"], "Hi");
        assert_eq!(apns["k"], "v");
    }
}
