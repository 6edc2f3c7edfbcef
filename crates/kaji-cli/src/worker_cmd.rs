//! `kaji worker --task-list ID --name NAME [--agent TYPE]`: a headless
//! teammate in its own process. It holds its liveness lock
//! (`owners/NAME.lock` beside the list) while alive, and loops: release the
//! tasks of owners whose liveness lock is free, claim the next available
//! task as NAME, work it in a fresh session (one prompt), complete it (and
//! notify), claim the next. While unfinished tasks could still become
//! available it waits (re-checking every `KAJI_WORKER_POLL_MS`, default
//! 500 ms); when none can, it exits 0.
//!
//! Prints one line per event on stdout (`claimed #3`, `completed #3`,
//! `released #3`, `released #5 of w2 (departed)`). Nobody can answer its
//! asks: they are denied, except its own AttemptCompletion, which it
//! accepts. Exit codes: 0 nothing left, 1 a session or list error, 2 a
//! usage error (no --task-list, a worker of that name already running).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kaji_core::subagent::types::AgentCatalog;
use kaji_core::{AskRequest, TaskFrontend};
use kaji_protocol::{AskKind, AskResponse, SessionEvent, TaskStatus as RunStatus};
use kaji_tasks::TaskListStore;
use kaji_tasks::list::{Task, TaskPatch, TaskStatus};

use crate::agent::AgentArgs;

/// Arguments of `kaji worker`.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The teammate's name: the owner of the tasks it claims.
    #[arg(long, value_name = "NAME")]
    pub name: String,
    /// The agent type whose system prompt it works with (see `kaji agents list`).
    #[arg(long = "agent", value_name = "TYPE")]
    pub agent_type: Option<String>,
    #[command(flatten)]
    pub agent: AgentArgs,
}

/// A front end nobody watches.
struct Headless;

#[async_trait]
impl TaskFrontend for Headless {
    fn emit(&self, _event: SessionEvent) {}

    async fn answer(&self, ask: &AskRequest) -> AskResponse {
        if ask.kind == AskKind::CompletionResult {
            return AskResponse::Approve;
        }
        AskResponse::Deny {
            feedback: Some(
                "this is a headless teammate (kaji worker): nobody can answer; work within the allowed tools"
                    .to_string(),
            ),
        }
    }
}

fn poll_interval() -> Duration {
    std::env::var("KAJI_WORKER_POLL_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_millis(500))
}

/// Runs `kaji worker`; returns the exit code.
pub async fn run(mut args: WorkerArgs) -> i32 {
    let name = args.name.trim().to_string();
    if name.is_empty() {
        eprintln!("kaji worker: --name is empty; give the teammate a name");
        return 2;
    }
    // The model's task tools act as this teammate.
    args.agent.agent_name = Some(name.clone());
    let Some(list_id) = args.agent.task_list.clone() else {
        eprintln!("kaji worker: --task-list ID is required: the list to claim tasks from");
        return 2;
    };
    let home = crate::paths::kaji_home();
    let store = match TaskListStore::open(&home, &list_id) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("kaji worker: --task-list {list_id:?}: {e}");
            return 2;
        }
    };
    let _alive = match store.hold_liveness(&name) {
        Ok(Some(lock)) => lock,
        Ok(None) => {
            eprintln!("kaji worker: a worker named {name} is already running on list {list_id}");
            return 2;
        }
        Err(e) => {
            eprintln!("kaji worker: {e}");
            return 1;
        }
    };
    let role = match role_prompt(&args) {
        Ok(role) => role,
        Err(message) => {
            eprintln!("kaji worker: {message}");
            return 2;
        }
    };
    match work(&args, &name, &store, &role).await {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("kaji worker: {message}");
            let _ = store.release_with_note(&name, "the worker stopped on an error");
            1
        }
    }
}

/// The system prompt of `--agent TYPE`, if given.
fn role_prompt(args: &WorkerArgs) -> Result<String, String> {
    let Some(kind) = &args.agent_type else {
        return Ok(String::new());
    };
    let dir = match &args.agent.cwd {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(|e| e.to_string())?,
    };
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let catalog = AgentCatalog::discover(&crate::paths::kaji_home(), &dir, home.as_deref());
    catalog
        .find(kind)
        .map(|def| format!("{}\n\n", def.system_prompt))
        .ok_or_else(|| {
            format!(
                "--agent {kind}: no such agent type; the types are: {}",
                catalog.names()
            )
        })
}

async fn work(
    args: &WorkerArgs,
    name: &str,
    store: &TaskListStore,
    role: &str,
) -> Result<(), String> {
    loop {
        for (owner, ids) in store.release_departed().map_err(|e| e.to_string())? {
            for id in ids {
                println!("released #{id} of {owner} (departed)");
            }
        }
        if let Some(task) = store.claim_next(name).map_err(|e| e.to_string())? {
            println!("claimed #{}", task.id);
            work_one(args, name, store, role, &task).await?;
            continue;
        }
        let open = store
            .list()
            .map_err(|e| e.to_string())?
            .tasks
            .iter()
            .any(|t| t.status != TaskStatus::Completed);
        if !open {
            return Ok(());
        }
        tokio::time::sleep(poll_interval()).await;
    }
}

async fn work_one(
    args: &WorkerArgs,
    name: &str,
    store: &TaskListStore,
    role: &str,
    task: &Task,
) -> Result<(), String> {
    let (session, _warnings) = args
        .agent
        .build_session(None, Arc::new(Headless))
        .await
        .map_err(|e| e.to_string())?;
    let prompt = format!(
        "{role}You are the teammate `{name}` working on the shared task list. You have claimed task #{}: {}\n\n{}\n\nDo this task, then call AttemptCompletion with what you did.",
        task.id, task.subject, task.description
    );
    let outcome = session.submit(prompt).await.map_err(|e| e.to_string());
    session.shutdown().await;
    let outcome = outcome?;
    let current = store.get(task.id).map_err(|e| e.to_string())?;
    if outcome.status == RunStatus::Completed {
        if current.status != TaskStatus::Completed {
            let patch = TaskPatch {
                status: Some(TaskStatus::Completed),
                ..TaskPatch::default()
            };
            let updated = store.update(task.id, patch).map_err(|e| e.to_string())?;
            let snapshot = store.list().map_err(|e| e.to_string())?;
            kaji_tools::team_tools::notify_completion(store, name, &updated, &snapshot);
        }
        println!("completed #{}", task.id);
    } else {
        store
            .release_with_note(
                name,
                &format!("the teammate ended as {}", outcome.status.as_str()),
            )
            .map_err(|e| e.to_string())?;
        println!("released #{}", task.id);
    }
    Ok(())
}
