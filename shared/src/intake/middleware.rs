//! Cross-cutting HTTP behaviour: request ids, security headers, the error envelope,
//! one log line per request, no panic ever reaching the client, and no query parameter
//! or body property silently ignored.

use std::panic::AssertUnwindSafe;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use serde_json::Value;

use super::body::{BODY_LIMIT, read_json};
use super::error::{ApiError, Envelope, ErrorBody};
use crate::problems::Problems;

pub static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
const JSON_CSP: &str = "default-src 'none'; frame-ancestors 'none'";

/// Keeps a safe incoming `X-Request-ID`, otherwise makes a UUID v4.
pub fn request_id_for(incoming: Option<&HeaderValue>) -> String {
    incoming
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            (1..=128).contains(&v.len())
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
        })
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}

/// The API routes that read a query string: their GET lists, each refusing the
/// parameters it does not know.
const QUERY_READERS: [&str; 5] = [
    "/notifications",
    "/webhook-events",
    "/suppressions",
    "/templates",
    "/campaigns",
];

/// Refuses a query parameter on an API route that reads none (400, as a list refuses one
/// it does not know): `DELETE /notifications/{id}?dryRun=true` must not look obeyed.
/// Layered on the keyed routes only; the unsubscribe link, the pages and `/health` are
/// reached by mail clients, browsers and probes that add parameters of their own.
pub async fn refuse_unread_query(request: Request, next: Next) -> Response {
    let reads_query = request.method() == Method::GET
        && request
            .extensions()
            .get::<MatchedPath>()
            .is_some_and(|path| QUERY_READERS.contains(&path.as_str()));
    if !reads_query {
        match super::body::query_pairs(request.uri().query()) {
            Ok(pairs) => {
                if let Some((name, _)) = pairs.first() {
                    return ApiError::field(name, format!("property {name} should not exist"))
                        .into_response();
                }
            }
            Err(error) => return error.into_response(),
        }
    }
    next.run(request).await
}

/// The API routes whose handlers read a body, by method and path. Every other POST, PUT,
/// PATCH or DELETE of the keyed routes takes none.
const BODY_READERS: [(Method, &str); 12] = [
    (Method::POST, "/notifications"),
    (Method::POST, "/notifications/batch"),
    (Method::POST, "/notifications/retry"),
    (Method::PUT, "/recipients/{id}"),
    (Method::PATCH, "/recipients/{id}/preferences"),
    (Method::POST, "/webhook-endpoints"),
    (Method::POST, "/webhook-events/retry"),
    (Method::POST, "/suppressions"),
    (Method::POST, "/unsubscribe-links"),
    (Method::POST, "/templates/{id}/versions"),
    (Method::POST, "/templates/{id}/preview"),
    (Method::POST, "/campaigns"),
];

/// Refuses a body on an API route that reads none, as a route that reads one refuses a
/// property it does not know: `POST /webhook-endpoints/{id}/rotate-secret` with
/// `{"secret": …}` must not look obeyed. No body and `{}` are taken; any property is a 400
/// naming it, and anything but an object a 400 on `body`. Layered on the keyed routes.
pub async fn refuse_unread_body(request: Request, next: Next) -> Response {
    let method = request.method();
    let writes = [Method::POST, Method::PUT, Method::PATCH, Method::DELETE].contains(method);
    let reads_body = request
        .extensions()
        .get::<MatchedPath>()
        .is_some_and(|path| {
            BODY_READERS
                .iter()
                .any(|(reader, route)| reader == method && *route == path.as_str())
        });
    if !writes || reads_body {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    match read_json(&parts.headers, body, BODY_LIMIT).await {
        Ok(None) => {}
        Ok(Some(Value::Object(object))) if object.is_empty() => {}
        Ok(Some(Value::Object(object))) => {
            let mut problems = Problems::new();
            problems.only(&object, &[]);
            return ApiError::from(problems).into_response();
        }
        Ok(Some(_)) => {
            return ApiError::field("body", "this route takes no body (an empty object at most)")
                .into_response();
        }
        Err(error) => return error.into_response(),
    }
    next.run(Request::from_parts(parts, Body::empty())).await
}

pub async fn around_request(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let request_id = request_id_for(request.headers().get(&REQUEST_ID));
    let method = request.method().clone();
    let path = request.uri().path().to_string();

    let mut response = match AssertUnwindSafe(next.run(request)).catch_unwind().await {
        Ok(response) => response,
        Err(_) => {
            tracing::error!(request_id, "handler panicked");
            ApiError::internal().into_response()
        }
    };
    // Errors become the envelope; a handler's own non-2xx body (the health check's 503,
    // the page refusing a forged unsubscribe link) goes out as the handler wrote it.
    let own_body = response.extensions().get::<ErrorBody>().is_none()
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| {
                v.as_bytes().starts_with(b"application/json")
                    || v.as_bytes().starts_with(b"text/html")
            });
    if !response.status().is_success() && response.status() != StatusCode::NOT_MODIFIED && !own_body
    {
        response = render_error(response, &path, &request_id);
    }

    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        headers.insert(REQUEST_ID.clone(), value);
    }
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::X_FRAME_OPTIONS,
        HeaderValue::from_static("SAMEORIGIN"),
    );
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(JSON_CSP),
        );
    }
    headers.remove(header::SERVER);

    tracing::info!(
        request_id,
        method = %method,
        path = loggable_path(&path),
        status = response.status().as_u16(),
        duration_ms = started.elapsed().as_secs_f64() * 1000.0,
        "request"
    );
    response
}

