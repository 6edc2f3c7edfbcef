//! The Task state machine (seed 000).
//!
//! Three nested loops:
//! - **outer** ([`Task::run`]): rounds until the task ends; a reply that
//!   used no tool is answered with a nudge and counts as a mistake;
//! - **middle** (`Task::round`): one full round — assemble the request,
//!   stream the reply, present it — whose tool results become the next
//!   round's user content; the round counter mirrors the turn count;
//! - **inner** (`Task::present`): walks the reply's blocks as they
//!   complete, emitting text while it streams and running each tool as soon
//!   as its block is complete, before the rest of the reply has arrived.
//!
//! The stream is read by its own tokio task that feeds a
//! [`ReplyAssembler`]; the presenter waits on a version counter. Both touch
//! the task's state only under the one lock ([`TaskState`]), held for
//! short, synchronous sections and never across an await.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kaji_llm::{LlmError, ModelProvider, ModelRequest};
use kaji_protocol::{
    AskKind, AskPayload, AskResponse, BackgroundTask, ContentBlock, Message, Role, SayKind,
    SayPayload, StateUpdate, StopReason, TaskEvent, TaskStatus, Usage, UsageReport,
};
use kaji_tools::ToolContext;
use kaji_tools::todo::TodoState;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::checkpoints::CheckpointStore;
use crate::compaction;
use crate::config::{Compaction, TextReply};
use crate::emitter::Emitter;
use crate::executor::{
    CallEnv, CheckpointGate, Effect, Ran, ToolExecutor, ToolRun, report_hook_warnings,
};
use crate::frontend::TaskFrontend;
use crate::hooks::{HookEvent, HookPayload, HookRunner};
use crate::parser::{BlockContent, ReplyAssembler, ToolCall, ToolProtocol, XmlToolGrammar};
use crate::permissions::{PermissionMode, SharedApprovals};
use crate::prompt::{PromptInputs, system_prompt};
use crate::session::record::SessionRecord;
use crate::session::recorder::{Recorder, now_millis};

/// How long the first request waits for MCP servers still connecting.
pub const MCP_CONNECT_WAIT: Duration = Duration::from_secs(10);

/// [`MCP_CONNECT_WAIT`], or `KAJI_MCP_CONNECT_WAIT_MS` (so tests of the
/// timeout path never wait 10 s).
fn mcp_connect_wait() -> Duration {
    crate::env::duration_from_env("KAJI_MCP_CONNECT_WAIT_MS", MCP_CONNECT_WAIT)
}

/// The note recorded in the history when the user rejects a tool.
pub const INTERRUPTED_BY_FEEDBACK: &str = "[Response interrupted by user feedback]";
/// The note recorded in the history when the task is aborted mid-reply.
pub const INTERRUPTED_BY_ABORT: &str = "[Response interrupted by user]";

/// The cost of a request's usage in USD.
pub type Pricing = Arc<dyn Fn(&Usage) -> f64 + Send + Sync>;

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
    /// The shared task list (files or PostgreSQL).
    pub task_list: Option<kaji_tasks::list::TaskList>,
    /// The runtime task registry.
    pub runtime: Option<Arc<kaji_tasks::RuntimeTaskRegistry>>,
    /// Extra system prompt sections (rule files), in order.
    pub extra_system_sections: Vec<String>,
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
    /// Where the file tools read and write text (an editor's buffers);
    /// `None`: the local disk.
    pub files: Option<Arc<dyn kaji_tools::FileAccess>>,
    /// The session's child-process environment policy, for every process
    /// a tool starts.
    pub env_policy: Arc<kaji_tasks::process::EnvPolicy>,
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
            task_list: None,
            runtime: None,
            extra_system_sections: Vec::new(),
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
            files: None,
            env_policy: Arc::default(),
            transcript_path: None,
            session_context: Vec::new(),
        }
    }
}

/// How a task ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskOutcome {
    /// The final status.
    pub status: TaskStatus,
    /// Model turns taken.
    pub turns: u32,
    /// Tokens used.
    pub usage: Usage,
    /// The completion result, or why the task failed.
    pub result: Option<String>,
    /// The conversation, ready to resume: every tool use has its result.
    pub history: Vec<Message>,
    /// How long the task ran.
    pub duration: Duration,
    /// The permission mode at the end (plan mode entered or left).
    pub mode: PermissionMode,
    /// The mode a plan's approval returns to.
    pub mode_before_plan: PermissionMode,
    /// The working directory at the end (a worktree entered or left).
    pub cwd: PathBuf,
    /// Why the model stopped, when the status does not say it all
    /// (`refusal`).
    pub stop_reason: Option<String>,
    /// What the task cost, when the model's prices are known.
    pub cost_usd: Option<f64>,
}

/// Aborts a running task from anywhere (a signal handler, a UI key).
#[derive(Debug, Clone)]
pub struct AbortHandle {
    cancel: CancellationToken,
    cancel_hook: Arc<CancelHookGate>,
}

/// Whether the TaskCancel hook must run: decided before the abort flag is
/// set, as the seed orders it.
#[derive(Debug, Default)]
struct CancelHookGate {
    /// TaskCancel hooks are configured.
    configured: bool,
    /// The task has started (TaskStart ran), so there is something to
    /// cancel.
    started: AtomicBool,
    /// The decision, taken in [`AbortHandle::abort`].
    due: AtomicBool,
}

impl AbortHandle {
    /// Aborts the task: first decides whether the TaskCancel hook must
    /// run, then sets the abort flag — every path stops at its next await
    /// point, running hooks and commands are killed — and the task ends with
    /// status aborted, running the TaskCancel hook last.
    pub fn abort(&self) {
        if !self.cancel.is_cancelled()
            && self.cancel_hook.configured
            && self.cancel_hook.started.load(Ordering::SeqCst)
        {
            self.cancel_hook.due.store(true, Ordering::SeqCst);
        }
        self.cancel.cancel();
    }
}

/// The state behind the task's one lock.
#[derive(Debug, Default)]
struct TaskState {
    history: Vec<Message>,
    /// The reply being streamed in the current round.
    assembler: Option<ReplyAssembler>,
    /// Set by the stream reader when the stream has ended.
    stream_end: Option<Result<(), StreamFailure>>,
    /// Whether the current reply has produced any content event.
    stream_had_content: bool,
    consecutive_mistakes: u32,
    turns: u32,
    usage: Usage,
    mode: PermissionMode,
    /// The mode to return to when a plan is approved.
    mode_before_plan: PermissionMode,
    /// The working directory now (changes in worktrees).
    cwd: PathBuf,
    /// Rounds since the model last touched the checklist or task list.
    rounds_since_todo: u32,
    /// The checkpoints of the current working directory (a worktree has
    /// its own).
    checkpoints: Option<CheckpointStore>,
    /// Where this round's user content went: `Some(n)` when it was
    /// appended to an existing user message that had `n` blocks.
    pushed_onto: Option<usize>,
    /// Why the model stopped for good, when that is not the task's status
    /// alone (`refusal`).
    stop_reason: Option<String>,
    /// The last tool call and its result, and how many times in a row the
    /// same call got the same result (loop detection).
    last_call: Option<(String, String, u32)>,
    /// A loop was detected: the mistake limit is reached after this round.
    force_mistake_limit: bool,
    /// The context the last round filled, in tokens.
    context_tokens: u64,
    /// The prompt of this Task as the user typed it.
    prompt: String,
    /// This Task compacted after an overflow already (one retry only).
    compacted_for_overflow: bool,
    /// Cost so far, when the model's prices are known.
    cost_usd: Option<f64>,
    /// This round's user content, until it is in the session file (it
    /// goes there with the reply, or ahead of the reply's first tool).
    round_user: Option<Vec<ContentBlock>>,
}

impl TaskState {
    /// Adds this round's user content: a new user message, or more blocks
    /// of the last one when the history already ends with the user (a
    /// continued conversation whose last results were answered).
    fn push_user_content(&mut self, content: Vec<ContentBlock>) {
        match self.history.last_mut() {
            Some(last) if last.role == Role::User => {
                self.pushed_onto = Some(last.content.len());
                last.content.extend(content);
            }
            _ => {
                self.pushed_onto = None;
                self.history.push(Message {
                    role: Role::User,
                    content,
                });
            }
        }
    }

    /// Takes back what [`TaskState::push_user_content`] added (the request
    /// failed as a whole and is retried).
    fn unpush_user_content(&mut self) {
        match self.pushed_onto.take() {
            Some(len) => {
                if let Some(last) = self.history.last_mut() {
                    last.content.truncate(len);
                }
            }
            None => {
                self.history.pop();
            }
        }
    }
}

/// What the outer loop does after a round.
enum Next {
    /// Send this as the next user content.
    Content(Vec<ContentBlock>),
    /// Send the same user content again.
    Retry,
    /// End the task.
    End(TaskStatus, Option<String>),
}

/// What one round came to.
enum RoundOutcome {
    /// Tools ran; their results are the next user content.
    Continue(Vec<ContentBlock>),
    /// The reply used no tool.
    NoToolUsed(String),
    /// The reply was empty.
    Empty,
    /// The model request failed.
    ApiFailed(String),
    /// The request failed in a way a retry cannot fix (a rejected key, a
    /// bad request): the task fails without offering one.
    ApiFailedFinal(String),
    /// AttemptCompletion was called.
    Completed {
        result: String,
        tool_use_id: String,
        other_results: Vec<ContentBlock>,
    },
    /// The task was aborted.
    Aborted,
    /// The provider refused the request (with its explanation).
    Refused(String),
    /// The request did not fit the model's context window.
    Overflow(String),
}

