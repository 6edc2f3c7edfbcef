//! What the runtime task registry speaks: the types, statuses and ids of
//! runtime tasks, their configuration, what a start asks for, what a read,
//! a stop and an end return, and the registry's errors. Plain data and its
//! formatting; it never starts, reads or stops anything.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{DEFAULT_OUTPUT_CAP_BYTES, DEFAULT_REPLY_CAP_CHARS};

/// The seven kinds of runtime task of the seed. Only
/// [`RuntimeTaskType::LocalBash`] can be started today; the others are
/// named so that ids, listings and refusals already speak of them.
///
/// Each type has the one-letter id prefix given in its docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeTaskType {
    /// A shell command line run in the background (prefix `b`).
    LocalBash,
    /// A sub-agent running in this process (prefix `a`).
    LocalAgent,
    /// An agent running elsewhere (prefix `r`).
    RemoteAgent,
    /// A teammate agent sharing this process (prefix `t`).
    InProcessTeammate,
    /// A scripted workflow (prefix `w`).
    LocalWorkflow,
    /// A watcher of an MCP server (prefix `m`).
    MonitorMcp,
    /// Background consolidation work (prefix `d`).
    Dream,
}

impl RuntimeTaskType {
    /// Every type, in the seed's order.
    pub const ALL: [RuntimeTaskType; 7] = [
        Self::LocalBash,
        Self::LocalAgent,
        Self::RemoteAgent,
        Self::InProcessTeammate,
        Self::LocalWorkflow,
        Self::MonitorMcp,
        Self::Dream,
    ];

    /// The name used in JSON and listings, e.g. `local_bash`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LocalBash => "local_bash",
            Self::LocalAgent => "local_agent",
            Self::RemoteAgent => "remote_agent",
            Self::InProcessTeammate => "in_process_teammate",
            Self::LocalWorkflow => "local_workflow",
            Self::MonitorMcp => "monitor_mcp",
            Self::Dream => "dream",
        }
    }

    /// The first character of ids of this type.
    pub fn id_prefix(self) -> char {
        match self {
            Self::LocalBash => 'b',
            Self::LocalAgent => 'a',
            Self::RemoteAgent => 'r',
            Self::InProcessTeammate => 't',
            Self::LocalWorkflow => 'w',
            Self::MonitorMcp => 'm',
            Self::Dream => 'd',
        }
    }

    /// Whether this kaji can start tasks of this type.
    pub fn is_implemented(self) -> bool {
        matches!(
            self,
            Self::LocalBash | Self::LocalAgent | Self::InProcessTeammate
        )
    }

    /// Whether tasks of this type are agents (started with
    /// [`RuntimeTaskRegistry::start_agent`], not a command line).
    pub fn is_agent(self) -> bool {
        matches!(self, Self::LocalAgent | Self::InProcessTeammate)
    }
}

impl fmt::Display for RuntimeTaskType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The life-cycle state of a runtime task (a process's life, not a plan's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeTaskStatus {
    /// Registered, not started yet.
    Pending,
    /// Running.
    Running,
    /// Ended on its own with exit code 0.
    Completed,
    /// Ended on its own with another exit code or a signal, or could not
    /// be run.
    Failed,
    /// Stopped by kaji (TaskStop, abort or exit).
    Killed,
}

impl RuntimeTaskStatus {
    /// The name used in JSON and listings, e.g. `running`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Killed => "killed",
        }
    }

    /// Whether the task has ended (completed, failed or killed).
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Killed)
    }
}

impl fmt::Display for RuntimeTaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A runtime task id: the type's prefix letter and 8 characters of
/// `[0-9a-z]`, e.g. `b9x4k2m1p`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RuntimeTaskId(pub(super) String);

impl RuntimeTaskId {
    const RANDOM_LEN: usize = 8;
    const ALPHABET: &'static [u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";

