//! `kaji tasks`: read and change a shared task list from the shell.
//!
//! A thin layer over kaji-tasks' [`TaskListStore`]: parse, call, print.
//! Every subcommand prints text for people or, with `--json`, JSON for
//! scripts. Exit codes: 0 ok, 1 refused (blocked claim, cycle, nothing to
//! claim, unreadable file, a lock still busy after `KAJI_LOCK_TIMEOUT_MS`,
//! a list `repair` could not make sound, stdout cannot be written, e.g. a
//! full disk), 2 usage error or missing list/task. A closed stdout (`kaji
//! tasks list | head -0`) ends the command quietly with exit 0. It must
//! never change a list except through the store, and never panic on a
//! failed write.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

mod db;
mod lists;
mod repair;

use clap::{Args, Subcommand};
use kaji_tasks::list::{
    DEFAULT_LIST_ID, ListSnapshot, ListTarget, ListTask, ListTaskFilter, ListTaskPatch,
    ListTaskStatus, LockWait, NewListTask, TaskListError, TaskListErrorKind, TaskListStore,
    resolve_target,
};
use serde_json::{Value, json};

/// How often `watch` looks at the list directory.
const WATCH_INTERVAL: Duration = Duration::from_millis(200);

/// Arguments of `kaji tasks`.
#[derive(Debug, Args)]
pub struct TasksArgs {
    /// Task list to use (letters, digits, `_` and `-`; other characters
    /// become `-`). Defaults to $KAJI_TASK_LIST_ID, then "default". A
    /// value containing `://` is a PostgreSQL URL (see docs/task-list.md).
    #[arg(
        long = "list",
        value_name = "ID",
        env = "KAJI_TASK_LIST_ID",
        global = true
    )]
    list: Option<String>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: TasksCommand,
}

#[derive(Debug, Subcommand)]
enum TasksCommand {
    /// Show the tasks as a table sorted by id; the filters narrow it
    /// (every filter given must hold).
    List(ListFilterArgs),
    /// Show every task list: LIST SESSIONS TASKS OPEN UPDATED.
    Lists,
    /// Show every field of one task.
    Show {
        /// Task id.
        id: u64,
    },
    /// Create a pending task (creates the list if needed).
    Create {
        /// One-line title.
        subject: String,
        /// Full description.
        #[arg(long, default_value = "")]
        description: String,
        /// How the task reads while in progress.
        #[arg(long, value_name = "F")]
        active_form: Option<String>,
        /// Ids of tasks the new task waits for.
        #[arg(long, value_name = "ID,…", value_delimiter = ',')]
        blocked_by: Vec<u64>,
    },
    /// Change fields or dependencies of a task.
    Update {
        /// Task id.
        id: u64,
        /// New status; `deleted` deletes the task.
        #[arg(long, value_name = "S", value_parser = ["pending", "in_progress", "completed", "deleted"])]
        status: Option<String>,
        /// New owner; an empty string clears it.
        #[arg(long, value_name = "O")]
        owner: Option<String>,
        /// New subject.
        #[arg(long, value_name = "S")]
        subject: Option<String>,
        /// New description.
        #[arg(long, value_name = "D")]
        description: Option<String>,
        /// Ids of tasks this task should wait for.
        #[arg(long, value_name = "ID,…", value_delimiter = ',')]
        add_blocked_by: Vec<u64>,
        /// Ids of tasks this task should no longer wait for.
        #[arg(long, value_name = "ID,…", value_delimiter = ',')]
        remove_blocked_by: Vec<u64>,
    },
    /// Give a task to an owner and mark it in_progress, if it is available;
    /// without ID, the lowest-id available task.
    Claim {
        /// Task id.
        id: Option<u64>,
        /// Who takes the task.
        #[arg(long, value_name = "O")]
        owner: String,
    },
    /// Give back every unfinished task held by an owner.
    Release {
        /// Whose tasks to release.
        #[arg(long, value_name = "O")]
        owner: String,
    },
    /// Delete a task; its id is never reused.
    Delete {
        /// Task id.
        id: u64,
    },
    /// Show the list and redraw it whenever a task changes (Ctrl-C stops).
    Watch {
        /// Watch the list of this directory's most recent session.
        #[arg(long)]
        latest: bool,
    },
    /// Rebuild a broken or missing `.highwatermark` (never lower than any
    /// id seen), clear stale locks, and report unreadable files. Exit 0
    /// when the list is sound afterwards, else 1.
    Repair,
    /// Create or upgrade the task-list schema of the database
    /// ($KAJI_TASK_LIST_URL or a URL given to --list).
    Migrate,
    /// Print the list as JSON (every task, with the high-water mark), for
    /// `import` on either backend.
    Export,
    /// Put an exported list (a JSON file, `-` for stdin) into an empty list
    /// of the chosen backend, ids and all.
    Import {
        /// The file `export` wrote.
        file: String,
    },
}

