//! The integration tests of Notify Queue: one binary, one module per area, every test on a
//! database of its own on a real PostgreSQL (`DATABASE_URL`, else a private server). The
//! shared helpers live in the harness library, `notify_tests` (`tests/harness/`).

mod api;
mod auth;
mod batch;
mod operations;
mod ratelimit;
mod redrive_lambda;
mod sweeper;
mod webhooks;
