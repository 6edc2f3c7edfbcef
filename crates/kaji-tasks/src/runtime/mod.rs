//! The runtime task registry: *who is running now* (seed 002, layer two of
//! "Task").
//!
//! A session owns one [`RuntimeTaskRegistry`]. It starts background work
//! (today: `local_bash`, a shell command line), gives each piece a
//! [`RuntimeTaskId`], captures its stdout and stderr into a capped output
//! file `$KAJI_HOME/runs/<session-id>/<id>.output`, lets each caller read
//! what is new since *its* previous read ([`RuntimeTaskRegistry::read_since_last`]),
//! stops tasks with their whole process group ([`RuntimeTaskRegistry::stop`],
//! [`RuntimeTaskRegistry::stop_all`]) and queues a [`FinishedNotice`] when a
//! task ends, for the core to put into the next model request.
//!
//! Each session also keeps `runs/<session-id>/session.json` up to date (see
//! [`state`]), from which `kaji ps` lists the runtime tasks of every
//! running session on the machine.
//!
//! This module must never touch the task list: a runtime task that fails
//! changes no plan task. It never blocks the producer of output (the
//! capture keeps reading whatever the cap), never polls while waiting, and
//! never leaves a process running once its registry is stopped or dropped.

mod agent;
pub mod orphans;
mod output;
pub mod state;

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::process::{self, GroupChild};
pub use agent::{AgentEnd, AgentStart, AgentTaskHandle};
pub use orphans::{KilledOrphan, OrphanGroup, find_orphans, kill_orphans};
use output::OutputLog;
pub use state::{SessionScan, SessionState, SkippedStateFile, scan_sessions};

/// Default cap of a task's output file: 64 MiB.
pub const DEFAULT_OUTPUT_CAP_BYTES: u64 = 64 * 1024 * 1024;
/// Default cap of one [`OutputRead`] reply: 30,000 characters.
pub const DEFAULT_REPLY_CAP_CHARS: usize = 30_000;
/// The caller key of the session's main agent.
pub const MAIN_CALLER: &str = "main";

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
pub struct RuntimeTaskId(String);

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

/// Mutable facts about a task.
#[derive(Debug)]
struct TaskState {
    status: RuntimeTaskStatus,
    pid: Option<i32>,
    ended_at_ms: Option<u64>,
    exit_code: Option<i32>,
    signal: Option<i32>,
    error: Option<String>,
    /// Each caller's next logical read offset.
    offsets: HashMap<String, u64>,
    /// The owner has seen the task's end and read everything: no notice.
    owner_saw_end: bool,
    /// For agents: what it is doing now.
    activity: Option<String>,
    /// For agents: tokens used so far.
    tokens: Option<u64>,
    /// For agents: the result it reported.
    result: Option<String>,
}

impl TaskState {
    /// A task that just started, with its process group's `pid` if any.
    fn running(pid: Option<i32>) -> Self {
        Self {
            status: RuntimeTaskStatus::Running,
            pid,
            ended_at_ms: None,
            exit_code: None,
            signal: None,
            error: None,
            offsets: HashMap::new(),
            owner_saw_end: false,
            activity: None,
            tokens: None,
            result: None,
        }
    }
}

/// An id of `task_type` that no task of `tasks` has.
fn fresh_id(tasks: &[Arc<TaskEntry>], task_type: RuntimeTaskType) -> RuntimeTaskId {
    loop {
        let id = RuntimeTaskId::generate(task_type);
        if !tasks.iter().any(|t| t.id == id) {
            return id;
        }
    }
}

#[derive(Debug)]
struct TaskEntry {
    id: RuntimeTaskId,
    task_type: RuntimeTaskType,
    description: String,
    command: Option<String>,
    owner: String,
    /// For agents: the agent's name.
    agent: Option<String>,
    started_at_ms: u64,
    log: Arc<OutputLog>,
    stop: CancellationToken,
    state: Mutex<TaskState>,
}

