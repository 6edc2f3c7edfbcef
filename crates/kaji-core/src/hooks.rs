//! Hooks: user-configured shell commands that run at fixed points of a
//! task's life and may add context for the model or block what is about to
//! happen.
//!
//! A hook is configured as a `[[hooks.<Event>]]` table (see
//! [`crate::config`] and `docs/hooks.md`). [`HookRunner::run`] runs every
//! hook of one event, in the order they were configured (user settings
//! first, then project settings), one after the other:
//!
//! - the command runs with `sh -c` in the task's working directory, in a
//!   process group of its own ([`kaji_tasks::process`]), with one JSON
//!   object ([`HookPayload`] plus `hook_event_name`) on its stdin;
//! - exit 0: its stdout (capped at [`CONTEXT_CAP_CHARS`] characters) is
//!   added to [`HookOutcome::context`] for the model;
//! - exit 0 with one JSON object on stdout: Claude Code's answer style
//!   (`decision`/`reason`, `hookSpecificOutput.permissionDecision` and
//!   `permissionDecisionReason`, `hookSpecificOutput.additionalContext`,
//!   `continue`/`stopReason`, `systemMessage`), folded into the
//!   [`HookOutcome`]; a `deny` or `block` blocks like exit 2;
//! - exit 2: it blocks; its stderr is the reason ([`HookOutcome::blocked`])
//!   and later hooks of the same event do not run;
//! - any other exit, a failure to start, or running past its timeout (the
//!   group is killed): a warning for the user, nothing is blocked;
//! - when the cancellation token fires, the running hook's group is killed
//!   and the remaining hooks are skipped ([`HookOutcome::cancelled`]).
//!
//! When the leader exits, whatever it left running in its group is killed
//! too: a hook never leaves processes behind. A process that left the
//! group (`setsid … &`) but kept the hook's output pipes open is waited
//! for only until the hook's timeout, then killed (it is found by the
//! pipes it holds): a hook never runs past its timeout.
//!
//! This module never decides what a block means for the task (the core
//! does), never prints, and never runs a hook outside its own process group.

use std::collections::BTreeMap;
use std::fmt;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::str::FromStr;
use std::time::Duration;

use kaji_tasks::process::{self, GroupChild};
use regex::Regex;
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::PermissionMode;

pub mod program;

pub use program::{HookCallbackRequest, HookCallbacks, ProgramHook, ProgramHooks};

/// A hook's timeout when its table gives none: 60 seconds.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// How much of a hook's stdout becomes context for the model: 10,000
/// characters (the rest is cut, with a note).
pub const CONTEXT_CAP_CHARS: usize = 10_000;

/// How much of a hook's stderr is kept for a block reason or a warning.
pub const STDERR_CAP_CHARS: usize = 10_000;

/// Bytes read from each of a hook's output pipes at most; the rest is read
/// and thrown away so the hook never blocks on a full pipe.
const PIPE_KEEP_BYTES: usize = 256 * 1024;

/// The exit code with which a hook blocks.
pub const BLOCK_EXIT_CODE: i32 = 2;

/// The points of a task's life at which hooks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookEvent {
    /// A new task is about to send its first request. A block stops the
    /// task before that request.
    TaskStart,
    /// A task is resumed from its saved history.
    TaskResume,
    /// The user cancelled the task (runs after running hooks and background
    /// commands were cancelled).
    TaskCancel,
    /// The task ended as completed.
    TaskComplete,
    /// The user submitted a prompt; a block refuses it.
    UserPromptSubmit,
    /// A tool is about to run; a block refuses the call, with the reason
    /// given to the model.
    PreToolUse,
    /// A tool has run.
    PostToolUse,
    /// The history is about to be compacted.
    PreCompact,
    /// A session begins or is resumed (Claude Code's name). The payload's
    /// `source` says which: `startup`, `resume`, `clear`, `compact`.
    SessionStart,
    /// A session ends; `reason` says why (`exit`, `clear`, `logout`,
    /// `other`). Nothing can be blocked.
    SessionEnd,
    /// The main agent is about to end its turn. A block (`decision:
    /// "block"` or exit 2) keeps it working, with the reason as its next
    /// instruction.
    Stop,
    /// A subagent is about to end its turn; a block keeps it working.
    SubagentStop,
    /// kaji is about to ask the user something or has been idle waiting
    /// for input; the payload's `message` says what.
    Notification,
    /// A tool ran and failed (Claude Code's event; `PostToolUse` is for
    /// tools that succeeded). The payload adds `error`.
    PostToolUseFailure,
    /// A sub-agent is about to start (`agent_id`, `agent_type`).
    SubagentStart,
    /// kaji is about to ask the user to approve a tool call. A block
    /// (`decision.behavior: "deny"`) refuses it without asking; an allow
    /// runs it.
    PermissionRequest,
    /// A task-list item was created (`task_id`, `task_subject`).
    TaskCreated,
    /// A task-list item was marked completed (`task_id`, `task_subject`).
    TaskCompleted,
}