/// Why a reply stream ended early.
#[derive(Debug, Clone)]
struct StreamFailure {
    /// The provider's error, for the user.
    message: String,
    /// It was the context window (compaction, not a retry, helps).
    overflow: bool,
    /// Asking again may succeed ([`LlmError::retry_may_help`]).
    retryable: bool,
}

/// One task: born with a prompt, dropped when it ends.
pub struct Task {
    config: TaskConfig,
    executor: Arc<ToolExecutor>,
    emitter: Emitter,
    state: Arc<Mutex<TaskState>>,
    cancel: CancellationToken,
    cancel_hook: Arc<CancelHookGate>,
    task_id: String,
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("task_id", &self.task_id)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Task {
    /// Creates a task. Nothing runs until [`Task::run`].
    pub fn new(
        config: TaskConfig,
        executor: ToolExecutor,
        frontend: Arc<dyn TaskFrontend>,
    ) -> Self {
        let state = TaskState {
            mode: config.permission_mode,
            mode_before_plan: config.mode_before_plan.unwrap_or(config.permission_mode),
            cwd: config
                .start_dir
                .clone()
                .unwrap_or_else(|| config.cwd.clone()),
            checkpoints: config.checkpoints.clone(),
            history: config.history.clone(),
            ..TaskState::default()
        };
        let mut executor = executor;
        executor.set_approvals(Arc::clone(&config.approvals));
        if let Some(hooks) = &config.hooks {
            executor.set_hooks(hooks.clone());
        }
        if config.checkpoints.is_some() && executor.checkpoint_gate().is_none() {
            executor.set_checkpoint_gate(CheckpointGate::new());
        }
        let cancel_hook = Arc::new(CancelHookGate {
            configured: config
                .hooks
                .as_ref()
                .is_some_and(|h| h.has_hooks(HookEvent::TaskCancel))
                && config.agent == "main",
            ..CancelHookGate::default()
        });
        let task_id = config.task_id.clone().unwrap_or_else(new_task_id);
        let mut emitter = Emitter::new(
            frontend,
            Arc::clone(&config.message_ids),
            &config.session_id,
            &task_id,
            &config.agent,
        );
        let state = Arc::new(Mutex::new(state));
        if let Some(hooks) = config
            .hooks
            .clone()
            .filter(|h| h.has_hooks(HookEvent::Notification))
        {
            let (state, base) = (Arc::clone(&state), hook_base(&config, &task_id));
            emitter.set_notifier(hooks, move || {
                let st = state.lock().unwrap_or_else(|e| e.into_inner());
                HookPayload {
                    cwd: st.cwd.clone(),
                    permission_mode: st.mode,
                    ..base.clone()
                }
            });
        }
        Self {
            cancel_hook,
            task_id,
            config,
            executor: Arc::new(executor),
            emitter,
            state,
            cancel: CancellationToken::new(),
        }
    }

    /// The task's id.
    pub fn id(&self) -> &str {
        &self.task_id
    }

    /// A handle that aborts this task.
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle {
            cancel: self.cancel.clone(),
            cancel_hook: Arc::clone(&self.cancel_hook),
        }
    }

    fn lock(&self) -> MutexGuard<'_, TaskState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs the task to its end: the outer loop.
    pub async fn run(self, prompt: String) -> TaskOutcome {
        self.run_with(prompt, Vec::new()).await
    }

    /// As [`Task::run`], with blocks the user attached (images) sent
    /// after the prompt's text.
    pub async fn run_with(self, prompt: String, attachments: Vec<ContentBlock>) -> TaskOutcome {
        let started = Instant::now();
        self.config
            .recorder
            .record_synced(SessionRecord::TaskStarted {
                task_id: self.task_id.clone(),
                prompt: prompt.clone(),
                at: now_millis(),
            });
        self.emitter
            .say(SayKind::UserFeedback, prompt.clone(), None);
        self.lock().prompt = prompt.clone();
        let mut user_content = Vec::new();
        if let Some(notice) = &self.config.resumed {
            user_content.push(ContentBlock::text(notice.clone()));
        }
        for context in &self.config.session_context {
            user_content.push(ContentBlock::text(format!(
                "[SessionStart hook]\n{context}"
            )));
        }
        user_content.push(ContentBlock::text(prompt.clone()));
        user_content.extend(attachments);
        self.start_initial_checkpoint();
        let stopped_by_hook = self.start_hooks(&prompt, &mut user_content).await;
        let (status, result) = match stopped_by_hook {
            Some(stop) => stop,
            None => self.outer_loop(user_content).await,
        };
        self.finish(status, result, started).await
    }

    /// Rounds until the task ends.
    async fn outer_loop(
        &self,
        mut user_content: Vec<ContentBlock>,
    ) -> (TaskStatus, Option<String>) {
        let mut empty_retries = 0u32;
        let mut stop_hook_active = false;
        loop {
            if self.cancel.is_cancelled() {
                return (TaskStatus::Aborted, None);
            }
            if let Some(end) = self.check_limits(&mut user_content).await {
                return end;
            }
            self.add_notices(&mut user_content).await;
            if self.needs_compaction(&user_content) {
                self.lock()
                    .push_user_content(std::mem::take(&mut user_content));
                if let Err(e) = self.compact(None, "auto").await {
                    self.emitter.say(SayKind::Error, e.clone(), None);
                    return (TaskStatus::Failed, Some(e));
                }
            }
            let step = match self.round(user_content.clone()).await {
                RoundOutcome::Continue(next) => {
                    empty_retries = 0;
                    Next::Content(next)
                }
                // A reply with text and no tool: where a person is there to
                // answer (the UI, an editor, a sub-agent's parent) it ends
                // the turn; headless, the seed's nudge asks for a tool.
                RoundOutcome::NoToolUsed(text) => match self.config.on_text_reply {
                    TextReply::Finish => Next::End(TaskStatus::Completed, Some(text)),
                    TextReply::Nudge => {
                        empty_retries = 0;
                        self.lock().consecutive_mistakes += 1;
                        Next::Content(vec![ContentBlock::text(NO_TOOL_NUDGE)])
                    }
                },
                RoundOutcome::Empty => self.after_empty_reply(&mut empty_retries).await,
                RoundOutcome::ApiFailed(err) => self.after_failed_request(err, &user_content).await,
                RoundOutcome::ApiFailedFinal(err) => {
                    self.emitter.say(SayKind::Error, err.clone(), None);
                    Next::End(TaskStatus::Failed, Some(err))
                }
                RoundOutcome::Completed {
                    result,
                    tool_use_id,
                    other_results,
                } => {
                    self.after_completion(result, tool_use_id, other_results)
                        .await
                }
                RoundOutcome::Aborted => Next::End(TaskStatus::Aborted, None),
                RoundOutcome::Overflow(err) => self.after_overflow(err, &mut user_content).await,
                RoundOutcome::Refused(why) => {
                    let msg = format!("The model refused to continue: {why}");
                    self.emitter.say(SayKind::Error, msg.clone(), None);
                    self.lock().stop_reason = Some("refusal".into());
                    Next::End(TaskStatus::Failed, Some(msg))
                }
            };
            match step {
                Next::Content(next) => user_content = next,
                Next::Retry => {}
                Next::End(status, result) => {
                    match self.stop_hooks(status, stop_hook_active).await {
                        Some(next) => {
                            stop_hook_active = true;
                            user_content = next;
                        }
                        None => return (status, result),
                    }
                }
            }
        }
    }

    /// The mistake limit (checked before each request, as in the seed) and
    /// the turn limit. `Some` ends the task.
    async fn check_limits(
        &self,
        user_content: &mut Vec<ContentBlock>,
    ) -> Option<(TaskStatus, Option<String>)> {
        let mistakes = self.lock().consecutive_mistakes;
        if mistakes >= self.config.max_mistakes {
            let msg = format!(
                "The model made {mistakes} consecutive mistakes (the limit is {}).",
                self.config.max_mistakes
            );
            if self.lock().mode == PermissionMode::Yolo {
                self.emitter.say(SayKind::Error, msg.clone(), None);
                return Some((TaskStatus::MistakeLimit, Some(msg)));
            }
            let ask = format!("{msg} Continue?");
            match self
                .ask_or_abort(AskKind::MistakeLimitReached, ask, None)
                .await
            {
                Some(
                    AskResponse::Approve
                    | AskResponse::ApproveAlways
                    | AskResponse::ApproveAlwaysProject,
                ) => {
                    self.lock().consecutive_mistakes = 0;
                }
                Some(AskResponse::Reply { text }) => {
                    self.lock().consecutive_mistakes = 0;
                    user_content.push(ContentBlock::text(format!("The user says:\n{text}")));
                }
                Some(AskResponse::Deny { .. }) => {
                    return Some((TaskStatus::MistakeLimit, Some(msg)));
                }
                None => return Some((TaskStatus::Aborted, None)),
            }
        }
        let turns = self.lock().turns;
        if let Some(max) = self.config.max_turns
            && turns >= max
        {
            let msg = format!("The turn limit of {max} was reached.");
            self.emitter.say(SayKind::Error, msg.clone(), None);
            return Some((TaskStatus::MaxTurns, Some(msg)));
        }
        // The run's budget, shared with every agent of the run: this
        // request is taken from it here.
        if let Err(spent) = self.config.budget.start_request() {
            let msg = spent.to_string();
            self.emitter.say(SayKind::Error, msg.clone(), None);
            self.lock().stop_reason = Some(spent.stop_reason().to_string());
            return Some((TaskStatus::MaxTurns, Some(msg)));
        }
        None
    }

