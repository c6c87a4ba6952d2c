//! Notify Queue: a notification scheduler on PostgreSQL.
//!
//! Everything the Lambda functions and the local runner do lives here; their `main`s only
//! build configuration and the pool once and call in.

pub mod auth;
pub mod backoff;
pub mod config;
pub mod db;
pub mod functions;
pub mod intake;
pub mod metrics;
pub mod notification;
pub mod provider;
pub mod queue;
pub mod ratelimit;
pub mod redrive;
pub mod runner;
pub mod schedule;
pub mod stop;
pub mod sweeper;
pub mod telemetry;
pub mod wake;
pub mod webhook;
