//! The integration tests of this crate, in one binary: one link instead of
//! one per file, and shared helpers compiled once. Each module is one of
//! the former test files; run one with `cargo test -p kaji-tools --test all MODULE::`.
//! Kept as binaries of their own (they change or measure process-wide state; see docs/testing.md): `bash_secret_env`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed expectation is a test failure"
)]

mod bash;
mod bash_sandbox;
mod fs_tools;
mod interaction;
mod plan;
mod runtime_tools;
mod skill;
mod summaries;
mod team_tools;
mod todo;
mod web_fetch;
mod worktree;