    /// What the model learns of without asking: an open checklist left
    /// alone for a while, and background tasks of this agent that ended.
    async fn add_notices(&self, user_content: &mut Vec<ContentBlock>) {
        if let Some(reminder) = self.todo_reminder() {
            user_content.push(ContentBlock::text(reminder));
        }
        if let Some(runtime) = &self.config.runtime {
            for notice in runtime.take_finished_notices_for(&self.config.agent) {
                user_content.push(ContentBlock::text(notice.to_prompt_text()));
            }
        }
        // Messages and completion notices from the team's mailbox: a
        // teammate's own (a `kaji worker`'s main agent is named `main`, but
        // the lead's mailbox, with the notices of its own completions, is
        // not its to read).
        let mailbox = match self.config.role {
            kaji_tools::AgentRole::Teammate => &self.config.owner,
            _ => &self.config.agent,
        };
        if let Some(list) = &self.config.task_list
            && let Ok(messages) = list.take_messages(mailbox).await
        {
            for message in messages {
                user_content.push(ContentBlock::text(message.to_prompt_text()));
            }
        }
    }

    /// Whether the next request would pass the compaction threshold: the
    /// context the last round filled plus what this round adds.
    fn needs_compaction(&self, user_content: &[ContentBlock]) -> bool {
        if self.config.compaction != Compaction::Auto {
            return false;
        }
        let Some(window) = self.config.context_window else {
            return false;
        };
        let adding = serde_json::to_vec(user_content).map_or(0, |v| v.len() as u64) / 4;
        let context = self.lock().context_tokens + adding;
        context as f64 > self.config.compact_threshold * window as f64
    }

    /// The request did not fit: compact and send it again (once), unless
    /// compaction is off.
    async fn after_overflow(&self, err: String, user_content: &mut Vec<ContentBlock>) -> Next {
        if self.config.compaction == Compaction::Off {
            let msg = format!(
                "The conversation no longer fits the model's context window ({err}), and compaction is off (`compaction = \"off\"` in the settings). Start a new conversation, or set `compaction = \"auto\"`."
            );
            self.emitter.say(SayKind::Error, msg.clone(), None);
            return Next::End(TaskStatus::Failed, Some(msg));
        }
        if std::mem::replace(&mut self.lock().compacted_for_overflow, true) {
            let msg = format!(
                "The request still does not fit the context window after compaction: {err}"
            );
            self.emitter.say(SayKind::Error, msg.clone(), None);
            return Next::End(TaskStatus::Failed, Some(msg));
        }
        self.lock().push_user_content(std::mem::take(user_content));
        match self.compact(None, "auto").await {
            Ok(()) => Next::Content(Vec::new()),
            Err(e) => {
                self.emitter.say(SayKind::Error, e.clone(), None);
                Next::End(TaskStatus::Failed, Some(e))
            }
        }
    }

    /// Compacts the history (see [`crate::compaction`]): the PreCompact
    /// hook (`trigger`: `manual` for `/compact`, else `auto`), the cheap
    /// steps, then a summary when they are not enough.
    async fn compact(&self, instructions: Option<&str>, trigger: &str) -> Result<(), String> {
        let payload = self
            .hook_payload()
            .with_field("trigger", trigger)
            .with_field("custom_instructions", instructions.unwrap_or_default());
        self.run_hook_with(HookEvent::PreCompact, payload).await;
        let mut history = self.lock().history.clone();
        let before = compaction::estimate_tokens(&history);
        let files = |name: &str, input: &Value| self.executor.files_of(name, input);
        let collapsed = compaction::collapse_repeated_reads(&mut history, &files);
        let elided = compaction::elide_old_outputs(&mut history);
        let after_cheap = compaction::estimate_tokens(&history);
        let target = self
            .config
            .context_window
            .map(|w| (self.config.compact_threshold * w as f64 * 0.8) as u64);
        let cheap_enough = instructions.is_none()
            && target.is_some_and(|t| after_cheap <= t)
            && (collapsed + elided) > 0;
        let (history, dropped) = if cheap_enough {
            (history, 0)
        } else {
            let (summary, dropped) = self.summarize(history.clone(), instructions).await?;
            let summarized =
                compaction::compacted_history(&summary, &self.compaction_context().await);
            // Compaction only shrinks: a summary that does not bring the
            // context below what it replaces (and, when automatic, below
            // the threshold) is rejected; the oldest rounds go instead.
            let summarized_tokens = compaction::estimate_tokens(&summarized);
            let limit = match target {
                Some(t) if instructions.is_none() => t.min(before),
                _ => before,
            };
            if summarized_tokens < limit {
                (summarized, dropped)
            } else {
                self.emitter.say(
                    SayKind::Info,
                    format!(
                        "The summary (about {summarized_tokens} tokens) would not shrink the context (about {before} tokens): it is rejected, and the oldest rounds are dropped instead"
                    ),
                    None,
                );
                shrink_by_dropping(history, limit)?
            }
        };
        let after = compaction::estimate_tokens(&history);
        self.lock().history = history.clone();
        self.lock().context_tokens = after;
        self.config
            .recorder
            .record_synced(SessionRecord::HistoryReplaced {
                history,
                reason: "compaction".into(),
                tokens_before: Some(before),
                tokens_after: Some(after),
            });
        let mut text = format!("Context compacted: about {before} → {after} tokens");
        if dropped > 0 {
            text.push_str(&format!(" ({dropped} oldest rounds were dropped to fit)"));
        }
        self.emitter.say(
            SayKind::ContextCompacted,
            text,
            Some(SayPayload::Compacted {
                tokens_before: before,
                tokens_after: after,
                dropped_rounds: dropped as u32,
            }),
        );
        Ok(())
    }

    /// The summary request: the history plus the instruction, no tools. A
    /// request that does not fit drops the oldest rounds (a call with its
    /// result) until it does. Returns the summary and the rounds dropped.
    async fn summarize(
        &self,
        mut history: Vec<Message>,
        instructions: Option<&str>,
    ) -> Result<(String, usize), String> {
        let mut dropped = 0;
        for _ in 0..8 {
            let mut messages = history.clone();
            let mut ask = compaction::SUMMARY_INSTRUCTIONS.to_string();
            if let Some(extra) = instructions.filter(|i| !i.trim().is_empty()) {
                ask.push_str(&format!("\nThe user asks the summary to focus on: {extra}"));
            }
            match messages.last_mut() {
                Some(last) if last.role == Role::User => last.content.push(ContentBlock::text(ask)),
                _ => messages.push(Message::user_text(ask)),
            }
            let request = ModelRequest {
                model: self.config.model.clone(),
                system: "You write precise summaries of coding sessions, so that the work can go on from the summary alone.".into(),
                messages,
                tools: Vec::new(),
                max_tokens: self.config.max_tokens,
                temperature: None,
            };
            match self.collect_text(request).await {
                Ok(text) if !text.trim().is_empty() => return Ok((text, dropped)),
                Ok(_) => return Err("compaction failed: the model's summary was empty".into()),
                Err(e) if e.is_context_overflow() => {
                    let rounds = history.iter().filter(|m| m.role == Role::Assistant).count();
                    let n = compaction::drop_oldest_rounds(&mut history, rounds.div_ceil(4).max(1));
                    if n == 0 {
                        return Err(format!(
                            "compaction failed: even the smallest summary request does not fit: {e}"
                        ));
                    }
                    dropped += n;
                }
                Err(e) => {
                    return Err(format!(
                        "compaction failed: the summary request failed: {e}"
                    ));
                }
            }
        }
        Err("compaction failed: the summary request never fit the context window".into())
    }

    /// Runs a request without tools and returns its text.
    async fn collect_text(&self, request: ModelRequest) -> Result<String, LlmError> {
        let mut stream = self.config.provider.stream(request);
        let mut text = String::new();
        loop {
            let item = tokio::select! {
                item = stream.next() => item,
                _ = self.cancel.cancelled() => return Ok(text),
            };
            match item {
                None => return Ok(text),
                Some(Err(e)) => return Err(e),
                Some(Ok(kaji_protocol::StreamEvent::TextDelta { text: t })) => text.push_str(&t),
                Some(Ok(_)) => {}
            }
        }
    }

    /// What survives a summary besides it: open tasks, the todo, the files
    /// changed, the user's latest prompt.
    async fn compaction_context(&self) -> compaction::CompactionContext {
        let snapshot = match &self.config.task_list {
            Some(list) => list.list().await.ok(),
            None => None,
        };
        let open_tasks = snapshot
            .map(|snap| {
                snap.tasks
                    .iter()
                    .filter(|t| t.status.as_str() != "completed")
                    .map(|t| format!("#{} [{}] {}", t.id, t.status.as_str(), t.subject))
                    .collect()
            })
            .unwrap_or_default();
        let todo = self
            .config
            .todo
            .as_ref()
            .map(|t| {
                t.open_items()
                    .iter()
                    .map(|i| format!("[{}] {}", i.status.as_str(), i.content))
                    .collect()
            })
            .unwrap_or_default();
        let (history, prompt) = {
            let st = self.lock();
            (st.history.clone(), st.prompt.clone())
        };
        let files = |name: &str, input: &Value| self.executor.files_of(name, input);
        compaction::CompactionContext {
            open_tasks,
            todo,
            files_changed: compaction::files_changed_in(&history, &files),
            latest_prompt: prompt,
        }
    }

