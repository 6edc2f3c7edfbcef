//! A session's services, shared by construction, and the one place a Task
//! is made from them.
//!
//! [`SessionServices`] is built once per session ([`super::SessionBuilder`])
//! and held in an `Arc`: the main agent's Tasks, every sub-agent, every
//! teammate and (through the Task) every tool call read the same set by
//! reference. What differs between Tasks is a small [`TaskSpec`]: id,
//! agent identity, history, mode, working directory, model, granted tools,
//! budget, what a text answer does. [`SessionServices::task`] is the only
//! function that turns services and a spec into a [`Task`], and
//! [`TaskSpec::child`] the only one that derives a child's spec from its
//! parent's, so a setting added here reaches a sub-agent without anyone
//! copying it. Adding a session service is one field of
//! [`SessionServices`], or of [`kaji_tools::ToolServices`] when tools
//! read it (a tool call reads them through its context's `Arc`).
//!
//! This module never reads the environment, prints, or holds a lock across
//! an await.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use kaji_llm::ModelProvider;
use kaji_protocol::{Message, Usage};
use kaji_tools::ToolRegistry;
use kaji_tools::todo::TodoState;

use crate::ToolExecutor;
use crate::checkpoints::CheckpointStore;
use crate::config::{Compaction, TextReply};
use crate::frontend::TaskFrontend;
use crate::hooks::HookRunner;
use crate::parser::ToolProtocol;
use crate::permissions::{PermissionMode, SharedApprovals};
use crate::storage::recorder::Recorder;
use crate::task::{Task, TaskConfig};

/// The limits and switches every Task of the session runs under (the
/// session-level settings, read once).
#[derive(Debug, Clone)]
pub struct SessionLimits {
    /// `tool_protocol`.
    pub tool_protocol: ToolProtocol,
    /// `max_mistakes`.
    pub max_mistakes: u32,
    /// `tool_result_max_chars`.
    pub tool_result_max_chars: usize,
    /// `compaction`.
    pub compaction: Compaction,
    /// `auto_compact_threshold`.
    pub compact_threshold: f64,
    /// Whether checkpoints are taken (`--no-checkpoints`).
    pub checkpoints: bool,
    /// Sub-agents' depth, token budget and model aliases.
    pub subagents: crate::subagent::limits::SubagentLimits,
    /// Whether the session (and its sub-agents) are saved.
    pub persist: bool,
    /// The run's request and cost budget (`max_requests`,
    /// `max_budget_usd`), one for the session and every child.
    pub budget: Arc<crate::budget::RunBudget>,
}

