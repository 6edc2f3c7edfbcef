//! Errors of tool calls. Each one becomes an error tool result whose text is
//! the `Display` of the error, so messages are written for the model: they
//! say what went wrong, where, and what to do instead.

use std::path::PathBuf;

/// Why a tool call failed.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not fit the tool's schema.
    #[error("invalid input for {tool}: {message}")]
    InvalidInput {
        /// Tool name.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// A file or directory the call needs does not exist.
    #[error("{}: no such file or directory", path.display())]
    NotFound {
        /// The path.
        path: PathBuf,
    },
    /// An I/O operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The call is not allowed or makes no sense in this state, with the
    /// reason.
    #[error("{0}")]
    Refused(String),
    /// The call ran out of time.
    #[error("timed out after {seconds} s")]
    Timeout {
        /// The limit.
        seconds: u64,
    },
    /// A sandboxed command failed in a way that looks like the sandbox
    /// refused it (a permission error in its output). `output` is the
    /// command's result text, `note` says so ("this may have been blocked
    /// by the sandbox (workspace-write): …").
    #[error("{output}\n[{note}]")]
    SandboxDenied {
        /// The command's output and exit line.
        output: String,
        /// What the sandbox probably refused.
        note: String,
    },
    /// The task was aborted while the call ran.
    #[error("cancelled")]
    Cancelled,
}
