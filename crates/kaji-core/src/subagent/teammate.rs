//! In-process teammates: named background agents of the lead's session
//! that share its task list (an `Agent` call with `name`).
//!
//! A teammate is an `in_process_teammate` runtime task whose output is its
//! transcript. It loops: claim the next available task through the store
//! (list lock, task lock, availability checks) under its name, work it in
//! a fresh child Task (a sub-agent of the type asked for, with its own
//! history, saved as a child session), complete it and send the completion
//! notices, claim the next. When nothing is available but unfinished tasks
//! could still become available it goes idle (activity `idle`, the lead is
//! told once) and looks again every `KAJI_TEAMMATE_POLL_MS` (default
//! 500 ms); when no unfinished task is left it ends and the lead is told.
//! However it ends — finished, stopped (`TaskStop`, the session's end) or
//! crashed (a panic) — its unfinished tasks are released with a note.
//!
//! This module never prints, never decides permissions (its child Tasks'
//! executors do) and holds no lock across an await.

use std::sync::Arc;
use std::time::Duration;

use kaji_protocol::TaskStatus;
use kaji_tasks::list::{ListTask, ListTaskPatch, ListTaskStatus, TaskList};
use kaji_tasks::runtime::{AgentEnd, AgentStart, AgentTaskHandle, RuntimeTaskType};
use kaji_tools::agent_tools::{AgentRequest, Isolation};
use kaji_tools::team_tools::{LEAD, notify_completion};
use kaji_tools::{AgentRole, ToolContext, ToolError, ToolOutput};
use serde_json::json;

use super::{Identity, Prepared, Report, SubagentSpawner};
use crate::storage::persist;

/// How often an idle teammate looks at the list again.
fn poll_interval() -> Duration {
    crate::env::duration_from_env("KAJI_TEAMMATE_POLL_MS", Duration::from_millis(500))
}

/// What one teammate needs while it runs.
struct Teammate {
    spawner: SubagentSpawner,
    request: AgentRequest,
    caller: ToolContext,
    name: String,
    store: TaskList,
    handle: Arc<AgentTaskHandle>,
    /// Its worktree's working directory, with `isolation: "worktree"`.
    start_dir: Option<std::path::PathBuf>,
}

impl SubagentSpawner {
    /// Starts the teammate `request.name`; returns its runtime id at once.
    pub(super) async fn spawn_teammate(
        &self,
        request: AgentRequest,
        caller: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let name = checked_name(request.name.as_deref().unwrap_or_default())?;
        self.definition(&request)?;
        let refuse = |why: &str| Err(ToolError::Refused(format!("Agent: {why}")));
        let store = self.services.task_list.clone();
        let runtime = Arc::clone(&self.services.runtime);
        let taken = runtime
            .list()
            .into_iter()
            .any(|t| t.agent.as_deref() == Some(name.as_str()) && !t.status.is_terminal());
        if taken {
            return refuse(&format!(
                "a teammate named {name} is already running; pick another name"
            ));
        }
        let start_dir = match request.isolation {
            Some(Isolation::Worktree) => Some(self.worktree_for(&name, caller).await?),
            None => None,
        };
        let handle = runtime
            .start_agent(AgentStart {
                task_type: RuntimeTaskType::InProcessTeammate,
                description: request.description.clone(),
                agent: name.clone(),
                owner: caller.agent.clone(),
            })
            .map_err(|e| ToolError::Refused(format!("Agent: {e}")))?;
        let handle = Arc::new(handle);
        let info = handle.info();
        let teammate = Teammate {
            spawner: self.clone(),
            request,
            caller: caller.clone(),
            name: name.clone(),
            store,
            handle,
            start_dir,
        };
        supervise(teammate);
        Ok(ToolOutput {
            content: format!(
                "Started teammate {name} as runtime task {}. It claims available tasks of the shared task list one after another; you get a notice when one completes and when it goes idle or ends. Read its transcript with TaskOutput, stop it with TaskStop.",
                info.id
            ),
            data: Some(json!({
                "task_id": info.id.as_str(),
                "agent": name,
                "output_path": info.output_path,
            })),
            ..ToolOutput::default()
        })
    }

    /// The worktree `.kaji/worktrees/<agent>` of an isolated agent.
    pub(super) async fn worktree_for(
        &self,
        agent: &str,
        caller: &ToolContext,
    ) -> Result<std::path::PathBuf, ToolError> {
        kaji_tools::worktree::create_worktree(&caller.project_dir, Some(agent))
            .await
            .map(|w| w.cwd)
            .map_err(|e| ToolError::Refused(format!("Agent: isolation \"worktree\": {e}")))
    }
}

