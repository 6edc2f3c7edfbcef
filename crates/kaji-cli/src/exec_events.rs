//! The public schema of `kaji exec --json`: one [`ExecLine`] per line of
//! standard output, `schema_version` [`SCHEMA_VERSION`] (documented in
//! docs/exec-json.md).
//!
//! These types are a contract with scripts and CI, separate from the
//! internal events ([`kaji_protocol::TaskEvent`]): the only way an internal
//! event reaches the output is [`from_event`], and [`task_started`] and
//! [`result`] build the first and the last line. Every internal enum is
//! matched exhaustively there, so an internal rename or a new internal
//! variant is a compile error here, never a silent change of the JSON.
//!
//! This module must never serialise an internal type into a line, and
//! never remove or change the meaning of a field within schema version 1;
//! fields and kinds may be added. The golden transcripts in
//! `tests/golden/*.jsonl` (tests/exec_golden.rs) hold it to today's bytes.
//!
//! A line is written as a `serde_json::Value` (see [`ExecLine::to_json`]),
//! so keys come out in sorted order, as they always have.

use std::path::Path;
use std::time::Duration;

use kaji_core::{PermissionMode, TaskOutcome};
use kaji_llm::ProviderKind;
use kaji_protocol::{AskPayload, BackgroundTask, SayPayload, StateUpdate, TaskEvent};
use serde::Serialize;
use serde_json::Value;

/// The schema version in the `task_started` line. It changes only when a
/// field's meaning changes (or a field or line type goes away); added line
/// types, kinds and fields keep it.
pub const SCHEMA_VERSION: u32 = 1;

/// One line of `kaji exec --json`, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExecLine {
    /// The first line: what runs, where.
    TaskStarted(TaskStartedLine),
    /// One-way progress of the task (complete messages only).
    Say(SayLine),
    /// A question the task asked; in `kaji exec` every ask but
    /// `completion_result` (and `plan` with `--approve-plan`) is denied.
    Ask(AskLine),
    /// A tool call the task is about to execute (or refuse).
    ToolUse(ToolUseLine),
    /// The result sent back to the model for a tool call.
    ToolResult(ToolResultLine),
    /// The last line: how the task ended.
    Result(ResultLine),
    /// What one model request of the main agent used, after every round.
    Usage(UsageLine),
    /// Background tasks that were still running when kaji exited and were
    /// stopped (before `result`; only when there were any).
    BackgroundStopped(BackgroundStoppedLine),
}

/// `{"type":"usage",…}`: one model request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageLine {
    /// The task's turn (from 1).
    pub turn: u32,
    /// Input tokens not read from the cache.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read_input_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_creation_input_tokens: u64,
    /// The context the conversation fills after this round.
    pub context_tokens: u64,
    /// The model's context window, or null when unknown.
    pub context_window: Option<u64>,
    /// The request's cost in USD, or null when the model's prices are
    /// unknown.
    pub cost_usd: Option<f64>,
    /// The counts are kaji's estimate (the server reported none).
    pub estimated: bool,
}

/// `{"type":"background_stopped","tasks":[…]}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BackgroundStoppedLine {
    /// One entry per stopped task.
    pub tasks: Vec<BackgroundTaskData>,
}

/// A runtime task (background shell or agent).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BackgroundTaskData {
    /// Its runtime id (as `TaskOutput`, `TaskStop` and `kaji ps` name it).
    pub id: String,
    /// What it ran.
    pub description: String,
    /// Its status when it was listed.
    pub status: String,
}

impl ExecLine {
    /// The line as JSON (one object; keys in sorted order).
    pub fn to_json(&self) -> Value {
        // Serialising these types cannot fail: every key is a string and
        // every value plain data.
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        // Keys in sorted order, whatever serde_json's `preserve_order`
        // feature (which a dependency may switch on) says.
        value.sort_all_objects();
        value
    }