impl HookEvent {
    /// Every event, in documentation order.
    pub const ALL: [HookEvent; 18] = [
        Self::TaskStart,
        Self::TaskResume,
        Self::TaskCancel,
        Self::TaskComplete,
        Self::UserPromptSubmit,
        Self::PreToolUse,
        Self::PostToolUse,
        Self::PreCompact,
        Self::SessionStart,
        Self::SessionEnd,
        Self::Stop,
        Self::SubagentStop,
        Self::Notification,
        Self::PostToolUseFailure,
        Self::SubagentStart,
        Self::PermissionRequest,
        Self::TaskCreated,
        Self::TaskCompleted,
    ];

    /// The event's name in configuration and in `hook_event_name`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TaskStart => "TaskStart",
            Self::TaskResume => "TaskResume",
            Self::TaskCancel => "TaskCancel",
            Self::TaskComplete => "TaskComplete",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::PreToolUse => "PreToolUse",
            Self::PostToolUse => "PostToolUse",
            Self::PreCompact => "PreCompact",
            Self::SessionStart => "SessionStart",
            Self::SessionEnd => "SessionEnd",
            Self::Stop => "Stop",
            Self::SubagentStop => "SubagentStop",
            Self::Notification => "Notification",
            Self::PostToolUseFailure => "PostToolUseFailure",
            Self::SubagentStart => "SubagentStart",
            Self::PermissionRequest => "PermissionRequest",
            Self::TaskCreated => "TaskCreated",
            Self::TaskCompleted => "TaskCompleted",
        }
    }

    /// Whether the event concerns one tool call (`matcher` applies, and the
    /// payload carries `tool_name` and `tool_input`).
    pub fn is_tool_event(self) -> bool {
        matches!(
            self,
            Self::PreToolUse
                | Self::PostToolUse
                | Self::PostToolUseFailure
                | Self::PermissionRequest
        )
    }

    /// The payload field a `matcher` is matched against, as in Claude
    /// Code: the tool's name for tool events, `source` for SessionStart,
    /// `reason` for SessionEnd, `trigger` for PreCompact,
    /// `notification_type` for Notification, `agent_type` for
    /// SubagentStart and SubagentStop; `None`: the event has no matcher.
    pub fn matcher_field(self) -> Option<&'static str> {
        match self {
            _ if self.is_tool_event() => Some("tool_name"),
            Self::SessionStart => Some("source"),
            Self::SessionEnd => Some("reason"),
            Self::PreCompact => Some("trigger"),
            Self::Notification => Some("notification_type"),
            Self::SubagentStart | Self::SubagentStop => Some("agent_type"),
            _ => None,
        }
    }

    /// Whether a non-empty `matcher` means something for this event.
    pub fn has_matcher(self) -> bool {
        self.matcher_field().is_some()
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for HookEvent {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|e| e.as_str()).collect();
                format!(
                    "unknown hook event {s:?}: expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// Which tool names a hook applies to: a regular expression that must match
/// the whole name (`Edit|Write` matches `Edit` and `Write` but not
/// `EditNotebook`). An empty pattern or `*` matches every tool.
#[derive(Debug, Clone)]
pub struct ToolMatcher {
    pattern: String,
    regex: Option<Regex>,
}

impl ToolMatcher {
    /// Compiles `pattern`; the error is the regex crate's description.
    pub fn new(pattern: &str) -> Result<Self, regex::Error> {
        let trimmed = pattern.trim();
        let regex = if trimmed.is_empty() || trimmed == "*" {
            None
        } else {
            Some(Regex::new(&format!("^(?:{trimmed})$"))?)
        };
        Ok(Self {
            pattern: pattern.to_string(),
            regex,
        })
    }

    /// The pattern as configured.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Whether the tool called `tool_name` matches.
    pub fn matches(&self, tool_name: &str) -> bool {
        self.regex.as_ref().is_none_or(|r| r.is_match(tool_name))
    }
}

/// One configured hook.
#[derive(Debug, Clone)]
pub struct HookSpec {
    /// The command line, run with `sh -c`.
    pub command: String,
    /// For tool events: which tools it applies to (`None`: all).
    pub matcher: Option<ToolMatcher>,
    /// How long it may run before its process group is killed.
    pub timeout: Duration,
    /// The settings file it came from (for messages).
    pub source: Option<PathBuf>,
    /// Claude Code's `statusMessage`: shown while the hook runs.
    pub status_message: Option<String>,
    /// Claude Code's `async`: accepted; kaji runs the hook to its end
    /// before going on, as for any hook.
    pub run_async: bool,
}

impl HookSpec {
    /// A hook running `command` with the default timeout and no matcher.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            matcher: None,
            timeout: DEFAULT_HOOK_TIMEOUT,
            source: None,
            status_message: None,
            run_async: false,
        }
    }
}

