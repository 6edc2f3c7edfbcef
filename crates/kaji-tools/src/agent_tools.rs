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
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{
    Tool, ToolAccess, ToolContext, ToolError, ToolOutput, ToolRegistry, parse_input, require_text,
};

/// One `Agent` call, checked.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentRequest {
    /// A few words on the work (shown to the user and in `kaji ps`).
    pub description: String,
    /// The work, in full: the sub-agent sees nothing else of the parent's
    /// conversation.
    pub prompt: String,
    /// The agent type (`general-purpose`, `Explore`, `Plan`, or a user or
    /// project type), matched case-insensitively.
    pub subagent_type: String,
    /// A model for this run (`inherit`, an alias such as `sonnet`, or a
    /// model name).
    #[serde(default)]
    pub model: Option<String>,
    /// Return a runtime task id at once; the result comes as a notice.
    #[serde(default)]
    pub run_in_background: bool,
    /// `"worktree"`: the agent works in a git worktree of its own
    /// (`.kaji/worktrees/<agent>` on branch `kaji/<agent>`), so parallel
    /// edits never collide.
    #[serde(default)]
    pub isolation: Option<Isolation>,
    /// A teammate's name: the agent becomes a named teammate in the
    /// background that claims tasks of the shared task list under this
    /// name, one after another, until none is left.
    #[serde(default)]
    pub name: Option<String>,
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
            input_schema: json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string", "description": "A short (3-5 word) description of the task."},
                    "prompt": {"type": "string", "description": "The task for the agent to perform."},
                    "subagent_type": {"type": "string", "description": "The type of agent to use, e.g. general-purpose, Explore or Plan."},
                    "model": {"type": "string", "description": "Optional model: inherit, sonnet, opus, haiku or a model name."},
                    "run_in_background": {"type": "boolean", "description": "Run the agent in the background and return its task id at once."},
                    "isolation": {"type": "string", "enum": ["worktree"], "description": "\"worktree\": work in a git worktree of its own, so parallel edits never collide."},
                    "name": {"type": "string", "description": "Start a named teammate instead: it runs in the background and claims tasks of the shared task list under this name, one after another, until none is left (prompt: its standing instructions). You get notices when tasks complete and when it goes idle or ends."}
                },
                "required": ["description", "prompt", "subagent_type"],
                "additionalProperties": false
            }),
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