/// What lives as long as the conversation and is shared, by reference, by
/// all its Tasks: see the module docs.
pub struct SessionServices {
    /// The session id.
    pub session_id: String,
    /// `$KAJI_HOME`.
    pub kaji_home: PathBuf,
    /// The user's checkout, where the session started.
    pub project_dir: PathBuf,
    /// The provider's configuration (kind, model, base URL, reasoning).
    pub provider_config: kaji_llm::ProviderConfig,
    /// `[models."<name>"]`: context windows and prices, for whichever
    /// model a Task uses.
    pub models: kaji_llm::pricing::ModelOverrides,
    /// Every tool of the session (built-ins, todo, skills).
    pub tools: ToolRegistry,
    /// The MCP servers.
    pub mcp: Option<kaji_mcp::McpManager>,
    /// Which search `WebSearch` uses (`[web_search]`).
    pub web_search: crate::web_search::WebSearchSetup,
    /// The task list. Tools reach the same list through `tool_services`,
    /// derived from this one by [`SessionServices::tool_view`].
    pub task_list: kaji_tasks::list::TaskList,
    /// Background shells and agents (the tools' too, as for the list).
    pub runtime: Arc<kaji_tasks::RuntimeTaskRegistry>,
    /// The todo checklist.
    pub todo: TodoState,
    /// The hooks (with the session's environment policy).
    pub hooks: Option<HookRunner>,
    /// Rules, approvals granted so far, protected paths and the sandbox
    /// base every Task's sandbox is derived from.
    pub approvals: SharedApprovals,
    /// What tools read of the session, made once by
    /// [`SessionServices::tool_view`] and shared by every Task and call:
    /// the task list and runtime registry above, the child-process
    /// environment policy (`secret_env`,
    /// `env_passthrough`), where the file tools read and write text, and
    /// the language servers (started on first use, ended with the
    /// session). A session service a tool needs is one field of
    /// [`kaji_tools::ToolServices`].
    pub tool_services: Arc<kaji_tools::ToolServices>,
    /// The front end every Task's events reach (a sub-agent's through
    /// its own wrapper).
    pub frontend: Arc<dyn TaskFrontend>,
    /// The session's message counter, so ids never repeat.
    pub message_ids: Arc<AtomicU64>,
    /// What the session's sub-agents used, rolled into the session's
    /// usage.
    pub subagent_usage: Arc<Mutex<Usage>>,
    /// Limits and switches.
    pub limits: SessionLimits,
    /// The system prompt's `# Skills` section (empty: no skills).
    pub skills_section: String,
    /// The main agent's owner name on the task list.
    pub owner: String,
    /// The user's home (`HOME`, read at start-up): where
    /// `~/.claude/agents` is.
    pub user_home: Option<PathBuf>,
    /// The main agent's role (a `kaji worker` is a teammate).
    pub role: kaji_tools::AgentRole,
    /// Agent types the front end's program defined (Agent SDK).
    pub program_agents: Vec<crate::subagent::types::AgentDefinition>,
    /// The main agent's system prompt as the front end changed it.
    pub system_prompt: super::options::CustomPrompt,
    /// Whether the main agent's commands' output reaches the front end
    /// as it comes.
    pub live_output: bool,
    /// The main agent's `--max-turns`.
    pub max_turns: Option<u32>,
    /// What the main agent's text-only reply does (`on_text_reply`, else
    /// the front end's default); a sub-agent's always finishes.
    pub on_text_reply: TextReply,
}

/// Which tools a Task gets.
#[derive(Clone)]
pub(crate) enum ToolGrant {
    /// Every tool of the session and its MCP servers.
    All,
    /// These tools only (a sub-agent's type's list), MCP servers or not.
    Only { tools: ToolRegistry, mcp: bool },
}

/// What one Task is, beside the services: see the module docs.
#[derive(Clone)]
pub(crate) struct TaskSpec {
    /// The Task's id (default: a new one).
    pub task_id: Option<String>,
    /// The session id its records go under (a sub-agent's own).
    pub session_id: String,
    /// `main`, or a sub-agent's or teammate's name (also its owner name).
    pub agent: String,
    /// The name it holds tasks of the shared list under.
    pub owner: String,
    /// What kind of agent runs it.
    pub role: kaji_tools::AgentRole,
    /// The provider requests go to (the session's live one).
    pub provider: Arc<dyn ModelProvider>,
    /// The model.
    pub model: String,
    /// The conversation it continues.
    pub history: Vec<Message>,
    /// The permission mode it starts in.
    pub mode: PermissionMode,
    /// The mode a plan's approval returns to.
    pub mode_before_plan: Option<PermissionMode>,
    /// Where it works.
    pub cwd: PathBuf,
    /// The tools it gets.
    pub tools: ToolGrant,
    /// Model turns allowed.
    pub max_turns: Option<u32>,
    /// What a reply with text and no tool does.
    pub on_text_reply: TextReply,
    /// Its sections of the system prompt (rule files, skills; a
    /// sub-agent's own).
    pub system_sections: Vec<String>,
    /// Where its conversation is written, and the file's path.
    pub recorder: Recorder,
    /// The session file (hooks' `transcript_path`).
    pub transcript_path: Option<PathBuf>,
    /// The checklist reminder (the main agent's only).
    pub todo_reminders: bool,
    /// Commands' output reaches the front end as it comes.
    pub live_output: bool,
    /// A resumed session's notice.
    pub resumed: Option<String>,
    /// What SessionStart hooks said.
    pub session_context: Vec<String>,
    /// Where the task-start checkpoint's id goes.
    pub start_checkpoint: Option<Arc<Mutex<Option<String>>>>,
    /// The front end its events reach.
    pub frontend: Arc<dyn TaskFrontend>,
    /// Runs its sub-agents.
    pub agents: Option<Arc<dyn kaji_tools::agent_tools::AgentSpawner>>,
}

