//! kaji-lsp against real language servers (installed by `.ci/run` into
//! `tests/lsp-servers`) and small fake ones.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed expectation is a test failure"
)]

mod builtin_failing;
mod common;
mod pyright;
mod typescript;
