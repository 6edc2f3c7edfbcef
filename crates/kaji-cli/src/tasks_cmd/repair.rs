//! How `kaji tasks repair` shows its [`RepairReport`]: text for people,
//! and the JSON object documented in `docs/task-list.md` ("Repair").
//! It only formats; the repair itself is `TaskListStore::repair`.

use kaji_tasks::list::{CorruptFile, LockNote, RepairReport, TaskListStore};
use serde_json::{Value, json};

/// The `--json` object.
pub(super) fn report_json(store: &TaskListStore, report: &RepairReport) -> Value {
    json!({
        "listId": store.list_id(),
        "sound": report.is_sound(),
        "highwatermark": {
            "before": report.highwatermark_before,
            "problem": report.highwatermark_problem,
            "after": report.highwatermark_after,
            "rewritten": report.highwatermark_rewritten,
        },
        "maxSeenId": report.max_seen_id,
        "staleLocksCleared": report.stale_locks_cleared.iter().map(lock_json).collect::<Vec<_>>(),
        "heldLocks": report.held_locks.iter().map(lock_json).collect::<Vec<_>>(),
        "removed": report.removed.iter().map(file_json).collect::<Vec<_>>(),
        "badFiles": report.bad_files.iter().map(file_json).collect::<Vec<_>>(),
    })
}

fn lock_json(note: &LockNote) -> Value {
    json!({
        "path": note.path.display().to_string(),
        "pid": note.holder.as_ref().map(|h| h.pid),
        "command": note.holder.as_ref().map(|h| h.command.clone()),
        "holderAlive": note.holder_alive,
    })
}

fn file_json(file: &CorruptFile) -> Value {
    json!({"path": file.path.display().to_string(), "problem": file.problem})
}

/// The text report, one line per finding, ending with the verdict.
pub(super) fn report_text(report: &RepairReport) -> String {
    let mut out = String::new();
    let hwm = &report;
    match (&hwm.highwatermark_problem, hwm.highwatermark_rewritten) {
        (Some(problem), _) => out.push_str(&format!(
            ".highwatermark was unreadable ({problem}); rebuilt as {}\n",
            hwm.highwatermark_after
        )),
        (None, true) => out.push_str(&format!(
            ".highwatermark was {}; raised to {} (highest id seen)\n",
            hwm.highwatermark_before
                .map_or_else(|| "missing".to_string(), |b| b.to_string()),
            hwm.highwatermark_after
        )),
        (None, false) => out.push_str(&format!(
            ".highwatermark is {}: fine\n",
            hwm.highwatermark_after
        )),
    }
    for note in &report.stale_locks_cleared {
        out.push_str(&format!(
            "cleared stale lock {} (its holder {} is gone)\n",
            note.path.display(),
            holder(note)
        ));
    }
    for note in &report.held_locks {
        let state = if note.holder_alive {
            "running"
        } else {
            "gone: the lock is held by a process that inherited it"
        };
        out.push_str(&format!(
            "lock {} is held by {} ({state})\n",
            note.path.display(),
            holder(note)
        ));
    }
    for file in &report.removed {
        out.push_str(&format!(
            "removed {}: {}\n",
            file.path.display(),
            file.problem
        ));
    }
    for file in &report.bad_files {
        out.push_str(&format!(
            "unreadable, left as it is: {}: {}\n",
            file.path.display(),
            file.problem
        ));
    }
    out.push_str(if report.is_sound() {
        "the list is sound\n"
    } else {
        "the list is NOT sound\n"
    });
    out
}

fn holder(note: &LockNote) -> String {
    match &note.holder {
        Some(h) => format!("pid {} ({})", h.pid, h.command),
        None => "an unknown process".to_string(),
    }
}
