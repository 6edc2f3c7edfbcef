//! What every command that runs an agent shares: the model and permission
//! options, turned into [`SessionOptions`] for the core's
//! [`SessionBuilder`]. Nothing is assembled here.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use kaji_core::config::TextReply;
use kaji_core::{
    PermissionMode, ResumeFrom, Session, SessionBuilder, SessionError, SessionOptions,
    TaskFrontend, ToolProtocol,
};

/// Options of the agent commands (`exec`, the TUI).
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// Working directory of the task.
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Model provider: anthropic, openai (Chat Completions, and any
    /// OpenAI-compatible server) or openai-responses (the Responses API;
    /// chosen by itself for models that need it).
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// Model name.
    #[arg(long, short = 'm', value_name = "MODEL")]
    pub model: Option<String>,
    /// Base URL of the provider's API.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// How hard the model is asked to think: off | low | medium | high
    /// (default: `reasoning` in config.toml, else off).
    #[arg(long, value_name = "LEVEL")]
    pub reasoning: Option<String>,
    /// default | accept-edits | yolo | plan (default: `permission_mode` in
    /// config.toml, else default).
    #[arg(long, value_name = "MODE")]
    pub permission_mode: Option<String>,
    /// Run every tool without asking (same as --permission-mode yolo).
    #[arg(long)]
    pub yolo: bool,
    /// Consecutive mistakes before the task stops (yolo) or asks (default:
    /// `max_mistakes` in config.toml, else 3).
    #[arg(long, value_name = "N")]
    pub max_mistakes: Option<u32>,
    /// Stop after this many model turns of the main agent (a sub-agent's
    /// turns are bounded by its own `maxTurns`).
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,
    /// Stop after this many model requests in the whole run, sub-agents'
    /// and in-process teammates' included (default: `max_requests` in
    /// config.toml, else no limit).
    #[arg(long, value_name = "N")]
    pub max_requests: Option<u64>,
    /// Stop once the run has cost this many US dollars, sub-agents' and
    /// in-process teammates' included (default: `max_budget_usd` in
    /// config.toml, else no limit). Without known prices it warns and does
    /// not stop.
    #[arg(long, value_name = "USD")]
    pub max_budget_usd: Option<f64>,
    /// How the model calls tools: native (the provider's tool calling) or
    /// xml (calls written in the reply text, for servers without tools).
    #[arg(long, value_name = "PROTOCOL", default_value = "native")]
    pub tool_protocol: String,
    /// Work in git worktree NAME (`.kaji/worktrees/NAME` on branch
    /// `kaji/NAME`, created from HEAD) instead of the checkout itself.
    #[arg(long, value_name = "NAME")]
    pub worktree: Option<String>,
    /// Take no checkpoints of the working directory.
    #[arg(long)]
    pub no_checkpoints: bool,
    /// Share this task list with other sessions and processes (default:
    /// one list per session). Also KAJI_TASK_LIST_ID. A value containing
    /// `://` is a PostgreSQL URL ending in `?list=NAME` (see
    /// docs/task-list.md); the backend is otherwise chosen by
    /// KAJI_TASK_LIST_URL or the `task_list_url` setting.
    #[arg(long, value_name = "ID|URL")]
    pub task_list: Option<String>,
    /// Save nothing of this session under `$KAJI_HOME/sessions/`.
    #[arg(long)]
    pub no_session_persistence: bool,
    /// The front end's default for a text-only reply (`on_text_reply`):
    /// set by the front end, not a flag.
    #[arg(skip)]
    pub text_reply_default: Option<TextReply>,
    /// The owner name of a teammate (`kaji worker --name`): set by the
    /// front end, not a flag.
    #[arg(skip)]
    pub agent_name: Option<String>,
    /// Whether commands' output reaches the front end as it comes: set by
    /// the terminal UI, not a flag.
    #[arg(skip)]
    pub live_output: bool,
    /// Allow what RULE matches (Claude Code syntax: `Bash(cargo test:*)`,
    /// `Edit(src/**)`); repeatable.
    #[arg(long = "allow", value_name = "RULE")]
    pub allow: Vec<String>,
    /// Deny what RULE matches; repeatable. Deny beats ask beats allow.
    #[arg(long = "deny", value_name = "RULE")]
    pub deny: Vec<String>,
    /// Confine Bash commands: read-only, workspace-write or off (default:
    /// the `sandbox` setting, else by permission mode where supported).
    #[arg(long, value_name = "MODE")]
    pub sandbox: Option<String>,
    /// Trust this project for this run: its hooks, MCP servers,
    /// `permission_mode`, `base_url` and allow rules apply (`kaji trust`
    /// records it for good).
    #[arg(long)]
    pub trust: bool,
}