    /// A fresh random id for a task of `task_type`.
    pub fn generate(task_type: RuntimeTaskType) -> Self {
        let mut id = String::with_capacity(1 + Self::RANDOM_LEN);
        id.push(task_type.id_prefix());
        for _ in 0..Self::RANDOM_LEN {
            id.push(char::from(
                Self::ALPHABET[fastrand::usize(0..Self::ALPHABET.len())],
            ));
        }
        Self(id)
    }

    /// Checks the shape of `text`; `None` when it is not a runtime task id.
    pub fn parse(text: &str) -> Option<Self> {
        let mut chars = text.chars();
        let prefix = chars.next()?;
        let known_prefix = RuntimeTaskType::ALL.iter().any(|t| t.id_prefix() == prefix);
        let rest = chars.as_str();
        (known_prefix
            && rest.len() == Self::RANDOM_LEN
            && rest
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()))
        .then(|| Self(text.to_string()))
    }

    /// The type its prefix names.
    pub fn task_type(&self) -> Option<RuntimeTaskType> {
        let prefix = self.0.chars().next()?;
        RuntimeTaskType::ALL
            .into_iter()
            .find(|t| t.id_prefix() == prefix)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RuntimeTaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A snapshot of one runtime task, as listed by `kaji ps` and stored in
/// `session.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeTaskInfo {
    /// The task's id.
    pub id: RuntimeTaskId,
    /// Its type.
    #[serde(rename = "type")]
    pub task_type: RuntimeTaskType,
    /// Its status.
    pub status: RuntimeTaskStatus,
    /// What it is for, in a few words.
    pub description: String,
    /// The command line, for `local_bash`.
    #[serde(default)]
    pub command: Option<String>,
    /// The caller that started it (receives its [`FinishedNotice`]).
    pub owner: String,
    /// The leader's pid (also its process group id) while it has one.
    #[serde(default)]
    pub pid: Option<i32>,
    /// Start time, milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// End time, milliseconds since the Unix epoch.
    #[serde(default)]
    pub ended_at_ms: Option<u64>,
    /// Exit code, when it ended with one.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    #[serde(default)]
    pub signal: Option<i32>,
    /// The output file.
    pub output_path: PathBuf,
    /// Bytes of output written so far.
    pub output_bytes: u64,
    /// Of those, bytes dropped from the front of the file by its cap.
    pub dropped_bytes: u64,
    /// Why the task could not be run or its output not be kept, if so.
    #[serde(default)]
    pub error: Option<String>,
    /// For agents: the agent's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// For agents: what it is doing now (`idle` for a teammate waiting for
    /// work, else a few words such as `Bash` or `thinking`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity: Option<String>,
    /// For agents: the tokens (input plus output) it has used so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

/// Limits of a registry.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Most bytes an output file keeps (default 64 MiB). Past it the oldest
    /// half is dropped, and the file says so.
    pub output_cap_bytes: u64,
    /// Most characters one read returns (default 30,000); the newest are
    /// kept.
    pub reply_cap_chars: usize,
    /// Time between `SIGTERM` and `SIGKILL` when a task is stopped
    /// (default `KAJI_KILL_GRACE_MS`, else 2 s).
    pub kill_grace: Duration,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            output_cap_bytes: DEFAULT_OUTPUT_CAP_BYTES,
            reply_cap_chars: DEFAULT_REPLY_CAP_CHARS,
            kill_grace: crate::limits::kill_grace_from_env(),
        }
    }
}

