//! A webhook receiver on 127.0.0.1: records every request (headers and body) and answers
//! from a script. Dropping it stops it.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::net::TcpListener;
use uuid::Uuid;

/// One scripted answer.
#[derive(Debug, Clone, Copy)]
pub enum Reply {
    Status(u16),
    /// Answers after a pause.
    After(Duration, u16),
    /// Holds the request forever.
    Hang,
    /// `307 Temporary Redirect` to `http://{address}/hooks` (a POST stays a POST).
    RedirectTo(SocketAddr),
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("the body is JSON")
    }

    pub fn event_id(&self) -> String {
        self.json()["eventId"]
            .as_str()
            .expect("eventId is a string")
            .to_string()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

struct Script {
    replies: Mutex<VecDeque<Reply>>,
    /// Answer once the script runs out.
    otherwise: Reply,
    received: Mutex<Vec<Received>>,
    arrivals: tokio::sync::watch::Sender<usize>,
}

pub struct Receiver {
    pub url: String,
    pub address: SocketAddr,
    script: Arc<Script>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Answers `replies` in turn, then `otherwise`, on a port the OS picks.
    pub async fn start(replies: &[Reply], otherwise: Reply) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        Self::start_on(listener, replies, otherwise)
    }

    /// Answers 200 to everything on `port` (0: one the OS picks).
    pub async fn accepting_on(port: u16) -> Receiver {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind the webhook receiver");
        Self::start_on(listener, &[], Reply::Status(200))
    }

    pub fn start_on(listener: TcpListener, replies: &[Reply], otherwise: Reply) -> Receiver {
        let address = listener.local_addr().expect("address");
        let script = Arc::new(Script {
            replies: Mutex::new(replies.iter().copied().collect()),
            otherwise,
            received: Mutex::new(Vec::new()),
            arrivals: tokio::sync::watch::Sender::new(0),
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(script.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            url: format!("http://{address}/hooks"),
            address,
            script,
            task,
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.script.received.lock().expect("lock").clone()
    }

    /// The eventId of every request, in arrival order.
    pub fn event_ids(&self) -> Vec<String> {
        self.received().iter().map(Received::event_id).collect()
    }

    /// How many times each eventId was received (bodies without one are not counted).
    pub fn deliveries_per_event(&self) -> HashMap<Uuid, u32> {
        let mut seen = HashMap::new();
        for request in self.received() {
            let id = serde_json::from_slice::<Value>(&request.body)
                .ok()
                .and_then(|v| {
                    v["eventId"]
                        .as_str()
                        .and_then(|id| Uuid::try_parse(id).ok())
                });
            if let Some(id) = id {
                *seen.entry(id).or_default() += 1;
            }
        }
        seen
    }

    /// Waits (at most 10 s) until `count` requests have arrived.
    pub async fn wait_for_requests(&self, count: usize) {
        let mut arrivals = self.script.arrivals.subscribe();
        tokio::time::timeout(Duration::from_secs(10), arrivals.wait_for(|n| *n >= count))
            .await
            .expect("requests arrive in time")
            .expect("receiver alive");
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(State(script): State<Arc<Script>>, headers: HeaderMap, body: Bytes) -> Response {
    script
        .received
        .lock()
        .expect("lock")
        .push(Received { headers, body });
    let reply = script
        .replies
        .lock()
        .expect("lock")
        .pop_front()
        .unwrap_or(script.otherwise);
    script.arrivals.send_modify(|n| *n += 1);
    let code = match reply {
        Reply::Status(code) => code,
        Reply::After(pause, code) => {
            tokio::time::sleep(pause).await;
            code
        }
        Reply::Hang => std::future::pending().await,
        Reply::RedirectTo(address) => {
            return (
                StatusCode::TEMPORARY_REDIRECT,
                [(header::LOCATION, format!("http://{address}/hooks"))],
            )
                .into_response();
        }
    };
    StatusCode::from_u16(code)
        .expect("valid status")
        .into_response()
}

/// A URL where nothing listens: a port the OS just handed out, closed again.
pub async fn closed_port_url() -> (String, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    drop(listener);
    (format!("http://{address}/hooks"), address)
}