/// What a child (sub-agent, teammate's task) may change of its parent's
/// spec — nothing else differs.
pub(crate) struct ChildChanges {
    /// Its own session id (a child session).
    pub session_id: String,
    /// Its name (agent and owner).
    pub agent: String,
    /// Sub-agent or teammate.
    pub role: kaji_tools::AgentRole,
    /// Its model (an alias resolved).
    pub model: String,
    /// The mode its type asks for; it gets no wider than its parent's.
    pub mode: Option<PermissionMode>,
    /// Its tools.
    pub tools: ToolGrant,
    /// Its type's `maxTurns`.
    pub max_turns: Option<u32>,
    /// What its text-only reply does: a sub-agent finishes (its parent
    /// reads the answer); a teammate is nudged (its claimed task is done
    /// when it says so with AttemptCompletion).
    pub on_text_reply: TextReply,
    /// Its section of the system prompt.
    pub system_section: String,
    /// Where it works, when not where its parent works (a worktree).
    pub cwd: Option<PathBuf>,
    /// Its session file.
    pub recorder: Recorder,
    /// Its session file's path.
    pub transcript_path: Option<PathBuf>,
    /// Its front end (the parent's, wrapped).
    pub frontend: Arc<dyn TaskFrontend>,
    /// Runs its own sub-agents (one level deeper).
    pub agents: Option<Arc<dyn kaji_tools::agent_tools::AgentSpawner>>,
}

impl TaskSpec {
    /// The spec of a child of this Task. What the child changes is
    /// [`ChildChanges`]; it starts with no history, and has no checklist
    /// reminder, resume notice, SessionStart context or live command
    /// output. Everything else is its parent's.
    pub(crate) fn child(&self, c: ChildChanges) -> TaskSpec {
        TaskSpec {
            task_id: None,
            session_id: c.session_id,
            owner: c.agent.clone(),
            agent: c.agent,
            role: c.role,
            provider: Arc::clone(&self.provider),
            model: c.model,
            history: Vec::new(),
            mode: crate::subagent::types::narrower_mode(self.mode, c.mode),
            mode_before_plan: None,
            cwd: c.cwd.unwrap_or_else(|| self.cwd.clone()),
            tools: c.tools,
            max_turns: c.max_turns,
            on_text_reply: c.on_text_reply,
            system_sections: vec![c.system_section],
            recorder: c.recorder,
            transcript_path: c.transcript_path,
            todo_reminders: false,
            live_output: false,
            resumed: None,
            session_context: Vec::new(),
            start_checkpoint: None,
            frontend: c.frontend,
            agents: c.agents,
        }
    }
}

impl SessionServices {
    /// The tools' view of the session's services: the session's own task
    /// list and runtime registry (derived here, the one place they reach
    /// the tools, so the two never point at different stores), the
    /// child-process environment policy, the file access and the language
    /// servers.
    pub(crate) fn tool_view(
        task_list: &kaji_tasks::list::TaskList,
        runtime: &Arc<kaji_tasks::RuntimeTaskRegistry>,
        env_policy: Arc<kaji_tasks::process::EnvPolicy>,
        files: Option<Arc<dyn kaji_tools::FileAccess>>,
        lsp: Arc<kaji_lsp::LspPool>,
    ) -> Arc<kaji_tools::ToolServices> {
        Arc::new(kaji_tools::ToolServices {
            task_list: Some(task_list.clone()),
            runtime: Some(Arc::clone(runtime)),
            env_policy,
            files,
            lsp: Some(lsp),
        })
    }

    /// The task list's id.
    pub fn list_id(&self) -> &str {
        self.task_list.list_id()
    }

    /// The one place a Task is made: the session's services as they are,
    /// and `spec`.
    pub(crate) fn task(&self, spec: TaskSpec) -> Task {
        let frontend = Arc::clone(&spec.frontend);
        let (config, executor) = self.task_parts(spec);
        Task::new(config, executor, frontend)
    }

