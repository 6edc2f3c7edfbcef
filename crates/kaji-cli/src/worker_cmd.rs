//! `kaji worker --task-list ID --name NAME [--agent TYPE]`: a headless
//! teammate in its own process, on either backend of the task list. It
//! holds its place while alive — the liveness lock (`owners/NAME.lock`
//! beside a file list) or a lease with a heartbeat (a database list,
//! `lease_ms` / `KAJI_LEASE_MS`) — and loops: release the tasks of owners
//! that are gone (lock free, lease lapsed), claim the next available task
//! as NAME, work it in a fresh session (one prompt), complete it (fenced on
//! a database: refused, `lost #3`, when its lease lapsed and the task went
//! to another worker) and notify, claim the next. While unfinished tasks could still become
//! available it waits (re-checking every `KAJI_WORKER_POLL_MS`, default
//! 500 ms); when none can, it exits 0. A task it released unfinished (its
//! budget, turns or mistakes) it never takes again: when only such tasks
//! are left it prints `leaving #N to other workers` and exits 0.
//!
//! Prints one line per event on stdout (`claimed #3`, `completed #3`,
//! `released #3`, `released #5 of w2 (departed)`). Nobody can answer its
//! asks: they are denied, except its own AttemptCompletion, which it
//! accepts. Exit codes: 0 nothing left, 1 a session or list error, 2 a
//! usage error (no --task-list, a worker of that name already running),
//! 130 stopped by SIGTERM, SIGINT or SIGHUP.
//!
//! Stopped by a signal, it aborts the task in hand, completes it if it had
//! finished, else releases it with a note (`released #3`), gives up its
//! lock or lease and exits; a task that will not end within the exit grace
//! (`KAJI_EXIT_GRACE_MS`) is released all the same. At its start, tasks
//! still held under its name (a worker of that name that was killed) are
//! released, so it never waits on its own.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kaji_core::SessionBuilder;
use kaji_core::subagent::types::AgentCatalog;
use kaji_core::{AskRequest, TaskFrontend};
use kaji_protocol::{AskKind, AskResponse, SessionEvent, TaskStatus};
use kaji_tasks::list::{ListTask, ListTaskPatch, ListTaskStatus, Member, TaskList, TaskListError};
use tokio_util::sync::CancellationToken;

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
    let env = kaji_core::env::StartupEnv::read();
    let named = args.agent.task_list.is_some() || env.task_list_id.is_some();
    let (list, lease) = match open_list(&args, &env, named).await {
        Ok(found) => found,
        Err((code, message)) => {
            eprintln!("kaji worker: {message}");
            return code;
        }
    };
    let member = match list.join(&name, lease).await {
        Ok(Some(member)) => member,
        Ok(None) => {
            eprintln!(
                "kaji worker: a worker named {name} is already running on list {}",
                list.list_id()
            );
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
            let _ = list.leave(member).await;
            eprintln!("kaji worker: {message}");
            return 2;
        }
    };
    // Tasks held under this name belong to an earlier worker of the name
    // that did not leave (kill -9): nobody else may take them while this
    // one lives, so they go back to the list.
    match list
        .release_with_note(
            &name,
            &format!(
                "released by {name} at its start: an earlier worker of this name left it unfinished"
            ),
        )
        .await
    {
        Ok(ids) => {
            for id in ids {
                println!("released #{id} (held under this name before)");
            }
        }
        Err(e) => eprintln!("kaji worker: cannot release the tasks held under {name}: {e}"),
    }
    let stop = CancellationToken::new();
    let signals = tokio::spawn({
        let stop = stop.clone();
        async move {
            let name = wait_for_stop_signal().await;
            eprintln!("kaji worker: {name}: stopping");
            stop.cancel();
        }
    });
    let worked = work(&args, &list, &member, &role, &stop).await;
    signals.abort();
    if stop.is_cancelled() {
        let _ = list.leave(member).await;
        return 130;
    }
    match worked {
        Ok(()) => {
            let _ = list.leave(member).await;
            0
        }
        Err(message) => {
            eprintln!("kaji worker: {message}");
            let _ = list
                .release_with_note(&name, "the worker stopped on an error")
                .await;
            1
        }
    }
}

/// The list to work (`--task-list` or `KAJI_TASK_LIST_ID`, on the backend
/// `task_list_url` / `KAJI_TASK_LIST_URL` names; a URL given to
/// `--task-list` must carry `?list=`) and the lease length.
async fn open_list(
    args: &WorkerArgs,
    env: &kaji_core::env::StartupEnv,
    named: bool,
) -> Result<(TaskList, Duration), (i32, String)> {
    let url_names_list = env
        .task_list_url
        .as_deref()
        .and_then(|u| kaji_tasks::list::pg::PgUrl::parse(u).ok())
        .is_some_and(|u| u.list.is_some());
    if !named && !url_names_list {
        return Err((
            2,
            "--task-list ID is required: the list to claim tasks from".to_string(),
        ));
    }
    let options = args
        .agent
        .session_options()
        .map_err(|e| (2, e.to_string()))?;
    SessionBuilder::new(crate::paths::kaji_home(), options)
        .startup_env(env.clone())
        .task_list("")
        .await
        .map_err(|e| (if e.is_usage() { 2 } else { 1 }, e.to_string()))
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

/// Waits for SIGTERM, SIGINT or SIGHUP; returns its name.
async fn wait_for_stop_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        let _ = tokio::signal::ctrl_c().await;
        return "SIGINT";
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
        _ = hup.recv() => "SIGHUP",
    }
}

