//! `notify-local`: Notify Queue in one process for development and black-box tests, and
//! the tools only development needs. None of this ships inside a Lambda function.
//!
//! - [`runner`]: the HTTP API, sweeper and webhook drainer in one process (`APP_ROLE`).
//! - [`embedded`]: a private PostgreSQL started from the machine's binaries.
//! - [`scratch`]: per-run databases for the tests and the benchmark.
//! - [`keys`]: `notify-local keys create|list|revoke`.
//! - [`aws_stub`]: a stand-in for SES and SNS on loopback, for tests and the benchmark.

pub mod aws_stub;
pub mod embedded;
pub mod keys;
pub mod runner;
pub mod scratch;

pub use runner::redact;
