//! `kaji tasks` on a PostgreSQL list, and the commands that work across
//! backends (`migrate`, `export`, `import`), through the one
//! [`TaskList`] interface.
//!
//! Must never print a password (every message goes through the errors of
//! kaji-tasks, which redact it) or change a list except through it.

use std::io::{IsTerminal, Read};
use std::path::Path;

use kaji_tasks::list::pg::WatchMode;
use kaji_tasks::list::{
    ListSnapshot, ListTarget, ListTask, ListTaskPatch, ListTaskStatus, NewListTask, TaskList,
    TaskListError,
};
use serde_json::{Value, json};

use super::{
    Failure, Printer, TasksCommand, WATCH_INTERVAL, describe, emit, id_list, print_json, table,
    warn,
};
use kaji_tasks::list::ListTaskFilter;

/// Whether `command` goes through the async interface even on files.
pub(super) fn needs_async(command: &TasksCommand) -> bool {
    matches!(
        command,
        TasksCommand::Migrate | TasksCommand::Export | TasksCommand::Import { .. }
    )
}

/// Runs `command` on `target` in a tokio runtime of its own.
pub(super) fn run(
    home: &Path,
    target: &ListTarget,
    json: bool,
    command: TasksCommand,
) -> Result<(), Failure> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure {
            code: 1,
            kind: "io",
            reason: None,
            message: format!("cannot start the async runtime: {e}"),
        })?;
    runtime.block_on(run_async(home, target, json, command))
}

async fn open(home: &Path, target: &ListTarget, create: bool) -> Result<TaskList, TaskListError> {
    let list = if create {
        TaskList::open(home, target).await?
    } else {
        TaskList::open_existing(home, target).await?
    };
    if let TaskList::Pg(pg) = &list
        && let Some(note) = pg.migrate_note()
    {
        warn(&note);
    }
    Ok(list)
}

fn snapshot_json(list: &TaskList, snapshot: &ListSnapshot) -> Value {
    json!({
        "listId": list.list_id(),
        "highwatermark": snapshot.highwatermark,
        "tasks": snapshot.tasks,
        "errors": snapshot.errors.iter().map(|e| json!({
            "path": e.path.display().to_string(),
            "problem": e.problem,
        })).collect::<Vec<_>>(),
    })
}

async fn run_async(
    home: &Path,
    target: &ListTarget,
    json: bool,
    command: TasksCommand,
) -> Result<(), Failure> {
    let out = Printer { json };
    match command {
        TasksCommand::Migrate => migrate(target, json).await,
        TasksCommand::Export => {
            let list = open(home, target, false).await?;
            let snapshot = list.list().await?;
            print_json(&snapshot_json(&list, &snapshot))
        }
        TasksCommand::Import { file } => {
            let snapshot = read_export(&file)?;
            let list = open(home, target, true).await?;
            let count = list.import(&snapshot).await?;
            if json {
                print_json(&json!({"listId": list.list_id(), "imported": count}))
            } else {
                emit(&format!(
                    "imported {count} tasks into list {}\n",
                    list.list_id()
                ))
            }
        }
        // `lists` reads the files of $KAJI_HOME, whatever the backend.
        TasksCommand::Lists => super::lists::run(home, json),
        TasksCommand::List(filter) => {
            let filter = filter.filter()?;
            let list = open(home, target, false).await?;
            let snapshot = list.list().await?;
            if json {
                print_json(&snapshot_json(&list, &snapshot))
            } else {
                emit(&table(&snapshot, &filter))
            }
        }
        TasksCommand::Show { id } => {
            let list = open(home, target, false).await?;
            let task = list.get(id).await?;
            if json {
                print_json(&serde_json::to_value(&task).unwrap_or(Value::Null))
            } else {
                emit(&describe(&list.list().await?, &task))
            }
        }
        TasksCommand::Create {
            subject,
            description,
            active_form,
            blocked_by,
        } => {
            let list = open(home, target, true).await?;
            let task = list
                .create(NewListTask {
                    subject,
                    description,
                    active_form,
                    blocked_by,
                    ..NewListTask::default()
                })
                .await?;
            out.task(&task, &format!("created #{}: {}", task.id, task.subject))
        }
        TasksCommand::Update {
            id,
            status,
            owner,
            subject,
            description,
            add_blocked_by,
            remove_blocked_by,
        } => {
            let list = open(home, target, false).await?;
            if status.as_deref() == Some("deleted") {
                let task = list.delete(id).await?;
                return out.task(&task, &format!("deleted #{}: {}", task.id, task.subject));
            }
            let status = status.map(|s| s.parse::<ListTaskStatus>()).transpose()?;
            let patch = ListTaskPatch {
                status,
                owner: owner.map(|o| Some(o).filter(|o| !o.trim().is_empty())),
                subject,
                description,
                add_blocked_by,
                remove_blocked_by,
                ..ListTaskPatch::default()
            };
            let outcome = list.update(id, patch).await?;
            if json {
                print_json(&json!({"task": outcome.task, "unblocked": outcome.unblocked}))
            } else {
                let mut text = format!("updated #{}: {}\n", id, outcome.task.subject);
                if !outcome.unblocked.is_empty() {
                    text.push_str(&format!("unblocked: {}\n", id_list(&outcome.unblocked)));
                }
                emit(&text)
            }
        }
        TasksCommand::Claim { id, owner } => {
            let list = open(home, target, false).await?;
            let task = claim(&list, id, &owner).await?;
            out.task(
                &task,
                &format!("claimed #{} for {owner}: {}", task.id, task.subject),
            )
        }
        TasksCommand::Release { owner } => {
            let list = open(home, target, false).await?;
            let released = list.release(&owner).await?;
            if json {
                print_json(&json!({ "released": released }))
            } else if released.is_empty() {
                emit(&format!("{owner} held no unfinished task\n"))
            } else {
                emit(&format!("released {}\n", id_list(&released)))
            }
        }
        TasksCommand::Delete { id } => {
            let list = open(home, target, false).await?;
            let task = list.delete(id).await?;
            out.task(&task, &format!("deleted #{}: {}", task.id, task.subject))
        }
        TasksCommand::Watch { .. } => watch(&open(home, target, false).await?, json).await,
        TasksCommand::Repair => Err(Failure {
            code: 2,
            kind: "invalid_input",
            reason: None,
            message: "repair is for file lists; a database list keeps itself consistent in \
                      transactions"
                .to_string(),
        }),
    }
}