/// The path as logged: a segment that names a person is replaced by what it is: a recipient
/// id (a client may use an address as one), a suppressed address, an unsubscribe token
/// (which carries the address).
fn loggable_path(path: &str) -> String {
    let mut segments: Vec<&str> = path.split('/').collect();
    let (at, placeholder) = match segments.get(1).copied() {
        Some("recipients") => (2, "{recipientId}"),
        Some("unsubscribe") => (2, "{token}"),
        Some("suppressions") => (3, "{address}"),
        _ => return path.to_string(),
    };
    if let Some(segment) = segments.get_mut(at) {
        *segment = placeholder;
    }
    segments.join("/")
}

/// Renders any non-2xx response as the envelope; errors that did not come from a handler
/// (unknown route, wrong method) get their reason phrase as the message.
fn render_error(response: Response, path: &str, request_id: &str) -> Response {
    let status = response.status();
    let error = match response.extensions().get::<ErrorBody>() {
        Some(ErrorBody(error)) => error.clone(),
        None => match status {
            StatusCode::NOT_FOUND => ApiError::not_found(format!("Cannot find {path}")),
            StatusCode::METHOD_NOT_ALLOWED => {
                ApiError::new(status, "Method not allowed for this route")
            }
            _ => ApiError::new(status, status.canonical_reason().unwrap_or("Error")),
        },
    };
    let envelope = Envelope {
        status_code: status.as_u16(),
        error: status.canonical_reason().unwrap_or("Error"),
        message: &error.message,
        details: &error.details,
        path,
        request_id,
    };
    let body = serde_json::to_vec(&envelope).unwrap_or_default();
    let mut rendered = Response::new(Body::from(body));
    *rendered.status_mut() = status;
    let headers = rendered.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for (name, value) in response.headers() {
        if name == header::ALLOW || name == header::RETRY_AFTER || name == header::WWW_AUTHENTICATE
        {
            headers.insert(name.clone(), value.clone());
        }
    }
    rendered
}

#[cfg(test)]
mod tests {
    use super::loggable_path;

    #[test]
    fn logged_paths_name_no_person() {
        for (path, logged) in [
            ("/recipients/ada@example.com", "/recipients/{recipientId}"),
            (
                "/recipients/ada@example.com/preferences",
                "/recipients/{recipientId}/preferences",
            ),
            ("/unsubscribe/eyJzIjp7fQ.sig", "/unsubscribe/{token}"),
            (
                "/suppressions/EMAIL/ada%40example.com",
                "/suppressions/EMAIL/{address}",
            ),
            ("/suppressions", "/suppressions"),
            ("/recipients", "/recipients"),
            ("/notifications/8828acc0", "/notifications/8828acc0"),
            ("/unsubscribe-links", "/unsubscribe-links"),
        ] {
            assert_eq!(loggable_path(path), logged, "{path}");
        }
    }
}