/// Every configured hook, by event, each list in run order.
#[derive(Debug, Clone, Default)]
pub struct HooksConfig {
    hooks: BTreeMap<HookEvent, Vec<HookSpec>>,
}

impl HooksConfig {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `hook` to the hooks of `event`.
    pub fn push(&mut self, event: HookEvent, hook: HookSpec) {
        self.hooks.entry(event).or_default().push(hook);
    }

    /// Appends every hook of `other` after this one's (user settings, then
    /// project settings).
    pub fn extend(&mut self, other: HooksConfig) {
        for (event, list) in other.hooks {
            self.hooks.entry(event).or_default().extend(list);
        }
    }

    /// The hooks of `event`, in run order.
    pub fn hooks(&self, event: HookEvent) -> &[HookSpec] {
        self.hooks.get(&event).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Whether no hook is configured at all.
    pub fn is_empty(&self) -> bool {
        self.hooks.values().all(Vec::is_empty)
    }
}

/// What a hook is told about the moment it runs. `hook_event_name` is added
/// by [`HookRunner::run`]; fields that are `None` are left out of the JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct HookPayload {
    /// The task's id.
    pub task_id: String,
    /// The session's id (`session_id`, as Claude Code sends it).
    pub session_id: Option<String>,
    /// The session's saved history (`transcript_path`).
    pub transcript_path: Option<PathBuf>,
    /// The task's working directory (also the hook's working directory).
    pub cwd: PathBuf,
    /// The task's permission mode at this moment.
    pub permission_mode: PermissionMode,
    /// Tool events: the tool's name.
    pub tool_name: Option<String>,
    /// Tool events: the tool's input as the model gave it.
    pub tool_input: Option<Value>,
    /// PostToolUse: the tool's result.
    pub tool_response: Option<Value>,
    /// UserPromptSubmit: the prompt.
    pub prompt: Option<String>,
    /// Event-specific fields (SessionStart `source`, SessionEnd `reason`,
    /// Stop `stop_hook_active`, Notification `message`, PreCompact
    /// `trigger`), written as they are.
    pub extra: Map<String, Value>,
}

impl HookPayload {
    /// A payload for the task events (TaskStart, TaskResume, TaskCancel,
    /// TaskComplete, PreCompact).
    pub fn task(
        task_id: impl Into<String>,
        cwd: impl Into<PathBuf>,
        permission_mode: PermissionMode,
    ) -> Self {
        Self {
            task_id: task_id.into(),
            session_id: None,
            transcript_path: None,
            cwd: cwd.into(),
            permission_mode,
            tool_name: None,
            tool_input: None,
            tool_response: None,
            prompt: None,
            extra: Map::new(),
        }
    }

    /// Adds the session's id and the path of its saved history.
    pub fn with_session(
        mut self,
        session_id: impl Into<String>,
        transcript_path: Option<PathBuf>,
    ) -> Self {
        self.session_id = Some(session_id.into());
        self.transcript_path = transcript_path;
        self
    }

    /// Adds an event-specific field (`source`, `reason`, `message`,
    /// `trigger`, `stop_hook_active`, …). The common fields cannot be
    /// overwritten this way.
    pub fn with_field(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.extra.insert(key.into(), value.into());
        self
    }