    /// Uses `model` for this Task's requests.
    pub(crate) fn set_model(&mut self, model: String) {
        self.config.model = model;
    }

    /// A front end's `!command`: runs one tool call outside any model
    /// round, through the same approvals, sandbox, hooks and checkpoints
    /// as the model's calls, and hands back its result and the history.
    pub(crate) async fn run_user_call(self, call: ToolCall) -> (ToolRun, Vec<Message>) {
        self.start_initial_checkpoint();
        let run = self.run_tool(&call, None).await;
        let history = std::mem::take(&mut self.lock().history);
        (run, history)
    }

    /// `/compact [instructions]`: compacts the conversation now, outside
    /// any prompt, and hands the history back.
    pub async fn compact_now(self, instructions: Option<String>) -> Result<TaskOutcome, String> {
        let started = Instant::now();
        self.compact(instructions.as_deref(), "manual").await?;
        let state = std::mem::take(&mut *self.lock());
        Ok(TaskOutcome {
            status: TaskStatus::Completed,
            turns: 0,
            usage: Usage::default(),
            result: None,
            history: state.history,
            duration: started.elapsed(),
            mode: state.mode,
            mode_before_plan: state.mode_before_plan,
            cwd: state.cwd,
            stop_reason: None,
            cost_usd: None,
        })
    }

    /// An empty reply: retried with backoff, then the user is asked.
    async fn after_empty_reply(&self, empty_retries: &mut u32) -> Next {
        if *empty_retries < self.config.empty_reply_retries {
            *empty_retries += 1;
            let delay = self.config.empty_reply_backoff * 2u32.pow(*empty_retries - 1);
            self.emitter.say(
                SayKind::Error,
                format!(
                    "The model sent an empty reply (no text, no tool call); retrying ({}/{}) in {} ms.",
                    empty_retries,
                    self.config.empty_reply_retries,
                    delay.as_millis()
                ),
                None,
            );
            if !self.sleep_or_abort(delay).await {
                return Next::End(TaskStatus::Aborted, None);
            }
            return Next::Retry;
        }
        let msg = format!(
            "The model sent an empty reply {} times in a row.",
            *empty_retries + 1
        );
        match self
            .ask_or_abort(AskKind::ApiReqFailed, format!("{msg} Retry?"), None)
            .await
        {
            Some(
                AskResponse::Approve
                | AskResponse::ApproveAlways
                | AskResponse::ApproveAlwaysProject
                | AskResponse::Reply { .. },
            ) => {
                *empty_retries = 0;
                Next::Retry
            }
            Some(AskResponse::Deny { .. }) => Next::End(TaskStatus::Failed, Some(msg)),
            None => Next::End(TaskStatus::Aborted, None),
        }
    }

    /// A request that failed as a whole: the user decides whether to retry.
    async fn after_failed_request(&self, err: String, user_content: &[ContentBlock]) -> Next {
        self.emitter.say(SayKind::Error, err.clone(), None);
        let ask = format!("The model request failed: {err}\nRetry?");
        match self.ask_or_abort(AskKind::ApiReqFailed, ask, None).await {
            Some(
                AskResponse::Approve
                | AskResponse::ApproveAlways
                | AskResponse::ApproveAlwaysProject,
            ) => Next::Retry,
            // What the user typed goes to the model with the retry.
            Some(AskResponse::Reply { text }) => {
                let mut next = user_content.to_vec();
                next.push(ContentBlock::text(format!("The user says:\n{text}")));
                Next::Content(next)
            }
            Some(AskResponse::Deny { .. }) => Next::End(TaskStatus::Failed, Some(err)),
            None => Next::End(TaskStatus::Aborted, None),
        }
    }

    /// AttemptCompletion: the user accepts the result, or gives feedback
    /// and the task goes on.
    async fn after_completion(
        &self,
        result: String,
        tool_use_id: String,
        mut other_results: Vec<ContentBlock>,
    ) -> Next {
        self.emitter
            .say(SayKind::CompletionResult, result.clone(), None);
        let answer = self
            .ask_or_abort(AskKind::CompletionResult, result.clone(), None)
            .await;
        let (reply, end) = match answer {
            Some(AskResponse::Reply { text })
            | Some(AskResponse::Deny {
                feedback: Some(text),
            }) => (
                format!("The user has feedback on the result:\n{text}"),
                None,
            ),
            Some(_) => (
                "The user accepted the result.".to_string(),
                Some(TaskStatus::Completed),
            ),
            None => (
                "The task was aborted.".to_string(),
                Some(TaskStatus::Aborted),
            ),
        };
        other_results.push(self.result_block(&tool_use_id, "AttemptCompletion", &reply, false));
        match end {
            None => Next::Content(other_results),
            Some(status) => {
                // Keep the history resumable: every call answered.
                let message = Message {
                    role: Role::User,
                    content: other_results,
                };
                self.lock().history.push(message.clone());
                self.config
                    .recorder
                    .record_synced(SessionRecord::Message { message });
                let result = (status == TaskStatus::Completed).then_some(result);
                Next::End(status, result)
            }
        }
    }

    /// The end of a task: hooks, the report of background work still
    /// running after an abort, the record, and the outcome.
    async fn finish(
        &self,
        status: TaskStatus,
        result: Option<String>,
        started: Instant,
    ) -> TaskOutcome {
        if status == TaskStatus::Aborted {
            // Running hooks and the foreground command were killed by the
            // abort flag. Background work belongs to the session and keeps
            // running: say what is still going. Then the TaskCancel hook
            // runs, if it was due when the abort came.
            self.emitter
                .say(SayKind::Error, "The task was aborted.", None);
            self.say_background_still_running();
            if self.cancel_hook.due.load(Ordering::SeqCst) {
                self.run_task_hook(HookEvent::TaskCancel).await;
            }
        } else if status == TaskStatus::Completed && self.config.agent == "main" {
            self.run_task_hook(HookEvent::TaskComplete).await;
        }
        let state = std::mem::take(&mut *self.lock());
        self.config
            .recorder
            .record_synced(SessionRecord::TaskEnded {
                task_id: self.task_id.clone(),
                status: status.as_str().to_string(),
                at: now_millis(),
            });
        let outcome = TaskOutcome {
            status,
            turns: state.turns,
            usage: state.usage,
            result,
            history: state.history,
            duration: started.elapsed(),
            mode: state.mode,
            mode_before_plan: state.mode_before_plan,
            cwd: state.cwd,
            stop_reason: state.stop_reason,
            cost_usd: state.cost_usd,
        };
        self.emitter.emit(TaskEvent::Finished {
            status,
            turns: outcome.turns,
            usage: outcome.usage,
            result: outcome.result.clone(),
        });
        outcome
    }

    /// After an abort: the background tasks that go on running.
    fn say_background_still_running(&self) {
        let Some(runtime) = &self.config.runtime else {
            return;
        };
        let tasks: Vec<BackgroundTask> = runtime
            .list()
            .into_iter()
            .filter(|t| !t.status.is_terminal())
            .map(|t| BackgroundTask {
                id: t.id.as_str().to_string(),
                description: t.description.clone(),
                status: t.status.as_str().to_string(),
            })
            .collect();
        if tasks.is_empty() {
            return;
        }
        let lines: Vec<String> = tasks
            .iter()
            .map(|t| format!("  {} {}", t.id, t.description))
            .collect();
        self.emitter.say(
            SayKind::Info,
            format!(
                "Still running in the background (stop with TaskStop or `kaji ps`):\n{}",
                lines.join("\n")
            ),
            Some(SayPayload::Background { tasks }),
        );
    }

    /// Asks, unless the task is aborted first (`None`).
    async fn ask_or_abort(
        &self,
        kind: AskKind,
        text: String,
        payload: Option<AskPayload>,
    ) -> Option<AskResponse> {
        tokio::select! {
            r = self.emitter.ask(kind, text, payload) => Some(r),
            _ = self.cancel.cancelled() => None,
        }
    }