/// What a registry operation can fail with. The messages are written for
/// the model and for users: they say which task and what to do.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// No runtime task has this id in this session.
    #[error("no runtime task `{id}` in this session{hint}")]
    UnknownTask {
        /// The id asked for.
        id: String,
        /// Extra help (empty, or starting with `; `).
        hint: String,
    },
    /// The id is a task-list (plan) id, not a runtime task id.
    #[error(
        "`{id}` is a task-list (plan) task id, not a runtime task id: runtime task ids look like \
         `b9x4k2m1p` (returned by Bash with run_in_background); use TaskGet or TaskUpdate for plan tasks"
    )]
    PlanTaskId {
        /// The id asked for.
        id: String,
    },
    /// The task has already ended.
    #[error("runtime task `{id}` is not running: it already ended as {status}{exit}")]
    NotRunning {
        /// The task.
        id: RuntimeTaskId,
        /// Its final status.
        status: RuntimeTaskStatus,
        /// ` (exit code N)` or empty.
        exit: String,
    },
    /// This kind of runtime task cannot be started by this kaji.
    #[error(
        "runtime tasks of type {0} are not implemented yet; local_bash (commands), local_agent and in_process_teammate (agents) can be started"
    )]
    UnsupportedType(RuntimeTaskType),
    /// An agent type given where a command is started, or the other way
    /// round.
    #[error(
        "runtime tasks of type {0} are {kind}: start them with {with}",
        kind = if .0.is_agent() { "agents" } else { "commands" },
        with = if .0.is_agent() { "start_agent (the Agent tool)" } else { "start (Bash with run_in_background)" }
    )]
    WrongStart(RuntimeTaskType),
    /// The registry has been shut down ([`RuntimeTaskRegistry::shutdown`]).
    #[error("the session is shutting down: no new runtime task can be started")]
    ShuttingDown,
    /// The configuration makes no sense.
    #[error("invalid runtime task configuration: {0}")]
    InvalidConfig(String),
    /// The command could not be started.
    #[error("could not start `{command}`: {source}")]
    Spawn {
        /// The command line.
        command: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file of the registry could not be written or read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// What to start.
#[derive(Debug, Clone)]
pub struct StartRequest {
    /// The kind of task.
    pub task_type: RuntimeTaskType,
    /// What it is for, in a few words.
    pub description: String,
    /// The command line (for `local_bash`).
    pub command: String,
    /// Working directory.
    pub cwd: PathBuf,
    /// The caller starting it; it gets the [`FinishedNotice`] and its reads
    /// decide what counts as unread.
    pub owner: String,
}

/// How long a read waits before it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadWait {
    /// Returns at once (`block: false`).
    Now,
    /// Until the task has ended or the timeout passed (`block: true`).
    Ended,
    /// Until new output appears, the task ends, or the timeout passes (for
    /// callers that follow output as it comes, such as tests and UIs).
    NewOutput,
}

/// The answer to [`RuntimeTaskRegistry::read_since_last`].
#[derive(Debug, Clone)]
pub struct OutputRead {
    /// The task as it was when the bytes were read. When its status is
    /// terminal, `output` reaches the very end of the output.
    pub task: RuntimeTaskInfo,
    /// The new bytes (after the reply cap).
    pub output: Vec<u8>,
    /// Logical offset of the first byte of `output`.
    pub start_offset: u64,
    /// Logical offset just past `output`: where this caller's next read
    /// starts.
    pub end_offset: u64,
    /// New bytes this caller never saw because the output file's cap had
    /// dropped them already.
    pub dropped_bytes: u64,
    /// New bytes left out of this reply by the reply cap (the newest were
    /// kept); they are still in the output file.
    pub skipped_bytes: u64,
    /// The call blocked and the timeout passed before what it waited for
    /// (the end of the task, or new output) came.
    pub timed_out: bool,
}