    /// [`Self::to_json`] of a line produced inside a sub-agent: with its
    /// `agent_id` and the `parent_tool_use_id` of the `Agent` call that
    /// started it (the Agent SDK's names).
    pub fn to_json_in(&self, agent_id: &str, parent_tool_use_id: Option<&str>) -> Value {
        let mut value = self.to_json();
        if let Value::Object(map) = &mut value {
            map.insert("agent_id".into(), Value::from(agent_id));
            map.insert(
                "parent_tool_use_id".into(),
                parent_tool_use_id.map_or(Value::Null, Value::from),
            );
        }
        value.sort_all_objects();
        value
    }
}

/// `{"type":"task_started",…}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskStartedLine {
    /// The schema version of every line of this run: [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The task's id (unique per run).
    pub task_id: String,
    /// The kaji session id (also the default task-list id).
    pub session_id: String,
    /// The model name, as given to the provider.
    pub model: String,
    /// The provider's wire format.
    pub provider: ExecProvider,
    /// The working directory, absolute (the checkout the task started in,
    /// also with `--worktree`).
    pub cwd: String,
    /// The permission mode the task starts in.
    pub permission_mode: ExecPermissionMode,
    /// The run continues a saved session (`--resume`, `--continue`).
    pub resumed: bool,
    /// With `--worktree NAME`: the worktree the task works in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeInfo>,
}

impl ExecLine {
    /// `task_started` with the worktree the task works in.
    pub fn with_worktree(mut self, worktree: Option<WorktreeInfo>) -> Self {
        if let ExecLine::TaskStarted(line) = &mut self {
            line.worktree = worktree;
        }
        self
    }
}

/// The `worktree` of `task_started`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorktreeInfo {
    /// Its name.
    pub name: String,
    /// The directory the task works in, absolute.
    pub path: String,
    /// Its branch, `kaji/NAME`.
    pub branch: String,
}

/// The `provider` of `task_started`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecProvider {
    /// The Anthropic Messages API.
    Anthropic,
    /// The OpenAI Chat Completions API (and servers that copy it).
    #[serde(rename = "openai")]
    OpenAi,
    /// The OpenAI Responses API.
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
}

/// The `permission_mode` of `task_started`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExecPermissionMode {
    /// Read-only tools run; edits and commands ask (and are denied).
    Default,
    /// Edits inside the working directory run too; commands ask.
    AcceptEdits,
    /// Everything runs.
    Yolo,
    /// Only read-only tools run; the task ends with a plan.
    Plan,
}

/// `{"type":"say",…}`: one complete message of progress.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SayLine {
    /// Message id, unique within the run (shared with asks).
    pub id: u64,
    /// What kind of progress.
    pub kind: ExecSayKind,
    /// The message text.
    pub text: String,
    /// Always `false`: streamed partial messages are not printed.
    pub partial: bool,
    /// Structured detail, for some kinds; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<SayData>,
}

/// The `kind` of a `say` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecSayKind {
    /// The prompt, echoed (the first say of a task).
    UserFeedback,
    /// Model text.
    Text,
    /// Model reasoning (thinking).
    Reasoning,
    /// A tool is being used; `data` is a [`ToolSayData`].
    Tool,
    /// Output of a command (not emitted by kaji today).
    CommandOutput,
    /// A model request started; `data` is an [`ApiReqStartedData`].
    ApiReqStarted,
    /// A model request is retried; `data` is an [`ApiReqRetriedData`].
    ApiReqRetried,
    /// An error the task recovered from or stops on.
    Error,
    /// The task's final result (followed by the `completion_result` ask).
    CompletionResult,
    /// The task list changed; `data` is the whole list.
    TaskList,
    /// The todo checklist changed; `data` is the whole checklist.
    Todo,
    /// Anything else worth showing: hook warnings, checkpoints (`data` is a
    /// [`CheckpointData`]), MCP notices.
    Info,
    /// The conversation was compacted to fit the context window.
    ContextCompacted,
}