async fn claim(list: &TaskList, id: Option<u64>, owner: &str) -> Result<ListTask, Failure> {
    match id {
        Some(id) => Ok(list.claim(id, owner).await?),
        None => list.claim_next(owner).await?.ok_or_else(|| Failure {
            code: 1,
            kind: "refused",
            reason: Some("none_available"),
            message: format!("no task in list {:?} is available to claim", list.list_id()),
        }),
    }
}

async fn migrate(target: &ListTarget, json: bool) -> Result<(), Failure> {
    let ListTarget::Pg(url, id) = target else {
        let text = "nothing to migrate: file lists have no schema";
        return if json {
            print_json(&json!({"backend": "files", "message": text}))
        } else {
            emit(&format!("{text}\n"))
        };
    };
    let list = kaji_tasks::list::pg::PgTaskList::connect(url, id).await?;
    let report = list.migrate().await?;
    // `connect` may already have created the schema on first use.
    let before = match list.migrate_note() {
        Some(_) => 0,
        None => report.before,
    };
    if json {
        print_json(&json!({"server": list.server(), "before": before, "after": report.after}))
    } else if before == report.after {
        emit(&format!(
            "the task-list schema on {} is up to date (version {})\n",
            list.server(),
            report.after
        ))
    } else {
        emit(&format!(
            "migrated the task-list schema on {} from version {before} to {}\n",
            list.server(),
            report.after
        ))
    }
}

fn read_export(file: &str) -> Result<ListSnapshot, Failure> {
    let bad = |message: String| Failure {
        code: 2,
        kind: "invalid_input",
        reason: None,
        message,
    };
    let mut text = String::new();
    let read = if file == "-" {
        std::io::stdin().read_to_string(&mut text).map(|_| ())
    } else {
        std::fs::read_to_string(file).map(|t| text = t)
    };
    read.map_err(|e| bad(format!("{file}: {e}")))?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("{file}: not JSON: {e}")))?;
    let tasks: Vec<ListTask> =
        serde_json::from_value(value.get("tasks").cloned().unwrap_or(Value::Null))
            .map_err(|e| bad(format!("{file}: \"tasks\" is not a list of tasks: {e}")))?;
    let highwatermark = value
        .get("highwatermark")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    Ok(ListSnapshot {
        tasks,
        errors: Vec::new(),
        highwatermark,
    })
}

/// Redraws on every notice (PostgreSQL) or poll (files, or where LISTEN is
/// unavailable — said once on stderr).
async fn watch(list: &TaskList, json: bool) -> Result<(), Failure> {
    let tty = std::io::stdout().is_terminal();
    let mut watcher = match list {
        TaskList::Pg(pg) => Some(pg.watch(WATCH_INTERVAL).await),
        TaskList::Files(_) => None,
    };
    let mut told = false;
    let mut last: Option<ListSnapshot> = None;
    loop {
        if let Some(WatchMode::Poll { reason }) = watcher.as_ref().map(|w| w.mode())
            && !told
        {
            warn(&format!(
                "kaji tasks: {reason}; polling every {} ms instead of LISTEN",
                WATCH_INTERVAL.as_millis()
            ));
            told = true;
        }
        let snapshot = list.list().await?;
        if last.as_ref() != Some(&snapshot) {
            let text = if json {
                format!("{}\n", snapshot_json(list, &snapshot))
            } else {
                let clear = if tty { "\x1b[2J\x1b[H" } else { "" };
                format!(
                    "{clear}task list {} — Ctrl-C to stop\n{}",
                    list.list_id(),
                    table(&snapshot, &ListTaskFilter::default())
                )
            };
            emit(&text)?;
            last = Some(snapshot);
        }
        match &mut watcher {
            Some(w) => w.changed().await,
            None => tokio::time::sleep(WATCH_INTERVAL).await,
        }
    }
}