/// The filters of `kaji tasks list`.
#[derive(Debug, Args)]
struct ListFilterArgs {
    /// Only tasks in this status: pending, in_progress or completed.
    #[arg(long, value_name = "S")]
    status: Option<String>,
    /// Only tasks held by this owner; an empty string: tasks nobody holds.
    #[arg(long, value_name = "O")]
    owner: Option<String>,
    /// Only tasks that can be claimed now (pending, unowned, unblocked).
    #[arg(long)]
    available: bool,
    /// Only tasks still waiting for an open blocker.
    #[arg(long)]
    blocked: bool,
    /// Show the list of this directory's most recent session (instead of
    /// --list, $KAJI_TASK_LIST_ID or "default").
    #[arg(long)]
    latest: bool,
}

impl ListFilterArgs {
    fn filter(self) -> Result<ListTaskFilter, Failure> {
        Ok(ListTaskFilter {
            status: self
                .status
                .map(|s| s.parse::<ListTaskStatus>())
                .transpose()?,
            owner: self.owner,
            available: self.available,
            blocked: self.blocked,
        })
    }
}

/// A failure: the exit code and what to say.
struct Failure {
    code: i32,
    kind: &'static str,
    reason: Option<&'static str>,
    message: String,
}

impl Failure {
    /// Standard output is closed: stop, say nothing, exit 0.
    fn closed_pipe() -> Self {
        Self {
            code: 0,
            kind: "closed_pipe",
            reason: None,
            message: String::new(),
        }
    }

    /// Standard output cannot be written for another reason (a full disk).
    fn stdout(e: &std::io::Error) -> Self {
        Self {
            code: 1,
            kind: "io",
            reason: None,
            message: format!("cannot write to standard output: {e}"),
        }
    }
}

/// Writes `text` to stdout and flushes it; a closed pipe or a full disk
/// becomes a [`Failure`] instead of a panic.
fn emit(text: &str) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Failure::closed_pipe()),
        Err(e) => Err(Failure::stdout(&e)),
    }
}

