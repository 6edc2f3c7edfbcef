//! The integration tests of this crate, in one binary: one link instead of
//! one per file, and shared helpers compiled once. Each module is one of
//! the former test files; run one with `cargo test -p kaji-llm --test all MODULE::`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed expectation is a test failure"
)]

#[macro_use]
mod common;

mod context;
mod limits;
mod providers;
mod reasoning;
mod selection;
mod wire;
mod wire_cache;