/// The `data` of a `say` line, by kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SayData {
    /// Kind `tool`.
    Tool(ToolSayData),
    /// Kind `api_req_started`.
    ApiReqStarted(ApiReqStartedData),
    /// Kind `api_req_retried`.
    ApiReqRetried(ApiReqRetriedData),
    /// Kind `info`, for a checkpoint taken.
    Checkpoint(CheckpointData),
    /// Kind `task_list`: every task of the list, in order.
    TaskList(Vec<TaskListItem>),
    /// Kind `todo`: the whole checklist, in order.
    Todo(Vec<TodoItem>),
    /// Kind `info` after an abort: background tasks still running.
    Background(Vec<BackgroundTaskData>),
    /// Kind `context_compacted`.
    Compacted(CompactedData),
}

/// `data` of a `context_compacted` say.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactedData {
    /// Context tokens before (estimated).
    pub tokens_before: u64,
    /// Context tokens after (estimated).
    pub tokens_after: u64,
    /// Oldest rounds dropped because even the summary request did not fit.
    pub dropped_rounds: u32,
}

/// `data` of a `tool` say.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ToolSayData {
    /// The tool call's id (the `id` of its `tool_use` line).
    pub id: String,
    /// The tool's name.
    pub tool: String,
    /// The tool's input, as the model gave it.
    pub input: Value,
}

/// `data` of an `api_req_started` say.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ApiReqStartedData {
    /// The turn this request is for, from 1.
    pub turn: u32,
    /// The model asked.
    pub model: String,
}

/// `data` of an `api_req_retried` say.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ApiReqRetriedData {
    /// The attempt about to be made, from 2.
    pub attempt: u32,
    /// Attempts allowed in all.
    pub max_attempts: u32,
    /// The wait before it, in milliseconds.
    pub delay_ms: u64,
}

/// `data` of an `info` say for a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct CheckpointData {
    /// The checkpoint's full id (for `kaji checkpoints`).
    pub checkpoint: String,
    /// Its label (`turn N: Tool`).
    pub label: String,
}

/// One task of a `task_list` say.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct TaskListItem {
    /// The task's number in its list.
    pub id: u64,
    /// Its subject.
    pub subject: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: String,
    /// Who took it, or null.
    pub owner: Option<String>,
    /// The present-continuous form shown while it is in progress, or null.
    #[serde(rename = "activeForm")]
    pub active_form: Option<String>,
    /// The ids of the open tasks it waits for.
    #[serde(rename = "blockedBy")]
    pub blocked_by: Vec<u64>,
}

/// One item of a `todo` say.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct TodoItem {
    /// What is to be done, imperative.
    pub content: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: String,
    /// The same in present continuous.
    #[serde(rename = "activeForm")]
    pub active_form: String,
}

/// `{"type":"ask",…}`: a question, with the text it was asked in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AskLine {
    /// Message id, unique within the run (shared with says).
    pub id: u64,
    /// What is asked.
    pub kind: ExecAskKind,
    /// The question.
    pub text: String,
    /// Always `false`: partial asks are not printed.
    pub partial: bool,
    /// Structured detail, for some kinds; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<AskData>,
}

/// The `kind` of an `ask` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecAskKind {
    /// Approve a tool call (an edit, an MCP tool, …); `data` is a
    /// [`ToolAskData`].
    Tool,
    /// Approve a shell command; `data` is a [`ToolAskData`].
    Command,
    /// The model asks the user a question; `data` is a [`FollowupData`].
    Followup,
    /// Too many consecutive mistakes: go on?
    MistakeLimitReached,
    /// A model request failed (or the replies stayed empty): retry?
    ApiReqFailed,
    /// The task says it is done (accepted by `kaji exec`).
    CompletionResult,
    /// Resume an interrupted task? (not emitted by kaji today)
    Resume,
    /// Approve the plan (leave plan mode); the text is the plan.
    Plan,
}

/// The `data` of an `ask` line, by kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AskData {
    /// Kinds `tool` and `command`.
    Tool(ToolAskData),
    /// Kind `followup`.
    Followup(FollowupData),
}