    /// Adds the prompt (UserPromptSubmit).
    pub fn with_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.prompt = Some(prompt.into());
        self
    }

    /// Adds the tool call (PreToolUse, PostToolUse).
    pub fn with_tool(mut self, tool_name: impl Into<String>, tool_input: Value) -> Self {
        self.tool_name = Some(tool_name.into());
        self.tool_input = Some(tool_input);
        self
    }

    /// Inside a sub-agent (`agent` is not `main`): Claude Code's
    /// `agent_id` (the sub-agent's task id) and `agent_type` (its type).
    pub fn with_agent(mut self, agent: &str, agent_id: &str) -> Self {
        if agent != "main" && !agent.is_empty() {
            self.extra.insert("agent_id".into(), Value::from(agent_id));
            self.extra.insert("agent_type".into(), Value::from(agent));
        }
        self
    }

    /// Adds the tool call's id (`tool_use_id`, tool events).
    pub fn with_tool_use_id(mut self, id: impl Into<String>) -> Self {
        self.extra
            .insert("tool_use_id".into(), Value::from(id.into()));
        self
    }

    /// Adds the tool's result (PostToolUse).
    pub fn with_tool_response(mut self, tool_response: Value) -> Self {
        self.tool_response = Some(tool_response);
        self
    }

    /// The JSON object written to a hook's stdin for `event`.
    pub fn to_json(&self, event: HookEvent) -> Value {
        let mut map = self.extra.clone();
        map.insert("hook_event_name".into(), Value::from(event.as_str()));
        // Session events (SessionStart, SessionEnd) belong to no task.
        if !self.task_id.is_empty() {
            map.insert("task_id".into(), Value::from(self.task_id.clone()));
        }
        if let Some(id) = &self.session_id {
            map.insert("session_id".into(), Value::from(id.clone()));
        }
        if let Some(path) = &self.transcript_path {
            map.insert(
                "transcript_path".into(),
                Value::from(path.to_string_lossy().into_owned()),
            );
        }
        map.insert(
            "cwd".into(),
            Value::from(self.cwd.to_string_lossy().into_owned()),
        );
        map.insert(
            "permission_mode".into(),
            Value::from(self.permission_mode.claude_name()),
        );
        if let Some(name) = &self.tool_name {
            map.insert("tool_name".into(), Value::from(name.clone()));
        }
        if let Some(input) = &self.tool_input {
            map.insert("tool_input".into(), input.clone());
        }
        if let Some(response) = &self.tool_response {
            map.insert("tool_response".into(), response.clone());
        }
        if let Some(prompt) = &self.prompt {
            map.insert("prompt".into(), Value::from(prompt.clone()));
        }
        Value::Object(map)
    }
}

/// What running the hooks of one event came to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookOutcome {
    /// Set when a hook exited with code 2: its stderr (or, when it printed
    /// nothing there, a note naming the hook). The core blocks what the
    /// event announced.
    pub blocked: Option<String>,
    /// The stdout of every hook that exited 0 and printed something, each
    /// capped at [`CONTEXT_CAP_CHARS`] characters: context for the model.
    pub context: Vec<String>,
    /// Hooks that failed without blocking (other exit codes, could not
    /// start, timed out, killed by a signal): one message each for the
    /// user, naming the hook.
    pub warnings: Vec<String>,
    /// The cancellation token fired: the running hook was killed and the
    /// rest were skipped.
    pub cancelled: bool,
    /// PreToolUse: the strongest permission decision a hook answered with
    /// in JSON (`deny` over `ask` over `allow`). A `deny` also sets
    /// [`Self::blocked`]. An `allow` may skip the approval prompt but never
    /// overrides a deny rule; an `ask` forces the prompt.
    pub permission: Option<PermissionDecision>,
    /// A hook answered `"continue": false`: the task must stop; its
    /// `stopReason` (or a note naming the hook). Also sets [`Self::blocked`].
    pub stop: Option<String>,
    /// `systemMessage`s of hooks: shown to the user, not to the model.
    pub messages: Vec<String>,
}

/// A PreToolUse hook's `hookSpecificOutput.permissionDecision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PermissionDecision {
    /// Run the tool without asking (unless a deny rule forbids it).
    Allow,
    /// Ask the user, even where a rule or the mode would allow.
    Ask,
    /// Refuse the call; the reason goes to the model.
    Deny,
}