/// A teammate name: 1 to 64 of `[A-Za-z0-9._-]`, not the lead's.
fn checked_name(name: &str) -> Result<String, ToolError> {
    let name = name.trim();
    kaji_tools::worktree::validate_worktree_name(name).map_err(|_| ToolError::InvalidInput {
        tool: "Agent".to_string(),
        message: format!(
            "invalid teammate name {name:?}: use 1 to 64 of A-Z a-z 0-9 . _ - starting with a letter or digit"
        ),
    })?;
    if name == LEAD {
        return Err(ToolError::InvalidInput {
            tool: "Agent".to_string(),
            message: format!("`{LEAD}` is the lead's name; give the teammate another"),
        });
    }
    Ok(name.to_string())
}

/// Runs the teammate's loop in a task of its own and, around it, the part
/// that must happen however it ends: its tasks released, the lead told,
/// the runtime task finished.
fn supervise(teammate: Teammate) {
    let store = teammate.store.clone();
    let name = teammate.name.clone();
    let handle = Arc::clone(&teammate.handle);
    let work = tokio::spawn(run(teammate));
    tokio::spawn(async move {
        let end = match work.await {
            Ok(end) => end,
            Err(e) => {
                let why = if e.is_panic() {
                    "the teammate crashed"
                } else {
                    "the teammate was cancelled"
                };
                handle.append(&format!("\n[{name}] {why}\n"));
                leave(&store, &name, why, &format!("Teammate {name} ended: {why}")).await;
                AgentEnd::Failed(why.to_string())
            }
        };
        if let Ok(handle) = Arc::try_unwrap(handle) {
            handle.finish(end);
        }
    });
}

/// The claim–work–complete loop; see the module docs.
async fn run(teammate: Teammate) -> AgentEnd {
    let stop = teammate.handle.stop_token();
    let name = teammate.name.clone();
    let store = teammate.store.clone();
    let mut done = 0u32;
    let mut told_idle = false;
    loop {
        if stop.is_cancelled() {
            let text = format!("Teammate {name} was stopped after {done} task(s)");
            leave(&store, &name, "the teammate was stopped", &text).await;
            return AgentEnd::Failed("stopped".to_string());
        }
        // The run's budget is shared: once it is spent, every task would
        // end before its first request, be released and be claimed again.
        if let Some(spent) = teammate.spawner.services.limits.budget.spent() {
            let why = format!("the run's budget is spent ({})", spent.stop_reason());
            let text = spent.to_string();
            let text = format!("Teammate {name} ended: {}", text.trim_end_matches('.'));
            leave(&store, &name, &why, &text).await;
            return AgentEnd::Failed(why);
        }
        let claimed = store.claim_next(&name).await;
        match claimed {
            Err(e) => {
                let why = format!("the task list failed: {e}");
                leave(
                    &store,
                    &name,
                    &why,
                    &format!("Teammate {name} ended: {why}"),
                )
                .await;
                return AgentEnd::Failed(why);
            }
            Ok(Some(task)) => {
                told_idle = false;
                if teammate.work_one(&task).await {
                    done += 1;
                }
            }
            Ok(None) => {
                if !unfinished_left(&store).await {
                    teammate.handle.append(&format!("[{name}] no work left\n"));
                    tell_lead(
                        &store,
                        &name,
                        &format!("Teammate {name} ended: no work is left ({done} task(s) done)."),
                    )
                    .await;
                    return AgentEnd::Completed;
                }
                if !told_idle {
                    told_idle = true;
                    teammate.handle.set_activity("idle");
                    tell_lead(&store, &name, &format!("Teammate {name} is idle: no task is available now ({done} done so far); it takes the next one that becomes available.")).await;
                }
                tokio::select! {
                    () = stop.cancelled() => {}
                    () = tokio::time::sleep(poll_interval()) => {}
                }
            }
        }
    }
}

