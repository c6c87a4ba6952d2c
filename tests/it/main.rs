//! The integration tests of Notify Queue: one binary, one module per area, every test on a
//! database of its own on a real PostgreSQL (`DATABASE_URL`, else a private server). The
//! shared helpers live in the harness library, `notify_tests` (`tests/harness/`).
//!
//! The chaos scenarios are ignored by default; run them with
//! `cargo test -p notify-tests --test it -- --ignored chaos --nocapture`.

mod api;
mod audience;
mod auth;
mod batch;
mod chaos;
mod concurrency;
mod content;
mod database;
mod delivery;
mod deploy;
mod logs;
mod migration;
mod operations;
mod pipelined;
mod processes;
mod properties;
mod ratelimit;
mod redrive_lambda;
mod sql;
mod sweeper;
mod tls;
mod webhooks;