impl PermissionDecision {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "allow" | "approve" => Some(Self::Allow),
            "ask" => Some(Self::Ask),
            "deny" | "block" => Some(Self::Deny),
            _ => None,
        }
    }
}

impl HookOutcome {
    /// Whether a hook blocked.
    pub fn is_blocked(&self) -> bool {
        self.blocked.is_some()
    }
}

/// Runs the configured hooks. Cheap to clone; shares nothing mutable.
#[derive(Debug, Clone, Default)]
pub struct HookRunner {
    config: HooksConfig,
    /// The session's child-process environment policy.
    env_policy: std::sync::Arc<process::EnvPolicy>,
    /// The front end's program's hook callbacks (the Agent SDK's), run
    /// after the configured hooks of the same event.
    program: Option<ProgramHooks>,
}

impl HookRunner {
    /// A runner for `config` (its hooks get the built-in secret names
    /// removed from their environment).
    pub fn new(config: HooksConfig) -> Self {
        Self {
            config,
            env_policy: std::sync::Arc::default(),
            program: None,
        }
    }

    /// This runner with the program's hook callbacks after the
    /// configured hooks.
    pub fn with_program(mut self, program: Option<ProgramHooks>) -> Self {
        self.program = program.filter(|p| !p.is_empty());
        self
    }

    /// This runner with the session's environment policy (`secret_env`,
    /// `env_passthrough`) for the hooks it starts.
    pub fn with_env_policy(mut self, policy: std::sync::Arc<process::EnvPolicy>) -> Self {
        self.env_policy = policy;
        self
    }

    /// The configuration it runs.
    pub fn config(&self) -> &HooksConfig {
        &self.config
    }

    /// Whether at least one hook is configured for `event` (for any tool).
    pub fn has_hooks(&self, event: HookEvent) -> bool {
        !self.config.hooks(event).is_empty()
            || self
                .program
                .as_ref()
                .is_some_and(|p| !p.hooks(event).is_empty())
    }

    /// Runs every hook of `event` that applies (for tool events: whose
    /// matcher matches `payload.tool_name`), in order, in `payload.cwd`.
    /// Stops at the first block. Cancelling `cancel` kills the running
    /// hook's process group and skips the rest.
    pub async fn run(
        &self,
        event: HookEvent,
        payload: HookPayload,
        cancel: &CancellationToken,
    ) -> HookOutcome {
        let mut outcome = HookOutcome::default();
        let hooks = self.config.hooks(event);
        if !self.has_hooks(event) {
            return outcome;
        }
        let stdin = match serde_json::to_vec(&payload.to_json(event)) {
            Ok(mut bytes) => {
                bytes.push(b'\n');
                bytes
            }
            Err(e) => {
                outcome.warnings.push(format!(
                    "{event} hooks not run: payload could not be encoded: {e}"
                ));
                return outcome;
            }
        };
        let subject = matcher_subject(event, &payload);
        for hook in hooks {
            if event.has_matcher()
                && let Some(matcher) = &hook.matcher
                && !matcher.matches(subject.as_deref().unwrap_or(""))
            {
                continue;
            }
            if cancel.is_cancelled() {
                outcome.cancelled = true;
                break;
            }
            let label = format!("{event} hook `{}`", hook.command);
            let run = run_one(hook, &payload.cwd, &stdin, &self.env_policy, cancel).await;
            if absorb(run, event, &label, hook.timeout, &mut outcome) {
                break;
            }
        }
        if let Some(program) = &self.program
            && !outcome.is_blocked()
            && !outcome.cancelled
        {
            let input = payload.to_json(event);
            run_program(
                program,
                event,
                &input,
                subject.as_deref(),
                cancel,
                &mut outcome,
            )
            .await;
        }
        outcome
    }
}

