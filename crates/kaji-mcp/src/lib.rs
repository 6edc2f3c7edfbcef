//! kaji's MCP client: starts the MCP servers of `[mcp_servers.<name>]`
//! (and of a project's `.mcp.json`, read by [`load_mcp_json`]),
//! keeps them alive, and offers their tools and resources to the model as
//! kaji [`Tool`](kaji_tools::Tool)s.
//!
//! The client is kaji's own (it replaced the `rmcp` SDK, whose build was
//! one of the largest units of a cold install): a JSON-RPC peer, a stdio
//! and a streamable HTTP transport, and the MCP types kaji uses. Stdio
//! servers are spawned through [`kaji_tasks::process`], so each runs in a
//! process group of its own and dies with it; streamable HTTP servers are
//! reached with reqwest (rustls).
//!
//! The entry point is [`McpManager`]: [`McpManager::start`] starts every
//! enabled server in the background, [`McpManager::wait_ready`] waits a
//! bounded time for them, [`McpManager::tools`] returns the tools of the
//! connected ones (`mcp__<server>__<tool>`, plus `ListMcpResources` and
//! `ReadMcpResource`), [`McpManager::status`] reports each server, and
//! [`McpManager::shutdown`] stops them all.
//!
//! This crate must never block start-up on a server, never let a server
//! process outlive the manager, never ask the user or decide about
//! permissions (the core does, from [`kaji_tools::ToolAccess`]), and never
//! panic on anything a server sends.

mod client;
mod config;
mod connection;
pub mod content;
mod error;
mod jsonrpc;
mod manager;
mod mcp_json;
pub mod model;
pub mod names;
mod stderr;
mod tools;
mod transport;

pub use config::{
    DEFAULT_STARTUP_TIMEOUT_SECS, DEFAULT_TOOL_TIMEOUT_SECS, McpConfigError, McpServerConfig,
    McpServerTableError, McpTransportConfig, servers_from_tables,
};
pub use error::McpError;
pub use manager::{
    McpCallOutput, McpFailure, McpManager, McpManagerOptions, McpResourceInfo, McpServerReport,
    McpServerStatus, McpToolInfo,
};
pub use mcp_json::{
    MCP_JSON_FILE, McpJsonError, McpJsonServers, load_mcp_json, load_mcp_json_servers,
    parse_mcp_json, parse_mcp_json_servers,
};
pub use stderr::{STDERR_TAIL_BYTES, STDERR_TAIL_LINES, StderrTail};
pub use tools::{ListMcpResources, McpTool, ReadMcpResource};