    /// The configuration and executor of a Task of `spec`. The
    /// configuration is written out field by field, so that a field added
    /// to [`TaskConfig`] does not compile until it is decided here.
    pub(crate) fn task_parts(&self, spec: TaskSpec) -> (TaskConfig, ToolExecutor) {
        let limits = &self.limits;
        // What no setting changes: kaji's defaults.
        let defaults = TaskConfig::new(
            self.project_dir.clone(),
            Arc::clone(&spec.provider),
            String::new(),
        );
        let info = kaji_llm::pricing::model_info(&spec.model, &self.models);
        let pricing = crate::budget::pricing(&info);
        let checkpoints = open_checkpoints(limits.checkpoints, &self.kaji_home, &spec.cwd)
            .ok()
            .flatten();
        let web_search = self.web_search.searcher(&spec.provider, &spec.model);
        let provider_web_search = self.web_search.provider_search(&spec.provider);
        let config = TaskConfig {
            cwd: self.project_dir.clone(),
            start_dir: (spec.cwd != self.project_dir).then(|| spec.cwd.clone()),
            provider: spec.provider,
            model: spec.model,
            tool_protocol: limits.tool_protocol,
            permission_mode: spec.mode,
            max_mistakes: limits.max_mistakes,
            max_turns: spec.max_turns,
            budget: Arc::clone(&limits.budget),
            max_tokens: defaults.max_tokens,
            temperature: defaults.temperature,
            empty_reply_retries: defaults.empty_reply_retries,
            empty_reply_backoff: defaults.empty_reply_backoff,
            session_id: spec.session_id,
            kaji_home: self.kaji_home.clone(),
            tool_services: Arc::clone(&self.tool_services),
            // The program's system prompt is the main agent's only, as in
            // Claude Code.
            system_intro: (spec.agent == "main")
                .then(|| self.system_prompt.replace.clone())
                .flatten(),
            extra_system_sections: spec.system_sections,
            history: spec.history,
            hooks: self.hooks.clone(),
            checkpoints,
            start_checkpoint: spec.start_checkpoint,
            live_output: spec.live_output,
            todo: spec.todo_reminders.then(|| self.todo.clone()),
            todo_reminder_turns: defaults.todo_reminder_turns,
            mode_before_plan: spec.mode_before_plan,
            approvals: Arc::clone(&self.approvals),
            recorder: spec.recorder,
            message_ids: Arc::clone(&self.message_ids),
            agent: spec.agent,
            owner: spec.owner,
            role: spec.role,
            resumed: spec.resumed,
            task_id: spec.task_id,
            context_window: Some(info.context_window),
            pricing,
            on_text_reply: spec.on_text_reply,
            compaction: limits.compaction,
            compact_threshold: limits.compact_threshold,
            web_search,
            provider_web_search,
            agents: spec.agents,
            transcript_path: spec.transcript_path,
            session_context: spec.session_context,
        };
        let (tools, mcp) = match spec.tools {
            ToolGrant::All => (self.tools.clone(), true),
            ToolGrant::Only { tools, mcp } => (tools, mcp),
        };
        let mut executor = ToolExecutor::new(tools);
        executor.set_result_cap(limits.tool_result_max_chars);
        if let Some(m) = self.mcp.as_ref().filter(|_| mcp) {
            executor.set_mcp(m.clone());
        }
        (config, executor)
    }

    /// Adds a sub-agent's usage to the session's.
    pub(crate) fn add_subagent_usage(&self, usage: &Usage) {
        self.subagent_usage
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add(usage);
    }
}

/// Opens the checkpoint store of `dir`, if checkpoints are on.
fn open_checkpoints(
    enabled: bool,
    kaji_home: &Path,
    dir: &Path,
) -> Result<Option<CheckpointStore>, String> {
    if !enabled {
        return Ok(None);
    }
    CheckpointStore::open(kaji_home, dir)
        .map(Some)
        .map_err(|e| format!("cannot set up checkpoints: {e}"))
}