/// Takes one hook's run into `outcome`: its context, its JSON answer, its
/// block, or a warning (`label` names the hook). True when the hooks after
/// it must not run (a block, a stop, a cancellation).
fn absorb(
    run: HookRun,
    event: HookEvent,
    label: &str,
    timeout: Duration,
    outcome: &mut HookOutcome,
) -> bool {
    match run {
        HookRun::Exited {
            status,
            stdout,
            stderr,
        } => match status.code() {
            Some(0) => {
                if let Some(answer) = JsonAnswer::parse(&stdout) {
                    return answer.apply(event, label, outcome);
                }
                let text = cap_chars(&stdout, CONTEXT_CAP_CHARS);
                if !text.trim().is_empty() {
                    outcome.context.push(text);
                }
            }
            Some(BLOCK_EXIT_CODE) => {
                let reason = cap_chars(stderr.trim(), STDERR_CAP_CHARS);
                outcome.blocked = Some(if reason.is_empty() {
                    format!("blocked by {label} (exit code 2, nothing on stderr)")
                } else {
                    reason
                });
                return true;
            }
            Some(code) => outcome.warnings.push(with_stderr(
                format!("{label} failed with exit code {code}"),
                &stderr,
            )),
            None => outcome.warnings.push(with_stderr(
                format!("{label} was killed by a signal ({status})"),
                &stderr,
            )),
        },
        HookRun::SpawnFailed(e) => outcome
            .warnings
            .push(format!("{label} could not start: {e}")),
        HookRun::TimedOut => outcome.warnings.push(format!(
            "{label} timed out after {} s and was killed, with every process it started (detached ones holding its output included); the session goes on",
            timeout.as_secs_f64()
        )),
        HookRun::Cancelled => {
            outcome.cancelled = true;
            return true;
        }
    }
    false
}

/// What a hook's matcher is matched against for `event`: the tool's name,
/// the event's own field (a notification's type, a compaction's trigger,
/// …), or nothing.
fn matcher_subject(event: HookEvent, payload: &HookPayload) -> Option<String> {
    match event.matcher_field() {
        Some("tool_name") => payload.tool_name.clone(),
        Some(field) => payload
            .extra
            .get(field)
            .and_then(Value::as_str)
            .map(str::to_string),
        None => None,
    }
}

/// Runs the program's callbacks of `event` that apply, in order, after the
/// configured hooks; stops at the first block.
async fn run_program(
    program: &ProgramHooks,
    event: HookEvent,
    input: &Value,
    subject: Option<&str>,
    cancel: &CancellationToken,
    outcome: &mut HookOutcome,
) {
    let tool_use_id = input
        .get("tool_use_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    for hook in program.hooks(event) {
        if event.has_matcher()
            && let Some(matcher) = &hook.matcher
            && !matcher.matches(subject.unwrap_or(""))
        {
            continue;
        }
        for id in &hook.callback_ids {
            if cancel.is_cancelled() {
                outcome.cancelled = true;
                return;
            }
            let label = format!("{event} hook callback `{id}` of the program");
            let request = HookCallbackRequest {
                callback_id: id.clone(),
                input: input.clone(),
                tool_use_id: tool_use_id.clone(),
            };
            match program.call(request, hook.timeout, cancel).await {
                program::CallbackRun::Answered(Value::Object(map)) => {
                    if JsonAnswer::from_map(&map).apply(event, &label, outcome) {
                        return;
                    }
                }
                program::CallbackRun::Answered(_) => {}
                program::CallbackRun::Failed(e) if hook.block_on_failure => {
                    outcome.blocked = Some(format!("blocked: {label} failed ({e})"));
                    return;
                }
                program::CallbackRun::Failed(e) => {
                    outcome.warnings.push(format!("{label} failed: {e}"));
                }
                program::CallbackRun::Cancelled => {
                    outcome.cancelled = true;
                    return;
                }
            }
        }
    }
}

/// A hook's answer in Claude Code's JSON style (stdout of an exit 0 that
/// is one JSON object).
#[derive(Debug, Default)]
struct JsonAnswer {
    decision: Option<String>,
    reason: Option<String>,
    permission: Option<PermissionDecision>,
    permission_reason: Option<String>,
    context: Option<String>,
    stop: Option<Option<String>>,
    message: Option<String>,
}

impl JsonAnswer {
    /// `None` when stdout is not one JSON object (then it is plain text).
    fn parse(stdout: &str) -> Option<Self> {
        let trimmed = stdout.trim();
        if !trimmed.starts_with('{') {
            return None;
        }
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(trimmed) else {
            return None;
        };
        Some(Self::from_map(&map))
    }

