//! The integration tests of this crate, in one binary: one link instead of
//! one per file, and shared helpers compiled once. Each module is one of
//! the former test files; run one with `cargo test -p kaji-tasks --test all MODULE::`.
//! Kept as binaries of their own (they change or measure process-wide state; see docs/testing.md): `watchdog_fds`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed expectation is a test failure"
)]

mod list_support;

mod list_backends;
mod list_bad_files;
mod list_dependency_props;
mod list_multiprocess;
mod list_semantics;
mod no_orphans;
mod process_group;
mod runtime_agents;
mod runtime_registry;
mod sandbox;