impl TaskEntry {
    fn state(&self) -> MutexGuard<'_, TaskState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn info(&self) -> RuntimeTaskInfo {
        let st = self.state();
        self.info_locked(&st)
    }

    fn info_locked(&self, st: &TaskState) -> RuntimeTaskInfo {
        let progress = self.log.progress();
        RuntimeTaskInfo {
            id: self.id.clone(),
            task_type: self.task_type,
            status: st.status,
            description: self.description.clone(),
            command: self.command.clone(),
            owner: self.owner.clone(),
            pid: st.pid,
            started_at_ms: self.started_at_ms,
            ended_at_ms: st.ended_at_ms,
            exit_code: st.exit_code,
            signal: st.signal,
            output_path: self.log.path().to_path_buf(),
            output_bytes: progress.written,
            dropped_bytes: self.log.dropped(),
            error: st.error.clone().or_else(|| self.log.error()),
            agent: self.agent.clone(),
            activity: st.activity.clone(),
            tokens: st.tokens,
        }
    }

    /// Waits until the task has ended and its output is complete.
    async fn wait_finished(&self) {
        let mut rx = self.log.subscribe();
        // An error means the sender is gone, which only happens when the
        // entry is dropped: nothing more will change.
        let _ = rx.wait_for(|p| p.finished).await;
    }
}

#[derive(Debug)]
struct Shared {
    session_id: String,
    run_dir: PathBuf,
    state_path: PathBuf,
    config: RuntimeConfig,
    started_at_ms: u64,
    pid_start_ticks: Option<u64>,
    /// Tasks in start order.
    tasks: Mutex<Vec<Arc<TaskEntry>>>,
    /// Ids of ended tasks whose notice has not been taken yet.
    notices: Mutex<Vec<RuntimeTaskId>>,
    /// Cancelled by stop_all and on drop: stops every task.
    shutdown: CancellationToken,
    /// Serialises rewrites of `session.json`.
    state_write: Mutex<()>,
}

impl Shared {
    fn tasks(&self) -> MutexGuard<'_, Vec<Arc<TaskEntry>>> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a task of `task_type` may start now: a type that is
    /// implemented, started the right way (`agent`: through `start_agent`)
    /// and a registry that is not shutting down.
    fn may_start(&self, task_type: RuntimeTaskType, agent: bool) -> Result<(), RuntimeError> {
        if !task_type.is_implemented() {
            return Err(RuntimeError::UnsupportedType(task_type));
        }
        if task_type.is_agent() != agent {
            return Err(RuntimeError::WrongStart(task_type));
        }
        if self.shutdown.is_cancelled() {
            return Err(RuntimeError::ShuttingDown);
        }
        Ok(())
    }

    /// Creates the capped output file of task `id` in the run directory.
    fn create_log(&self, id: &RuntimeTaskId) -> Result<(PathBuf, OutputLog), RuntimeError> {
        let output_path = self.run_dir.join(format!("{id}.output"));
        let log = OutputLog::create(output_path.clone(), self.config.output_cap_bytes).map_err(
            |source| RuntimeError::Io {
                path: output_path.clone(),
                source,
            },
        )?;
        Ok((output_path, log))
    }

    fn notices(&self) -> MutexGuard<'_, Vec<RuntimeTaskId>> {
        self.notices.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn snapshot(&self) -> SessionState {
        let tasks = self.tasks().iter().map(|t| t.info()).collect();
        SessionState {
            schema_version: state::SESSION_STATE_SCHEMA_VERSION,
            session_id: self.session_id.clone(),
            pid: std::process::id(),
            pid_start_ticks: self.pid_start_ticks,
            started_at_ms: self.started_at_ms,
            tasks,
        }
    }

    /// Rewrites `session.json`. Failures are not fatal to the tasks: the
    /// file only feeds `kaji ps`.
    fn persist(&self) -> std::io::Result<()> {
        let _guard = self.state_write.lock().unwrap_or_else(|e| e.into_inner());
        let snapshot = self.snapshot();
        state::write_state(&self.state_path, &snapshot)
    }
}