    /// Sleeps; false when aborted meanwhile.
    async fn sleep_or_abort(&self, d: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(d) => true,
            _ = self.cancel.cancelled() => false,
        }
    }

    /// TaskStart, then UserPromptSubmit. Their context joins the first
    /// user message; a block (exit 2) ends the task before the first
    /// request, with the hook's reason.
    async fn start_hooks(
        &self,
        prompt: &str,
        user_content: &mut Vec<ContentBlock>,
    ) -> Option<(TaskStatus, Option<String>)> {
        self.cancel_hook.started.store(true, Ordering::SeqCst);
        let hooks = self.config.hooks.as_ref()?;
        // A sub-agent's prompt is its parent's call, not the user's.
        if self.config.agent != "main" {
            return None;
        }
        // A Task that continues a session loaded from disk is a resumption
        // (the seed's TaskResume); every other one starts.
        let first = if self.config.resumed.is_some() {
            (
                HookEvent::TaskResume,
                "the TaskResume hook stopped the task",
            )
        } else {
            (HookEvent::TaskStart, "the TaskStart hook stopped the task")
        };
        for (event, what) in [
            first,
            (
                HookEvent::UserPromptSubmit,
                "a UserPromptSubmit hook refused the prompt",
            ),
        ] {
            if !hooks.has_hooks(event) {
                continue;
            }
            let mut payload = self.hook_payload();
            if event == HookEvent::UserPromptSubmit {
                payload = payload.with_prompt(prompt);
            }
            let outcome = hooks.run(event, payload, &self.cancel).await;
            report_hook_warnings(&self.emitter, &outcome.warnings);
            if outcome.cancelled || self.cancel.is_cancelled() {
                return Some((TaskStatus::Aborted, None));
            }
            if let Some(reason) = outcome.blocked {
                let msg = format!("{what}: {reason}");
                self.emitter.say(SayKind::Error, msg.clone(), None);
                return Some((TaskStatus::Failed, Some(msg)));
            }
            for context in outcome.context {
                user_content.push(ContentBlock::text(format!(
                    "[{} hook]\n{context}",
                    event.as_str()
                )));
            }
        }
        None
    }

    /// The seed's initial checkpoint: taken in the background; the gate
    /// opens when it is done (or failed), so writes wait and reads do not.
    fn start_initial_checkpoint(&self) {
        let Some(gate) = self.executor.checkpoint_gate().cloned() else {
            return;
        };
        let Some(store) = self.config.checkpoints.clone() else {
            return;
        };
        let emitter = self.emitter.clone();
        let state = Arc::clone(&self.state);
        let timeout = crate::checkpoints::initial_checkpoint_timeout();
        let slot = self.config.start_checkpoint.clone();
        let label = start_label(&self.lock().prompt);
        tokio::spawn(async move {
            match store.commit_within(&label, timeout).await {
                Ok(taken) => {
                    // Nothing changed since the latest checkpoint: that
                    // one holds the files as they are.
                    let id = match taken {
                        Some(cp) => Some(cp.id),
                        None => store.latest().await.ok().flatten().map(|cp| cp.id),
                    };
                    if let Some(slot) = slot {
                        *slot.lock().unwrap_or_else(|e| e.into_inner()) =
                            id.map(|id| id.as_str().to_string());
                    }
                }
                Err(crate::checkpoints::CheckpointError::Timeout { after }) => {
                    // A huge tree never blocks the first write for long:
                    // this task goes on without checkpoints.
                    state.lock().unwrap_or_else(|e| e.into_inner()).checkpoints = None;
                    emitter.say(
                        SayKind::Error,
                        format!(
                            "The initial checkpoint took longer than {} s and was given up; this task takes no checkpoints (KAJI_CHECKPOINT_TIMEOUT_MS sets the limit).",
                            after.as_secs_f64()
                        ),
                        None,
                    );
                }
                // The task ended (and its runtime went away) before the
                // checkpoint did: nothing is left to protect.
                Err(crate::checkpoints::CheckpointError::Cancelled) => {}
                Err(e) => {
                    emitter.say(
                        SayKind::Error,
                        format!("The initial checkpoint failed; changes of this task cannot be undone with `kaji checkpoints`: {e}"),
                        None,
                    );
                }
            }
            gate.open();
        });
    }

    /// A checkpoint after a tool call that changed files.
    async fn checkpoint_after(&self, call: &ToolCall) {
        let (store, turn) = {
            let st = self.lock();
            (st.checkpoints.clone(), st.turns)
        };
        let Some(store) = store else {
            return;
        };
        let label = format!("turn {turn}: {}", call.name);
        match store.commit(&label).await {
            Ok(Some(cp)) => {
                self.config.recorder.record(SessionRecord::Checkpoint {
                    id: cp.id.as_str().to_string(),
                    label: label.clone(),
                });
                self.emitter.say(
                    SayKind::Info,
                    format!("checkpoint {} ({label})", cp.id.short()),
                    Some(SayPayload::Checkpoint {
                        checkpoint: cp.id.as_str().to_string(),
                        label: label.clone(),
                    }),
                );
            }
            Ok(None) => {}
            Err(e) => {
                self.emitter.say(
                    SayKind::Error,
                    format!("checkpoint after {} failed: {e}", call.name),
                    None,
                );
            }
        }
    }

    fn hook_payload(&self) -> HookPayload {
        let st = self.lock();
        HookPayload {
            cwd: st.cwd.clone(),
            permission_mode: st.mode,
            ..hook_base(&self.config, &self.task_id)
        }
    }

    /// Runs a hook that can block nothing (TaskComplete, TaskCancel).
    async fn run_task_hook(&self, event: HookEvent) {
        self.run_hook_with(event, self.hook_payload()).await;
    }

    /// Runs the hooks of `event` with `payload`, showing their warnings;
    /// nothing they answer is acted on.
    async fn run_hook_with(&self, event: HookEvent, payload: HookPayload) {
        let Some(hooks) = self.config.hooks.as_ref() else {
            return;
        };
        if !hooks.has_hooks(event) {
            return;
        }
        // A fresh token: the task's own may already be cancelled.
        let outcome = hooks.run(event, payload, &CancellationToken::new()).await;
        report_hook_warnings(&self.emitter, &outcome.warnings);
    }

    /// The Stop hook (SubagentStop for a sub-agent) when the agent's turn
    /// ends (not on abort). A block of a completed turn keeps it working:
    /// the next user content, with the hook's reason.
    async fn stop_hooks(
        &self,
        status: TaskStatus,
        stop_hook_active: bool,
    ) -> Option<Vec<ContentBlock>> {
        let hooks = self.config.hooks.as_ref()?;
        let event = if self.config.agent == "main" {
            HookEvent::Stop
        } else {
            HookEvent::SubagentStop
        };
        if status == TaskStatus::Aborted || !hooks.has_hooks(event) {
            return None;
        }
        let payload = self
            .hook_payload()
            .with_field("stop_hook_active", stop_hook_active);
        let outcome = hooks.run(event, payload, &self.cancel).await;
        report_hook_warnings(&self.emitter, &outcome.warnings);
        let reason = outcome.blocked?;
        if status != TaskStatus::Completed || outcome.stop.is_some() || self.cancel.is_cancelled() {
            return None;
        }
        self.emitter.say(
            SayKind::Info,
            format!("{event} hook: keep working: {reason}"),
            None,
        );
        Some(vec![ContentBlock::text(format!(
            "[{event} hook]\n{reason}"
        ))])
    }

    /// The checklist reminder, when the model has left open items alone
    /// for `todo_reminder_turns` rounds.
    fn todo_reminder(&self) -> Option<String> {
        let todo = self.config.todo.as_ref()?;
        let mut st = self.lock();
        st.rounds_since_todo += 1;
        if st.rounds_since_todo <= self.config.todo_reminder_turns {
            return None;
        }
        let reminder = todo.reminder()?;
        st.rounds_since_todo = 0;
        Some(reminder)
    }

    fn tool_context(&self) -> ToolContext {
        let (cwd, mode) = {
            let st = self.lock();
            (st.cwd.clone(), st.mode)
        };
        ToolContext {
            sandbox: crate::permissions::sandbox_for(&self.config.approvals, mode, &cwd),
            cwd,
            project_dir: self.config.cwd.clone(),
            cancel: self.cancel.child_token(),
            session_id: self.config.session_id.clone(),
            agent: self.config.agent.clone(),
            owner: self.config.owner.clone(),
            role: self.config.role,
            kaji_home: self.config.kaji_home.clone(),
            task_list: self.config.task_list.clone(),
            runtime: self.config.runtime.clone(),
            agents: self.config.agents.clone(),
            files: self.config.files.clone(),
            env_policy: Arc::clone(&self.config.env_policy),
            output: self
                .config
                .live_output
                .then(|| crate::live_output::sink(self.emitter.clone())),
            call_id: None,
        }
    }

    /// A tool result in the form the protocol needs: a native
    /// `tool_result` block, or text for the xml protocol.
    fn result_block(&self, id: &str, name: &str, content: &str, is_error: bool) -> ContentBlock {
        match self.config.tool_protocol {
            ToolProtocol::Native => ContentBlock::tool_result(id, content, is_error),
            ToolProtocol::Xml => {
                let label = if is_error { "Error" } else { "Result" };
                ContentBlock::text(format!("[{name}] {label}:\n{content}"))
            }
        }
    }

    fn request(&self, specs: Vec<kaji_protocol::ToolSpec>) -> ModelRequest {
        let (mode, messages, cwd) = {
            let st = self.lock();
            (st.mode, st.history.clone(), st.cwd.clone())
        };
        let system = system_prompt(&PromptInputs {
            cwd: &cwd,
            protocol: self.config.tool_protocol,
            tools: &specs,
            mode,
            extra_sections: &self.config.extra_system_sections,
        });
        ModelRequest {
            model: self.config.model.clone(),
            system,
            messages,
            tools: match self.config.tool_protocol {
                ToolProtocol::Native => specs,
                ToolProtocol::Xml => Vec::new(),
            },
            max_tokens: self.config.max_tokens,
            temperature: self.config.temperature,
        }
    }

    /// The middle loop's body: one request, its stream, its presentation.
    async fn round(&self, user_content: Vec<ContentBlock>) -> RoundOutcome {
        // MCP servers still connecting get up to 10 s before the first
        // request (the seed's wait); after that, a server that connects
        // later has its tools in the next round.
        if let Some(mcp) = self.executor.mcp()
            && self.lock().turns == 0
        {
            tokio::select! {
                still = mcp.wait_ready(mcp_connect_wait()) => {
                    if !still.is_empty() {
                        self.emitter.say(
                            SayKind::Info,
                            format!("MCP servers still connecting, going on without them for now: {}", still.join(", ")),
                            None,
                        );
                    }
                    // Nothing fails silently: a server that could not start
                    // is named, with why.
                    for failure in mcp.failures() {
                        self.emitter.say(
                            SayKind::Error,
                            format!("MCP server {} is not available: {}", failure.name, failure.why),
                            None,
                        );
                    }
                }
                _ = self.cancel.cancelled() => return RoundOutcome::Aborted,
            }
        }
        let specs = self.executor.begin_round();
        let turn = {
            let mut st = self.lock();
            st.round_user = Some(user_content.clone());
            st.push_user_content(user_content);
            st.turns += 1;
            st.stream_end = None;
            st.stream_had_content = false;
            let grammar = XmlToolGrammar::from_specs(&specs);
            st.assembler = Some(ReplyAssembler::new(
                self.config.tool_protocol,
                grammar,
                &format!("xml_{}_", st.turns),
            ));
            st.turns
        };
        let request = self.request(specs);
        let request_bytes = request_size(&request);
        self.emitter.say(
            SayKind::ApiReqStarted,
            format!("Turn {turn}: request to {}", self.config.model),
            Some(SayPayload::ApiRequest {
                turn,
                model: self.config.model.clone(),
            }),
        );

        // The stream reader: feeds the assembler under the lock and bumps
        // the version the presenter waits on.
        let (version_tx, version_rx) = watch::channel(0u64);
        let stream_cancel = self.cancel.child_token();
        let reader = {
            let state = Arc::clone(&self.state);
            let emitter = self.emitter.clone();
            let provider = Arc::clone(&self.config.provider);
            let stream_cancel = stream_cancel.clone();
            tokio::spawn(async move {
                let mut stream = provider.stream(request);
                let end = loop {
                    let item = tokio::select! {
                        item = stream.next() => item,
                        _ = stream_cancel.cancelled() => break Ok(()),
                    };
                    match item {
                        None => break Ok(()),
                        Some(Err(e)) => {
                            break Err(StreamFailure {
                                message: describe_llm_error(&e),
                                overflow: e.is_context_overflow(),
                                retryable: e.retry_may_help(),
                            });
                        }
                        Some(Ok(kaji_protocol::StreamEvent::Retrying {
                            attempt,
                            max_attempts,
                            delay_ms,
                            reason,
                        })) => {
                            emitter.say(
                                SayKind::ApiReqRetried,
                                format!("Retrying (attempt {attempt}/{max_attempts}) in {delay_ms} ms: {reason}"),
                                Some(SayPayload::Retry { attempt, max_attempts, delay_ms }),
                            );
                        }
                        Some(Ok(event)) => {
                            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
                            if !matches!(event, kaji_protocol::StreamEvent::Usage(_)) {
                                st.stream_had_content = true;
                            }
                            if let Some(a) = st.assembler.as_mut() {
                                a.push(&event);
                            }
                            drop(st);
                            version_tx.send_modify(|v| *v += 1);
                        }
                    }
                };
                drop(stream);
                let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(a) = st.assembler.as_mut() {
                    a.finish();
                }
                st.stream_end = Some(end);
                drop(st);
                version_tx.send_modify(|v| *v += 1);
            })
        };

        let presented = self.present(version_rx, &stream_cancel).await;
        stream_cancel.cancel();
        let _ = reader.await;

        // Record the reply and decide what comes next.
        let (assembler, end, had_content) = {
            let mut st = self.lock();
            let a = st.assembler.take();
            let reported = a.as_ref().map(|a| a.usage()).unwrap_or_default();
            // A server that reports no usage gets an estimate; a reply kaji
            // cut short after a rejection may just not have reached its
            // usage yet, and gets none. An aborted reply gets an estimate:
            // its request was paid for, and the task reports it (#32).
            let cut_by_us = presented.interrupted;
            let (usage, estimated) = match a.as_ref() {
                Some(a) if reported == Usage::default() && st.stream_had_content && !cut_by_us => {
                    let broken = matches!(st.stream_end, Some(Err(_)));
                    (estimate_usage(request_bytes, a, broken), true)
                }
                _ => (reported, false),
            };
            st.usage.add(&usage);
            let turn = st.turns;
            let had_content = st.stream_had_content;
            drop(st);
            if usage != Usage::default() {
                self.report_usage(turn, usage, estimated);
            }
            let mut st = self.lock();
            (a, st.stream_end.take(), had_content)
        };
        let Some(assembler) = assembler else {
            return RoundOutcome::ApiFailed("internal error: the reply was lost".into());
        };
        let aborted = self.cancel.is_cancelled();
        if let Some(Err(err)) = &end
            && !had_content
            && !aborted
        {
            // Nothing arrived: the request failed as a whole. Forget this
            // round's user message; the outer loop retries it.
            let mut st = self.lock();
            st.unpush_user_content();
            st.turns -= 1;
            if err.overflow {
                return RoundOutcome::Overflow(err.message.clone());
            }
            if !err.retryable {
                return RoundOutcome::ApiFailedFinal(err.message.clone());
            }
            return RoundOutcome::ApiFailed(err.message.clone());
        }

        let mut assistant = assembler.history_content();
        let stop = assembler.stop_reason().cloned();
        let runs = &presented.runs;
        let mut results: Vec<ContentBlock> = Vec::new();
        // Native: keep only tool uses that got a result; every one of them
        // is answered, in order.
        if self.config.tool_protocol == ToolProtocol::Native {
            assistant.retain(|b| match b {
                ContentBlock::ToolUse { id, .. } => runs.iter().any(|(c, _)| &c.id == id),
                _ => true,
            });
        }
        for (call, run) in runs {
            results.push(self.result_block(&call.id, &call.name, run.content(), run.is_error()));
            results.extend(run.images().iter().cloned());
        }
        if presented.interrupted {
            assistant.push(ContentBlock::text(INTERRUPTED_BY_FEEDBACK));
        } else if aborted {
            assistant.push(ContentBlock::text(INTERRUPTED_BY_ABORT));
        }
        let broken = match &end {
            Some(Err(e)) if !aborted && !presented.interrupted => Some(e.message.clone()),
            _ => None,
        };
        if let Some(e) = &broken {
            // A reply that broke off (past the reply cap, say) must not
            // come back as an ever larger request: its text is kept in
            // part.
            cap_broken_text(&mut assistant);
            assistant.push(ContentBlock::text(format!("[Response interrupted: {e}]")));
        }
        let is_empty = !assistant.iter().any(|b| match b {
            ContentBlock::Text { text } => !text.trim().is_empty(),
            ContentBlock::ToolUse { .. } => true,
            _ => false,
        }) && runs.is_empty();

        if let Some(StopReason::Refusal { explanation, .. }) = &stop
            && !aborted
            && runs.is_empty()
        {
            // A refusal is final: the same request would be refused again.
            if is_empty {
                let mut st = self.lock();
                st.unpush_user_content();
            }
            let why = explanation
                .clone()
                .unwrap_or_else(|| "the provider gave no explanation".to_string());
            return RoundOutcome::Refused(why);
        }
        if is_empty && !aborted {
            let mut st = self.lock();
            st.unpush_user_content();
            st.turns -= 1;
            if let Some(e) = broken {
                return RoundOutcome::ApiFailed(e);
            }
            return RoundOutcome::Empty;
        }
        let reply_text = strip_thinking_leftovers(
            &assistant
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        );
        {
            let mut st = self.lock();
            let reply = Message {
                role: Role::Assistant,
                content: assistant,
            };
            // The round's user content and the reply that answered it go to
            // the session file together (a request that failed as a whole
            // left no trace), unless the user content went ahead of a tool.
            if let Some(content) = st.round_user.take() {
                self.config.recorder.record(SessionRecord::Message {
                    message: Message {
                        role: Role::User,
                        content,
                    },
                });
            }
            self.config.recorder.record(SessionRecord::Message {
                message: reply.clone(),
            });
            st.history.push(reply);
            let made_mistake = runs.iter().any(|(_, r)| r.is_mistake());
            if made_mistake {
                st.consecutive_mistakes +=
                    runs.iter().filter(|(_, r)| r.is_mistake()).count() as u32;
            } else if runs.iter().any(|(_, r)| !r.is_error()) {
                st.consecutive_mistakes = 0;
            }
            // A reply cut off by a broken stream is answered with "go on",
            // which a stream that keeps breaking would repeat forever: each
            // one counts toward the mistake limit.
            if broken.is_some() {
                st.consecutive_mistakes += 1;
            }
            if std::mem::take(&mut st.force_mistake_limit) {
                st.consecutive_mistakes = st.consecutive_mistakes.max(self.config.max_mistakes);
            }
        }
        if aborted {
            if !results.is_empty() {
                let message = Message {
                    role: Role::User,
                    content: results,
                };
                self.lock().history.push(message.clone());
                self.config
                    .recorder
                    .record(SessionRecord::Message { message });
            }
            self.config.recorder.sync();
            return RoundOutcome::Aborted;
        }
        // Each result was made durable as its tool returned (see
        // `write_ahead`); the reply is, before the next request.
        self.config.recorder.sync();
        if let Some((call, run)) = runs.iter().find(|(_, r)| r.completion().is_some()) {
            // Results of calls made beside AttemptCompletion go back with
            // its own result, so every call stays answered.
            let other_results = runs
                .iter()
                .filter(|(c, _)| c.id != call.id)
                .map(|(c, r)| self.result_block(&c.id, &c.name, r.content(), r.is_error()))
                .collect();
            return RoundOutcome::Completed {
                result: run.completion().unwrap_or_default().to_string(),
                tool_use_id: call.id.clone(),
                other_results,
            };
        }
        if let Some(e) = broken {
            if results.is_empty() {
                results.push(ContentBlock::text(format!(
                    "Your previous reply was cut off ({e}). Continue where you stopped."
                )));
            }
            return RoundOutcome::Continue(results);
        }
        if stop == Some(StopReason::MaxTokens) {
            // A call the output limit cut off was not run (its result says
            // so); tell the model why and how to go on.
            results.push(ContentBlock::text(MAX_TOKENS_NOTE));
            return RoundOutcome::Continue(results);
        }
        if runs.is_empty() {
            return RoundOutcome::NoToolUsed(reply_text.trim().to_string());
        }
        RoundOutcome::Continue(results)
    }

    /// Tells the front end and the session file what a request used.
    fn report_usage(&self, turn: u32, usage: Usage, estimated: bool) {
        let cost_usd = self.config.pricing.as_ref().map(|p| p(&usage));
        let context_tokens = usage
            .input_tokens
            .saturating_add(usage.cache_read_input_tokens)
            .saturating_add(usage.cache_creation_input_tokens)
            .saturating_add(usage.output_tokens);
        {
            let mut st = self.lock();
            st.context_tokens = context_tokens;
            if let Some(c) = cost_usd {
                *st.cost_usd.get_or_insert(0.0) += c;
            }
        }
        self.config.budget.charge(cost_usd, &usage);
        self.config.recorder.record(SessionRecord::Usage {
            turn,
            usage,
            cost_usd,
        });
        self.emitter.emit(TaskEvent::Usage(UsageReport {
            turn,
            usage,
            context_tokens,
            context_window: self.config.context_window,
            cost_usd,
            estimated,
        }));
    }

    /// The inner loop: walks the reply's blocks as they complete.
    async fn present(
        &self,
        mut version: watch::Receiver<u64>,
        stream_cancel: &CancellationToken,
    ) -> Presented {
        let mut out = Presented::default();
        let mut next = 0usize;
        // The partial message being streamed: (message id, bytes sent).
        let mut streaming: Option<(u64, usize)> = None;
        let mut completed = false;
        loop {
            if self.cancel.is_cancelled() {
                return out;
            }
            let step = {
                let st = self.lock();
                let done = st.stream_end.is_some();
                let assembler = st.assembler.as_ref();
                match assembler.and_then(|a| a.blocks().get(next)) {
                    None => {
                        if done {
                            Step::Done
                        } else {
                            Step::Wait
                        }
                    }
                    Some(b) => match (&b.content, b.partial) {
                        (BlockContent::Text(t) | BlockContent::Reasoning(t), true) => {
                            let sent = streaming.map(|(_, n)| n).unwrap_or(0);
                            let reasoning = matches!(b.content, BlockContent::Reasoning(_));
                            Step::Partial {
                                reasoning,
                                delta: t[sent..].to_string(),
                            }
                        }
                        (BlockContent::Text(t), false) => Step::Complete(SayKind::Text, t.clone()),
                        (BlockContent::Reasoning(t), false) => {
                            Step::Complete(SayKind::Reasoning, t.clone())
                        }
                        (BlockContent::ToolUse(call), true) => {
                            match assembler.and_then(|a| a.streaming_arguments(next)) {
                                Some(text) if !out.interrupted && !completed => {
                                    let sent = streaming.map(|(_, n)| n).unwrap_or(0);
                                    Step::CallPartial {
                                        name: call.name.clone(),
                                        delta: text.get(sent..).unwrap_or_default().to_string(),
                                    }
                                }
                                _ if done => Step::Done,
                                _ => Step::Wait,
                            }
                        }
                        (BlockContent::ToolUse(call), false) => Step::Tool(call.clone()),
                    },
                }
            };
            match step {
                Step::Done => return out,
                Step::Wait => {
                    tokio::select! {
                        r = version.changed() => {
                            if r.is_err() {
                                // The reader is gone; its end is recorded.
                                let done = self.lock().stream_end.is_some();
                                if !done {
                                    return out;
                                }
                            }
                        }
                        _ = self.cancel.cancelled() => return out,
                    }
                }
                Step::Partial { reasoning, delta } => {
                    if !delta.is_empty() && !out.interrupted && !completed {
                        let kind = if reasoning {
                            SayKind::Reasoning
                        } else {
                            SayKind::Text
                        };
                        match &mut streaming {
                            None => {
                                let id = self.emitter.next();
                                self.emitter.emit(TaskEvent::Say {
                                    id,
                                    kind,
                                    text: delta.clone(),
                                    partial: true,
                                    payload: None,
                                });
                                streaming = Some((id, delta.len()));
                            }
                            Some((id, sent)) => {
                                self.emitter.emit(TaskEvent::Delta {
                                    id: *id,
                                    text: delta.clone(),
                                });
                                *sent += delta.len();
                            }
                        }
                    } else if let Some((_, sent)) = &mut streaming {
                        *sent += delta.len();
                    }
                    tokio::select! {
                        _ = version.changed() => {}
                        _ = self.cancel.cancelled() => return out,
                    }
                }
                Step::CallPartial { name, delta } => {
                    self.stream_call_arguments(&mut streaming, &name, delta);
                    tokio::select! {
                        _ = version.changed() => {}
                        _ = self.cancel.cancelled() => return out,
                    }
                }
                Step::Complete(kind, text) => {
                    next += 1;
                    let id = streaming.take().map(|(id, _)| id);
                    if out.interrupted || completed {
                        continue;
                    }
                    let text = if kind == SayKind::Text {
                        strip_thinking_leftovers(&text)
                    } else {
                        text
                    };
                    if text.trim().is_empty() && id.is_none() {
                        continue;
                    }
                    let id = id.unwrap_or_else(|| self.emitter.next());
                    self.emitter.emit(TaskEvent::Say {
                        id,
                        kind,
                        text,
                        partial: false,
                        payload: None,
                    });
                }
                Step::Tool(call) => {
                    next += 1;
                    // The partial ask of the call's arguments, if any: the
                    // call's announcement replaces it.
                    let announce = streaming.take().map(|(id, _)| id);
                    let run = if out.interrupted {
                        skipped(
                            &call,
                            "the user rejected an earlier tool call in this reply",
                        )
                    } else if completed {
                        skipped(
                            &call,
                            "the task was completed by an earlier AttemptCompletion call",
                        )
                    } else {
                        self.write_ahead(&call, &out.runs);
                        self.run_tool(&call, announce).await
                    };
                    self.config
                        .recorder
                        .record_synced(SessionRecord::ToolResult {
                            block: self.result_block(
                                &call.id,
                                &call.name,
                                run.content(),
                                run.is_error(),
                            ),
                            tool_use_id: call.id.clone(),
                        });
                    if self.cancel.is_cancelled() {
                        out.runs.push((call, run));
                        return out;
                    }
                    if run.is_rejected() {
                        out.interrupted = true;
                        stream_cancel.cancel();
                    }
                    if run.completion().is_some() {
                        completed = true;
                    }
                    out.runs.push((call, run));
                }
            }
        }
    }

    /// Makes the reply so far durable before `call` runs: this round's user
    /// content (the first time) and the reply's text and calls up to
    /// `call` (a `partial_reply`). A kill -9 while the tool runs leaves the
    /// call in the file, so a resume answers it as interrupted instead of
    /// asking the model again (which may run it twice).
    fn write_ahead(&self, call: &ToolCall, earlier: &[(ToolCall, ToolRun)]) {
        if !self.config.recorder.is_enabled() {
            return;
        }
        let (user, mut content) = {
            let mut st = self.lock();
            let content = st
                .assembler
                .as_ref()
                .map(|a| a.history_content())
                .unwrap_or_default();
            (st.round_user.take(), content)
        };
        if self.config.tool_protocol == ToolProtocol::Native {
            content.retain(|b| match b {
                ContentBlock::ToolUse { id, .. } => {
                    id == &call.id || earlier.iter().any(|(c, _)| &c.id == id)
                }
                _ => true,
            });
        }
        if let Some(content) = user {
            self.config.recorder.record(SessionRecord::Message {
                message: Message {
                    role: Role::User,
                    content,
                },
            });
        }
        self.config
            .recorder
            .record_synced(SessionRecord::PartialReply {
                message: Message {
                    role: Role::Assistant,
                    content,
                },
            });
    }

    /// Streams a tool call's arguments as they arrive: a partial `ask`
    /// (kind `tool`) first, then [`TaskEvent::Delta`]s with the new text of
    /// the rendering. The call's `tool` say, with the same id, ends it.
    fn stream_call_arguments(
        &self,
        streaming: &mut Option<(u64, usize)>,
        name: &str,
        delta: String,
    ) {
        match streaming {
            None => {
                let id = self.emitter.next();
                *streaming = Some((id, delta.len()));
                self.emitter.emit(TaskEvent::Ask {
                    id,
                    kind: AskKind::Tool,
                    text: delta,
                    partial: true,
                    payload: Some(AskPayload::ToolApproval {
                        tool: name.to_string(),
                        input: Value::Object(Default::default()),
                        preview: None,
                        always: Vec::new(),
                    }),
                });
            }
            Some((id, sent)) if !delta.is_empty() => {
                *sent += delta.len();
                self.emitter.emit(TaskEvent::Delta {
                    id: *id,
                    text: delta,
                });
            }
            Some(_) => {}
        }
    }

    /// Loop detection (as Cline has): the same call with the same input and
    /// the same result three times in a row gets a warning in its result;
    /// five times reaches the mistake limit. Polling `TaskOutput`, and
    /// calls whose results differ, never count.
    fn detect_loop(&self, call: &ToolCall, run: &mut ToolRun) {
        if run.ran().is_some_and(|r| r.polls) {
            return;
        }
        let key = match &call.input {
            Ok(input) => format!("{}\u{0}{input}", call.name),
            Err(_) => return,
        };
        let mut st = self.lock();
        let repeats = match &mut st.last_call {
            Some((k, out, n)) if *k == key && out == run.content() => {
                *n += 1;
                *n
            }
            _ => {
                st.last_call = Some((key, run.content().to_string(), 1));
                1
            }
        };
        if repeats >= LOOP_LIMIT {
            st.force_mistake_limit = true;
            run.content_mut().push_str(&format!(
                "\n\n[kaji: this exact call has now returned the same result {repeats} times in a row; the task counts this as reaching the mistake limit.]"
            ));
        } else if repeats >= LOOP_WARNING {
            run.content_mut().push_str(&format!(
                "\n\n[kaji: this exact call has returned the same result {repeats} times in a row. Repeating it will not change the result: try something else.]"
            ));
        }
    }

    /// Runs one call; its `tool` say takes the id `announce` (the partial
    /// ask of its arguments) or a new one, so every call run takes one id.
    async fn run_tool(&self, call: &ToolCall, announce: Option<u64>) -> ToolRun {
        let announce_id = announce.unwrap_or_else(|| self.emitter.next());
        let input = call.input.clone().unwrap_or(Value::Null);
        let mut ctx = self.tool_context();
        ctx.call_id = Some(call.id.clone());
        let (view, preview) = self.executor.presentation(&call.name, &input, &ctx).unzip();
        self.emitter.emit(TaskEvent::ToolUse {
            id: call.id.clone(),
            name: call.name.clone(),
            input,
            view,
            preview: preview.flatten(),
        });
        let (mode, mode_before_plan) = {
            let st = self.lock();
            (st.mode, st.mode_before_plan)
        };
        let env = CallEnv {
            mode,
            mode_before_plan,
            ctx: &ctx,
            emitter: &self.emitter,
            task_id: &self.task_id,
            recorder: &self.config.recorder,
            transcript_path: self.config.transcript_path.as_deref(),
            announce_id,
        };
        let mut run = self.executor.execute(call, &env).await;
        self.detect_loop(call, &mut run);
        if let ToolRun::Ran(ran) = &run {
            self.apply(ran);
            if ran.changed_files && !self.cancel.is_cancelled() {
                self.checkpoint_after(call).await;
            }
        }
        self.emitter.emit(TaskEvent::ToolResult {
            id: call.id.clone(),
            name: call.name.clone(),
            is_error: run.is_error(),
            output: run.content().to_string(),
        });
        run
    }

    /// What a call that ran changes in the task: its mode, its working
    /// directory, the recorded todo, the checklist reminder.
    fn apply(&self, ran: &Ran) {
        let mut st = self.lock();
        match &ran.effect {
            Some(Effect::Mode(new_mode)) => {
                if *new_mode == PermissionMode::Plan {
                    st.mode_before_plan = st.mode;
                }
                st.mode = *new_mode;
                self.config.recorder.record(SessionRecord::Mode {
                    mode: new_mode.as_str().to_string(),
                });
            }
            Some(Effect::Cwd(cwd)) => {
                st.cwd = cwd.clone();
                self.config
                    .recorder
                    .record(SessionRecord::Cwd { cwd: cwd.clone() });
                // Entering or leaving a worktree: checkpoints follow the
                // working directory.
                if self.config.checkpoints.is_some() {
                    st.checkpoints = CheckpointStore::open(&self.config.kaji_home, cwd).ok();
                }
            }
            Some(Effect::Complete(_)) | None => {}
        }
        if let Some(StateUpdate::Todo { items }) = &ran.update {
            self.config.recorder.record(SessionRecord::Todo {
                items: items.clone(),
            });
        }
        // Touching the checklist or the task list resets the reminder.
        if ran.update.is_some() {
            st.rounds_since_todo = 0;
        }
    }
}

