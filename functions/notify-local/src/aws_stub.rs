//! A small stand-in for Amazon SES v2 and Amazon SNS on 127.0.0.1, for tests and the
//! benchmark: it answers `SendEmail` (REST-JSON), `Publish` and `CreatePlatformEndpoint`
//! (query/XML) like the real services, success or error in their own formats, records
//! every call with the time it arrived, and can be told how to answer and how slowly.
//! (moto implements far more of AWS, and is used where its state matters; it is too slow
//! to measure the sweeper against.)

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::{DateTime, Utc};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Ses,
    Sns,
}

/// How the stub answers a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Success, with a fresh message id.
    Accept,
    /// An error in the service's format: HTTP status, error code, message and an
    /// optional `Retry-After` in seconds.
    Error {
        status: u16,
        code: String,
        message: String,
        retry_after: Option<u64>,
    },
}

impl Reply {
    pub fn error(status: u16, code: &str, message: &str) -> Self {
        Reply::Error {
            status,
            code: code.to_string(),
            message: message.to_string(),
            retry_after: None,
        }
    }
}

/// Answers matching calls with `reply`, `times` times (forever when `None`).
#[derive(Debug, Clone)]
pub struct Rule {
    pub service: Option<Service>,
    pub recipient: Option<String>,
    pub times: Option<usize>,
    pub reply: Reply,
}

/// One call the stub received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub at: DateTime<Utc>,
    pub service: Service,
    pub action: String,
    /// The email address, phone number, endpoint ARN or device token.
    pub recipient: String,
    pub message_id: Option<String>,
    /// The message headers an email carried (SES `Content.Simple.Headers`).
    pub headers: Vec<(String, String)>,
}

#[derive(Default)]
struct Script {
    rules: Vec<Rule>,
    latency: Duration,
    calls: Vec<Call>,
}

/// A running stub; it serves until the process ends.
#[derive(Clone)]
pub struct AwsStub {
    address: SocketAddr,
    script: Arc<Mutex<Script>>,
}

impl AwsStub {
    /// Serves on a free port of 127.0.0.1.
    pub async fn start() -> anyhow::Result<Self> {
        let script = Arc::new(Mutex::new(Script::default()));
        let app = Router::new()
            .route("/v2/email/outbound-emails", post(send_email))
            .route("/", post(sns_action))
            .with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::warn!(%error, "the AWS stub stopped");
            }
        });
        Ok(AwsStub { address, script })
    }

    /// The value for `AWS_ENDPOINT_URL`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Matching calls get `rule.reply` (rules are tried in the order added).
    pub fn push(&self, rule: Rule) {
        if let Ok(mut script) = self.script.lock() {
            script.rules.push(rule);
        }
    }

    /// Every call waits this long before it is answered.
    pub fn set_latency(&self, latency: Duration) {
        if let Ok(mut script) = self.script.lock() {
            script.latency = latency;
        }
    }

    /// Forgets every rule (calls stay recorded).
    pub fn clear_rules(&self) {
        if let Ok(mut script) = self.script.lock() {
            script.rules.clear();
        }
    }

    /// Every call so far, in arrival order.
    pub fn calls(&self) -> Vec<Call> {
        self.script
            .lock()
            .map(|script| script.calls.clone())
            .unwrap_or_default()
    }
}

type Shared = Arc<Mutex<Script>>;