/// An error of the command line or the configuration (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl AgentArgs {
    /// The session these flags ask for. Parsing only: the
    /// [`SessionBuilder`] does the rest.
    pub fn session_options(&self) -> Result<SessionOptions, UsageError> {
        let permission_mode = if self.yolo {
            Some(PermissionMode::Yolo)
        } else {
            self.permission_mode
                .as_deref()
                .map(|m| {
                    m.parse()
                        .map_err(|e: String| UsageError(format!("--permission-mode: {e}")))
                })
                .transpose()?
        };
        let tool_protocol: ToolProtocol = self
            .tool_protocol
            .parse()
            .map_err(|e: String| UsageError(format!("--tool-protocol: {e}")))?;
        let sandbox = self
            .sandbox
            .as_deref()
            .map(|m| {
                m.parse::<kaji_sandbox::SandboxMode>()
                    .map_err(|e| UsageError(format!("--sandbox: {e}")))
            })
            .transpose()?;
        let reasoning = self
            .reasoning
            .as_deref()
            .map(|r| {
                r.parse::<kaji_llm::Reasoning>()
                    .map_err(|e| UsageError(format!("--reasoning: {e}")))
            })
            .transpose()?;
        Ok(SessionOptions {
            reasoning,
            allow: self.allow.clone(),
            deny: self.deny.clone(),
            sandbox,
            trust: self.trust,
            cwd: self.cwd.clone(),
            provider: self.provider.clone(),
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            permission_mode,
            max_mistakes: self.max_mistakes,
            max_turns: self.max_turns,
            max_requests: self.max_requests,
            max_budget_usd: self.max_budget_usd,
            tool_protocol,
            worktree: self.worktree.clone(),
            no_checkpoints: self.no_checkpoints,
            task_list: self.task_list.clone(),
            persist: !self.no_session_persistence,
            text_reply_default: self.text_reply_default.unwrap_or(TextReply::Nudge),
            role: if self.agent_name.is_some() {
                kaji_tools::AgentRole::Teammate
            } else {
                kaji_tools::AgentRole::Main
            },
            agent_name: self.agent_name.clone(),
            live_output: self.live_output,
            ..SessionOptions::default()
        })
    }

    /// Builds the session these flags ask for, resuming `resume` if set.
    pub async fn build_session(
        &self,
        resume: Option<ResumeFrom>,
        frontend: Arc<dyn TaskFrontend>,
    ) -> Result<(Arc<Session>, Vec<String>)> {
        let mut options = self.session_options()?;
        options.resume = resume;
        build(options, frontend).await
    }
}

/// Builds a session from `options`.
pub async fn build(
    options: SessionOptions,
    frontend: Arc<dyn TaskFrontend>,
) -> Result<(Arc<Session>, Vec<String>)> {
    {
        SessionBuilder::new(crate::paths::kaji_home(), options)
            .build(frontend)
            .await
            .map_err(session_error)
    }
}

/// A session error as the CLI reports it: usage errors exit 2.
pub fn session_error(e: SessionError) -> anyhow::Error {
    if e.is_usage() {
        UsageError(e.to_string()).into()
    } else {
        anyhow::Error::new(e)
    }
}
