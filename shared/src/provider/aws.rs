//! What the AWS providers share: one SDK configuration (SDK retries off: the queue is the
//! retry mechanism, and a retry inside one attempt would hide throttling from the pacing),
//! and the one classification of AWS errors into outcomes.

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::stalled_stream_protection::StalledStreamProtectionConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_sesv2::config::http::HttpResponse;
use aws_sdk_sesv2::error::{ProvideErrorMetadata, SdkError};

use super::ProviderOutcome;

/// The SDK configuration of every AWS provider: the standard chain (`AWS_ENDPOINT_URL`
/// points it at a local API), no SDK retries, the provider time limit as the operation
/// timeout.
pub async fn sdk_config(timeout: Duration) -> aws_config::SdkConfig {
    loader(timeout).load().await
}

/// An SDK configuration that talks to `endpoint` (a local stand-in, in tests) with fixed
/// test credentials, whatever the environment says; otherwise as [`sdk_config`].
pub async fn sdk_config_at(endpoint: &str, timeout: Duration) -> aws_config::SdkConfig {
    loader(timeout)
        .endpoint_url(endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sesv2::config::Credentials::new(
            "test", "test", None, None, "static",
        ))
        .load()
        .await
}

/// What both share. Stalled-stream protection is off: it watches the throughput of
/// streamed bodies, and every call here sends and reads a few hundred bytes under the
/// operation timeout, which already ends a call that stalls.
fn loader(timeout: Duration) -> aws_config::ConfigLoader {
    let connect_timeout = timeout.min(Duration::from_secs(3));
    aws_config::from_env()
        .http_client(super::aws_http::client(Some(connect_timeout)))
        .retry_config(RetryConfig::disabled())
        .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
        .timeout_config(
            TimeoutConfig::builder()
                .operation_timeout(timeout)
                .connect_timeout(connect_timeout)
                .build(),
        )
}

/// What a service error says, as the classification reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAnswer<'a> {
    pub status: u16,
    pub code: &'a str,
    pub message: &'a str,
    pub retry_after: Option<Duration>,
}