#[derive(Debug, Default)]
struct Presented {
    runs: Vec<(ToolCall, ToolRun)>,
    interrupted: bool,
}

enum Step {
    Done,
    Wait,
    Partial {
        reasoning: bool,
        delta: String,
    },
    /// A tool call still streaming: the new text of its arguments.
    CallPartial {
        name: String,
        delta: String,
    },
    Complete(SayKind, String),
    Tool(ToolCall),
}

fn skipped(call: &ToolCall, why: &str) -> ToolRun {
    ToolRun::failed(format!("{} was not run: {why}.", call.name), false)
}

/// Removes stray `<thinking>`/`</thinking>` tags left in text blocks.
fn strip_thinking_leftovers(text: &str) -> String {
    if text.contains("thinking>") {
        text.replace("<thinking>", "").replace("</thinking>", "")
    } else {
        text.to_string()
    }
}

fn describe_llm_error(e: &LlmError) -> String {
    e.to_string()
}

/// The label of a task's first checkpoint: `task start: PROMPT` (its
/// first line, cut to 60 characters), so a listing names the prompt.
fn start_label(prompt: &str) -> String {
    let first = prompt.trim().lines().next().unwrap_or("").trim();
    if first.is_empty() {
        return "task start".into();
    }
    let mut cut: String = first.chars().take(60).collect();
    if first.chars().count() > 60 {
        cut.push('…');
    }
    format!("task start: {cut}")
}

