//! What a front end asks of a new session: plain data from flags and
//! settings, no I/O. The [`super::SessionBuilder`] turns it into a Session.

use std::path::PathBuf;

use crate::config::TextReply;
use crate::parser::ToolProtocol;
use crate::permissions::PermissionMode;

use crate::storage::persist::ResumeFrom;
use crate::storage::record::SessionKind;

/// Everything a front end decides about a session.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// The working directory (default: the process's).
    pub cwd: Option<PathBuf>,
    /// `--provider`.
    pub provider: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--base-url`.
    pub base_url: Option<String>,
    /// `--reasoning`: how hard the model is asked to think; `None`: the
    /// `reasoning` setting, else off.
    pub reasoning: Option<kaji_llm::Reasoning>,
    /// The permission mode; `None`: the settings', else default (or, when
    /// resuming, the saved session's).
    pub permission_mode: Option<PermissionMode>,
    /// Consecutive mistakes before a Task stops or asks.
    pub max_mistakes: Option<u32>,
    /// Model turns per prompt.
    pub max_turns: Option<u32>,
    /// Model requests of the whole run, sub-agents' included
    /// (`--max-requests`; else the `max_requests` setting).
    pub max_requests: Option<u64>,
    /// Cost of the whole run in USD (`--max-budget-usd`; else the
    /// `max_budget_usd` setting).
    pub max_budget_usd: Option<f64>,
    /// How the model calls tools.
    pub tool_protocol: ToolProtocol,
    /// Work in this git worktree (`.kaji/worktrees/NAME`).
    pub worktree: Option<String>,
    /// Take no checkpoints.
    pub no_checkpoints: bool,
    /// Share this task list (default: the session's own, or the saved
    /// session's when resuming).
    pub task_list: Option<String>,
    /// Write the session to `$KAJI_HOME/sessions/` (false:
    /// `--no-session-persistence`).
    pub persist: bool,
    /// Continue a saved session instead of starting a new one.
    pub resume: Option<ResumeFrom>,
    /// The id a new session takes (`--session-id`; default: a new UUID).
    /// Creating it fails when a session has it already.
    pub session_id: Option<String>,
    /// What the new session is (main, or a fork).
    pub kind: SessionKind,
    /// What a text-only reply does when the settings do not say
    /// (`on_text_reply`): the front end's default — `finish` where a person
    /// answers, `nudge` headless.
    pub text_reply_default: TextReply,
    /// Foreground commands' output reaches the front end as it comes
    /// (the terminal UI); off by default.
    pub live_output: bool,
    /// Trust the project for this session (`--trust`), whatever
    /// `trusted.toml` says.
    pub trust: bool,
    /// `--allow RULE`: rules that allow (source: the command line).
    pub allow: Vec<String>,
    /// `--deny RULE`: rules that deny (source: the command line).
    pub deny: Vec<String>,
    /// `--sandbox`: overrides the `sandbox` setting.
    pub sandbox: Option<kaji_sandbox::SandboxMode>,
    /// Nobody can approve asks (`kaji exec`): denied approvals are listed
    /// ([`super::Session::permission_denials`]) and count as mistakes.
    pub headless: bool,
    /// Depth limit, token budget and model aliases of sub-agents.
    pub subagents: crate::subagent::limits::SubagentLimits,
    /// The main agent's owner name on the task list (`kaji worker
    /// --name`); `None`: `KAJI_AGENT_NAME`, else the session id.
    pub agent_name: Option<String>,
    /// The main agent's role: a `kaji worker` is a teammate, which never
    /// takes over another owner's task.
    pub role: kaji_tools::AgentRole,
    /// MCP servers the front end adds to the settings' (an editor's, over
    /// ACP), by name; a name the settings have already is skipped.
    pub mcp_servers: std::collections::BTreeMap<String, kaji_mcp::McpServerConfig>,
    /// `--setting-sources`: which of Claude Code's settings files are read
    /// (`None`: all three, unless `claude_setting_sources` says otherwise).
    pub setting_sources: Option<Vec<crate::claude_settings::SettingSource>>,
    /// Agent types the front end's program defines (the Agent SDK's
    /// `agents`); they replace file-defined ones of the same name.
    pub agents: Vec<crate::subagent::types::AgentDefinition>,
    /// Tools the front end serves itself (the Agent SDK's in-process MCP
    /// servers), added to the built-ins.
    pub tools: FrontendTools,
    /// The main agent's system prompt, changed (the Agent SDK's
    /// `--system-prompt`, `--append-system-prompt`).
    pub system_prompt: CustomPrompt,
    /// Hook callbacks the front end's program serves (the Agent SDK's
    /// `hooks`), run after the settings' hooks of each event.
    pub program_hooks: Option<crate::hooks::ProgramHooks>,
}

/// How a front end changes the main agent's system prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CustomPrompt {
    /// Replaces kaji's introduction (who it is, how it works); the
    /// environment, tool protocol, rule files, skills and agent types
    /// stay, since kaji's tools and agents need them.
    pub replace: Option<String>,
    /// Added at the end.
    pub append: Option<String>,
}

/// Tools a front end adds to a session.
#[derive(Clone, Default)]
pub struct FrontendTools(pub Vec<std::sync::Arc<dyn kaji_tools::Tool>>);

impl std::fmt::Debug for FrontendTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|t| t.name()))
            .finish()
    }
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            cwd: None,
            provider: None,
            model: None,
            base_url: None,
            reasoning: None,
            permission_mode: None,
            max_mistakes: None,
            max_turns: None,
            max_requests: None,
            max_budget_usd: None,
            tool_protocol: ToolProtocol::Native,
            worktree: None,
            no_checkpoints: false,
            task_list: None,
            persist: true,
            resume: None,
            session_id: None,
            kind: SessionKind::Main,
            text_reply_default: TextReply::Nudge,
            live_output: false,
            trust: false,
            allow: Vec::new(),
            deny: Vec::new(),
            sandbox: None,
            headless: false,
            subagents: crate::subagent::limits::SubagentLimits::default(),
            agent_name: None,
            role: kaji_tools::AgentRole::Main,
            mcp_servers: std::collections::BTreeMap::new(),
            setting_sources: None,
            agents: Vec::new(),
            tools: FrontendTools::default(),
            system_prompt: CustomPrompt::default(),
            program_hooks: None,
        }
    }
}
