//! Errors of MCP calls. Messages name the server (and the tool) and, when a
//! server process died or failed to start, carry the tail of its stderr:
//! they reach the model and the user as they are.

use std::time::Duration;

use kaji_tools::ToolError;

/// Why a call to an MCP server failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    /// No server of that name is configured.
    #[error("no MCP server named `{server}` is configured{}", known_list(known))]
    UnknownServer {
        /// The name asked for.
        server: String,
        /// The configured names.
        known: Vec<String>,
    },
    /// The server is configured with `enabled = false`, or was switched off.
    #[error(
        "MCP server `{server}` is disabled (`enabled = false` in its configuration, or switched off while running)"
    )]
    Disabled {
        /// The server.
        server: String,
    },
    /// The server is not running: it failed to start, crashed or hung, and
    /// its restart back-off has not passed yet (or the restart failed).
    #[error("MCP server `{server}` is unavailable: {reason}{}{}", retry_note(*retry_in), stderr_note(stderr_tail))]
    Unavailable {
        /// The server.
        server: String,
        /// Why it is down.
        reason: String,
        /// The last lines it wrote to stderr.
        stderr_tail: String,
        /// When it will be restarted on next use, if not yet due.
        retry_in: Option<Duration>,
    },
    /// The server is still starting and did not finish in time for this call.
    #[error("MCP server `{server}` is still starting; try again shortly")]
    StillConnecting {
        /// The server.
        server: String,
    },
    /// The connection broke during the call (the process exited, the HTTP
    /// session ended).
    #[error(
        "MCP server `{server}` stopped during {operation}: {reason}; it will be restarted on next use{}",
        stderr_note(stderr_tail)
    )]
    ConnectionLost {
        /// The server.
        server: String,
        /// What was running, e.g. ``call to tool `echo` ``.
        operation: String,
        /// What happened.
        reason: String,
        /// The last lines it wrote to stderr.
        stderr_tail: String,
    },
    /// The server answered with a JSON-RPC error.
    #[error("MCP server `{server}` refused {operation}: {message}")]
    Server {
        /// The server.
        server: String,
        /// What was asked.
        operation: String,
        /// The server's error message.
        message: String,
    },
    /// The call ran past the server's `timeout`.
    #[error("MCP server `{server}` did not answer {operation} within {} s", timeout.as_secs())]
    Timeout {
        /// The server.
        server: String,
        /// What was asked.
        operation: String,
        /// The limit.
        timeout: Duration,
    },
    /// The task was aborted while the call ran.
    #[error("cancelled")]
    Cancelled,
    /// [`crate::McpManager::shutdown`] has run.
    #[error("MCP servers have been shut down")]
    ShutDown,
}

impl From<McpError> for ToolError {
    fn from(error: McpError) -> Self {
        match error {
            McpError::Timeout { timeout, .. } => ToolError::Timeout {
                seconds: timeout.as_secs(),
            },
            McpError::Cancelled => ToolError::Cancelled,
            other => ToolError::Refused(other.to_string()),
        }
    }
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        " (none are)".to_string()
    } else {
        format!(" (configured: {})", known.join(", "))
    }
}

fn retry_note(retry_in: Option<Duration>) -> String {
    match retry_in {
        Some(d) if !d.is_zero() => format!(" (restart on next use after {:.1} s)", d.as_secs_f64()),
        _ => String::new(),
    }
}

fn stderr_note(tail: &str) -> String {
    let tail = tail.trim_end();
    if tail.is_empty() {
        String::new()
    } else {
        format!("\nstderr (last lines):\n{tail}")
    }
}
