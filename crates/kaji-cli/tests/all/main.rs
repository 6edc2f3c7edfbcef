//! The integration tests of this crate, in one binary: one link instead of
//! one per file, and shared helpers compiled once. Each module is one of
//! the former test files; run one with `cargo test -p kaji-cli --test all MODULE::`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed expectation is a test failure"
)]

mod common;

mod acp_client;
mod agent_sdk;
mod agent_sdk_control;
mod agents_cli;
mod checkpoint_cost;
mod checkpoint_repack;
mod checkpoint_rounds;
mod checkpoint_settle;
mod checkpoint_watch;
mod checkpoints_cli;
mod chosen_model;
mod claude_habits;
mod claude_settings;
mod claude_setup;
mod compaction;
mod detached_hooks;
mod doctor_cli;
mod exec_cli;
mod exec_golden;
mod images_cli;
mod log_file;
mod lsp_cli;
mod mcp_cli;
mod no_retry;
mod nothing_lost;
mod permissions_cli;
mod provider_search;
mod ps_cli;
mod resume_views;
mod review_cli;
mod review_shadow;
mod rules_cli;
mod run_budget;
mod sandbox_escapes;
mod sdk_env;
mod sdk_hooks;
mod sdk_permissions;
mod sdk_requests;
mod session_errors;
mod sessions_cli;
mod sessions_resume;
mod shell_analysis;
mod subagent_services;
mod tasks_cli;
mod tasks_pg_cli;
mod tool_results;
mod tool_schemas;
mod tool_titles;
mod trust_cli;
mod tui;
mod tui_cli;
mod web_search_cli;
mod web_search_history;
mod what_runs;
mod worker_cli;
mod worker_pg_cli;
