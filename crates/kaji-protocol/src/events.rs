//! The two exits from a task to its user, `say` and `ask`, as events.
//!
//! A task never prints. Everything a person or a script may see goes out as
//! a [`TaskEvent`]; everything that needs an answer is an [`TaskEvent::Ask`]
//! answered with an [`AskResponse`]. A message streamed in parts is sent
//! several times with the same `id` and `partial: true`, then once more with
//! `partial: false`; in between, [`TaskEvent::Delta`]s carry only the new
//! text. Front ends replace the message with that id.

use crate::payload::{AskPayload, SayPayload};
use crate::stream::Usage;
use serde::{Deserialize, Serialize};

/// One-way progress a task reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SayKind {
    /// The user's prompt or feedback, echoed into the transcript.
    UserFeedback,
    /// Model text.
    Text,
    /// Model reasoning (thinking).
    Reasoning,
    /// A tool is being used (its name and input).
    Tool,
    /// Output of a command.
    CommandOutput,
    /// A model request has started.
    ApiReqStarted,
    /// A model request is being retried.
    ApiReqRetried,
    /// An error the task recovered from or is about to stop on.
    Error,
    /// The task's final result.
    CompletionResult,
    /// The task list (plan tasks) changed.
    TaskList,
    /// The todo checklist changed.
    Todo,
    /// The conversation was compacted to fit the context window.
    ContextCompacted,
    /// Anything else worth showing: hook output, notices.
    Info,
}

/// A question a task waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AskKind {
    /// Approve a tool call (edit, MCP tool, …).
    Tool,
    /// Approve a shell command.
    Command,
    /// The model asks the user a question.
    Followup,
    /// Too many consecutive mistakes: go on or stop?
    MistakeLimitReached,
    /// A model request failed: retry or stop?
    ApiReqFailed,
    /// The task says it is done: accept, or give feedback to go on.
    CompletionResult,
    /// Resume an interrupted task?
    Resume,
    /// Approve a plan (leave plan mode).
    Plan,
}

/// An answer to an ask.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AskResponse {
    /// Yes, once.
    Approve,
    /// Yes, once, with this input instead of the model's (an Agent SDK
    /// program's `updatedInput`); the rules still apply to it.
    ApproveEdited {
        /// The input the tool runs with.
        input: serde_json::Value,
    },
    /// Yes, and do not ask again this session for the same tool (or, for
    /// commands, the same command prefix).
    ApproveAlways,
    /// Yes, and store the same rules for this project too: in its
    /// `.kaji/config.local.toml` (not committed), so later sessions there
    /// do not ask either.
    ApproveAlwaysProject,
    /// No, optionally with feedback for the model.
    Deny {
        /// What the user said instead.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        feedback: Option<String>,
    },
    /// No, from a program that answers asks (an Agent SDK program's
    /// `can_use_tool` deny): its message is the call's result as it is,
    /// the rest of the reply still runs, and it is never a mistake, even
    /// headless.
    Refuse {
        /// What the model is told.
        message: String,
    },
    /// A free-text answer (to a followup question, or feedback on a result).
    Reply {
        /// The answer.
        text: String,
    },
}

/// How a prompt's Task ended (not a task-list item's status, which is
/// `kaji_tasks::list::ListTaskStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// The model called AttemptCompletion (and it was accepted).
    Completed,
    /// An unrecoverable error.
    Failed,
    /// Cancelled by the user or a signal.
    Aborted,
    /// Too many consecutive mistakes.
    MistakeLimit,
    /// The turn limit was reached.
    MaxTurns,
}

impl TaskStatus {
    /// The process exit code `kaji exec` uses for this status.
    pub fn exit_code(self) -> i32 {
        match self {
            TaskStatus::Completed => 0,
            TaskStatus::Failed | TaskStatus::MistakeLimit | TaskStatus::MaxTurns => 1,
            TaskStatus::Aborted => 130,
        }
    }

    /// The status as written in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Aborted => "aborted",
            TaskStatus::MistakeLimit => "mistake_limit",
            TaskStatus::MaxTurns => "max_turns",
        }
    }
}

/// Everything a task emits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TaskEvent {
    /// One-way progress.
    Say {
        /// Message id, stable across partial updates.
        id: u64,
        /// What kind of progress.
        kind: SayKind,
        /// The text so far.
        text: String,
        /// More updates of this message follow.
        partial: bool,
        /// Typed detail (the tool and its input, a checkpoint, …).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        payload: Option<SayPayload>,
    },
    /// More text for the partial message `id` (a `say` or `ask` sent with
    /// `partial: true`): append it. Streaming text this way keeps the cost
    /// of a long reply linear; the final non-partial message repeats the
    /// whole text.
    Delta {
        /// The message to append to.
        id: u64,
        /// The new text.
        text: String,
    },
    /// A question; the task waits until it is answered.
    Ask {
        /// Message id; the answer names it.
        id: u64,
        /// What is asked.
        kind: AskKind,
        /// The question.
        text: String,
        /// Still being streamed: not answerable yet.
        partial: bool,
        /// Typed detail (the tool and its input, the options, …).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        payload: Option<AskPayload>,
    },
    /// A tool call the task is about to execute (or refuse).
    ToolUse {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments.
        input: serde_json::Value,
        /// How the tool presents the call; absent for a tool kaji does not
        /// have.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        view: Option<crate::ToolView>,
        /// What an approval of the call would show beyond its title (the
        /// whole command, a unified diff of the file as it is now).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        preview: Option<String>,
    },
    /// The result of a tool call as sent back to the model.
    ToolResult {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Whether it failed or was refused.
        is_error: bool,
        /// The result text.
        output: String,
        /// The result for people, in one line (`Read 120 lines`, `3 files
        /// with matches`, `exit 1`): the tool's own summary of it
        /// (`kaji_tools::result_summary`), which front ends show instead
        /// of knowing tools. Absent from events made without a tool at
        /// hand; a front end then shows the output's first line.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
    },
    /// What one model request used, after every round.
    Usage(UsageReport),
    /// The task ended.
    Finished {
        /// How.
        status: TaskStatus,
        /// Model turns taken.
        turns: u32,
        /// Tokens used over the whole task.
        usage: Usage,
        /// The completion result or the failure message.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<String>,
    },
}

/// An event with whose it is: the session, the prompt's Task, and the agent
/// (`main`, or a sub-agent's runtime id) that emitted it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionEvent {
    /// The session.
    pub session_id: String,
    /// The Task (one prompt) within it.
    pub task_id: String,
    /// The agent: `main` or a sub-agent's name.
    pub agent: String,
    /// For a sub-agent's event: the id of the `Agent` tool call that
    /// started it (`None` for the main agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_tool_use_id: Option<String>,
    /// What happened.
    #[serde(flatten)]
    pub event: TaskEvent,
}

/// What one model request used, and where the context stands.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UsageReport {
    /// The Task's turn number.
    pub turn: u32,
    /// The request's tokens (estimated when the server reported none).
    pub usage: Usage,
    /// The context the conversation fills after this round: the request's
    /// input (cached or not) plus the reply.
    pub context_tokens: u64,
    /// The model's context window, when known.
    pub context_window: Option<u64>,
    /// The request's cost in USD, when the model's prices are known.
    pub cost_usd: Option<f64>,
    /// The counts are kaji's estimate from the sizes of the request and
    /// the reply (the server reported no usage).
    pub estimated: bool,
}
