//! What a Task is given when it is created ([`TaskConfig`]): fixed for its
//! life. Plain data and defaults; it must never hold per-round state.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kaji_llm::ModelProvider;
use kaji_protocol::Message;
use kaji_tools::todo::TodoState;

use crate::checkpoints::CheckpointStore;
use crate::config::{Compaction, TextReply};
use crate::hooks::HookRunner;
use crate::parser::ToolProtocol;
use crate::permissions::{PermissionMode, SharedApprovals};
use crate::storage::recorder::Recorder;

pub use crate::budget::Pricing;

/// Everything a task needs, fixed when it is created.
#[derive(Clone)]
pub struct TaskConfig {
    /// The working directory: the user's checkout, where the task started.
    pub cwd: PathBuf,
    /// Start in this directory instead of `cwd` (a worktree of it, for
    /// `kaji exec --worktree`); ExitWorktree returns to `cwd`.
    pub start_dir: Option<PathBuf>,
    /// The model provider.
    pub provider: Arc<dyn ModelProvider>,
    /// The model name.
    pub model: String,
    /// How the model calls tools.
    pub tool_protocol: ToolProtocol,
    /// The permission mode the task starts in.
    pub permission_mode: PermissionMode,
    /// Consecutive mistakes before the task stops or asks (default 3).
    pub max_mistakes: u32,
    /// Model turns allowed, if limited.
    pub max_turns: Option<u32>,
    /// Output token limit per request.
    pub max_tokens: u32,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Retries of an empty reply before the user is asked (default 3).
    pub empty_reply_retries: u32,
    /// Backoff before the first empty-reply retry; doubles each time.
    pub empty_reply_backoff: Duration,
    /// The kaji session id.
    pub session_id: String,
    /// `$KAJI_HOME`.
    pub kaji_home: PathBuf,
    /// The session's services tools read (task list, runtime tasks,
    /// environment policy, file access, language servers), shared with
    /// every Task of the session.
    pub tool_services: Arc<kaji_tools::ToolServices>,
    /// Extra system prompt sections (rule files), in order.
    pub extra_system_sections: Vec<String>,
    /// Replaces the system prompt's introduction (`--system-prompt`).
    pub system_intro: Option<String>,
    /// An earlier conversation this task continues (the `history` of an
    /// earlier [`TaskOutcome`], in which every tool use has its result).
    pub history: Vec<Message>,
    /// Hooks run around the task and its tools.
    pub hooks: Option<HookRunner>,
    /// Checkpoints of the working directory: one at task start (taken in
    /// the background behind the gate) and one after each tool call that
    /// changed files.
    pub checkpoints: Option<CheckpointStore>,
    /// Where the id of the checkpoint of the files as they were at task
    /// start goes once it is known (the session's rewind offers it).
    pub start_checkpoint: Option<Arc<Mutex<Option<String>>>>,
    /// Foreground commands' output goes to the front end as it comes
    /// (`command_output` says, then deltas); off by default.
    pub live_output: bool,
    /// The session's todo checklist (the state behind TodoWrite).
    pub todo: Option<TodoState>,
    /// Turns without touching the checklist or the task list, while items
    /// are open, before a reminder goes into the next request (default 10).
    pub todo_reminder_turns: u32,
    /// The mode to return to when a plan is approved (the session's, when
    /// it is in plan mode already).
    pub mode_before_plan: Option<PermissionMode>,
    /// The session's approval memory, shared by all its Tasks.
    pub approvals: SharedApprovals,
    /// Where the conversation is written as it happens.
    pub recorder: Recorder,
    /// The run's budget of requests and cost, shared with sub-agents.
    pub budget: Arc<crate::budget::RunBudget>,
    /// The session's message counter, so ids never repeat across prompts.
    pub message_ids: Arc<AtomicU64>,
    /// Whose Task this is: `main`, or a sub-agent's name.
    pub agent: String,
    /// The name its agent holds tasks of the shared list under.
    pub owner: String,
    /// What kind of agent runs it (the task list's owner rules).
    pub role: kaji_tools::AgentRole,
    /// Set when this Task continues a session loaded from disk: the
    /// TaskResume hook runs and the model gets this notice first.
    pub resumed: Option<String>,
    /// The Task's id (default: a new one).
    pub task_id: Option<String>,
    /// The model's context window, when known.
    pub context_window: Option<u64>,
    /// The cost of a request's usage in USD, when the model's prices are
    /// known.
    pub pricing: Option<Pricing>,
    /// What a reply with text and no tool does.
    pub on_text_reply: TextReply,
    /// When the conversation is compacted.
    pub compaction: Compaction,
    /// The share of the context window past which it is compacted before
    /// a request (`auto_compact_threshold`).
    pub compact_threshold: f64,
    /// Runs sub-agents for the `Agent` tool (see [`crate::subagent`]).
    pub agents: Option<Arc<dyn kaji_tools::agent_tools::AgentSpawner>>,
    /// Does `WebSearch`'s searches; `None`: none is set up.
    pub web_search: Option<Arc<dyn kaji_tools::web_search::WebSearcher>>,
    /// The provider's own search, which may be offered in the requests, in
    /// place of `WebSearch`, when the rules let `WebSearch` run without
    /// asking and the server has not rejected it (see
    /// [`crate::web_search`]); `None`: never.
    pub provider_web_search: Option<crate::web_search::ProviderSearch>,
    /// The session file, for hook payloads (`transcript_path`).
    pub transcript_path: Option<PathBuf>,
    /// Context SessionStart hooks gave, put before the prompt.
    pub session_context: Vec<String>,
}

impl std::fmt::Debug for TaskConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskConfig")
            .field("cwd", &self.cwd)
            .field("provider", &self.provider.name())
            .field("model", &self.model)
            .field("tool_protocol", &self.tool_protocol)
            .field("permission_mode", &self.permission_mode)
            .finish_non_exhaustive()
    }
}

impl TaskConfig {
    /// A configuration with kaji's defaults.
    pub fn new(cwd: PathBuf, provider: Arc<dyn ModelProvider>, model: String) -> Self {
        Self {
            kaji_home: cwd.join(".kaji-home"),
            cwd,
            start_dir: None,
            provider,
            model,
            tool_protocol: ToolProtocol::Native,
            permission_mode: PermissionMode::Default,
            max_mistakes: 3,
            max_turns: None,
            max_tokens: 8192,
            temperature: None,
            empty_reply_retries: 3,
            empty_reply_backoff: Duration::from_millis(500),
            session_id: "local".into(),
            tool_services: Arc::default(),
            extra_system_sections: Vec::new(),
            system_intro: None,
            history: Vec::new(),
            hooks: None,
            checkpoints: None,
            start_checkpoint: None,
            live_output: false,
            todo: None,
            todo_reminder_turns: 10,
            mode_before_plan: None,
            approvals: SharedApprovals::default(),
            recorder: Recorder::disabled(),
            budget: Arc::new(crate::budget::RunBudget::unlimited()),
            message_ids: Arc::new(AtomicU64::new(0)),
            agent: "main".into(),
            owner: "main".into(),
            role: kaji_tools::AgentRole::Main,
            resumed: None,
            task_id: None,
            context_window: None,
            pricing: None,
            compaction: Compaction::Auto,
            compact_threshold: 0.85,
            on_text_reply: TextReply::Nudge,
            agents: None,
            web_search: None,
            provider_web_search: None,
            transcript_path: None,
            session_context: Vec::new(),
        }
    }
}
