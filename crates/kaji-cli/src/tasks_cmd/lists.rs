//! `kaji tasks lists`: every task list under `$KAJI_HOME/tasks/`, with how
//! many sessions use it, its tasks, the open ones and its last change.
//!
//! A session uses the list its file records (`task_list` record), else the
//! list named after its id. It only reads: it never creates, repairs or
//! locks a list, and an unreadable list or session is a warning, not a
//! failure.

use std::collections::BTreeMap;
use std::path::Path;

use kaji_core::storage::record::SessionKind;
use kaji_core::storage::replay::replay;
use kaji_core::storage::store::SessionStore;
use kaji_tasks::list::{ListTaskStatus, TaskListStore, lists_root};
use serde_json::{Value, json};

use super::{Failure, emit, print_json, warn};

/// One row of the listing.
struct ListRow {
    id: String,
    sessions: usize,
    tasks: usize,
    open: usize,
    /// Milliseconds since the Unix epoch of the newest task change (0 when
    /// the list has no task).
    updated: u64,
}

/// Prints every list as a table (or JSON with `json`).
pub(super) fn run(home: &Path, json: bool) -> Result<(), Failure> {
    let sessions = sessions_per_list(home);
    let mut rows = Vec::new();
    for id in list_ids(home) {
        let store = match TaskListStore::open_existing(home, &id) {
            Ok(store) => store,
            Err(e) => {
                warn(&format!("kaji tasks: skipping list {id:?}: {e}"));
                continue;
            }
        };
        let snapshot = match store.list() {
            Ok(snapshot) => snapshot,
            Err(e) => {
                warn(&format!("kaji tasks: skipping list {id:?}: {e}"));
                continue;
            }
        };
        rows.push(ListRow {
            sessions: sessions.get(&id).copied().unwrap_or(0),
            tasks: snapshot.tasks.len(),
            open: snapshot
                .tasks
                .iter()
                .filter(|t| t.status != ListTaskStatus::Completed)
                .count(),
            updated: snapshot
                .tasks
                .iter()
                .map(|t| t.updated_at)
                .max()
                .unwrap_or(0),
            id,
        });
    }
    if json {
        return print_json(&Value::Array(rows.iter().map(row_json).collect()));
    }
    emit(&table(&rows))
}

fn row_json(row: &ListRow) -> Value {
    json!({
        "listId": row.id,
        "sessions": row.sessions,
        "tasks": row.tasks,
        "open": row.open,
        "updatedAt": row.updated,
    })
}

/// The names of the list directories, sorted.
fn list_ids(home: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(lists_root(home)) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|name| !name.starts_with('.'))
        .collect();
    ids.sort();
    ids
}

/// The list of the most recent session (main or fork) of the current
/// directory: `kaji tasks list --latest` and `watch --latest`.
pub(super) fn latest_list(home: &Path) -> Result<String, Failure> {
    let usage = |message: String| Failure {
        code: 2,
        kind: "not_found",
        reason: None,
        message,
    };
    let cwd = std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| usage(format!("cannot read the current directory: {e}")))?;
    let store = SessionStore::new(home);
    let listing = store
        .list()
        .map_err(|e| usage(format!("cannot read the sessions index: {e}")))?;
    let entry = listing
        .entries
        .iter()
        .find(|e| !e.removed && e.kind != SessionKind::Subagent && e.cwd == cwd)
        .ok_or_else(|| {
            usage(format!(
                "--latest: no saved session in {} (see `kaji sessions list --all`)",
                cwd.display()
            ))
        })?;
    let recorded = store
        .load(&entry.id)
        .map_err(|e| usage(format!("--latest: cannot read session {}: {e}", entry.id)))?;
    Ok(replay(&recorded)
        .task_list_id
        .unwrap_or_else(|| entry.id.clone()))
}

/// How many saved sessions use each list.
fn sessions_per_list(home: &Path) -> BTreeMap<String, usize> {
    let store = SessionStore::new(home);
    let mut counts = BTreeMap::new();
    let Ok(listing) = store.list() else {
        return counts;
    };
    for entry in listing.entries.iter().filter(|e| !e.removed) {
        let list = match store.load(&entry.id) {
            Ok(loaded) => replay(&loaded).task_list_id,
            Err(_) => None,
        };
        *counts
            .entry(list.unwrap_or_else(|| entry.id.clone()))
            .or_insert(0) += 1;
    }
    counts
}

fn table(rows: &[ListRow]) -> String {
    if rows.is_empty() {
        return "no task lists\n".to_string();
    }
    let mut cells = vec![["LIST", "SESSIONS", "TASKS", "OPEN", "UPDATED"].map(str::to_string)];
    for row in rows {
        cells.push([
            row.id.clone(),
            row.sessions.to_string(),
            row.tasks.to_string(),
            row.open.to_string(),
            format_time(row.updated),
        ]);
    }
    let mut widths = [0usize; 5];
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &cells {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// `2026-12-01 12:30` (UTC), or `-` for no time.
fn format_time(millis: u64) -> String {
    if millis == 0 {
        return "-".to_string();
    }
    kaji_protocol::UtcDateTime::from_unix_millis(millis)
        .map_or_else(|| "-".to_string(), |t| t.to_minute())
}
