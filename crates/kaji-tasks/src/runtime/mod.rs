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
mod capture;
pub mod orphans;
mod output;
pub mod state;
mod types;

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;

use crate::process::{self, GroupChild};
pub use agent::{AgentEnd, AgentStart, AgentTaskHandle};
use capture::{spawn_capture, supervise};
pub use orphans::{KilledOrphan, OrphanGroup, find_orphans, kill_orphans};
use output::OutputLog;
pub use state::{SessionScan, SessionState, SkippedStateFile, scan_sessions};
pub use types::*;

/// Default cap of a task's output file: 64 MiB.
pub const DEFAULT_OUTPUT_CAP_BYTES: u64 = 64 * 1024 * 1024;
/// Default cap of one [`OutputRead`] reply: 30,000 characters.
pub const DEFAULT_REPLY_CAP_CHARS: usize = 30_000;
/// The caller key of the session's main agent.
pub const MAIN_CALLER: &str = "main";

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
mod tests;