/// Registry of the runtime tasks of one session; see the module docs.
///
/// Share it as `Arc<RuntimeTaskRegistry>`. Dropping it stops every task
/// still running (as [`RuntimeTaskRegistry::stop_all`] does, without
/// waiting), provided the Tokio runtime is still alive; if the runtime goes
/// first, each task's process group is killed as its handle is dropped.
#[derive(Debug)]
pub struct RuntimeTaskRegistry {
    shared: Arc<Shared>,
}

impl RuntimeTaskRegistry {
    /// Creates the registry of session `session_id`, with its run directory
    /// `kaji_home/runs/<session_id>/` and its `session.json`.
    pub fn new(
        kaji_home: &Path,
        session_id: &str,
        config: RuntimeConfig,
    ) -> Result<Self, RuntimeError> {
        if session_id.is_empty()
            || session_id == "."
            || session_id == ".."
            || session_id.contains(['/', '\\', '\0'])
        {
            return Err(RuntimeError::InvalidConfig(format!(
                "session id `{session_id}` cannot be used as a directory name"
            )));
        }
        if config.output_cap_bytes < 16 {
            return Err(RuntimeError::InvalidConfig(format!(
                "output_cap_bytes is {}; it must be at least 16",
                config.output_cap_bytes
            )));
        }
        if config.reply_cap_chars == 0 {
            return Err(RuntimeError::InvalidConfig(
                "reply_cap_chars must be at least 1".to_string(),
            ));
        }
        let run_dir = kaji_home.join("runs").join(session_id);
        std::fs::create_dir_all(&run_dir).map_err(|source| RuntimeError::Io {
            path: run_dir.clone(),
            source,
        })?;
        let state_path = run_dir.join(state::SESSION_STATE_FILE);
        crate::watchdog::record_groups_in(run_dir.join(crate::watchdog::GROUPS_FILE));
        let shared = Arc::new(Shared {
            session_id: session_id.to_string(),
            run_dir,
            state_path: state_path.clone(),
            config,
            started_at_ms: now_ms(),
            pid_start_ticks: crate::procfs::own_start_ticks(),
            tasks: Mutex::new(Vec::new()),
            notices: Mutex::new(Vec::new()),
            shutdown: CancellationToken::new(),
            state_write: Mutex::new(()),
        });
        shared.persist().map_err(|source| RuntimeError::Io {
            path: state_path,
            source,
        })?;
        Ok(Self { shared })
    }

    /// The session id.
    pub fn session_id(&self) -> &str {
        &self.shared.session_id
    }

    /// `$KAJI_HOME/runs/<session-id>/`, where the output files are.
    pub fn run_dir(&self) -> &Path {
        &self.shared.run_dir
    }

    /// The limits in force.
    pub fn config(&self) -> &RuntimeConfig {
        &self.shared.config
    }

    /// Starts a runtime task. Only `local_bash` is implemented: other types
    /// are refused with [`RuntimeError::UnsupportedType`].
    ///
    /// The command runs with [`process::shell_command`] in `cwd`, in its own
    /// process group, stdin from `/dev/null`, stdout and stderr appended to
    /// the output file. Must be called within a Tokio runtime.
    pub async fn start(&self, request: StartRequest) -> Result<RuntimeTaskInfo, RuntimeError> {
        self.start_with(request, process::SpawnOptions::default())
            .await
    }

    /// [`RuntimeTaskRegistry::start`] with [`process::SpawnOptions`]: a
    /// sandbox given there confines the command and everything it starts.
    pub async fn start_with(
        &self,
        request: StartRequest,
        options: process::SpawnOptions,
    ) -> Result<RuntimeTaskInfo, RuntimeError> {
        self.shared.may_start(request.task_type, false)?;
        let id = fresh_id(&self.shared.tasks(), request.task_type);
        if !request.cwd.is_dir() {
            return Err(RuntimeError::Io {
                path: request.cwd.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "the working directory does not exist or is not a directory",
                ),
            });
        }
        let (output_path, log) = self.shared.create_log(&id)?;
        let log = Arc::new(log);

