//! Operator routes against a real PostgreSQL: single and bulk redrive, metrics as JSON and
//! as Prometheus text, and the worker role's reduced router.

mod console;
mod digest;
mod metrics;
mod redrive;
mod retention;
