//! Reading JSON bodies: content type, size limit (413), well-formedness (400).

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use serde_json::Value;

use super::error::ApiError;

/// Limit for every route but batch intake.
pub const BODY_LIMIT: usize = 64 * 1024;

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("Request body is larger than the limit of {limit} bytes"),
    )
}

/// Reads the body whole, at most `limit` bytes (413 beyond, whether declared or not).
pub async fn read_bytes(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<axum::body::Bytes, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(too_large(limit));
    }
    axum::body::to_bytes(body, limit).await.map_err(|error| {
        let mut source: Option<&(dyn std::error::Error + 'static)> =
            std::error::Error::source(&error);
        let mut length_limited = false;
        while let Some(cause) = source {
            length_limited |= cause.is::<http_body_util::LengthLimitError>();
            source = cause.source();
        }
        if length_limited {
            too_large(limit)
        } else {
            ApiError::bad_request("Request body could not be read")
        }
    })
}

/// Reads the body as JSON. `Ok(None)` for a body of zero bytes (the caller decides if
/// that is allowed); anything else must be JSON with a JSON content type.
pub async fn read_json(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Option<Value>, ApiError> {
    let bytes = read_bytes(headers, body, limit).await?;
    if bytes.is_empty() {
        return Ok(None);
    }
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        // The contract takes `application/json` only: a `+json` type names another
        // format (JSON:API, a JSON Patch, a problem document), which this API does not read.
        .map(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
        .unwrap_or(false);
    if !is_json {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
        ));
    }
    super::json::parse(&bytes)
        .map(Some)
        .map_err(|error| ApiError::bad_request(format!("Request body is not valid JSON ({error})")))
}

/// The pairs of a query string (`None` or empty: none), or 400 when it cannot be parsed.
pub fn query_pairs(query: Option<&str>) -> Result<Vec<(String, String)>, ApiError> {
    serde_urlencoded::from_str(query.unwrap_or(""))
        .map_err(|_| ApiError::bad_request("Query string could not be parsed"))
}
