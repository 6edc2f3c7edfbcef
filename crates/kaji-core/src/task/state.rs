//! The state behind the Task's one lock, and the values the loops hand each
//! other (a round's outcome, the outer loop's next step). Never held across
//! an await: every section that touches it is short and synchronous.

use std::path::PathBuf;
use std::sync::Arc;

use kaji_llm::{LlmError, WireCache};
use kaji_protocol::{ContentBlock, Message, Role, TaskStatus, Usage};

use crate::checkpoints::CheckpointStore;
use crate::parser::ReplyAssembler;
use crate::permissions::PermissionMode;

/// The state behind the task's one lock.
#[derive(Debug, Default)]
pub(super) struct TaskState {
    /// The conversation: shared with the request in flight, never copied
    /// for one (a push copies it only while a request still holds it).
    pub(super) history: Arc<Vec<Message>>,
    /// The history's messages as the provider serialised them, reused by
    /// the next request: whatever changes a message other than by pushing
    /// a new one says so here.
    pub(super) wire: Arc<WireCache>,
    /// The reply being streamed in the current round.
    pub(super) assembler: Option<ReplyAssembler>,
    /// Set by the stream reader when the stream has ended.
    pub(super) stream_end: Option<Result<(), LlmError>>,
    /// Whether the current reply has produced any content event.
    pub(super) stream_had_content: bool,
    pub(super) consecutive_mistakes: u32,
    pub(super) turns: u32,
    pub(super) usage: Usage,
    pub(super) mode: PermissionMode,
    /// The mode to return to when a plan is approved.
    pub(super) mode_before_plan: PermissionMode,
    /// The working directory now (changes in worktrees).
    pub(super) cwd: PathBuf,
    /// Rounds since the model last touched the checklist or task list.
    pub(super) rounds_since_todo: u32,
    /// The checkpoints of the current working directory (a worktree has
    /// its own).
    pub(super) checkpoints: Option<CheckpointStore>,
    /// Where this round's user content went: `Some(n)` when it was
    /// appended to an existing user message that had `n` blocks.
    pub(super) pushed_onto: Option<usize>,
    /// Why the model stopped for good, when that is not the task's status
    /// alone (`refusal`).
    pub(super) stop_reason: Option<String>,
    /// The last tool call and its result, and how many times in a row the
    /// same call got the same result (loop detection).
    pub(super) last_call: Option<(String, String, u32)>,
    /// A loop was detected: the mistake limit is reached after this round.
    pub(super) force_mistake_limit: bool,
    /// The context the last round filled, in tokens.
    pub(super) context_tokens: u64,
    /// The prompt of this Task as the user typed it.
    pub(super) prompt: String,
    /// This Task compacted after an overflow already (one retry only).
    pub(super) compacted_for_overflow: bool,
    /// Cost so far, when the model's prices are known.
    pub(super) cost_usd: Option<f64>,
    /// This round's user content, until it is in the session file (it
    /// goes there with the reply, or ahead of the reply's first tool).
    pub(super) round_user: Option<Vec<ContentBlock>>,
}

impl TaskState {
    /// Adds a message at the end of the history.
    pub(super) fn push_message(&mut self, message: Message) {
        Arc::make_mut(&mut self.history).push(message);
    }

    /// Replaces the history (after a compaction).
    pub(super) fn set_history(&mut self, history: Vec<Message>) {
        self.wire.clear();
        self.history = Arc::new(history);
    }

    /// The history, handed out (a copy only if a request still holds it).
    pub(super) fn take_history(&mut self) -> Vec<Message> {
        Arc::unwrap_or_clone(std::mem::take(&mut self.history))
    }

    /// Adds this round's user content: a new user message, or more blocks
    /// of the last one when the history already ends with the user (a
    /// continued conversation whose last results were answered).
    pub(super) fn push_user_content(&mut self, content: Vec<ContentBlock>) {
        let history = Arc::make_mut(&mut self.history);
        let len = history.len();
        match history.last_mut() {
            Some(last) if last.role == Role::User => {
                self.wire.keep_first(len - 1);
                self.pushed_onto = Some(last.content.len());
                last.content.extend(content);
            }
            _ => {
                self.pushed_onto = None;
                history.push(Message {
                    role: Role::User,
                    content,
                });
            }
        }
    }

    /// Takes back what [`TaskState::push_user_content`] added (the request
    /// failed as a whole and is retried).
    pub(super) fn unpush_user_content(&mut self) {
        let history = Arc::make_mut(&mut self.history);
        self.wire.keep_first(history.len().saturating_sub(1));
        match self.pushed_onto.take() {
            Some(len) => {
                if let Some(last) = history.last_mut() {
                    last.content.truncate(len);
                }
            }
            None => {
                history.pop();
            }
        }
    }
}

/// What the outer loop does after a round.
pub(super) enum Next {
    /// Send this as the next user content.
    Content(Vec<ContentBlock>),
    /// Send the same user content again.
    Retry,
    /// End the task.
    End(TaskStatus, Option<String>),
}

/// What one round came to.
pub(super) enum RoundOutcome {
    /// Tools ran; their results are the next user content.
    Continue(Vec<ContentBlock>),
    /// The reply used no tool.
    NoToolUsed(String),
    /// The reply was empty.
    Empty,
    /// The model request failed.
    ApiFailed(RoundError),
    /// AttemptCompletion was called.
    Completed {
        result: String,
        tool_use_id: String,
        /// The tool that finished the task (its result block names it).
        tool: String,
        other_results: Vec<ContentBlock>,
    },
    /// The task was aborted.
    Aborted,
    /// A hook answered `"continue": false`, with its `stopReason`.
    HookStopped(String),
    /// The provider refused the request (with its explanation, when it
    /// gave one).
    Refused(Option<String>),
    /// The request did not fit the model's context window.
    Overflow(LlmError),
    /// The server rejected the provider's search tool the request offered:
    /// it is withdrawn for the session and the round is sent again.
    SearchRejected,
}

/// Why a round's request failed (the outer loop asks whether to retry).
#[derive(Debug, thiserror::Error)]
pub(super) enum RoundError {
    /// Nothing of the reply arrived: the request failed as a whole.
    #[error("{0}")]
    Request(LlmError),
    /// The reply broke off before it held anything usable.
    #[error("{0}")]
    Broken(LlmError),
    /// The reply being assembled was lost (never expected).
    #[error("internal error: the reply was lost")]
    ReplyLost,
}

impl RoundError {
    /// Whether asking again may succeed ([`LlmError::retry_may_help`]).
    pub(super) fn retry_may_help(&self) -> bool {
        match self {
            RoundError::Request(e) | RoundError::Broken(e) => e.retry_may_help(),
            RoundError::ReplyLost => true,
        }
    }
}