impl Teammate {
    /// Works one claimed task in a fresh child Task; whether it was
    /// completed. An unfinished task is released with a note.
    async fn work_one(&self, task: &ListTask) -> bool {
        let name = &self.name;
        self.handle.set_activity(&format!("task #{}", task.id));
        self.handle.append(&format!(
            "[{name}] claimed task #{}: {}\n",
            task.id, task.subject
        ));
        let prepared = match self.prepare(task) {
            Ok(p) => p,
            Err(e) => {
                let _ = release(&self.store, name, &format!("it could not start: {e}")).await;
                return false;
            }
        };
        let _ = prepared.frontend.transcript.set(Arc::clone(&self.handle));
        let Prepared {
            task: child,
            frontend,
            agent,
            prompt,
            max_turns,
            budget,
        } = prepared;
        let abort = child.abort_handle();
        let stop = self.handle.stop_token();
        let watcher = tokio::spawn(async move {
            stop.cancelled().await;
            abort.abort();
        });
        let (outcome, final_event) = child.run_held(prompt, Vec::new()).await;
        watcher.abort();
        self.spawner.add_usage(&outcome.usage);
        self.spawner.services.runtime.stop_owned_by(&agent).await;
        final_event.send();
        let report = Report::new(&outcome, &frontend, max_turns, budget);
        self.handle.append(&format!("{}\n", report.text(&agent)));
        if outcome.status == TaskStatus::Completed {
            self.complete(task.id).await;
            self.handle
                .append(&format!("[{name}] completed task #{}\n", task.id));
            return true;
        }
        let why = format!("{name} did not finish it: {}", report.unfinished);
        let _ = release(&self.store, name, &why).await;
        false
    }

    /// The child Task for one claimed task.
    fn prepare(&self, task: &ListTask) -> Result<Prepared, ToolError> {
        let def = self.spawner.definition(&self.request)?;
        let name = &self.name;
        let section = format!(
            "# Teammate\nYou are the teammate `{name}` (type {}), one of a team that shares a task list with its lead `{}`. You have claimed one task of that list; do it, then call AttemptCompletion with what you did. Message the lead or another teammate with SendMessage when you must.\n\n{}",
            def.name, self.caller.agent, def.system_prompt
        );
        let mut prompt = format!("You have claimed task #{}: {}\n", task.id, task.subject);
        if !task.description.trim().is_empty() {
            prompt.push_str(&format!("\n{}\n", task.description));
        }
        if !self.request.prompt.trim().is_empty() {
            prompt.push_str(&format!(
                "\nStanding instructions from the lead:\n{}\n",
                self.request.prompt
            ));
        }
        let identity = Identity {
            agent: name.clone(),
            role: AgentRole::Teammate,
            system_section: section,
            prompt,
            start_dir: self.start_dir.clone(),
            // A claimed task is done when the teammate says so.
            on_text_reply: crate::config::TextReply::Nudge,
        };
        self.spawner.prepare_as(
            def,
            persist::new_session_id(),
            identity,
            &self.request,
            &self.caller,
        )
    }

    /// Marks the task completed (unless its agent did) and sends the
    /// completion notices.
    async fn complete(&self, id: u64) {
        let store = &self.store;
        if store
            .get(id)
            .await
            .is_ok_and(|t| t.status == ListTaskStatus::Completed)
        {
            return;
        }
        let patch = ListTaskPatch {
            status: Some(ListTaskStatus::Completed),
            ..ListTaskPatch::default()
        };
        if let Ok(outcome) = store.update(id, patch).await
            && let Ok(snapshot) = store.list().await
        {
            notify_completion(store, &self.name, &outcome, &snapshot).await;
        }
    }
}

/// A teammate leaving early: its unfinished tasks released (note `why`),
/// and the lead told `text` with what was released.
async fn leave(store: &TaskList, name: &str, why: &str, text: &str) {
    let released = release(store, name, why).await;
    tell_lead(store, name, &format!("{text}{released}.")).await;
}

/// Whether any task is not completed yet (it could still become
/// available: blocked, or held by someone who may release it).
async fn unfinished_left(store: &TaskList) -> bool {
    store.list().await.is_ok_and(|l| {
        l.tasks
            .iter()
            .any(|t| t.status != ListTaskStatus::Completed)
    })
}

/// Releases `name`'s unfinished tasks with the note `why`; the text to add
/// to the lead's notice (`"; released #3"`).
async fn release(store: &TaskList, name: &str, why: &str) -> String {
    match store.release_with_note(name, why).await {
        Ok(ids) if !ids.is_empty() => {
            let ids: Vec<String> = ids.iter().map(|i| format!("#{i}")).collect();
            format!("; its unfinished task(s) {} are released", ids.join(", "))
        }
        _ => String::new(),
    }
}

/// A notice for the lead, delivered at its next model request.
async fn tell_lead(store: &TaskList, name: &str, text: &str) {
    let _ = store.post_message(name, LEAD, text).await;
}
