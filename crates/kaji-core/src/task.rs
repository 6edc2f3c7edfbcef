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
    AskKind, AskResponse, ContentBlock, Message, Role, SayKind, TaskEvent, TaskStatus, Usage,
};
use kaji_tools::ToolContext;
use kaji_tools::todo::TodoState;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::checkpoints::CheckpointStore;
use crate::executor::{CallEnv, CheckpointGate, ToolExecutor, ToolRun, report_hook_warnings};
use crate::frontend::{AskRequest, TaskFrontend};
use crate::hooks::{HookEvent, HookPayload, HookRunner};
use crate::parser::{BlockContent, ReplyAssembler, ToolCall, ToolProtocol, XmlToolGrammar};
use crate::permissions::PermissionMode;
use crate::prompt::{PromptInputs, system_prompt};

/// How long the first request waits for MCP servers still connecting.
pub const MCP_CONNECT_WAIT: Duration = Duration::from_secs(10);

/// The note recorded in the history when the user rejects a tool.
pub const INTERRUPTED_BY_FEEDBACK: &str = "[Response interrupted by user feedback]";
/// The note recorded in the history when the task is aborted mid-reply.
pub const INTERRUPTED_BY_ABORT: &str = "[Response interrupted by user]";

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
    /// The shared task list.
    pub task_list: Option<kaji_tasks::TaskListStore>,
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
    /// The session's todo checklist (the state behind TodoWrite).
    pub todo: Option<TodoState>,
    /// Turns without touching the checklist or the task list, while items
    /// are open, before a reminder goes into the next request (default 10).
    pub todo_reminder_turns: u32,
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
            todo: None,
            todo_reminder_turns: 10,
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

/// Sends a task's events and asks to its front end, numbering messages.
#[derive(Clone)]
pub(crate) struct Emitter {
    frontend: Arc<dyn TaskFrontend>,
    next_id: Arc<AtomicU64>,
}

