//! The integration tests of this crate, in one binary. Each module is one
//! of the former test files; run one with
//! `cargo test -p kaji-policy --test all MODULE::`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed expectation is a test failure"
)]

mod compound;
mod differential;
