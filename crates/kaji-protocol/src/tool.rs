//! Tool specifications as offered to a model.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool as the model sees it: name, description and JSON Schema of its
/// input object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Tool name, e.g. `Read` or `mcp__github__create_issue`.
    pub name: String,
    /// What the tool does and when to use it.
    pub description: String,
    /// JSON Schema of the input object.
    pub input_schema: Value,
}

/// What a tool call does, for a front end's icon and ACP's `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Reads files.
    Read,
    /// Changes files.
    Edit,
    /// Runs a command or manages one that runs.
    Execute,
    /// Searches files or their content.
    Search,
    /// Reads from the network.
    Fetch,
    /// Thinks or plans without touching anything.
    Think,
    /// Changes the task's permission mode (plan mode).
    SwitchMode,
    /// Anything else (MCP tools, interaction, session state).
    #[default]
    Other,
}

/// The change a call makes to one file, as text a front end can diff: the
/// replaced text and its replacement (an edit), or the new content (a
/// whole-file write, `old_text` absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// The file, as the call names it: relative to the task's working
    /// directory, or absolute.
    pub path: std::path::PathBuf,
    /// The text replaced; absent when the whole file is written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_text: Option<String>,
    /// The text put in its place (or the whole new content).
    pub new_text: String,
}

/// How a tool presents one call, as the tool itself says (front ends never
/// look at a tool's name or input to show a call).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ToolView {
    /// What the call does.
    pub kind: ToolKind,
    /// One line for people: `Edit: src/main.rs`, `Bash: cargo test`.
    pub title: String,
    /// The files it reads or writes, as the call names them (relative to
    /// the task's working directory, or absolute).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<std::path::PathBuf>,
    /// The change it makes to a file, when it edits or writes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<FileChange>,
}