impl Emitter {
    fn next(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub(crate) fn say(&self, kind: SayKind, text: impl Into<String>, data: Option<Value>) -> u64 {
        let id = self.next();
        self.frontend.emit(TaskEvent::Say {
            id,
            kind,
            text: text.into(),
            partial: false,
            data,
        });
        id
    }

    fn emit(&self, event: TaskEvent) {
        self.frontend.emit(event);
    }

    pub(crate) async fn ask(
        &self,
        kind: AskKind,
        text: impl Into<String>,
        data: Option<Value>,
    ) -> AskResponse {
        let id = self.next();
        let text = text.into();
        self.frontend.emit(TaskEvent::Ask {
            id,
            kind,
            text: text.clone(),
            partial: false,
            data: data.clone(),
        });
        self.frontend
            .answer(&AskRequest {
                id,
                kind,
                text,
                data,
            })
            .await
    }
}

/// The state behind the task's one lock.
#[derive(Debug, Default)]
struct TaskState {
    history: Vec<Message>,
    /// The reply being streamed in the current round.
    assembler: Option<ReplyAssembler>,
    /// Set by the stream reader when the stream has ended.
    stream_end: Option<Result<(), String>>,
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

/// What one round came to.
enum RoundOutcome {
    /// Tools ran; their results are the next user content.
    Continue(Vec<ContentBlock>),
    /// The reply used no tool.
    NoToolUsed,
    /// The reply was empty.
    Empty,
    /// The model request failed.
    ApiFailed(String),
    /// AttemptCompletion was called.
    Completed {
        result: String,
        tool_use_id: String,
        other_results: Vec<ContentBlock>,
    },
    /// The task was aborted.
    Aborted,
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
            mode_before_plan: config.permission_mode,
            cwd: config
                .start_dir
                .clone()
                .unwrap_or_else(|| config.cwd.clone()),
            checkpoints: config.checkpoints.clone(),
            history: config.history.clone(),
            ..TaskState::default()
        };
        let mut executor = executor;
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
                .is_some_and(|h| h.has_hooks(HookEvent::TaskCancel)),
            ..CancelHookGate::default()
        });
        Self {
            cancel_hook,
            task_id: new_task_id(),
            config,
            executor: Arc::new(executor),
            emitter: Emitter {
                frontend,
                next_id: Arc::new(AtomicU64::new(0)),
            },
            state: Arc::new(Mutex::new(state)),
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
        let started = Instant::now();
        self.emitter
            .say(SayKind::UserFeedback, prompt.clone(), None);
        let mut user_content = vec![ContentBlock::text(prompt.clone())];
        let mut empty_retries = 0u32;
        self.start_initial_checkpoint();
        let stopped_by_hook = self.start_hooks(&prompt, &mut user_content).await;
        let (status, result) = if let Some(stop) = stopped_by_hook {
            stop
        } else {
            loop {
                if self.cancel.is_cancelled() {
                    break (TaskStatus::Aborted, None);
                }
                // The mistake limit, checked before each request as in the seed.
                let mistakes = self.lock().consecutive_mistakes;
                if mistakes >= self.config.max_mistakes {
                    let msg = format!(
                        "The model made {mistakes} consecutive mistakes (the limit is {}).",
                        self.config.max_mistakes
                    );
                    if self.lock().mode == PermissionMode::Yolo {
                        self.emitter.say(SayKind::Error, msg.clone(), None);
                        break (TaskStatus::MistakeLimit, Some(msg));
                    }
                    match self
                        .ask_or_abort(
                            AskKind::MistakeLimitReached,
                            format!("{msg} Continue?"),
                            None,
                        )
                        .await
                    {
                        Some(AskResponse::Approve | AskResponse::ApproveAlways) => {
                            self.lock().consecutive_mistakes = 0;
                        }
                        Some(AskResponse::Reply { text }) => {
                            self.lock().consecutive_mistakes = 0;
                            user_content
                                .push(ContentBlock::text(format!("The user says:\n{text}")));
                        }
                        Some(AskResponse::Deny { .. }) => {
                            break (TaskStatus::MistakeLimit, Some(msg));
                        }
                        None => break (TaskStatus::Aborted, None),
                    }
                }
                let turns = self.lock().turns;
                if let Some(max) = self.config.max_turns
                    && turns >= max
                {
                    let msg = format!("The turn limit of {max} was reached.");
                    self.emitter.say(SayKind::Error, msg.clone(), None);
                    break (TaskStatus::MaxTurns, Some(msg));
                }

                // An open checklist the model has not touched for a while.
                if let Some(reminder) = self.todo_reminder() {
                    user_content.push(ContentBlock::text(reminder));
                }
                // Background tasks that ended since the last request: the
                // model learns of them without polling.
                if let Some(runtime) = &self.config.runtime {
                    for notice in runtime.take_finished_notices() {
                        user_content.push(ContentBlock::text(notice.to_prompt_text()));
                    }
                }

                match self.round(user_content.clone()).await {
                    RoundOutcome::Continue(next) => {
                        empty_retries = 0;
                        user_content = next;
                    }
                    RoundOutcome::NoToolUsed => {
                        empty_retries = 0;
                        self.lock().consecutive_mistakes += 1;
                        user_content = vec![ContentBlock::text(NO_TOOL_NUDGE)];
                    }
                    RoundOutcome::Empty => {
                        if empty_retries < self.config.empty_reply_retries {
                            empty_retries += 1;
                            let delay =
                                self.config.empty_reply_backoff * 2u32.pow(empty_retries - 1);
                            self.emitter.say(
                            SayKind::Error,
                            format!(
                                "The model sent an empty reply (no text, no tool call); retrying ({empty_retries}/{}) in {} ms.",
                                self.config.empty_reply_retries,
                                delay.as_millis()
                            ),
                            None,
                        );
                            if !self.sleep_or_abort(delay).await {
                                break (TaskStatus::Aborted, None);
                            }
                            continue;
                        }
                        let msg = format!(
                            "The model sent an empty reply {} times in a row.",
                            empty_retries + 1
                        );
                        match self
                            .ask_or_abort(AskKind::ApiReqFailed, format!("{msg} Retry?"), None)
                            .await
                        {
                            Some(
                                AskResponse::Approve
                                | AskResponse::ApproveAlways
                                | AskResponse::Reply { .. },
                            ) => {
                                empty_retries = 0;
                            }
                            Some(AskResponse::Deny { .. }) => {
                                break (TaskStatus::Failed, Some(msg));
                            }
                            None => break (TaskStatus::Aborted, None),
                        }
                    }
                    RoundOutcome::ApiFailed(err) => {
                        self.emitter.say(SayKind::Error, err.clone(), None);
                        match self
                            .ask_or_abort(
                                AskKind::ApiReqFailed,
                                format!("The model request failed: {err}\nRetry?"),
                                None,
                            )
                            .await
                        {
                            Some(
                                AskResponse::Approve
                                | AskResponse::ApproveAlways
                                | AskResponse::Reply { .. },
                            ) => {}
                            Some(AskResponse::Deny { .. }) => {
                                break (TaskStatus::Failed, Some(err));
                            }
                            None => break (TaskStatus::Aborted, None),
                        }
                    }
                    RoundOutcome::Completed {
                        result,
                        tool_use_id,
                        mut other_results,
                    } => {
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
                        other_results.push(self.result_block(
                            &tool_use_id,
                            "AttemptCompletion",
                            &reply,
                            false,
                        ));
                        match end {
                            None => user_content = other_results,
                            Some(status) => {
                                // Keep the history resumable: every call answered.
                                self.lock().history.push(Message {
                                    role: Role::User,
                                    content: other_results,
                                });
                                let result = (status == TaskStatus::Completed).then_some(result);
                                break (status, result);
                            }
                        }
                    }
                    RoundOutcome::Aborted => break (TaskStatus::Aborted, None),
                }
            }
        };
        if status == TaskStatus::Aborted {
            // Everything the task started in the background dies with it
            // (running hooks were killed by the abort flag), then the
            // TaskCancel hook runs, if it was due when the abort came.
            if let Some(runtime) = &self.config.runtime {
                runtime.stop_all().await;
            }
            self.emitter
                .say(SayKind::Error, "The task was aborted.", None);
            if self.cancel_hook.due.load(Ordering::SeqCst) {
                self.run_task_hook(HookEvent::TaskCancel).await;
            }
        } else if status == TaskStatus::Completed {
            self.run_task_hook(HookEvent::TaskComplete).await;
        }
        let state = std::mem::take(&mut *self.lock());
        let outcome = TaskOutcome {
            status,
            turns: state.turns,
            usage: state.usage,
            result,
            history: state.history,
            duration: started.elapsed(),
        };
        self.emitter.emit(TaskEvent::Finished {
            status,
            turns: outcome.turns,
            usage: outcome.usage,
            result: outcome.result.clone(),
        });
        outcome
    }

    /// Asks, unless the task is aborted first (`None`).
    async fn ask_or_abort(
        &self,
        kind: AskKind,
        text: String,
        data: Option<Value>,
    ) -> Option<AskResponse> {
        tokio::select! {
            r = self.emitter.ask(kind, text, data) => Some(r),
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
        for (event, what) in [
            (HookEvent::TaskStart, "the TaskStart hook stopped the task"),
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
        tokio::spawn(async move {
            if let Err(e) = store.commit("task start").await {
                emitter.say(
                    SayKind::Error,
                    format!("The initial checkpoint failed; changes of this task cannot be undone with `kaji checkpoints`: {e}"),
                    None,
                );
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
                self.emitter.say(
                    SayKind::Info,
                    format!("checkpoint {} ({label})", cp.id.short()),
                    Some(json!({"checkpoint": cp.id.as_str(), "label": label})),
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
        HookPayload::task(self.task_id.clone(), st.cwd.clone(), st.mode)
    }

    /// Runs a hook that can block nothing (TaskComplete, TaskCancel).
    async fn run_task_hook(&self, event: HookEvent) {
        let Some(hooks) = self.config.hooks.as_ref() else {
            return;
        };
        if !hooks.has_hooks(event) {
            return;
        }
        // A fresh token: the task's own may already be cancelled.
        let outcome = hooks
            .run(event, self.hook_payload(), &CancellationToken::new())
            .await;
        report_hook_warnings(&self.emitter, &outcome.warnings);
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
        ToolContext {
            cwd: self.lock().cwd.clone(),
            project_dir: self.config.cwd.clone(),
            cancel: self.cancel.child_token(),
            session_id: self.config.session_id.clone(),
            kaji_home: self.config.kaji_home.clone(),
            task_list: self.config.task_list.clone(),
            runtime: self.config.runtime.clone(),
            sandbox: None,
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
                still = mcp.wait_ready(MCP_CONNECT_WAIT) => {
                    if !still.is_empty() {
                        self.emitter.say(
                            SayKind::Info,
                            format!("MCP servers still connecting, going on without them for now: {}", still.join(", ")),
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
        self.emitter.say(
            SayKind::ApiReqStarted,
            format!("Turn {turn}: request to {}", self.config.model),
            Some(json!({"turn": turn, "model": self.config.model})),
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
                        Some(Err(e)) => break Err(describe_llm_error(&e)),
                        Some(Ok(kaji_protocol::StreamEvent::Retrying {
                            attempt,
                            max_attempts,
                            delay_ms,
                            reason,
                        })) => {
                            emitter.say(
                                SayKind::ApiReqRetried,
                                format!("Retrying (attempt {attempt}/{max_attempts}) in {delay_ms} ms: {reason}"),
                                Some(json!({"attempt": attempt, "max_attempts": max_attempts, "delay_ms": delay_ms})),
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
            let usage = a.as_ref().map(|a| a.usage()).unwrap_or_default();
            st.usage.add(&usage);
            (a, st.stream_end.take(), st.stream_had_content)
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
            return RoundOutcome::ApiFailed(err.clone());
        }

        let mut assistant = assembler.history_content();
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
            results.push(self.result_block(&call.id, &call.name, &run.content, run.is_error));
        }
        if presented.interrupted {
            assistant.push(ContentBlock::text(INTERRUPTED_BY_FEEDBACK));
        } else if aborted {
            assistant.push(ContentBlock::text(INTERRUPTED_BY_ABORT));
        }
        let broken = match &end {
            Some(Err(e)) if !aborted && !presented.interrupted => Some(e.clone()),
            _ => None,
        };
        if let Some(e) = &broken {
            assistant.push(ContentBlock::text(format!("[Response interrupted: {e}]")));
        }
        let is_empty = !assistant.iter().any(|b| match b {
            ContentBlock::Text { text } => !text.trim().is_empty(),
            ContentBlock::ToolUse { .. } => true,
            _ => false,
        }) && runs.is_empty();

        if is_empty && !aborted {
            let mut st = self.lock();
            st.unpush_user_content();
            st.turns -= 1;
            if let Some(e) = broken {
                return RoundOutcome::ApiFailed(e);
            }
            return RoundOutcome::Empty;
        }
        {
            let mut st = self.lock();
            st.history.push(Message {
                role: Role::Assistant,
                content: assistant,
            });
            let made_mistake = runs.iter().any(|(_, r)| r.mistake);
            if made_mistake {
                st.consecutive_mistakes += runs.iter().filter(|(_, r)| r.mistake).count() as u32;
            } else if runs.iter().any(|(_, r)| !r.is_error) {
                st.consecutive_mistakes = 0;
            }
        }
        if aborted {
            if !results.is_empty() {
                self.lock().history.push(Message {
                    role: Role::User,
                    content: results,
                });
            }
            return RoundOutcome::Aborted;
        }
        if let Some((call, run)) = runs.iter().find(|(_, r)| r.completion.is_some()) {
            // Results of calls made beside AttemptCompletion go back with
            // its own result, so every call stays answered.
            let other_results = runs
                .iter()
                .filter(|(c, _)| c.id != call.id)
                .map(|(c, r)| self.result_block(&c.id, &c.name, &r.content, r.is_error))
                .collect();
            return RoundOutcome::Completed {
                result: run.completion.clone().unwrap_or_default(),
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
        if runs.is_empty() {
            return RoundOutcome::NoToolUsed;
        }
        RoundOutcome::Continue(results)
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
                match st.assembler.as_ref().and_then(|a| a.blocks().get(next)) {
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
                        (BlockContent::ToolUse(_), true) => {
                            if done {
                                Step::Done
                            } else {
                                Step::Wait
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
                                    data: None,
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
                        data: None,
                    });
                }
                Step::Tool(call) => {
                    next += 1;
                    streaming = None;
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
                        self.run_tool(&call).await
                    };
                    if self.cancel.is_cancelled() {
                        out.runs.push((call, run));
                        return out;
                    }
                    if run.rejected {
                        out.interrupted = true;
                        stream_cancel.cancel();
                    }
                    if run.completion.is_some() {
                        completed = true;
                    }
                    out.runs.push((call, run));
                }
            }
        }
    }

    async fn run_tool(&self, call: &ToolCall) -> ToolRun {
        let input = call.input.clone().unwrap_or(Value::Null);
        self.emitter.emit(TaskEvent::ToolUse {
            id: call.id.clone(),
            name: call.name.clone(),
            input,
        });
        let (mode, mode_before_plan) = {
            let st = self.lock();
            (st.mode, st.mode_before_plan)
        };
        let ctx = self.tool_context();
        let env = CallEnv {
            mode,
            mode_before_plan,
            ctx: &ctx,
            emitter: &self.emitter,
            task_id: &self.task_id,
        };
        let run = self.executor.execute(call, &env).await;
        {
            let mut st = self.lock();
            if let Some(new_mode) = run.new_mode {
                if new_mode == PermissionMode::Plan {
                    st.mode_before_plan = st.mode;
                }
                st.mode = new_mode;
            }
            if let Some(cwd) = &run.new_cwd {
                st.cwd = cwd.clone();
                // Entering or leaving a worktree: checkpoints follow the
                // working directory.
                if self.config.checkpoints.is_some() {
                    st.checkpoints = CheckpointStore::open(&self.config.kaji_home, cwd).ok();
                }
            }
            if matches!(
                call.name.as_str(),
                "TodoWrite" | "TaskCreate" | "TaskUpdate"
            ) {
                st.rounds_since_todo = 0;
            }
        }
        if run.changed_files && !self.cancel.is_cancelled() {
            self.checkpoint_after(call).await;
        }
        self.emitter.emit(TaskEvent::ToolResult {
            id: call.id.clone(),
            name: call.name.clone(),
            is_error: run.is_error,
            output: run.content.clone(),
        });
        run
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
    Partial { reasoning: bool, delta: String },
    Complete(SayKind, String),
    Tool(ToolCall),
}

fn skipped(call: &ToolCall, why: &str) -> ToolRun {
    ToolRun {
        content: format!("{} was not run: {why}.", call.name),
        is_error: true,
        mistake: false,
        rejected: false,
        completion: None,
        changed_files: false,
        new_mode: None,
        new_cwd: None,
    }
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

const NO_TOOL_NUDGE: &str = "[ERROR] You did not use a tool in your previous reply. Every reply must use a tool.\n\n- When the task is done, call AttemptCompletion with a summary of the result.\n- When you need information from the user, call AskUser with your question.\n- Otherwise, take the next step with the appropriate tool.";

fn new_task_id() -> String {
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