async fn work(
    args: &WorkerArgs,
    list: &TaskList,
    member: &Member,
    role: &str,
    stop: &CancellationToken,
) -> Result<(), String> {
    let name = member.name();
    // Tasks this worker released unfinished (its budget, turns or
    // mistakes): never worked again by it, so a budget is not spent over
    // and over on the same task.
    let mut gave_up = std::collections::BTreeSet::new();
    loop {
        if stop.is_cancelled() {
            return Ok(());
        }
        for (owner, ids) in list.release_departed().await.map_err(|e| e.to_string())? {
            for id in ids {
                println!("released #{id} of {owner} (departed)");
            }
        }
        if leave_the_rest(list, &gave_up).await? {
            return Ok(());
        }
        if let Some(task) = list
            .claim_next_as(member)
            .await
            .map_err(|e| e.to_string())?
        {
            if gave_up.contains(&task.id) {
                release(list, name, &task, "left for another worker").await?;
                return Ok(());
            }
            println!("claimed #{}", task.id);
            if !work_one(args, list, member, role, &task, stop).await? {
                gave_up.insert(task.id);
            }
            continue;
        }
        let open = list
            .list()
            .await
            .map_err(|e| e.to_string())?
            .tasks
            .iter()
            .any(|t| t.status != ListTaskStatus::Completed);
        if !open {
            return Ok(());
        }
        if let Some(why) = member.lost() {
            return Err(format!("{name} lost its place on the list: {why}"));
        }
        tokio::select! {
            _ = tokio::time::sleep(poll_interval()) => {}
            _ = stop.cancelled() => return Ok(()),
        }
    }
}

async fn work_one(
    args: &WorkerArgs,
    list: &TaskList,
    member: &Member,
    role: &str,
    task: &ListTask,
    stop: &CancellationToken,
) -> Result<bool, String> {
    let name = member.name();
    let (session, _warnings) = args
        .agent
        .build_session(None, Arc::new(Headless))
        .await
        .map_err(|e| e.to_string())?;
    let prompt = format!(
        "{role}You are the teammate `{name}` working on the shared task list. You have claimed task #{}: {}\n\n{}\n\nDo this task, then call AttemptCompletion with what you did.",
        task.id, task.subject, task.description
    );
    // A stop aborts the task; one that will not end within the grace is
    // given up on (its note says so) and the worker exits all the same.
    let submitted = {
        let submit = session.submit(prompt);
        tokio::pin!(submit);
        tokio::select! {
            outcome = &mut submit => Some(outcome),
            _ = stop.cancelled() => {
                session.abort();
                tokio::select! {
                    outcome = &mut submit => Some(outcome),
                    _ = tokio::time::sleep(crate::exec::exit_grace()) => None,
                }
            }
        }
    };
    let Some(outcome) = submitted else {
        release(
            list,
            name,
            task,
            "the worker was stopped and its task did not end in time",
        )
        .await?;
        return Ok(false);
    };
    session.shutdown().await;
    let outcome = outcome.map_err(|e| e.to_string())?;
    if outcome.status == TaskStatus::Completed {
        let patch = ListTaskPatch {
            status: Some(ListTaskStatus::Completed),
            ..ListTaskPatch::default()
        };
        // Fenced on a database: refused if the lease lapsed meanwhile and
        // the task went to someone else.
        match list.update_as(member, task.id, patch).await {
            Ok(updated) => {
                let snapshot = list.list().await.map_err(|e| e.to_string())?;
                kaji_tools::team_tools::notify_completion(list, name, &updated, &snapshot).await;
                println!("completed #{}", task.id);
            }
            Err(e @ TaskListError::LeaseLost { .. }) => {
                println!("lost #{}", task.id);
                return Err(format!("task #{} was not completed: {e}", task.id));
            }
            Err(e) => return Err(e.to_string()),
        }
    } else if stop.is_cancelled() {
        release(
            list,
            name,
            task,
            "the worker was stopped before it finished",
        )
        .await?;
    } else {
        let why = format!("the teammate ended as {}", outcome.status.as_str());
        release(list, name, task, &why).await?;
        return Ok(false);
    }
    Ok(true)
}

/// Whether every task that could be claimed now is one this worker gave
/// up on: then it leaves them to other workers and exits.
async fn leave_the_rest(
    list: &TaskList,
    gave_up: &std::collections::BTreeSet<u64>,
) -> Result<bool, String> {
    if gave_up.is_empty() {
        return Ok(false);
    }
    let available = list.available().await.map_err(|e| e.to_string())?;
    let leave = !available.is_empty() && available.iter().all(|t| gave_up.contains(&t.id));
    if leave {
        let ids: Vec<String> = available.iter().map(|t| format!("#{}", t.id)).collect();
        println!("leaving {} to other workers", ids.join(", "));
    }
    Ok(leave)
}

/// Gives `task` (and anything else `name` holds) back with a note.
async fn release(list: &TaskList, name: &str, task: &ListTask, why: &str) -> Result<(), String> {
    list.release_with_note(name, why)
        .await
        .map_err(|e| e.to_string())?;
    println!("released #{}", task.id);
    Ok(())
}
