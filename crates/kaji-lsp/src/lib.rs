//! kaji's language-server client.
//!
//! Speaks JSON-RPC with Content-Length framing over a server's stdin and
//! stdout ([`framing`]), keeps one server per (server, root) for a session
//! ([`LspPool`]), syncs documents with `didOpen`/`didChange` so answers are
//! never about stale text, collects `publishDiagnostics` and waits for them
//! by document version, with a bound. Servers are started through
//! kaji-tasks' one process-spawn seam with the session's environment
//! policy. Which servers exist is [`config`]: built-in defaults,
//! `[lsp.<name>]` settings and Claude Code's `.lsp.json`.
//!
//! This crate never depends on kaji-core, never prints, and never lets a
//! server's misbehaviour (missing, hung, crashed, flooding, garbage) block
//! a caller past the bound it asked for.

pub mod config;
mod connection;
pub mod diagnostics;
pub mod framing;
mod pool;
pub mod uri;

pub use config::{LSP_JSON_FILE, ServerConfig, ServerSettings, ServerSource};
pub use diagnostics::{Diagnostic, introduced, report};
pub use pool::{FileDiagnostics, LspPool, LspSettings, ServerStatus, server_status};
