//! The HTTP client of every AWS SDK client: reqwest over native-tls, the one HTTPS client
//! and TLS stack of the project (PostgreSQL's TLS is native-tls too), instead of the SDK's
//! own hyper + rustls client. It implements the SDK's `HttpClient` / `HttpConnector`
//! traits: timeouts come from the SDK's connector settings, and transport errors keep the
//! kinds (timeout, io, user, other) the SDK's retry classification and
//! [`super::aws::classify`] read.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::sync::Mutex;
use std::time::Duration;

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;

/// The client to give an SDK configuration (`.http_client(...)`) whose timeout
/// configuration sets `connect_timeout` and no read timeout. Its reqwest client is built
/// now, at start-up: building one loads the system's root certificates, which would
/// otherwise hold back the first calls. Clones share their connection pools.
pub fn client(connect_timeout: Option<Duration>) -> SharedHttpClient {
    let key = Timeouts {
        connect: connect_timeout,
        read: None,
    };
    let connector = SharedHttpConnector::new(ReqwestConnector::new(key));
    SharedHttpClient::new(ReqwestClient {
        connectors: Mutex::new(HashMap::from([(key, connector)])),
    })
}

/// Builds one reqwest client per distinct connector settings (in practice one per SDK
/// configuration), since reqwest takes its connect and read timeouts at build time.
#[derive(Debug)]
struct ReqwestClient {
    connectors: Mutex<HashMap<Timeouts, SharedHttpConnector>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Timeouts {
    connect: Option<Duration>,
    read: Option<Duration>,
}

impl HttpClient for ReqwestClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        let key = Timeouts {
            connect: settings.connect_timeout(),
            read: settings.read_timeout(),
        };
        // A poisoned lock only means another thread panicked while inserting: the map is
        // still a valid cache.
        let mut connectors = self
            .connectors
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        connectors
            .entry(key)
            .or_insert_with(|| SharedHttpConnector::new(ReqwestConnector::new(key)))
            .clone()
    }
}

#[derive(Debug)]
struct ReqwestConnector {
    /// `Err` keeps the build error, reported by every call (a client that cannot be built
    /// means the TLS library cannot load its roots: nothing can be sent).
    client: Result<reqwest::Client, String>,
}

impl ReqwestConnector {
    fn new(timeouts: Timeouts) -> Self {
        // AWS APIs do not redirect; a redirect must reach the SDK as the answer it is.
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_idle_timeout(Duration::from_secs(60));
        if let Some(timeout) = timeouts.connect {
            builder = builder.connect_timeout(timeout);
        }
        if let Some(timeout) = timeouts.read {
            builder = builder.read_timeout(timeout);
        }
        ReqwestConnector {
            client: builder.build().map_err(|error| error.to_string()),
        }
    }
}

impl HttpConnector for ReqwestConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let client = match &self.client {
            Ok(client) => client.clone(),
            Err(problem) => {
                let problem = format!("cannot build the HTTP client: {problem}");
                return HttpConnectorFuture::ready(Err(ConnectorError::other(
                    problem.into(),
                    None,
                )));
            }
        };
        let request = match request.try_into_http1x() {
            Ok(request) => request.map(into_body),
            Err(error) => {
                return HttpConnectorFuture::ready(Err(ConnectorError::user(error.into())));
            }
        };
        let request = match reqwest::Request::try_from(request) {
            Ok(request) => request,
            Err(error) => return HttpConnectorFuture::ready(Err(connector_error(error))),
        };
        HttpConnectorFuture::new(async move {
            let response = client.execute(request).await.map_err(connector_error)?;
            // The body streams on: the SDK reads it under its own timeouts and maps a
            // failure there to a response error.
            let response = http::Response::from(response).map(SdkBody::from_body_1_x);
            HttpResponse::try_from(response)
                .map_err(|error| ConnectorError::other(error.into(), None))
        })
    }
}

/// Request bodies the SDK built in memory (every API used here) go as bytes, without a
/// second copy; a streaming body is forwarded as a stream.
fn into_body(body: SdkBody) -> reqwest::Body {
    match body.bytes() {
        Some(bytes) => reqwest::Body::from(bytes::Bytes::copy_from_slice(bytes)),
        None => reqwest::Body::wrap(body),
    }
}

/// reqwest's error as the SDK's: a timeout, a connection that failed or broke (io: safe to
/// retry), a request that could not be built (user), anything else (other).
fn connector_error(error: reqwest::Error) -> ConnectorError {
    if error.is_timeout() {
        ConnectorError::timeout(error.into())
    } else if error.is_builder() {
        ConnectorError::user(error.into())
    } else if error.is_connect() {
        ConnectorError::io(error.into()).never_connected()
    } else if error.is_body() || error.is_decode() || has_io_source(&error) {
        ConnectorError::io(error.into())
    } else {
        ConnectorError::other(error.into(), None)
    }
}

/// Whether an I/O error (a reset or closed connection) lies under `error`.
fn has_io_source(error: &(dyn StdError + 'static)) -> bool {
    let mut next = error.source();
    while let Some(source) = next {
        if source.is::<std::io::Error>() {
            return true;
        }
        next = source.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connector(read: Option<Duration>) -> ReqwestConnector {
        ReqwestConnector::new(Timeouts {
            connect: Some(Duration::from_secs(1)),
            read,
        })
    }

    fn post(address: std::net::SocketAddr) -> HttpRequest {
        let request = http::Request::builder()
            .method("POST")
            .uri(format!("http://{address}/v2/email/outbound-emails"))
            .body(SdkBody::from("{}"))
            .expect("request");
        HttpRequest::try_from(request).expect("request")
    }

    #[tokio::test]
    async fn a_refused_connection_is_an_io_error_the_sdk_may_retry() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address");
        drop(listener);
        let error = connector(None)
            .call(post(address))
            .await
            .expect_err("nothing listens");
        assert!(error.is_io(), "{error:?}");
    }

    #[tokio::test]
    async fn a_silent_server_is_a_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        let _held = tokio::spawn(async move {
            let accepted = listener.accept().await;
            tokio::time::sleep(Duration::from_secs(5)).await;
            drop(accepted);
        });
        let error = connector(Some(Duration::from_millis(200)))
            .call(post(address))
            .await
            .expect_err("no answer");
        assert!(error.is_timeout(), "{error:?}");
    }

    #[tokio::test]
    async fn the_answer_comes_back_with_status_headers_and_body() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move {
            if let Ok((mut socket, _)) = listener.accept().await {
                let mut buffer = [0u8; 4096];
                let mut seen = Vec::new();
                // Read the head and the two-byte body.
                while !seen.ends_with(b"\r\n\r\n{}") {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buffer[..n]),
                    }
                }
                let answer = b"HTTP/1.1 400 Bad Request\r\nx-amzn-errortype: MessageRejected\r\n\
                    content-length: 2\r\n\r\n{}";
                let _ = socket.write_all(answer).await;
            }
        });
        let response = connector(None).call(post(address)).await.expect("answer");
        assert_eq!(response.status().as_u16(), 400);
        assert_eq!(
            response.headers().get("x-amzn-errortype"),
            Some("MessageRejected")
        );
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .expect("body")
            .to_bytes();
        assert_eq!(&body[..], b"{}");
    }
}
