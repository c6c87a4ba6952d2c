//! Notify Queue: a notification scheduler on PostgreSQL.
//!
//! Everything the Lambda functions do lives here; their `main`s only read configuration,
//! build a function's state once per container and call in. `docs/ARCHITECTURE.md` has the
//! module map: what each module owns and what it may call.

pub mod audience;
pub mod auth;
pub mod backoff;
pub mod channel;
pub mod cold_start;
pub mod config;
pub mod content;
pub mod db;
pub mod deadline;
pub mod deploy_setup;
pub mod digest;
pub mod domain;
pub mod feedback;
pub mod intake;
pub mod metrics;
pub mod notification;
pub mod problems;
pub mod provider;
pub mod queue;
pub mod ratelimit;
pub mod redrive;
pub mod retention;
pub mod secrets;
pub mod sql;
pub mod stop;
pub mod sweeper;
pub mod telemetry;
pub mod wake;
pub mod webhook;