/// `data` of a `tool` or `command` ask.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ToolAskData {
    /// The tool's name.
    pub tool: String,
    /// The tool's input, as the model gave it.
    pub input: Value,
    /// What will happen, in full (the whole command, a diff), when kaji
    /// shows more than the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
}

/// `data` of a `followup` ask.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct FollowupData {
    /// The answers offered (possibly none).
    pub options: Vec<String>,
}

/// `{"type":"tool_use",…}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolUseLine {
    /// The call's id, as the model gave it (or kaji made it up for XML
    /// calls).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// Its input (null when the model's arguments were not valid JSON).
    pub input: Value,
    /// What the call will do, in full: the whole command (Bash) or a
    /// unified diff of the file as it is now (Edit, Write). Absent for
    /// other tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
}

/// `{"type":"tool_result",…}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolResultLine {
    /// The call's id (the `id` of its `tool_use` line).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// Whether the call failed or was refused or denied.
    pub is_error: bool,
    /// The result text, as sent to the model.
    pub output: String,
    /// The result for people, in one line, as the tool summarises it
    /// (`Read 120 lines`, `exit 1`); absent when kaji has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// `{"type":"result",…}`: the last line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResultLine {
    /// How the task ended.
    pub status: ExecStatus,
    /// Model turns taken.
    pub turns: u32,
    /// Tokens used over the whole task.
    pub usage: ExecUsage,
    /// Wall time of the task, in milliseconds.
    pub duration_ms: u64,
    /// The completion result, or why the task failed, or null.
    pub result: Option<String>,
    /// The task's cost in USD, or null when the model's prices are
    /// unknown.
    pub total_cost_usd: Option<f64>,
    /// Why the model stopped, when the status alone does not say it
    /// (`refusal`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// The calls denied because nobody could approve them; absent when
    /// there were none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub permission_denials: Vec<PermissionDenialData>,
}

/// One entry of `permission_denials`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PermissionDenialData {
    /// The call's id (the `id` of its `tool_use` line).
    pub tool_use_id: String,
    /// The tool.
    pub tool: String,
    /// Its input.
    pub input: Value,
    /// Why it was denied, and the rule or flag that would have allowed it.
    pub reason: String,
}

/// The `status` of the `result` line (and with it the exit code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecStatus {
    /// Done, and the result accepted (exit 0).
    Completed,
    /// An unrecoverable error (exit 1).
    Failed,
    /// Stopped by SIGINT or SIGTERM (exit 130).
    Aborted,
    /// Too many consecutive mistakes (exit 1).
    MistakeLimit,
    /// The turn limit was reached (exit 1).
    MaxTurns,
}

/// The `usage` of the `result` line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ExecUsage {
    /// Input (prompt) tokens.
    pub input_tokens: u64,
    /// Output (completion) tokens.
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read_input_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_creation_input_tokens: u64,
}

/// The first line.
pub fn task_started(
    task_id: &str,
    session_id: &str,
    model: &str,
    provider: ProviderKind,
    cwd: &Path,
    mode: PermissionMode,
    resumed: bool,
) -> ExecLine {
    ExecLine::TaskStarted(TaskStartedLine {
        resumed,
        worktree: None,
        schema_version: SCHEMA_VERSION,
        task_id: task_id.to_string(),
        session_id: session_id.to_string(),
        model: model.to_string(),
        provider: match provider {
            ProviderKind::Anthropic => ExecProvider::Anthropic,
            ProviderKind::OpenAi => ExecProvider::OpenAi,
            ProviderKind::OpenAiResponses => ExecProvider::OpenAiResponses,
        },
        cwd: cwd.to_string_lossy().into_owned(),
        permission_mode: match mode {
            PermissionMode::Default => ExecPermissionMode::Default,
            PermissionMode::AcceptEdits => ExecPermissionMode::AcceptEdits,
            PermissionMode::Yolo => ExecPermissionMode::Yolo,
            PermissionMode::Plan => ExecPermissionMode::Plan,
        },
    })
}

