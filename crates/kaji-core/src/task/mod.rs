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
//!
//! Files follow the loops and their steps: the outer loop (`outer.rs`),
//! the round (`round.rs`), its stream reader (`stream.rs`), the presenter
//! (`present.rs`) and each tool call (`tool_call.rs`), the reply's
//! settlement (`settle.rs`), compaction driving (`compacting.rs`), start,
//! end and hooks (`lifecycle.rs`), checkpoints (`checkpointing.rs`) and the
//! write-ahead points (`persist.rs`); the lock's state in `state.rs`.

mod checkpointing;
mod compacting;
mod config;
mod lifecycle;
mod outer;
mod persist;
mod present;
mod round;
mod settle;
mod state;
mod stream;
mod tool_call;

pub use self::config::{Pricing, TaskConfig};
pub use crate::compaction::CompactionError;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kaji_protocol::{ContentBlock, Message, SayKind, TaskStatus, Usage};
use tokio_util::sync::CancellationToken;

use self::lifecycle::hook_base;
use self::state::TaskState;
use crate::emitter::Emitter;
use crate::executor::{CheckpointGate, ToolExecutor, ToolRun};
use crate::frontend::TaskFrontend;
use crate::hooks::{HookEvent, HookPayload};
use crate::parser::ToolCall;
use crate::permissions::PermissionMode;
use crate::storage::record::SessionRecord;
use crate::storage::recorder::now_millis;

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

/// A Task's final event ([`kaji_protocol::TaskEvent::Finished`]), held
/// back until the state it describes is stored: whoever runs the Task
/// keeps its outcome first (a session its history, mode and totals, a
/// sub-agent's caller its usage), then sends it, so a front end that
/// reacts to it sees the final state (and, for a session's prompt, a
/// session ready for the next one).
#[must_use = "the task's final event goes out only with `send`"]
pub struct FinalEvent {
    emitter: Emitter,
    event: kaji_protocol::TaskEvent,
}

impl std::fmt::Debug for FinalEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FinalEvent")
            .field("event", &self.event)
            .finish_non_exhaustive()
    }
}

impl FinalEvent {
    /// Sends the event to the Task's front end.
    pub fn send(self) {
        self.emitter.emit(self.event);
    }
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
            history: Arc::new(config.history.clone()),
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
        let (outcome, final_event) = self.run_held(prompt, attachments).await;
        final_event.send();
        outcome
    }

    /// As [`Task::run_with`], with the final event held back: the caller
    /// stores what the outcome changed, then sends it.
    pub async fn run_held(
        self,
        prompt: String,
        attachments: Vec<ContentBlock>,
    ) -> (TaskOutcome, FinalEvent) {
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
        user_content.push(ContentBlock::prompt(prompt.clone()));
        user_content.extend(attachments);
        self.start_initial_checkpoint();
        let stopped_by_hook = self.start_hooks(&prompt, &mut user_content).await;
        let (status, result) = match stopped_by_hook {
            Some(stop) => stop,
            None => self.outer_loop(user_content).await,
        };
        self.finish(status, result, started).await
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
        let history = self.lock().take_history();
        (run, history)
    }
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