/// Writes one line to stderr; there is nobody to tell if that fails.
fn warn(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

impl From<TaskListError> for Failure {
    fn from(e: TaskListError) -> Self {
        let (code, kind) = match e.kind() {
            TaskListErrorKind::NotFound => (2, "not_found"),
            TaskListErrorKind::InvalidInput => (2, "invalid_input"),
            TaskListErrorKind::Refused => (1, "refused"),
            TaskListErrorKind::Corrupt => (1, "corrupt"),
            TaskListErrorKind::Io => (1, "io"),
            TaskListErrorKind::Busy => (1, "lock_timeout"),
        };
        let reason = match &e {
            TaskListError::ClaimRefused { reason, .. } => Some(reason.code()),
            TaskListError::Cycle { .. } => Some("cycle"),
            _ => None,
        };
        Self {
            code,
            kind,
            reason,
            message: e.to_string(),
        }
    }
}

/// Runs `kaji tasks`; returns the exit code.
pub fn run(args: TasksArgs) -> i32 {
    let json = args.json;
    match run_inner(args) {
        Ok(()) => 0,
        Err(failure) if failure.kind == "closed_pipe" => failure.code,
        Err(failure) => {
            warn(&format!("kaji tasks: {}", failure.message));
            if json && failure.code != 0 {
                let mut error = json!({"kind": failure.kind, "message": failure.message});
                if let Some(reason) = failure.reason {
                    error["reason"] = json!(reason);
                }
                // Best effort: stdout may be what failed.
                let _ = emit(&format!("{}\n", json!({ "error": error })));
            }
            failure.code
        }
    }
}

fn run_inner(args: TasksArgs) -> Result<(), Failure> {
    let home = crate::paths::kaji_home();
    let latest = matches!(
        args.command,
        TasksCommand::List(ListFilterArgs { latest: true, .. })
            | TasksCommand::Watch { latest: true }
    );
    let flag = if latest {
        Some(lists::latest_list(&home)?)
    } else {
        args.list.filter(|l| !l.trim().is_empty())
    };
    let url = kaji_core::env::StartupEnv::read()
        .task_list_url
        .or_else(|| url_setting(&home));
    let target = resolve_target(flag.as_deref(), None, url.as_deref(), DEFAULT_LIST_ID)?;
    match target {
        ListTarget::Files(id) if !db::needs_async(&args.command) => {
            run_files(&home, id, args.json, args.command)
        }
        target => db::run(&home, &target, args.json, args.command),
    }
}

/// The `task_list_url` setting for the current directory (the user's
/// settings, and the project's when it is trusted, as for a session). A
/// settings file that cannot be read is said on stderr; the list is then
/// the file store's.
fn url_setting(home: &Path) -> Option<String> {
    let cwd = std::env::current_dir().ok()?;
    let trusted = kaji_core::trust::is_trusted(home, &cwd).unwrap_or(false);
    match kaji_core::config::KajiConfig::load_gated(home, &cwd, trusted) {
        Ok((settings, _)) => settings.task_list_url.filter(|u| !u.trim().is_empty()),
        Err(e) => {
            eprintln!("kaji tasks: {e}; `task_list_url` is not applied");
            None
        }
    }
}

fn run_files(
    home: &Path,
    list_id: String,
    json: bool,
    command: TasksCommand,
) -> Result<(), Failure> {
    let home = home.to_path_buf();
    let out = Printer { json };
    let existing = || TaskListStore::open_existing(&home, &list_id).map(with_wait_notice);
    match command {
        TasksCommand::Migrate | TasksCommand::Export | TasksCommand::Import { .. } => {
            return db::run(&home, &ListTarget::Files(list_id), json, command);
        }
        TasksCommand::List(filter) => {
            let filter = filter.filter()?;
            match existing() {
                Ok(store) => {
                    let snapshot = store.list()?;
                    out.snapshot(store.list_id(), &snapshot, &filter)?;
                }
                // A list nobody wrote to yet is an empty list.
                Err(TaskListError::ListNotFound { list_id, .. }) => {
                    out.snapshot(&list_id, &ListSnapshot::default(), &filter)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        TasksCommand::Lists => lists::run(&home, json)?,
        TasksCommand::Show { id } => {
            let store = existing()?;
            let task = store.get(id)?;
            let snapshot = store.list()?;
            if json {
                print_json(&serde_json::to_value(&task).unwrap_or(Value::Null))?;
            } else {
                emit(&describe(&snapshot, &task))?;
            }
        }
        TasksCommand::Create {
            subject,
            description,
            active_form,
            blocked_by,
        } => {
            let store = with_wait_notice(TaskListStore::open(&home, &list_id)?);
            let task = store.create(NewListTask {
                subject,
                description,
                active_form,
                blocked_by,
                ..NewListTask::default()
            })?;
            out.task(&task, &format!("created #{}: {}", task.id, task.subject))?;
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
            let store = existing()?;
            if status.as_deref() == Some("deleted") {
                let task = store.delete(id)?;
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
            let outcome = store.update(id, patch)?;
            if json {
                print_json(&json!({"task": outcome.task, "unblocked": outcome.unblocked}))?;
            } else {
                let mut text = format!("updated #{}: {}\n", id, outcome.task.subject);
                if !outcome.unblocked.is_empty() {
                    text.push_str(&format!("unblocked: {}\n", id_list(&outcome.unblocked)));
                }
                emit(&text)?;
            }
        }
        TasksCommand::Claim { id, owner } => {
            let store = existing()?;
            let task = match id {
                Some(id) => store.claim(id, &owner)?,
                None => store.claim_next(&owner)?.ok_or_else(|| Failure {
                    code: 1,
                    kind: "refused",
                    reason: Some("none_available"),
                    message: format!(
                        "no task in list {:?} is available to claim",
                        store.list_id()
                    ),
                })?,
            };
            out.task(
                &task,
                &format!("claimed #{} for {owner}: {}", task.id, task.subject),
            )?;
        }
        TasksCommand::Release { owner } => {
            let store = existing()?;
            let released = store.release(&owner)?;
            if json {
                print_json(&json!({ "released": released }))?;
            } else if released.is_empty() {
                emit(&format!("{owner} held no unfinished task\n"))?;
            } else {
                emit(&format!("released {}\n", id_list(&released)))?;
            }
        }
        TasksCommand::Delete { id } => {
            let store = existing()?;
            let task = store.delete(id)?;
            out.task(&task, &format!("deleted #{}: {}", task.id, task.subject))?;
        }
        TasksCommand::Watch { .. } => watch(&existing()?, json)?,
        TasksCommand::Repair => {
            let store = with_wait_notice(TaskListStore::locate(&home, &list_id)?);
            let report = store.repair()?;
            if json {
                print_json(&repair::report_json(&store, &report))?;
            } else {
                emit(&repair::report_text(&report))?;
            }
            if !report.is_sound() {
                return Err(Failure {
                    code: 1,
                    kind: "unsound",
                    reason: None,
                    message: format!(
                        "list {:?} is still not sound: look at the files named above",
                        store.list_id()
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Prints results as text or JSON.
struct Printer {
    json: bool,
}

impl Printer {
    fn task(&self, task: &ListTask, text: &str) -> Result<(), Failure> {
        if self.json {
            print_json(&serde_json::to_value(task).unwrap_or(Value::Null))
        } else {
            emit(&format!("{text}\n"))
        }
    }

    /// The list; unreadable files are warned about on stderr (and listed
    /// under `errors` with `--json`).
    fn snapshot(
        &self,
        list_id: &str,
        snapshot: &ListSnapshot,
        filter: &ListTaskFilter,
    ) -> Result<(), Failure> {
        warn_corrupt(snapshot);
        if self.json {
            print_json(&snapshot_json(list_id, snapshot, filter))
        } else {
            emit(&table(snapshot, filter))
        }
    }
}

fn print_json(value: &Value) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".to_string());
    emit(&format!("{text}\n"))
}

/// The store, printing once to stderr when a lock wait lasts a while
/// ("waiting for the list lock held by pid N …").
fn with_wait_notice(store: TaskListStore) -> TaskListStore {
    store.with_lock_observer(std::sync::Arc::new(|wait: &LockWait| {
        warn(&format!("kaji tasks: {wait}"));
    }))
}

fn snapshot_json(list_id: &str, snapshot: &ListSnapshot, filter: &ListTaskFilter) -> Value {
    json!({
        "listId": list_id,
        "highwatermark": snapshot.highwatermark,
        "tasks": snapshot.filtered(filter),
        "errors": snapshot.errors.iter().map(|e| json!({
            "path": e.path.display().to_string(),
            "problem": e.problem,
        })).collect::<Vec<_>>(),
    })
}

fn warn_corrupt(snapshot: &ListSnapshot) {
    for e in &snapshot.errors {
        warn(&format!("warning: {}: {}", e.path.display(), e.problem));
    }
}

fn id_list(ids: &[u64]) -> String {
    ids.iter()
        .map(|id| format!("#{id}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The readable table of the tasks of `snapshot` that pass `filter`: id,
/// status, owner, subject, open blockers.
fn table(snapshot: &ListSnapshot, filter: &ListTaskFilter) -> String {
    let mut rows = vec![[
        "ID".to_string(),
        "STATUS".to_string(),
        "OWNER".to_string(),
        "SUBJECT".to_string(),
        "BLOCKED BY".to_string(),
    ]];
    let shown = snapshot.filtered(filter);
    for task in &shown {
        rows.push([
            task.id.to_string(),
            task.status.to_string(),
            task.owner.clone().unwrap_or_else(|| "-".to_string()),
            task.subject.replace(['\n', '\r'], " "),
            id_list(&snapshot.open_blockers(task)),
        ]);
    }
    if snapshot.tasks.is_empty() {
        return "no tasks\n".to_string();
    }
    if shown.is_empty() {
        return format!(
            "no task matches the filter ({} tasks in the list)\n",
            snapshot.tasks.len()
        );
    }
    let mut widths = [0usize; 5];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            line.extend(std::iter::repeat_n(' ', w - cell.chars().count()));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Every field of one task, for `show`.
fn describe(snapshot: &ListSnapshot, task: &ListTask) -> String {
    let none = || "-".to_string();
    let ids =
        |set: &std::collections::BTreeSet<u64>| id_list(&set.iter().copied().collect::<Vec<_>>());
    let mut out = String::new();
    let mut field = |name: &str, value: String| out.push_str(&format!("{name:<12} {value}\n"));
    field("id", format!("#{}", task.id));
    field("subject", task.subject.clone());
    field("status", task.status.to_string());
    field("owner", task.owner.clone().unwrap_or_else(none));
    field("active form", task.active_form.clone().unwrap_or_else(none));
    field("blocked by", ids(&task.blocked_by));
    field("open", id_list(&snapshot.open_blockers(task)));
    field("blocks", ids(&task.blocks));
    field("unblocks", id_list(&snapshot.would_unblock(task)));
    field("metadata", Value::Object(task.metadata.clone()).to_string());
    field("created at", task.created_at.to_string());
    field("updated at", task.updated_at.to_string());
    out.push_str("description:\n");
    out.push_str(&task.description);
    if !task.description.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// What `watch` compares between polls: every task file's name and
/// identity (each atomic write creates a new file).
fn fingerprint(dir: &Path) -> Result<BTreeMap<String, (u64, u64, i128)>, TaskListError> {
    let mut seen = BTreeMap::new();
    let entries = std::fs::read_dir(dir).map_err(|e| TaskListError::Io {
        path: dir.to_path_buf(),
        source: e,
    })?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.ends_with(".json") || name == ".highwatermark") || name.starts_with(".tmp") {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        let modified = meta
            .modified()
            .ok()
            .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128);
        #[cfg(unix)]
        let ino = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let ino = 0;
        seen.insert(name, (ino, meta.len(), modified));
    }
    Ok(seen)
}

/// Redraws the list whenever a task file changes. With `--json`, prints
/// one JSON object per line for each state.
fn watch(store: &TaskListStore, json: bool) -> Result<(), Failure> {
    let tty = std::io::stdout().is_terminal();
    let mut last = None;
    loop {
        let now = fingerprint(store.dir())?;
        if last.as_ref() != Some(&now) {
            let snapshot = store.list()?;
            let text = if json {
                format!(
                    "{}\n",
                    snapshot_json(store.list_id(), &snapshot, &ListTaskFilter::default())
                )
            } else {
                let header = format!(
                    "task list {} ({}) — Ctrl-C to stop\n",
                    store.list_id(),
                    store.dir().display()
                );
                let clear = if tty { "\x1b[2J\x1b[H" } else { "" };
                format!(
                    "{clear}{header}{}",
                    table(&snapshot, &ListTaskFilter::default())
                )
            };
            // A closed pipe ends the watch quietly; a full disk with an error.
            emit(&text)?;
            if !json {
                warn_corrupt(&snapshot);
            }
            last = Some(now);
        }
        std::thread::sleep(WATCH_INTERVAL);
    }
}
