//! The set of tools a task offers.

use std::sync::Arc;

use kaji_protocol::ToolSpec;

use crate::Tool;

/// Tools by name, in the order they are offered to the model.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|t| t.name()))
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool, replacing one of the same name.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.retain(|t| t.name() != tool.name());
        self.tools.push(tool);
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// Specs of every tool, in registration order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec()).collect()
    }

    /// The tool that runs shell command lines and its input for
    /// `command` ([`Tool::shell_input`]), if the registry has one.
    pub fn shell_call(&self, command: &str) -> Option<(&'static str, serde_json::Value)> {
        self.tools
            .iter()
            .find_map(|t| t.shell_input(command).map(|input| (t.name(), input)))
    }

    /// The tool that reads a file for an `@path` mention and its input
    /// for `path` ([`Tool::mention_input`]), if the registry has one.
    pub fn mention_call(&self, path: &str) -> Option<(&Arc<dyn Tool>, serde_json::Value)> {
        self.tools
            .iter()
            .find_map(|t| t.mention_input(path).map(|input| (t, input)))
    }

    /// Names of every tool.
    pub fn names(&self) -> Vec<&'static str> {
        self.tools.iter().map(|t| t.name()).collect()
    }
}