/// The last line, for a task that ran for `duration`.
pub fn result(
    outcome: &TaskOutcome,
    duration: Duration,
    denials: &[kaji_core::permissions::PermissionDenial],
) -> ExecLine {
    use kaji_protocol::TaskStatus as S;
    let u = &outcome.usage;
    ExecLine::Result(ResultLine {
        status: match outcome.status {
            S::Completed => ExecStatus::Completed,
            S::Failed => ExecStatus::Failed,
            S::Aborted => ExecStatus::Aborted,
            S::MistakeLimit => ExecStatus::MistakeLimit,
            S::MaxTurns => ExecStatus::MaxTurns,
        },
        turns: outcome.turns,
        usage: ExecUsage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_input_tokens: u.cache_read_input_tokens,
            cache_creation_input_tokens: u.cache_creation_input_tokens,
        },
        duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
        result: outcome.result.clone(),
        total_cost_usd: outcome.cost_usd,
        stop_reason: outcome.stop_reason.clone(),
        permission_denials: denials
            .iter()
            .map(|d| PermissionDenialData {
                tool_use_id: d.tool_use_id.clone(),
                tool: d.tool.clone(),
                input: d.input.clone(),
                reason: format!("{}; {}", d.reason, allow_hint(d)),
            })
            .collect(),
    })
}

/// The flag that would have allowed a denied call.
pub fn allow_hint(d: &kaji_core::permissions::PermissionDenial) -> String {
    use kaji_core::permissions::DeniedAction;
    match (&d.rule, d.action) {
        (Some(rule), DeniedAction::Command) => format!(
            "--allow '{rule}' would allow it (or --sandbox workspace-write runs commands confined)"
        ),
        (Some(rule), DeniedAction::FileChange) => format!(
            "--allow '{rule}' would allow it (or --permission-mode accept-edits for edits inside the project)"
        ),
        (Some(rule), DeniedAction::Other) => format!("--allow '{rule}' would allow it"),
        (None, DeniedAction::Command) => "no narrow rule covers it; --sandbox workspace-write runs it confined, --yolo unconfined".to_string(),
        (None, _) => "it is outside the project or a protected path; only --yolo allows it".to_string(),
    }
}

/// The line an internal event is printed as, if any: complete says and
/// asks, tool uses and tool results. Partial messages, deltas and the
/// internal `Finished` event print nothing (the `result` line is built by
/// [`result`]).
pub fn from_event(event: &TaskEvent) -> Option<ExecLine> {
    match event {
        TaskEvent::Say { partial: true, .. }
        | TaskEvent::Ask { partial: true, .. }
        | TaskEvent::Delta { .. }
        | TaskEvent::Finished { .. } => None,
        TaskEvent::Say {
            id,
            kind,
            text,
            payload,
            ..
        } => Some(ExecLine::Say(SayLine {
            id: *id,
            kind: say_kind(*kind),
            text: text.clone(),
            partial: false,
            data: payload.as_ref().map(say_data),
        })),
        TaskEvent::Ask {
            id,
            kind,
            text,
            payload,
            ..
        } => Some(ExecLine::Ask(AskLine {
            id: *id,
            kind: ask_kind(*kind),
            text: text.clone(),
            partial: false,
            data: payload.as_ref().map(ask_data),
        })),
        TaskEvent::Usage(r) => Some(ExecLine::Usage(UsageLine {
            turn: r.turn,
            input_tokens: r.usage.input_tokens,
            output_tokens: r.usage.output_tokens,
            cache_read_input_tokens: r.usage.cache_read_input_tokens,
            cache_creation_input_tokens: r.usage.cache_creation_input_tokens,
            context_tokens: r.context_tokens,
            context_window: r.context_window,
            cost_usd: r.cost_usd,
            estimated: r.estimated,
        })),
        TaskEvent::ToolUse {
            id,
            name,
            input,
            preview,
            ..
        } => Some(ExecLine::ToolUse(ToolUseLine {
            id: id.clone(),
            name: name.clone(),
            input: input.clone(),
            preview: preview.clone(),
        })),
        TaskEvent::ToolResult {
            id,
            name,
            is_error,
            output,
            summary,
        } => Some(ExecLine::ToolResult(ToolResultLine {
            id: id.clone(),
            name: name.clone(),
            is_error: *is_error,
            output: output.clone(),
            summary: summary.clone(),
        })),
    }
}

