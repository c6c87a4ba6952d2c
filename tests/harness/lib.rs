//! The test harness shared by every integration test (the modules of `tests/it`).
//!
//! - [`db`]: a fresh database per test ([`TestDb`]), cloned from a migrated template.
//! - [`factory`]: notifications and outbox rows in a known state.
//! - [`app`]: [`TestApp`], a test database with the API served on it and typed verbs.
//! - [`doubles`]: the providers and randomness tests script.
//! - [`worker`]: worker configuration, sweepers and webhook drainers for tests.
//! - [`receiver`]: a scripted webhook receiver on 127.0.0.1.
//! - [`process`]: real `notify-local` processes.
//! - [`moto`]: a local AWS Scheduler API.

pub mod app;
pub mod db;
pub mod doubles;
pub mod factory;
pub mod moto;
pub mod process;
pub mod receiver;
pub mod worker;

use std::path::PathBuf;
use std::sync::OnceLock;

pub use app::{Reply, TestApp};
pub use db::TestDb;

/// The workspace root (migrations, docs and fixtures live there).
pub const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The `notify-local` binary of this build profile, next to the test executable
/// (`target/<profile>/deps/it-…` → `target/<profile>/notify-local`). Built once with
/// `cargo build -p notify-local` when a filtered test run did not build it.
pub fn notify_local_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("the test executable's path");
            let profile_dir = exe
                .parent()
                .and_then(|deps| deps.parent())
                .expect("target/<profile>/deps");
            let binary = profile_dir.join("notify-local");
            let release = profile_dir.file_name().is_some_and(|n| n == "release");
            let mut build = std::process::Command::new(env!("CARGO"));
            build.args(["build", "--quiet", "-p", "notify-local"]);
            if release {
                build.arg("--release");
            }
            // Always asked: cargo answers at once when the binary is up to date, and a
            // stale binary would test old code.
            let status = build
                .current_dir(WORKSPACE)
                .status()
                .expect("run cargo build -p notify-local");
            assert!(status.success(), "cargo build -p notify-local failed");
            assert!(binary.is_file(), "{} was not built", binary.display());
            binary
        })
        .clone()
}
