//! The state behind the Task's one lock, and the values the loops hand each
//! other (a round's outcome, the outer loop's next step). Never held across
//! an await: every section that touches it is short and synchronous.

use std::path::PathBuf;

use kaji_protocol::{ContentBlock, Message, Role, TaskStatus, Usage};

use crate::checkpoints::CheckpointStore;
use crate::parser::ReplyAssembler;
use crate::permissions::PermissionMode;

/// The state behind the task's one lock.
#[derive(Debug, Default)]
pub(super) struct TaskState {
    pub(super) history: Vec<Message>,
    /// The reply being streamed in the current round.
    pub(super) assembler: Option<ReplyAssembler>,
    /// Set by the stream reader when the stream has ended.
    pub(super) stream_end: Option<Result<(), StreamFailure>>,
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
    /// Adds this round's user content: a new user message, or more blocks
    /// of the last one when the history already ends with the user (a
    /// continued conversation whose last results were answered).
    pub(super) fn push_user_content(&mut self, content: Vec<ContentBlock>) {
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
    pub(super) fn unpush_user_content(&mut self) {
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
pub(super) struct StreamFailure {
    /// The provider's error, for the user.
    pub(super) message: String,
    /// It was the context window (compaction, not a retry, helps).
    pub(super) overflow: bool,
    /// Asking again may succeed (`LlmError::retry_may_help`).
    pub(super) retryable: bool,
}