/// Classifies an SDK error: no answer at all (timeout, connection, a response that could
/// not be read) is temporary; a service answer goes to `service`, which knows its codes.
/// The answer's message loses every mention of the `recipients` first: providers quote the
/// address ("… failed the check: ada@example.com"), and the text goes on to the attempt,
/// the notification's last error, a channel's pause reason and the log.
pub fn classify<E>(
    error: &SdkError<E, HttpResponse>,
    recipients: &[&str],
    service: impl Fn(&ServiceAnswer<'_>) -> ProviderOutcome,
) -> ProviderOutcome
where
    E: ProvideErrorMetadata + std::error::Error,
{
    match error {
        SdkError::ServiceError(context) => {
            let raw = context.raw();
            let message = without_recipient(context.err().message().unwrap_or(""), recipients);
            let answer = ServiceAnswer {
                status: raw.status().as_u16(),
                code: context.err().code().unwrap_or(""),
                message: &message,
                retry_after: raw.headers().get("retry-after").and_then(parse_retry_after),
            };
            service(&answer)
        }
        SdkError::TimeoutError(_) => ProviderOutcome::Temporary("Provider timed out".into()),
        SdkError::DispatchFailure(failure) => ProviderOutcome::Temporary(format!(
            "Provider unreachable: {}",
            if failure.is_timeout() {
                "timeout"
            } else if failure.is_io() {
                "connection error"
            } else {
                "request not sent"
            }
        )),
        SdkError::ResponseError(context) => ProviderOutcome::Temporary(format!(
            "Provider answered HTTP {} that could not be read",
            context.raw().status().as_u16()
        )),
        SdkError::ConstructionFailure(_) => {
            ProviderOutcome::Permanent("The request could not be built".into())
        }
        _ => ProviderOutcome::Temporary("Provider call failed".into()),
    }
}

/// What the recipient replaces in a provider's message.
const RECIPIENT_MARK: &str = "[recipient]";

/// `message` with each mention of the `recipients` (ASCII case ignored, as email
/// addresses are compared; a phone number also without its `+`) replaced by
/// [`RECIPIENT_MARK`]. Non-ASCII letters are compared as they are.
fn without_recipient(message: &str, recipients: &[&str]) -> String {
    let mut text = message.to_string();
    for recipient in recipients {
        let digits = recipient
            .strip_prefix('+')
            .filter(|rest| rest.bytes().all(|b| b.is_ascii_digit()));
        for mention in std::iter::once(*recipient).chain(digits) {
            // Too short to be anyone's address, and it would match ordinary words.
            if mention.len() >= 5 {
                text = replace_ignoring_ascii_case(&text, mention);
            }
        }
    }
    text
}

/// One pass over `text`: ASCII lowercasing keeps byte offsets (and UTF-8 boundaries), so
/// a match in the folded copy is the same bytes of `text`.
fn replace_ignoring_ascii_case(text: &str, mention: &str) -> String {
    let folded = text.to_ascii_lowercase();
    let mention = mention.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    while let Some(at) = folded[from..].find(&mention) {
        let start = from + at;
        out.push_str(&text[from..start]);
        out.push_str(RECIPIENT_MARK);
        from = start + mention.len();
    }
    out.push_str(&text[from..]);
    out
}

/// The rules every AWS service shares, after the service's own codes: throttling by
/// status or code, access and credentials problems, then 5xx temporary and 4xx
/// permanent.
pub fn common(answer: &ServiceAnswer<'_>) -> ProviderOutcome {
    let text = describe(answer);
    match answer.code {
        "Throttling"
        | "ThrottlingException"
        | "ThrottledException"
        | "TooManyRequestsException"
        | "RequestLimitExceeded"
        | "LimitExceededException" => ProviderOutcome::Throttled {
            retry_after: answer.retry_after,
            reason: text,
        },
        "AccessDenied"
        | "AccessDeniedException"
        | "AuthorizationError"
        | "InvalidClientTokenId"
        | "UnrecognizedClientException"
        | "ExpiredToken"
        | "ExpiredTokenException"
        | "SignatureDoesNotMatch"
        | "MissingAuthenticationToken" => ProviderOutcome::Misconfigured(text),
        "InternalFailure"
        | "InternalError"
        | "InternalErrorException"
        | "ServiceUnavailable"
        | "ServiceUnavailableException" => ProviderOutcome::Temporary(text),
        _ if answer.status == 429 => ProviderOutcome::Throttled {
            retry_after: answer.retry_after,
            reason: text,
        },
        _ if answer.status == 403 => ProviderOutcome::Misconfigured(text),
        _ if answer.status >= 500 => ProviderOutcome::Temporary(text),
        // A success status the SDK could not read: the message may have gone out, and SES
        // takes no idempotency key, so it is not sent again on its own (FAILED, redrivable).
        _ => ProviderOutcome::Permanent(text),
    }
}

/// `Provider answered HTTP 429 TooManyRequestsException: Maximum sending rate exceeded`.
pub fn describe(answer: &ServiceAnswer<'_>) -> String {
    let mut text = format!("Provider answered HTTP {}", answer.status);
    if !answer.code.is_empty() {
        text.push(' ');
        text.push_str(answer.code);
    }
    if !answer.message.is_empty() {
        text.push_str(": ");
        // [`classify`] has taken the recipient out of the message; it is kept short, as it
        // becomes an attempt's error, a last error and possibly a pause reason.
        text.push_str(&answer.message.chars().take(300).collect::<String>());
    }
    text
}

/// `Retry-After` as delay-seconds (RFC 9110); an HTTP date is not used by these APIs.
fn parse_retry_after(value: &str) -> Option<Duration> {
    let seconds: f64 = value.trim().parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(3600.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, code: &'static str) -> ServiceAnswer<'static> {
        ServiceAnswer {
            status,
            code,
            message: "",
            retry_after: None,
        }
    }

    #[test]
    fn the_common_rules_classify_by_code_then_status() {
        assert!(matches!(
            common(&answer(400, "Throttling")),
            ProviderOutcome::Throttled { .. }
        ));
        assert!(matches!(
            common(&answer(429, "")),
            ProviderOutcome::Throttled { .. }
        ));
        assert!(matches!(
            common(&answer(403, "AccessDeniedException")),
            ProviderOutcome::Misconfigured(_)
        ));
        assert!(matches!(
            common(&answer(503, "ServiceUnavailable")),
            ProviderOutcome::Temporary(_)
        ));
        assert!(matches!(
            common(&answer(502, "")),
            ProviderOutcome::Temporary(_)
        ));
        assert!(matches!(
            common(&answer(400, "SomethingElse")),
            ProviderOutcome::Permanent(_)
        ));
        // A success status the SDK could not read: never sent twice on its own.
        assert!(matches!(
            common(&answer(200, "")),
            ProviderOutcome::Permanent(_)
        ));
    }

    #[test]
    fn the_recipient_is_taken_out_of_a_providers_message() {
        assert_eq!(
            without_recipient(
                "Email address is not verified. The following identities failed the check \
                 in region US-EAST-1: sender@example.com, Ada.Lovelace@Example.com",
                &["ada.lovelace@example.com"]
            ),
            "Email address is not verified. The following identities failed the check \
             in region US-EAST-1: sender@example.com, [recipient]"
        );
        assert_eq!(
            without_recipient(
                "Invalid parameter: PhoneNumber Reason: +15557654321 is not valid (15557654321)",
                &["+15557654321"]
            ),
            "Invalid parameter: PhoneNumber Reason: [recipient] is not valid ([recipient])"
        );
        // A mention inside the mark is not found again; a message without one is kept.
        assert_eq!(
            without_recipient("recipient x", &["recipient"]),
            "[recipient] x"
        );
        assert_eq!(
            without_recipient("no address here", &["ada@example.com"]),
            "no address here"
        );
        // Only a phone number loses its `+` for the second look; a push target and the
        // endpoint it was registered as both go.
        assert_eq!(
            without_recipient("ada@example.com vs +ada@example.com", &["+ada@example.com"]),
            "ada@example.com vs [recipient]"
        );
        assert_eq!(
            without_recipient(
                "Endpoint arn:aws:sns:us-east-1:1:endpoint/GCM/app/e1 (token tok-12345) is disabled",
                &["tok-12345", "arn:aws:sns:us-east-1:1:endpoint/GCM/app/e1"]
            ),
            "Endpoint [recipient] (token [recipient]) is disabled"
        );
        // Multi-byte text around a mention stays whole.
        assert_eq!(
            without_recipient("für ADA@example.com — ok", &["ada@example.com"]),
            "für [recipient] — ok"
        );
    }

    #[test]
    fn retry_after_is_read_in_seconds() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
    }
}