/// The most text of a broken-off reply the history keeps.
const BROKEN_TEXT_KEPT: usize = 20_000;

/// Cuts the text blocks of a broken-off reply to [`BROKEN_TEXT_KEPT`]
/// characters in all, with a note.
fn cap_broken_text(content: &mut [ContentBlock]) {
    let mut budget = BROKEN_TEXT_KEPT;
    for block in content.iter_mut() {
        if let ContentBlock::Text { text } = block {
            let chars = text.chars().count();
            if chars <= budget {
                budget -= chars;
                continue;
            }
            let cut = text
                .char_indices()
                .nth(budget)
                .map_or(text.len(), |(i, _)| i);
            text.truncate(cut);
            text.push_str(&format!(
                "\n[… {} more characters of this reply were not kept]",
                chars - budget
            ));
            budget = 0;
        }
    }
}

/// Identical calls with identical results in a row before a warning, and
/// before the mistake limit.
const LOOP_WARNING: u32 = 3;
const LOOP_LIMIT: u32 = 5;

const MAX_TOKENS_NOTE: &str = "[Your previous reply hit the output token limit (max_tokens) before it ended. A tool call it cut off was not run. Continue from where you stopped, in smaller steps: write a large file in several parts (Write the first part, then Edit to append the rest).]";