/// The `result` of a run that kaji abandoned after a signal because the
/// task did not end in time: `aborted`, with what is known.
pub fn abandoned(duration: Duration) -> ExecLine {
    ExecLine::Result(ResultLine {
        status: ExecStatus::Aborted,
        turns: 0,
        usage: ExecUsage::default(),
        duration_ms: duration.as_millis() as u64,
        result: None,
        total_cost_usd: None,
        stop_reason: None,
        permission_denials: Vec::new(),
    })
}

/// `{"type":"background_stopped",…}`.
pub fn background_stopped(tasks: &[BackgroundTask]) -> ExecLine {
    ExecLine::BackgroundStopped(BackgroundStoppedLine {
        tasks: tasks.iter().map(background_task).collect(),
    })
}

fn background_task(t: &BackgroundTask) -> BackgroundTaskData {
    BackgroundTaskData {
        id: t.id.clone(),
        description: t.description.clone(),
        status: t.status.clone(),
    }
}

fn say_kind(kind: kaji_protocol::SayKind) -> ExecSayKind {
    use kaji_protocol::SayKind as K;
    match kind {
        K::UserFeedback => ExecSayKind::UserFeedback,
        K::Text => ExecSayKind::Text,
        K::Reasoning => ExecSayKind::Reasoning,
        K::Tool => ExecSayKind::Tool,
        K::CommandOutput => ExecSayKind::CommandOutput,
        K::ApiReqStarted => ExecSayKind::ApiReqStarted,
        K::ApiReqRetried => ExecSayKind::ApiReqRetried,
        K::Error => ExecSayKind::Error,
        K::CompletionResult => ExecSayKind::CompletionResult,
        K::TaskList => ExecSayKind::TaskList,
        K::Todo => ExecSayKind::Todo,
        K::Info => ExecSayKind::Info,
        K::ContextCompacted => ExecSayKind::ContextCompacted,
    }
}

fn ask_kind(kind: kaji_protocol::AskKind) -> ExecAskKind {
    use kaji_protocol::AskKind as K;
    match kind {
        K::Tool => ExecAskKind::Tool,
        K::Command => ExecAskKind::Command,
        K::Followup => ExecAskKind::Followup,
        K::MistakeLimitReached => ExecAskKind::MistakeLimitReached,
        K::ApiReqFailed => ExecAskKind::ApiReqFailed,
        K::CompletionResult => ExecAskKind::CompletionResult,
        K::Resume => ExecAskKind::Resume,
        K::Plan => ExecAskKind::Plan,
    }
}

