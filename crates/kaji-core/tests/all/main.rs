//! The integration tests of this crate, in one binary: one link instead of
//! one per file, and shared helpers compiled once. Each module is one of
//! the former test files; run one with `cargo test -p kaji-core --test all MODULE::`.
//! Kept as binaries of their own (they change or measure process-wide state; see docs/testing.md): `hook_secret_env`, `soak`, `teams`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed expectation is a test failure"
)]

mod cache_run;
mod common;
mod session_support;

mod checkpoint_borrow;
mod checkpoint_paths;
mod checkpoints;
mod claude_corpus;
mod claude_events;
mod config;
mod early_tools;
mod final_event;
mod hooks;
mod live_output;
mod loop_bounds;
mod loop_edges;
mod partial_asks;
mod permissions_config;
mod prompt_cache;
mod prompt_options;
mod reasoning_rounds;
mod rules;
mod session_attachments;
mod session_fork;
mod session_multiprocess;
mod session_rewind;
mod session_store;
mod subagents;
mod task_features;
mod task_loop;
mod text_reply;