        let mut cmd = process::shell_command(&request.command);
        cmd.current_dir(&request.cwd)
            .stdin(std::process::Stdio::null());
        let (child, reader) = match process::spawn_with_merged_output_with(cmd, &options) {
            Ok(spawned) => spawned,
            Err(source) => {
                let _ = std::fs::remove_file(&output_path);
                return Err(RuntimeError::Spawn {
                    command: request.command,
                    source,
                });
            }
        };

        let entry = Arc::new(TaskEntry {
            id: id.clone(),
            task_type: request.task_type,
            description: request.description,
            command: Some(request.command),
            owner: request.owner,
            agent: None,
            started_at_ms: now_ms(),
            log: Arc::clone(&log),
            stop: self.shared.shutdown.child_token(),
            state: Mutex::new(TaskState::running(Some(child.pid()))),
        });

        let capture_done =
            spawn_capture(&id, reader, Arc::clone(&log)).map_err(|source| RuntimeError::Io {
                path: output_path.clone(),
                source,
            })?;
        self.shared.tasks().push(Arc::clone(&entry));
        let _ = self.shared.persist();
        tokio::spawn(supervise(
            Arc::clone(&self.shared),
            Arc::clone(&entry),
            child,
            capture_done,
        ));
        Ok(entry.info())
    }

    /// Starts `command` as a `local_bash` task owned by `owner`.
    pub async fn start_local_bash(
        &self,
        command: &str,
        description: &str,
        cwd: &Path,
        owner: &str,
    ) -> Result<RuntimeTaskInfo, RuntimeError> {
        self.start_local_bash_with(
            command,
            description,
            cwd,
            owner,
            process::SpawnOptions::default(),
        )
        .await
    }

    /// [`RuntimeTaskRegistry::start_local_bash`] with
    /// [`process::SpawnOptions`] (a sandbox).
    pub async fn start_local_bash_with(
        &self,
        command: &str,
        description: &str,
        cwd: &Path,
        owner: &str,
        options: process::SpawnOptions,
    ) -> Result<RuntimeTaskInfo, RuntimeError> {
        let request = StartRequest {
            task_type: RuntimeTaskType::LocalBash,
            description: description.to_string(),
            command: command.to_string(),
            cwd: cwd.to_path_buf(),
            owner: owner.to_string(),
        };
        self.start_with(request, options).await
    }

    fn lookup(&self, task_id: &str) -> Result<Arc<TaskEntry>, RuntimeError> {
        let task_id = task_id.trim();
        let found = self
            .shared
            .tasks()
            .iter()
            .find(|t| t.id.as_str() == task_id)
            .cloned();
        if let Some(entry) = found {
            return Ok(entry);
        }
        let plan_like = task_id.strip_prefix('#').unwrap_or(task_id);
        if !plan_like.is_empty() && plan_like.bytes().all(|b| b.is_ascii_digit()) {
            return Err(RuntimeError::PlanTaskId {
                id: task_id.to_string(),
            });
        }
        let hint = if RuntimeTaskId::parse(task_id).is_some() {
            String::new()
        } else {
            "; runtime task ids are a type letter and 8 characters of [0-9a-z], like `b9x4k2m1p`"
                .to_string()
        };
        Err(RuntimeError::UnknownTask {
            id: task_id.to_string(),
            hint,
        })
    }

    /// A snapshot of one task. Fails with [`RuntimeError::UnknownTask`] or
    /// [`RuntimeError::PlanTaskId`].
    pub fn get(&self, task_id: &str) -> Result<RuntimeTaskInfo, RuntimeError> {
        Ok(self.lookup(task_id)?.info())
    }

    /// Snapshots of every task, oldest first.
    pub fn list(&self) -> Vec<RuntimeTaskInfo> {
        self.shared.tasks().iter().map(|t| t.info()).collect()
    }

    /// Returns the output task `task_id` wrote since `caller`'s previous
    /// read of it (from the start on the first read). Each caller (the main
    /// agent, each sub-agent, …) has its own position; concatenating one
    /// caller's reads gives the output with nothing repeated and nothing
    /// skipped, except bytes reported in [`OutputRead::dropped_bytes`]
    /// (cut by the file cap) or [`OutputRead::skipped_bytes`] (cut by the
    /// reply cap; the newest are kept).
    ///
    /// With `block`, waits until the task has *ended* or `timeout` passes
    /// ([`ReadWait::Ended`], as Claude Code's TaskOutput does), then returns
    /// everything this caller has not read yet; without it, returns at once
    /// ([`ReadWait::Now`]).
    pub async fn read_since_last(
        &self,
        caller: &str,
        task_id: &str,
        block: bool,
        timeout: Duration,
    ) -> Result<OutputRead, RuntimeError> {
        let wait = if block {
            ReadWait::Ended
        } else {
            ReadWait::Now
        };
        self.read_waiting(caller, task_id, wait, timeout).await
    }

    /// [`Self::read_since_last`] with the wait spelled out. Woken by the
    /// producer, never polling. While the task runs, a UTF-8 character cut
    /// by the end of the available output is held back for the next read.
    pub async fn read_waiting(
        &self,
        caller: &str,
        task_id: &str,
        wait: ReadWait,
        timeout: Duration,
    ) -> Result<OutputRead, RuntimeError> {
        let entry = self.lookup(task_id)?;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rx = entry.log.subscribe();
        // Wait for more than this many bytes (or the end) before reading.
        let mut threshold = entry.state().offsets.get(caller).copied().unwrap_or(0);
        loop {
            let timed_out = match wait {
                ReadWait::Now => false,
                ReadWait::Ended => {
                    let end = rx.wait_for(|p| p.finished);
                    tokio::time::timeout_at(deadline, end).await.is_err()
                }
                ReadWait::NewOutput => {
                    let news = rx.wait_for(|p| p.finished || p.written > threshold);
                    tokio::time::timeout_at(deadline, news).await.is_err()
                }
            };
            let read = self.read_now(&entry, caller)?;
            let read = OutputRead {
                timed_out: timed_out && (wait == ReadWait::Ended || read.output.is_empty()),
                ..read
            };
            // New bytes that were all held back (half a UTF-8 character):
            // keep waiting rather than return an empty reply.
            let only_held_back = read.output.is_empty()
                && read.skipped_bytes == 0
                && read.dropped_bytes == 0
                && !read.task.status.is_terminal();
            if wait != ReadWait::NewOutput || timed_out || !only_held_back {
                return Ok(read);
            }
            threshold = entry.log.progress().written;
        }
    }

    /// One read for `caller`, without waiting.
    fn read_now(&self, entry: &TaskEntry, caller: &str) -> Result<OutputRead, RuntimeError> {
        let reply_cap = self.shared.config.reply_cap_chars;
        let mut st = entry.state();
        // Status first: if it says the task ended, every byte is already in
        // the log, so this read reaches the true end.
        let finished = entry.log.progress().finished;
        let info = entry.info_locked(&st);
        let offset = st.offsets.get(caller).copied().unwrap_or(0);
        let max_bytes = (reply_cap as u64).saturating_mul(4);
        let slice = entry
            .log
            .read_from(offset, max_bytes)
            .map_err(|source| RuntimeError::Io {
                path: entry.log.path().to_path_buf(),
                source,
            })?;
        let mut bytes = slice.bytes;
        let mut end = slice.end;
        if !finished {
            let held = incomplete_utf8_tail(&bytes);
            bytes.truncate(bytes.len() - held);
            end -= held as u64;
        }
        // Reply cap in characters, newest kept.
        let cut = start_of_last_chars(&bytes, reply_cap);
        let skipped = slice.skipped + cut as u64;
        let start = slice.start + cut as u64;
        bytes.drain(..cut);
        st.offsets.insert(caller.to_string(), end);
        if finished && caller == entry.owner && end == info.output_bytes {
            st.owner_saw_end = true;
        }
        drop(st);
        Ok(OutputRead {
            task: info,
            output: bytes,
            start_offset: start,
            end_offset: end,
            dropped_bytes: slice.dropped,
            skipped_bytes: skipped,
            timed_out: false,
        })
    }

    /// Waits until task `task_id` has ended and its output is complete, and
    /// returns its final snapshot. Reads nothing: no caller's position
    /// moves.
    pub async fn wait_finished(&self, task_id: &str) -> Result<RuntimeTaskInfo, RuntimeError> {
        let entry = self.lookup(task_id)?;
        entry.wait_finished().await;
        Ok(entry.info())
    }

    /// Stops a running task: `SIGTERM` to its whole process group, `SIGKILL`
    /// after the grace period, then waits until the group is gone and the
    /// output is complete. Its status becomes `killed`.
    ///
    /// Refuses an unknown id, a plan-task id and a task that already ended,
    /// each with its own [`RuntimeError`].
    pub async fn stop(&self, task_id: &str) -> Result<RuntimeTaskInfo, RuntimeError> {
        let entry = self.lookup(task_id)?;
        {
            let st = entry.state();
            if st.status.is_terminal() {
                return Err(RuntimeError::NotRunning {
                    id: entry.id.clone(),
                    status: st.status,
                    exit: st
                        .exit_code
                        .map(|c| format!(" (exit code {c})"))
                        .unwrap_or_default(),
                });
            }
        }
        entry.stop.cancel();
        entry.wait_finished().await;
        Ok(entry.info())
    }

    /// Stops every running task (as [`RuntimeTaskRegistry::stop`]) and
    /// returns those it stopped. The registry stays usable: new tasks can
    /// be started afterwards. Returns once every process group is gone.
    pub async fn stop_all(&self) -> Vec<StoppedTask> {
        self.stop_matching(|_| true, false).await
    }

    /// Stops the running tasks started by `owner` (e.g. a sub-agent that
    /// ends) and returns them; the others keep running.
    pub async fn stop_owned_by(&self, owner: &str) -> Vec<StoppedTask> {
        self.stop_matching(|entry| entry.owner == owner, false)
            .await
    }

    /// Ends the session's runtime tasks for good: refuses new ones from
    /// now on ([`RuntimeError::ShuttingDown`]), stops every running task
    /// and returns those it stopped. Call it once, when the session ends —
    /// not when one prompt is aborted (background work belongs to the
    /// session; use nothing, or [`Self::stop_owned_by`], there).
    pub async fn shutdown(&self) -> Vec<StoppedTask> {
        self.stop_matching(|_| true, true).await
    }

    /// Whether [`Self::shutdown`] has been called (or the registry is
    /// being dropped).
    pub fn is_shut_down(&self) -> bool {
        self.shared.shutdown.is_cancelled()
    }

    /// Stops the wanted tasks (and, with `refuse_new`, shuts the registry
    /// down at the same moment) and waits until they are gone.
    async fn stop_matching(
        &self,
        wanted: impl Fn(&TaskEntry) -> bool,
        refuse_new: bool,
    ) -> Vec<StoppedTask> {
        let mut stopping = Vec::new();
        {
            let tasks = self.shared.tasks();
            for task in tasks.iter().filter(|t| wanted(t)) {
                let before = task.state().status;
                if !before.is_terminal() {
                    task.stop.cancel();
                    stopping.push((Arc::clone(task), before));
                }
            }
            if refuse_new {
                self.shared.shutdown.cancel();
            }
        }
        let mut stopped = Vec::new();
        for (task, status_before) in stopping {
            task.wait_finished().await;
            let info = task.info();
            // A task that ended on its own meanwhile was not stopped.
            if info.status == RuntimeTaskStatus::Killed {
                stopped.push(StoppedTask {
                    id: task.id.clone(),
                    task_type: task.task_type,
                    description: task.description.clone(),
                    command: task.command.clone(),
                    owner: task.owner.clone(),
                    status_before,
                    info,
                });
            }
        }
        let _ = self.shared.persist();
        stopped
    }

    /// Takes the notices of every task that ended since the last call, for
    /// the next model request. A task whose owner already read all of its
    /// output after it ended gets no notice.
    pub fn take_finished_notices(&self) -> Vec<FinishedNotice> {
        self.take_notices(|_| true)
    }

    /// As [`RuntimeTaskRegistry::take_finished_notices`], only for the tasks
    /// started by `owner`; the others stay queued.
    pub fn take_finished_notices_for(&self, owner: &str) -> Vec<FinishedNotice> {
        self.take_notices(|entry| entry.owner == owner)
    }

    fn take_notices(&self, wanted: impl Fn(&TaskEntry) -> bool) -> Vec<FinishedNotice> {
        let ids: Vec<RuntimeTaskId> = {
            let mut queue = self.shared.notices();
            let tasks = self.shared.tasks();
            let (taken, kept): (Vec<_>, Vec<_>) = queue
                .drain(..)
                .partition(|id| tasks.iter().find(|t| &t.id == id).is_none_or(|t| wanted(t)));
            *queue = kept;
            taken
        };
        let mut notices = Vec::new();
        for id in ids {
            let Some(entry) = self.shared.tasks().iter().find(|t| t.id == id).cloned() else {
                continue;
            };
            let st = entry.state();
            if st.owner_saw_end {
                continue;
            }
            let read = st.offsets.get(&entry.owner).copied().unwrap_or(0);
            let info = entry.info_locked(&st);
            notices.push(FinishedNotice {
                id: entry.id.clone(),
                task_type: entry.task_type,
                description: entry.description.clone(),
                status: info.status,
                exit_code: info.exit_code,
                unread_bytes: info.output_bytes.saturating_sub(read),
                owner: entry.owner.clone(),
                output_path: info.output_path,
                result: st.result.clone(),
            });
        }
        notices
    }
}