/// A say's typed payload as the public `data` of its line.
fn say_data(payload: &SayPayload) -> SayData {
    match payload {
        SayPayload::Tool {
            id, tool, input, ..
        } => SayData::Tool(ToolSayData {
            id: id.clone(),
            tool: tool.clone(),
            input: input.clone(),
        }),
        SayPayload::ApiRequest { turn, model } => SayData::ApiReqStarted(ApiReqStartedData {
            turn: *turn,
            model: model.clone(),
        }),
        SayPayload::Retry {
            attempt,
            max_attempts,
            delay_ms,
        } => SayData::ApiReqRetried(ApiReqRetriedData {
            attempt: *attempt,
            max_attempts: *max_attempts,
            delay_ms: *delay_ms,
        }),
        SayPayload::Checkpoint { checkpoint, label } => SayData::Checkpoint(CheckpointData {
            checkpoint: checkpoint.clone(),
            label: label.clone(),
        }),
        SayPayload::Update(StateUpdate::TaskList { tasks }) => SayData::TaskList(
            tasks
                .iter()
                .map(|t| TaskListItem {
                    id: t.id,
                    subject: t.subject.clone(),
                    status: t.status.clone(),
                    owner: t.owner.clone(),
                    active_form: t.active_form.clone(),
                    blocked_by: t.blocked_by.clone(),
                })
                .collect(),
        ),
        SayPayload::Update(StateUpdate::Todo { items }) => SayData::Todo(
            items
                .iter()
                .map(|i| TodoItem {
                    content: i.content.clone(),
                    status: i.status.as_str().to_string(),
                    active_form: i.active_form.clone(),
                })
                .collect(),
        ),
        SayPayload::Compacted {
            tokens_before,
            tokens_after,
            dropped_rounds,
        } => SayData::Compacted(CompactedData {
            tokens_before: *tokens_before,
            tokens_after: *tokens_after,
            dropped_rounds: *dropped_rounds,
        }),
        SayPayload::Background { tasks } => {
            SayData::Background(tasks.iter().map(background_task).collect())
        }
    }
}

/// An ask's typed payload as the public `data` of its line.
fn ask_data(payload: &AskPayload) -> AskData {
    match payload {
        AskPayload::ToolApproval {
            tool,
            input,
            preview,
            ..
        } => AskData::Tool(ToolAskData {
            tool: tool.clone(),
            input: input.clone(),
            preview: preview.clone(),
        }),
        AskPayload::Followup { options } => AskData::Followup(FollowupData {
            options: options.clone(),
        }),
        // Partial asks are never printed; were one printed, it would read
        // as the arguments' ask always did: the tool, no input yet.
        AskPayload::ToolArguments { tool, .. } => AskData::Tool(ToolAskData {
            tool: tool.clone(),
            input: serde_json::Value::Object(Default::default()),
            preview: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kaji_protocol::{AskKind, SayKind};
    use serde_json::json;

    fn say(kind: SayKind, payload: Option<SayPayload>) -> TaskEvent {
        TaskEvent::Say {
            id: 7,
            kind,
            text: "t".into(),
            partial: false,
            payload,
        }
    }

    #[test]
    fn partial_messages_deltas_and_finished_print_nothing() {
        let partial = TaskEvent::Say {
            id: 1,
            kind: SayKind::Text,
            text: "Hel".into(),
            partial: true,
            payload: None,
        };
        let delta = TaskEvent::Delta {
            id: 1,
            text: "lo".into(),
        };
        let ask = TaskEvent::Ask {
            id: 2,
            kind: AskKind::Followup,
            text: "?".into(),
            partial: true,
            payload: None,
        };
        for e in [partial, delta, ask] {
            assert_eq!(from_event(&e), None, "{e:?}");
        }
    }

    #[test]
    fn typed_payloads_are_written_as_version_1_data() {
        let payload = SayPayload::Tool {
            id: "c1".into(),
            tool: "Read".into(),
            input: json!({"file_path": "a"}),
            view: None,
        };
        let line = from_event(&say(SayKind::Tool, Some(payload))).unwrap();
        assert_eq!(
            line.to_json().to_string(),
            r#"{"data":{"id":"c1","input":{"file_path":"a"},"tool":"Read"},"id":7,"kind":"tool","partial":false,"text":"t","type":"say"}"#
        );
        let ask = TaskEvent::Ask {
            id: 3,
            kind: AskKind::Command,
            text: "Bash: ls".into(),
            partial: false,
            payload: Some(AskPayload::ToolApproval {
                tool: "Bash".into(),
                input: json!({"command": "ls"}),
                preview: None,
                always: Vec::new(),
                tool_use_id: None,
            }),
        };
        assert_eq!(
            from_event(&ask).unwrap().to_json()["data"],
            json!({"tool": "Bash", "input": {"command": "ls"}})
        );
    }
}