/// Records the call, waits the latency and decides the reply.
async fn answer(
    script: &Shared,
    service: Service,
    action: &str,
    recipient: String,
    headers: Vec<(String, String)>,
) -> (Reply, Option<String>) {
    let (reply, latency) = {
        let Ok(mut script) = script.lock() else {
            return (Reply::error(500, "InternalFailure", "stub poisoned"), None);
        };
        let mut reply = Reply::Accept;
        for rule in script.rules.iter_mut() {
            let matches = rule.service.is_none_or(|s| s == service)
                && rule.recipient.as_ref().is_none_or(|r| *r == recipient)
                && rule.times != Some(0);
            if matches {
                if let Some(times) = rule.times.as_mut() {
                    *times -= 1;
                }
                reply = rule.reply.clone();
                break;
            }
        }
        let message_id = (reply == Reply::Accept).then(|| uuid::Uuid::new_v4().to_string());
        script.calls.push(Call {
            at: Utc::now(),
            service,
            action: action.to_string(),
            recipient,
            message_id: message_id.clone(),
            headers,
        });
        ((reply, message_id), script.latency)
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    reply
}

/// SES v2 `SendEmail`: JSON in, `{"MessageId"}` out; errors as `x-amzn-ErrorType` and a
/// JSON `message`.
async fn send_email(State(script): State<Shared>, body: Bytes) -> Response {
    let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let recipient = request["Destination"]["ToAddresses"][0]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let headers = request["Content"]["Simple"]["Headers"]
        .as_array()
        .map(|headers| {
            headers
                .iter()
                .map(|h| {
                    let text = |field: &str| h[field].as_str().unwrap_or_default().to_string();
                    (text("Name"), text("Value"))
                })
                .collect()
        })
        .unwrap_or_default();
    match answer(&script, Service::Ses, "SendEmail", recipient, headers).await {
        (Reply::Accept, id) => {
            let body = serde_json::json!({ "MessageId": id.unwrap_or_default() });
            (StatusCode::OK, json_headers(), body.to_string()).into_response()
        }
        (
            Reply::Error {
                status,
                code,
                message,
                retry_after,
            },
            _,
        ) => {
            let mut headers = json_headers();
            if let Ok(value) = HeaderValue::from_str(&code) {
                headers.insert("x-amzn-errortype", value);
            }
            add_retry_after(&mut headers, retry_after);
            let body = serde_json::json!({ "message": message }).to_string();
            (status_code(status), headers, body).into_response()
        }
    }
}

/// SNS query actions: form-encoded in, XML out.
async fn sns_action(State(script): State<Shared>, body: Bytes) -> Response {
    let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    let field = |name: &str| {
        form.iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
    };
    let action = field("Action").unwrap_or_default();
    let recipient = field("PhoneNumber")
        .or_else(|| field("TargetArn"))
        .or_else(|| field("Token"))
        .unwrap_or_default();
    let reply = answer(
        &script,
        Service::Sns,
        &action,
        recipient.clone(),
        Vec::new(),
    )
    .await;
    let namespace = "http://sns.amazonaws.com/doc/2010-03-31/";
    match reply {
        (Reply::Accept, id) => {
            let result = match action.as_str() {
                "CreatePlatformEndpoint" => format!(
                    // The same token gets the same endpoint, as with SNS.
                    "<EndpointArn>arn:aws:sns:us-east-1:123456789012:endpoint/GCM/stub/{:016x}</EndpointArn>",
                    recipient
                        .bytes()
                        .fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
                            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
                        })
                ),
                _ => format!("<MessageId>{}</MessageId>", id.unwrap_or_default()),
            };
            let body = format!(
                "<{action}Response xmlns=\"{namespace}\"><{action}Result>{result}</{action}Result>\
                 <ResponseMetadata><RequestId>{}</RequestId></ResponseMetadata></{action}Response>",
                uuid::Uuid::new_v4()
            );
            (StatusCode::OK, xml_headers(), body).into_response()
        }
        (
            Reply::Error {
                status,
                code,
                message,
                retry_after,
            },
            _,
        ) => {
            let mut headers = xml_headers();
            add_retry_after(&mut headers, retry_after);
            let kind = if status >= 500 { "Receiver" } else { "Sender" };
            let body = format!(
                "<ErrorResponse xmlns=\"{namespace}\"><Error><Type>{kind}</Type><Code>{code}</Code>\
                 <Message>{message}</Message></Error><RequestId>{}</RequestId></ErrorResponse>",
                uuid::Uuid::new_v4()
            );
            (status_code(status), headers, body).into_response()
        }
    }
}

fn status_code(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

fn json_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers
}

fn xml_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/xml"));
    headers
}

fn add_retry_after(headers: &mut HeaderMap, seconds: Option<u64>) {
    if let Some(seconds) = seconds
        && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
    {
        headers.insert(header::RETRY_AFTER, value);
    }
}