impl Drop for RuntimeTaskRegistry {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
        crate::watchdog::stop_recording_in(&self.shared.run_dir.join(crate::watchdog::GROUPS_FILE));
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

/// Reads the merged output pipe on a thread of its own until every writer
/// is gone, appending to the log. Blocking reads keep the copy cheap and
/// off the async runtime; the producer is never throttled by the cap.
fn spawn_capture(
    id: &RuntimeTaskId,
    mut reader: std::io::PipeReader,
    log: Arc<OutputLog>,
) -> std::io::Result<tokio::sync::oneshot::Receiver<()>> {
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(format!("kaji-capture-{id}"))
        .spawn(move || {
            let mut buf = vec![0u8; 256 * 1024];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => log.append(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
            let _ = done_tx.send(());
        })?;
    Ok(done_rx)
}

/// Waits for the task's leader to exit (or for a stop), stops the rest of
/// its group, waits for the capture to finish, records the end and queues
/// the notice.
async fn supervise(
    shared: Arc<Shared>,
    entry: Arc<TaskEntry>,
    mut child: GroupChild,
    capture_done: tokio::sync::oneshot::Receiver<()>,
) {
    let grace = shared.config.kill_grace;
    let mut killed = false;
    let status = tokio::select! {
        status = child.wait() => status,
        _ = entry.stop.cancelled() => {
            killed = true;
            child.shutdown(grace).await
        }
    };
    // Members left behind by a leader that ended on its own.
    if !killed {
        let hurry = tokio::select! {
            _ = child.shutdown(grace) => false,
            _ = entry.stop.cancelled() => true,
        };
        if hurry {
            // A stop while the leftovers wind down: no more grace.
            let _ = child.kill_now().await;
        }
    }
    // Every writer of the pipe is dead, unless a process escaped the group:
    // do not wait for such a one forever.
    let _ = tokio::time::timeout(process::KILL_WAIT_LIMIT, capture_done).await;
    {
        let mut st = entry.state();
        st.ended_at_ms = Some(now_ms());
        st.pid = None;
        match &status {
            Ok(s) => {
                use std::os::unix::process::ExitStatusExt;
                st.exit_code = s.code();
                st.signal = s.signal();
                st.status = if killed {
                    RuntimeTaskStatus::Killed
                } else if s.success() {
                    RuntimeTaskStatus::Completed
                } else {
                    RuntimeTaskStatus::Failed
                };
            }
            Err(e) => {
                st.status = if killed {
                    RuntimeTaskStatus::Killed
                } else {
                    RuntimeTaskStatus::Failed
                };
                st.error = Some(format!("waiting for the process failed: {e}"));
            }
        }
    }
    shared.notices().push(entry.id.clone());
    let _ = shared.persist();
    entry.log.finish();
}

/// Length of an incomplete UTF-8 sequence at the end of `bytes` (0 to 3).
fn incomplete_utf8_tail(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let b = bytes[bytes.len() - back];
        if b & 0xC0 == 0x80 {
            continue; // continuation byte: keep looking for the lead byte
        }
        let needed = match b {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1, // invalid lead byte: nothing to wait for
        };
        return if needed > back { back } else { 0 };
    }
    0
}

/// The byte index where the last `max_chars` characters of `bytes` start
/// (each byte that is not a UTF-8 continuation byte counts as one).
fn start_of_last_chars(bytes: &[u8], max_chars: usize) -> usize {
    let mut chars = 0usize;
    for (i, b) in bytes.iter().enumerate().rev() {
        if b & 0xC0 != 0x80 {
            chars += 1;
            if chars == max_chars {
                return i;
            }
        }
    }
    0
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_documented_shape() {
        for t in RuntimeTaskType::ALL {
            let id = RuntimeTaskId::generate(t);
            assert_eq!(id.as_str().len(), 9);
            assert_eq!(RuntimeTaskId::parse(id.as_str()), Some(id.clone()));
            assert_eq!(id.task_type(), Some(t));
        }
        assert_eq!(RuntimeTaskId::parse("5"), None);
        assert_eq!(RuntimeTaskId::parse("b9x4k2m1"), None);
        assert_eq!(RuntimeTaskId::parse("B9x4k2m1p"), None);
        assert_eq!(RuntimeTaskId::parse("b9x4k2m1pq"), None);
        assert!(RuntimeTaskId::parse("b9x4k2m1p").is_some());
    }

    #[test]
    fn prefixes_are_distinct() {
        let mut seen: Vec<char> = RuntimeTaskType::ALL.iter().map(|t| t.id_prefix()).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 7);
    }

