//! The `Agent` tool: the model's way to hand a piece of work to a
//! sub-agent, with Claude Code's schema (`description`, `prompt`,
//! `subagent_type`, optional `model` and `run_in_background`).
//!
//! Running a sub-agent needs the session (provider, tool sets, front end),
//! which a tool does not have: the tool checks its input and passes it to
//! the [`AgentSpawner`] in [`ToolContext::agents`], which the core fills
//! in. With no spawner the call is refused. This module must never run a
//! model itself nor know about agent types beyond their names.

use std::sync::Arc;

use async_trait::async_trait;
use kaji_protocol::ToolSpec;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::{
    Tool, ToolAccess, ToolContext, ToolError, ToolOutput, ToolRegistry, parse_input, require_text,
};

/// One `Agent` call, checked. Its fields' doc comments are the input
/// schema's descriptions.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentRequest {
    /// A short (3-5 word) description of the task.
    pub description: String,
    /// The task for the agent to perform.
    pub prompt: String,
    /// The type of agent to use, e.g. general-purpose, Explore or Plan.
    pub subagent_type: String,
    /// Optional model: inherit, sonnet, opus, haiku or a model name.
    #[serde(default)]
    pub model: Option<String>,
    /// Run the agent in the background and return its task id at once.
    #[serde(default)]
    pub run_in_background: Option<bool>,
    /// "worktree": work in a git worktree of its own, so parallel edits never collide.
    #[serde(default)]
    #[schemars(with = "Option<String>", extend("enum" = ["worktree"]))]
    pub isolation: Option<Isolation>,
    /// Start a named teammate instead: it runs in the background and claims tasks of the shared task list under this name, one after another, until none is left (prompt: its standing instructions). You get notices when tasks complete and when it goes idle or ends.
    #[serde(default)]
    pub name: Option<String>,
}

impl AgentRequest {
    /// Whether the call asks for a background run.
    pub fn in_background(&self) -> bool {
        self.run_in_background.unwrap_or(false)
    }
}

/// Where an agent works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// A git worktree of its own.
    Worktree,
}

/// Runs sub-agents for the `Agent` tool; implemented by the core.
#[async_trait]
pub trait AgentSpawner: Send + Sync + std::fmt::Debug {
    /// Runs (or, with `run_in_background`, starts) a sub-agent for `request`
    /// on behalf of the caller described by `ctx`.
    async fn spawn(
        &self,
        request: AgentRequest,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError>;

    /// The agent types on offer, one per line (`name: description`), for
    /// the tool's description.
    fn describe_types(&self) -> String;
}

/// Adds `Agent` to `registry`.
pub(crate) fn register(registry: &mut ToolRegistry) {
    registry.register(Arc::new(AgentTool));
}

/// The `Agent` tool.
#[derive(Debug, Clone, Copy)]
struct AgentTool;

#[async_trait]
impl Tool for AgentTool {
    fn name(&self) -> &'static str {
        "Agent"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().to_string(),
            description: "Hands a piece of work to a sub-agent with its own conversation and the \
tools of its type, and returns its final result and usage. Types: general-purpose (all tools), \
Explore (read-only tools, for searching the code), Plan (read-only, for designing a plan), and \
the user's and project's own types. Give a complete prompt: the sub-agent sees nothing else of \
this conversation. With run_in_background it returns a runtime task id at once; read its \
transcript with TaskOutput, stop it with TaskStop, and its result reaches you as a notice when it \
ends. With name it starts a teammate that works through the shared task list (create the tasks \
first with TaskCreate)."
                .to_string(),
            input_schema: crate::schema::input_schema::<AgentRequest>(),
        }
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn access(&self, _input: &Value, _ctx: &ToolContext) -> ToolAccess {
        // The sub-agent's own calls are checked one by one, in a mode no
        // wider than its parent's.
        ToolAccess::Interaction
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let request: AgentRequest = parse_input(self.name(), input)?;
        require_text(
            self.name(),
            "prompt",
            &request.prompt,
            "say what the sub-agent must do",
        )?;
        require_text(
            self.name(),
            "subagent_type",
            &request.subagent_type,
            "name an agent type such as general-purpose, Explore or Plan",
        )?;
        let Some(spawner) = ctx.agents.as_ref() else {
            return Err(ToolError::Refused(
                "Agent: sub-agents cannot run here (this session has no agent support)".to_string(),
            ));
        };
        spawner.spawn(request, ctx).await
    }
}