const NO_TOOL_NUDGE: &str = "[ERROR] You did not use a tool in your previous reply. Every reply must use a tool.\n\n- When the task is done, call AttemptCompletion with a summary of the result.\n- When you need information from the user, call AskUser with your question.\n- Otherwise, take the next step with the appropriate tool.";

/// Drops the oldest rounds of `history` until it is under `limit`
/// tokens; fails clearly when even the last round is too large.
fn shrink_by_dropping(
    mut history: Vec<Message>,
    limit: u64,
) -> Result<(Vec<Message>, usize), String> {
    let mut dropped = 0;
    while compaction::estimate_tokens(&history) >= limit {
        let rounds = history.iter().filter(|m| m.role == Role::Assistant).count();
        let n = compaction::drop_oldest_rounds(&mut history, rounds.div_ceil(4).max(1));
        if n == 0 {
            return Err(format!(
                "compaction failed: neither a summary nor dropping old rounds brings the context under about {limit} tokens; start a new conversation (its history is kept)"
            ));
        }
        dropped += n;
    }
    // The model is told, where it reads next: the last user message.
    if dropped > 0
        && let Some(last) = history.last_mut().filter(|m| m.role == Role::User)
    {
        last.content.push(ContentBlock::text(format!(
            "[EARLIER ROUNDS DROPPED] The {dropped} oldest rounds of this conversation were dropped to keep it within the context window."
        )));
    }
    Ok((history, dropped))
}

/// A new Task id.
pub fn new_task_id() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "t{:x}{:04x}",
        (nanos as u64) ^ (std::process::id() as u64) << 40,
        n & 0xffff
    )
}

/// Bytes of what a request sends (system prompt, messages, tools): the
/// basis of a token estimate when the server reports no usage.
fn request_size(request: &ModelRequest) -> usize {
    let messages = serde_json::to_vec(&request.messages).map_or(0, |v| v.len());
    let tools = serde_json::to_vec(&request.tools).map_or(0, |v| v.len());
    request.system.len() + messages + tools
}

/// About four bytes a token: the estimate for servers that report no usage
/// (llama.cpp's and others that ignore `stream_options.include_usage`).
fn estimate_usage(request_bytes: usize, reply: &ReplyAssembler, broken: bool) -> Usage {
    // A reply that broke off (past the reply cap, say) is kept in part
    // only: the estimate counts what the next request will carry.
    let mut content = reply.history_content();
    if broken {
        cap_broken_text(&mut content);
    }
    let reply_bytes = serde_json::to_vec(&content).map_or(0, |v| v.len());
    Usage {
        input_tokens: (request_bytes as u64).div_ceil(4),
        output_tokens: (reply_bytes as u64).div_ceil(4),
        ..Usage::default()
    }
}

/// The payload fields of every hook a Task runs: its id, the session's id
/// and file, the starting directory and mode (callers put in the current
/// ones).
fn hook_base(config: &TaskConfig, task_id: &str) -> HookPayload {
    HookPayload::task(task_id, config.cwd.clone(), config.permission_mode)
        .with_session(config.session_id.clone(), config.transcript_path.clone())
}
