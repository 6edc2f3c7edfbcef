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