impl OutputRead {
    /// The new output as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.output).into_owned()
    }

    /// The reply for the model: status line, notes on skipped bytes, then
    /// the new output.
    pub fn to_prompt_text(&self) -> String {
        let t = &self.task;
        let mut out = format!("Task {} ({}): {}", t.id, t.description, status_phrase(t));
        out.push('\n');
        if self.dropped_bytes > 0 {
            out.push_str(&format!(
                "[{} bytes of output were dropped by the output file's cap before you read them]\n",
                self.dropped_bytes
            ));
        }
        if self.skipped_bytes > 0 {
            out.push_str(&format!(
                "[{} older bytes of new output were skipped to keep this reply short; the full output is in {}]\n",
                self.skipped_bytes,
                t.output_path.display()
            ));
        }
        if self.timed_out && !t.status.is_terminal() && !self.output.is_empty() {
            out.push_str(
                "[the task is still running: the wait timed out; this is its output so far]\n",
            );
        }
        if self.output.is_empty() {
            if self.timed_out {
                out.push_str("(no new output; the wait timed out)\n");
            } else {
                out.push_str("(no new output since your last read)\n");
            }
        } else {
            out.push_str(&self.text());
            if !out.ends_with('\n') {
                out.push('\n');
            }
        }
        if let Some(error) = &t.error {
            out.push_str(&format!("[error: {error}]\n"));
        }
        out
    }
}

fn status_phrase(t: &RuntimeTaskInfo) -> String {
    match (t.status, t.exit_code, t.signal) {
        (RuntimeTaskStatus::Killed, _, _) => "killed".to_string(),
        (status, Some(code), _) => format!("{status} (exit code {code})"),
        (status, None, Some(sig)) => format!("{status} (signal {sig})"),
        (status, None, None) => status.to_string(),
    }
}

/// Told to the model when a background task has ended: the next request
/// carries it, so the model learns of the end without polling.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FinishedNotice {
    /// The task.
    pub id: RuntimeTaskId,
    /// Its type.
    pub task_type: RuntimeTaskType,
    /// What it was for.
    pub description: String,
    /// How it ended.
    pub status: RuntimeTaskStatus,
    /// Its exit code, if it had one.
    pub exit_code: Option<i32>,
    /// Bytes of output its owner has not read yet.
    pub unread_bytes: u64,
    /// The caller that started it.
    pub owner: String,
    /// The output file.
    pub output_path: PathBuf,
    /// For agents: the result it reported (its final answer, or its
    /// partial result naming what is unfinished).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
}

impl FinishedNotice {
    /// The text for the next model request.
    pub fn to_prompt_text(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for FinishedNotice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Background task {} ({}) ", self.id, self.description)?;
        match (self.status, self.exit_code) {
            (RuntimeTaskStatus::Killed, _) => f.write_str("was killed")?,
            (status, Some(code)) => write!(f, "{status} with exit code {code}")?,
            (status, None) => write!(f, "{status}")?,
        }
        if let Some(result) = &self.result {
            write!(f, ". Its result:\n{result}\n")?;
            return write!(
                f,
                "(The whole transcript: TaskOutput {{\"task_id\": \"{}\"}} or the file {}.)",
                self.id,
                self.output_path.display()
            );
        }
        if self.unread_bytes > 0 {
            write!(
                f,
                "; {} bytes of its output are unread (TaskOutput {{\"task_id\": \"{}\"}}, or the file {}).",
                self.unread_bytes,
                self.id,
                self.output_path.display()
            )
        } else {
            f.write_str("; you have read all of its output.")
        }
    }
}

/// A runtime task that [`RuntimeTaskRegistry::stop_all`],
/// [`RuntimeTaskRegistry::stop_owned_by`] or
/// [`RuntimeTaskRegistry::shutdown`] stopped, for the front end to report
/// ("background task b… (`npm run dev`) was killed at exit").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoppedTask {
    /// The task.
    pub id: RuntimeTaskId,
    /// Its type.
    #[serde(rename = "type")]
    pub task_type: RuntimeTaskType,
    /// What it was for.
    pub description: String,
    /// The command line, for `local_bash`.
    pub command: Option<String>,
    /// The caller that started it.
    pub owner: String,
    /// Its status when the stop came (`running` or `pending`).
    pub status_before: RuntimeTaskStatus,
    /// The task after the stop (status `killed`).
    pub info: RuntimeTaskInfo,
}
