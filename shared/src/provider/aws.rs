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
pub fn classify<E>(
    error: &SdkError<E, HttpResponse>,
    service: impl Fn(&ServiceAnswer<'_>) -> ProviderOutcome,
) -> ProviderOutcome
where
    E: ProvideErrorMetadata + std::error::Error,
{
    match error {
        SdkError::ServiceError(context) => {
            let raw = context.raw();
            let answer = ServiceAnswer {
                status: raw.status().as_u16(),
                code: context.err().code().unwrap_or(""),
                message: context.err().message().unwrap_or(""),
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
        // Provider messages may quote the address; keep them short and never log them
        // beyond the notification's own last error.
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
    }

    #[test]
    fn retry_after_is_read_in_seconds() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
    }
}
