//! Runtime tasks that are not processes: agents (`local_agent`, a
//! sub-agent of this process, and `in_process_teammate`).
//!
//! An agent task has what a shell task has — an id, a status, an output
//! (its transcript, in the same capped output file, read per caller by
//! `TaskOutput`) and a stop — but the work is done by whoever holds its
//! [`AgentTaskHandle`]: it writes the transcript, watches
//! [`AgentTaskHandle::stop_token`] and reports the end with
//! [`AgentTaskHandle::finish`]. A handle dropped without a finish (the
//! agent panicked) ends the task as `failed`, so no agent stays `running`
//! forever. This module must never run the agent itself nor touch the task
//! list.

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::{
    RuntimeError, RuntimeTaskId, RuntimeTaskInfo, RuntimeTaskRegistry, RuntimeTaskStatus,
    RuntimeTaskType, Shared, TaskEntry, TaskState, fresh_id, now_ms,
};

/// What agent to register.
#[derive(Debug, Clone)]
pub struct AgentStart {
    /// `local_agent` or `in_process_teammate`.
    pub task_type: RuntimeTaskType,
    /// What it is for, in a few words.
    pub description: String,
    /// The agent's name.
    pub agent: String,
    /// The caller starting it; it gets the finished notice.
    pub owner: String,
}

/// How an agent's work ended, as its runner reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentEnd {
    /// It finished its work.
    Completed,
    /// It could not finish: an error, or a budget reached.
    Failed(String),
}

/// The runner's side of an agent task; see the module docs.
#[derive(Debug)]
pub struct AgentTaskHandle {
    shared: Arc<Shared>,
    entry: Arc<TaskEntry>,
    ended: bool,
}

impl AgentTaskHandle {
    /// The task's id.
    pub fn id(&self) -> &RuntimeTaskId {
        &self.entry.id
    }

    /// Cancelled by `TaskStop`, a stop of its owner's tasks and the
    /// session's shutdown: the agent must then stop its model request and
    /// its commands and finish.
    pub fn stop_token(&self) -> CancellationToken {
        self.entry.stop.clone()
    }

    /// Appends transcript text to the task's output.
    pub fn append(&self, text: &str) {
        self.entry.log.append(text.as_bytes());
    }

    /// Sets what the agent is doing now (`idle`, a tool's name, …).
    pub fn set_activity(&self, activity: &str) {
        self.entry.state().activity = Some(activity.to_string());
    }

    /// Adds to the tokens the agent has used (shown by `kaji ps` and the
    /// UI's `/agents`).
    pub fn add_tokens(&self, tokens: u64) {
        let mut st = self.entry.state();
        st.tokens = Some(st.tokens.unwrap_or(0) + tokens);
    }

    /// Keeps the agent's result for its owner's finished notice (the
    /// transcript holds it too).
    pub fn set_result(&self, result: &str) {
        self.entry.state().result = Some(result.to_string());
    }

    /// A snapshot of the task.
    pub fn info(&self) -> RuntimeTaskInfo {
        self.entry.info()
    }

    /// Records the end: `killed` when a stop was asked for, else as
    /// `end` says. Wakes blocked readers and queues the owner's notice.
    pub fn finish(mut self, end: AgentEnd) -> RuntimeTaskInfo {
        self.end(end);
        self.entry.info()
    }

    fn end(&mut self, end: AgentEnd) {
        if self.ended {
            return;
        }
        self.ended = true;
        {
            let mut st = self.entry.state();
            st.ended_at_ms = Some(now_ms());
            st.activity = None;
            st.status = if self.entry.stop.is_cancelled() {
                RuntimeTaskStatus::Killed
            } else {
                match end {
                    AgentEnd::Completed => RuntimeTaskStatus::Completed,
                    AgentEnd::Failed(error) => {
                        st.error = Some(error);
                        RuntimeTaskStatus::Failed
                    }
                }
            };
        }
        self.shared.notices().push(self.entry.id.clone());
        let _ = self.shared.persist();
        self.entry.log.finish();
    }
}

impl Drop for AgentTaskHandle {
    fn drop(&mut self) {
        if !self.ended {
            self.append("\n[kaji: the agent ended without reporting a result]\n");
            self.end(AgentEnd::Failed(
                "the agent ended without reporting a result (it crashed)".to_string(),
            ));
        }
    }
}

impl RuntimeTaskRegistry {
    /// Registers an agent task (status `running`) and returns its handle;
    /// see the module docs. Refuses types that are not agents with
    /// [`RuntimeError::WrongStart`] and a registry that is shutting
    /// down with [`RuntimeError::ShuttingDown`].
    pub fn start_agent(&self, request: AgentStart) -> Result<AgentTaskHandle, RuntimeError> {
        self.shared.may_start(request.task_type, true)?;
        let mut tasks = self.shared.tasks();
        let id = fresh_id(&tasks, request.task_type);
        let (_, log) = self.shared.create_log(&id)?;
        let entry = Arc::new(TaskEntry {
            id,
            task_type: request.task_type,
            description: request.description,
            command: None,
            owner: request.owner,
            agent: Some(request.agent),
            started_at_ms: now_ms(),
            log: Arc::new(log),
            stop: self.shared.shutdown.child_token(),
            state: Mutex::new(TaskState::running(None)),
        });
        tasks.push(Arc::clone(&entry));
        drop(tasks);
        let _ = self.shared.persist();
        Ok(AgentTaskHandle {
            shared: Arc::clone(&self.shared),
            entry,
            ended: false,
        })
    }
}