    /// The answer of one JSON object (a hook's stdout, a callback's
    /// answer).
    fn from_map(map: &Map<String, Value>) -> Self {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let specific = map.get("hookSpecificOutput");
        let field = |key: &str| specific.and_then(|s| s.get(key));
        Self {
            decision: text(map.get("decision")),
            reason: text(map.get("reason")),
            // PermissionRequest answers `decision: {behavior, message}`.
            permission: text(field("permissionDecision"))
                .or_else(|| text(field("decision").and_then(|d| d.get("behavior"))))
                .as_deref()
                .and_then(PermissionDecision::parse),
            permission_reason: text(field("permissionDecisionReason"))
                .or_else(|| text(field("decision").and_then(|d| d.get("message")))),
            context: text(field("additionalContext"))
                .or_else(|| text(map.get("additionalContext"))),
            stop: (map.get("continue") == Some(&Value::Bool(false)))
                .then(|| text(map.get("stopReason"))),
            message: text(map.get("systemMessage")),
        }
    }

    /// Folds the answer into `outcome`; `true` when it blocks (later hooks
    /// do not run).
    fn apply(self, event: HookEvent, label: &str, outcome: &mut HookOutcome) -> bool {
        if let Some(message) = self.message.filter(|m| !m.trim().is_empty()) {
            outcome.messages.push(cap_chars(&message, STDERR_CAP_CHARS));
        }
        if let Some(context) = self.context.filter(|c| !c.trim().is_empty()) {
            outcome.context.push(cap_chars(&context, CONTEXT_CAP_CHARS));
        }
        if let Some(reason) = self.stop {
            let reason = reason
                .filter(|r| !r.trim().is_empty())
                .unwrap_or_else(|| format!("stopped by {label} (\"continue\": false)"));
            outcome.stop = Some(reason.clone());
            outcome.blocked = Some(reason);
            return true;
        }
        let legacy = match self.decision.as_deref() {
            Some("approve") if event == HookEvent::PreToolUse => Some(PermissionDecision::Allow),
            Some("block") => Some(PermissionDecision::Deny),
            _ => None,
        };
        let Some(decision) = self.permission.or(legacy) else {
            return false;
        };
        if matches!(event, HookEvent::PreToolUse | HookEvent::PermissionRequest) {
            outcome.permission = outcome.permission.max(Some(decision));
        }
        if decision != PermissionDecision::Deny {
            return false;
        }
        let reason = self
            .permission_reason
            .or(self.reason)
            .filter(|r| !r.trim().is_empty())
            .unwrap_or_else(|| format!("blocked by {label}"));
        outcome.blocked = Some(cap_chars(&reason, STDERR_CAP_CHARS));
        true
    }
}

fn with_stderr(message: String, stderr: &str) -> String {
    let stderr = stderr.trim();
    if stderr.is_empty() {
        message
    } else {
        format!("{message}: {}", cap_chars(stderr, STDERR_CAP_CHARS))
    }
}

/// Keeps the first `cap` characters of `text`, with a note when cut.
fn cap_chars(text: &str, cap: usize) -> String {
    match text.char_indices().nth(cap) {
        None => text.to_string(),
        Some((cut, _)) => {
            let rest = text[cut..].chars().count();
            format!("{}\n[… {rest} more characters cut]", &text[..cut])
        }
    }
}

/// How one hook's run ended.
enum HookRun {
    Exited {
        status: ExitStatus,
        stdout: String,
        stderr: String,
    },
    SpawnFailed(std::io::Error),
    TimedOut,
    Cancelled,
}