    #[test]
    fn incomplete_utf8_is_held_back() {
        assert_eq!(incomplete_utf8_tail(b"abc"), 0);
        assert_eq!(incomplete_utf8_tail("é".as_bytes()), 0);
        assert_eq!(incomplete_utf8_tail(&"é".as_bytes()[..1]), 1);
        assert_eq!(incomplete_utf8_tail(&"€".as_bytes()[..2]), 2);
        assert_eq!(incomplete_utf8_tail(&"😀".as_bytes()[..3]), 3);
        assert_eq!(incomplete_utf8_tail("a😀".as_bytes()), 0);
    }

    #[test]
    fn last_chars_counts_characters() {
        assert_eq!(start_of_last_chars(b"abcdef", 2), 4);
        assert_eq!(start_of_last_chars(b"ab", 5), 0);
        let s = "aéé";
        assert_eq!(start_of_last_chars(s.as_bytes(), 2), 1);
    }

    #[test]
    fn notice_text_names_everything() {
        let n = FinishedNotice {
            id: RuntimeTaskId("b123456ab".to_string()),
            task_type: RuntimeTaskType::LocalBash,
            description: "run tests".to_string(),
            status: RuntimeTaskStatus::Failed,
            exit_code: Some(2),
            unread_bytes: 42,
            owner: MAIN_CALLER.to_string(),
            output_path: PathBuf::from("/x/b123456ab.output"),
            result: None,
        };
        let text = n.to_prompt_text();
        assert!(text.contains("b123456ab"), "{text}");
        assert!(text.contains("run tests"), "{text}");
        assert!(text.contains("failed with exit code 2"), "{text}");
        assert!(text.contains("42 bytes"), "{text}");
    }
}
