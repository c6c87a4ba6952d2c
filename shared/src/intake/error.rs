//! API errors. Handlers return [`ApiError`]; the response middleware renders every non-2xx
//! response as the one error envelope, adding the path and the request id.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

pub use crate::problems::FieldError;
use crate::problems::Problems;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub details: Vec<FieldError>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            details: Vec::new(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn validation(details: Vec<FieldError>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: "Validation failed".into(),
            details,
        }
    }

    /// One field with one problem.
    pub fn field(field: &str, message: impl Into<String>) -> Self {
        let mut problems = Problems::new();
        problems.add(field, message);
        problems.into()
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }

    /// Never says what went wrong inside: no SQL, no parameters, no stack.
    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "An unexpected error occurred",
        )
    }

    pub fn unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "The database is unavailable; try again shortly",
        )
    }
}

impl From<Problems> for ApiError {
    fn from(problems: Problems) -> Self {
        let mut error = ApiError::validation(problems.into_errors());
        // The contract words a bad cursor as the message itself: when it is the only
        // problem, the message says it (and `details` still names the field).
        if let [only] = error.details.as_slice()
            && only.field == "cursor"
            && let [reason] = only.errors.as_slice()
        {
            error.message = reason.clone();
        }
        error
    }
}

/// Database failures are logged here with their cause and shown to the client as a bare
/// 500 (or 503 when the database cannot be reached).
impl From<tokio_postgres::Error> for ApiError {
    fn from(error: tokio_postgres::Error) -> Self {
        if error.is_closed() || error.as_db_error().is_none() {
            tracing::error!(error = %error, "database unreachable");
            ApiError::unavailable()
        } else {
            tracing::error!(code = ?error.code(), "database error");
            ApiError::internal()
        }
    }
}

impl From<deadpool_postgres::PoolError> for ApiError {
    fn from(error: deadpool_postgres::PoolError) -> Self {
        tracing::error!(error = %error, "no database connection available");
        ApiError::unavailable()
    }
}

/// Carried in the response extensions until the middleware renders the envelope.
#[derive(Debug, Clone)]
pub(crate) struct ErrorBody(pub ApiError);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = self.status.into_response();
        response.extensions_mut().insert(ErrorBody(self));
        response
    }
}

/// The envelope every non-2xx response carries.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Envelope<'a> {
    pub status_code: u16,
    pub error: &'a str,
    pub message: &'a str,
    #[serde(skip_serializing_if = "<[FieldError]>::is_empty")]
    pub details: &'a [FieldError],
    pub path: &'a str,
    pub request_id: &'a str,
}