async fn run_one(
    hook: &HookSpec,
    cwd: &std::path::Path,
    stdin: &[u8],
    env_policy: &std::sync::Arc<process::EnvPolicy>,
    cancel: &CancellationToken,
) -> HookRun {
    let options = process::SpawnOptions::default().with_env(std::sync::Arc::clone(env_policy));
    let mut child: GroupChild =
        match process::spawn_in_group_with(hook_command(hook, cwd), &options) {
            Ok(child) => child,
            Err(e) => return HookRun::SpawnFailed(e),
        };
    let deadline = tokio::time::Instant::now() + hook.timeout;
    let stdout = child.child_mut().stdout.take();
    let stderr = child.child_mut().stderr.take();
    // The output pipes: whoever still holds them after the hook's time is
    // up (a child it detached with `setsid … &`) is killed too.
    let pipes: Vec<u64> = [
        stdout.as_ref().and_then(|s| process::pipe_inode(s.as_fd())),
        stderr.as_ref().and_then(|s| process::pipe_inode(s.as_fd())),
    ]
    .into_iter()
    .flatten()
    .collect();
    let stdout = stdout.map(|s| tokio::spawn(read_capped(s)));
    let stderr = stderr.map(|s| tokio::spawn(read_capped(s)));
    feed_stdin(&mut child, stdin);

    let ended = tokio::select! {
        status = child.wait() => Some(status),
        () = tokio::time::sleep_until(deadline) => None,
        () = cancel.cancelled() => {
            kill_all(&mut child, &pipes).await;
            return HookRun::Cancelled;
        }
    };
    let status = match ended {
        None => {
            kill_all(&mut child, &pipes).await;
            return HookRun::TimedOut;
        }
        Some(Err(e)) => {
            kill_all(&mut child, &pipes).await;
            return HookRun::SpawnFailed(e);
        }
        Some(Ok(status)) => status,
    };
    // The leader is done: end whatever it left behind (nothing is signalled
    // when the group is already empty), which also closes their ends of the
    // output pipes.
    let _ = child.shutdown(Duration::ZERO).await;
    // A process that left the group but kept a pipe open holds the output
    // open: wait for it only until the hook's time is up, then kill it.
    let output = async { (join_reader(stdout).await, join_reader(stderr).await) };
    tokio::pin!(output);
    let (stdout, stderr) = tokio::select! {
        both = &mut output => both,
        () = tokio::time::sleep_until(deadline) => {
            process::kill_pipe_holders(&pipes);
            let _ = output.await;
            return HookRun::TimedOut;
        }
        () = cancel.cancelled() => {
            process::kill_pipe_holders(&pipes);
            let _ = output.await;
            return HookRun::Cancelled;
        }
    };
    HookRun::Exited {
        status,
        stdout,
        stderr,
    }
}

/// The shell command that runs `hook` in `cwd`, with the project
/// directory in its environment and all three standard streams piped.
fn hook_command(hook: &HookSpec, cwd: &std::path::Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(&hook.command)
        .current_dir(cwd)
        .env("KAJI_PROJECT_DIR", cwd)
        .env("CLAUDE_PROJECT_DIR", cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Writes the payload to the hook's stdin in the background: a hook that
/// never reads its stdin must not stall the run; a closed pipe is ignored.
fn feed_stdin(child: &mut GroupChild, stdin: &[u8]) {
    if let Some(mut pipe) = child.child_mut().stdin.take() {
        let bytes = stdin.to_vec();
        tokio::spawn(async move {
            let _ = pipe.write_all(&bytes).await;
            let _ = pipe.shutdown().await;
        });
    }
}

/// Kills the hook's process group and whoever still holds its output
/// pipes.
async fn kill_all(child: &mut GroupChild, pipes: &[u64]) {
    let _ = child.kill_now().await;
    process::kill_pipe_holders(pipes);
}

async fn join_reader(handle: Option<tokio::task::JoinHandle<Vec<u8>>>) -> String {
    match handle {
        Some(handle) => String::from_utf8_lossy(&handle.await.unwrap_or_default()).into_owned(),
        None => String::new(),
    }
}

/// Reads `pipe` to its end, keeping the first [`PIPE_KEEP_BYTES`] bytes.
async fn read_capped(mut pipe: impl AsyncRead + Unpin) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = PIPE_KEEP_BYTES.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matcher_matches_whole_names() {
        let m = ToolMatcher::new("Edit|Write").expect("valid");
        assert!(m.matches("Edit"));
        assert!(m.matches("Write"));
        assert!(!m.matches("EditNotebook"));
        assert!(!m.matches("Read"));
        assert!(ToolMatcher::new("*").expect("valid").matches("Anything"));
        assert!(ToolMatcher::new("").expect("valid").matches("Anything"));
        assert!(
            ToolMatcher::new("mcp__.*")
                .expect("valid")
                .matches("mcp__fs__read")
        );
        assert!(ToolMatcher::new("(").is_err());
    }

    #[test]
    fn cap_chars_counts_characters() {
        assert_eq!(cap_chars("héllo", 10), "héllo");
        let capped = cap_chars("ééééé", 2);
        assert!(capped.starts_with("éé\n"));
        assert!(capped.contains("3 more characters"));
    }

    #[test]
    fn event_names_round_trip() {
        for event in HookEvent::ALL {
            assert_eq!(event.as_str().parse::<HookEvent>(), Ok(event));
        }
        assert!("Nope".parse::<HookEvent>().is_err());
    }
}
