//! `kaji ps`: the runtime tasks (background shells and agents) of every
//! running kaji session on this machine.
//!
//! It reads the state files the sessions keep under `$KAJI_HOME/runs/`
//! (see `kaji_tasks::runtime::state`) and prints one row per task of a
//! running session: id, type, status, age, description. Sessions whose
//! process is gone are not listed — except for the process groups they
//! left running (orphans, from their `groups.json`), shown with status
//! `orphaned` whatever the dead session's file still says. Without
//! `--kill-orphans` it only reads; it never stops a task of a live session
//! and never cleans up a dead session's files.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use kaji_tasks::runtime::orphans::ORPHANED;
use kaji_tasks::runtime::{
    OrphanGroup, RuntimeTaskInfo, find_orphans, kill_orphans, scan_sessions,
};
use serde_json::{Value, json};

/// Arguments of `kaji ps`.
#[derive(Debug, clap::Args)]
pub struct PsArgs {
    /// Print a JSON array (one object per task) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// End the orphaned process groups of dead sessions (SIGTERM, then
    /// SIGKILL after KAJI_KILL_GRACE_MS) and say what was ended. Exit 1 if
    /// any process survived.
    #[arg(long)]
    pub kill_orphans: bool,
}

/// Writes one line to stderr; there is nobody to tell if that fails.
fn warn(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// Ends the result of a write to stdout: a closed pipe is quiet (exit 0),
/// anything else (a full disk) an error (exit 1).
fn finish(written: std::io::Result<()>, ok: i32) -> i32 {
    let written = written.and_then(|()| std::io::stdout().lock().flush());
    match written {
        Ok(()) => ok,
        // A closed pipe (`kaji ps | head`) is not worth a complaint.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            warn(&format!("kaji ps: cannot write the listing: {e}"));
            1
        }
    }
}

/// Runs `kaji ps`; returns the exit code.
pub fn run(args: PsArgs) -> i32 {
    let home = crate::paths::kaji_home();
    let scan = scan_sessions(&home);
    for skipped in &scan.skipped {
        warn(&format!(
            "kaji ps: skipping {}: {}",
            skipped.path.display(),
            skipped.reason
        ));
    }
    let orphans = find_orphans(&home, &scan);
    if args.kill_orphans {
        return kill(&orphans, args.json);
    }
    let now = now_ms();
    let rows: Vec<(&str, u32, &RuntimeTaskInfo)> = scan
        .live
        .iter()
        .flat_map(|s| {
            s.tasks
                .iter()
                .map(move |t| (s.session_id.as_str(), s.pid, t))
        })
        .collect();

    let mut out = std::io::stdout().lock();
    let written = if args.json {
        let mut items: Vec<Value> = rows
            .iter()
            .map(|(session, pid, task)| {
                let mut value = serde_json::to_value(task).unwrap_or(Value::Null);
                if let Value::Object(map) = &mut value {
                    map.insert("session_id".into(), json!(session));
                    map.insert("session_pid".into(), json!(pid));
                    map.insert("session_alive".into(), json!(true));
                    map.insert(
                        "age_seconds".into(),
                        json!(now.saturating_sub(task.started_at_ms) / 1000),
                    );
                }
                value
            })
            .collect();
        items.extend(orphans.iter().map(|o| orphan_json(o, now)));
        serde_json::to_string_pretty(&items)
            .map_err(std::io::Error::other)
            .and_then(|text| writeln!(out, "{text}"))
    } else {
        write_table(&mut out, &rows, &orphans, now)
    };
    drop(out);
    if !orphans.is_empty() && !args.json {
        warn(&format!(
            "kaji ps: {} process group(s) of dead sessions are still running; \
             `kaji ps --kill-orphans` ends them",
            orphans.len()
        ));
    }
    finish(written, 0)
}

/// One orphan in the `--json` array: the task's object when the group is a
/// runtime task's (status `orphaned`, the file's status as
/// `recorded_status`), else an object of type `process_group`.
fn orphan_json(o: &OrphanGroup, now: u64) -> Value {
    let mut value = match &o.task {
        Some(task) => serde_json::to_value(task).unwrap_or(Value::Null),
        None => json!({
            "id": null,
            "type": "process_group",
            "description": o.command,
            "command": o.command,
            "started_at_ms": o.started_at_ms,
        }),
    };
    if let Value::Object(map) = &mut value {
        map.insert(
            "recorded_status".into(),
            json!(o.recorded_status().map(|s| s.as_str())),
        );
        map.insert("status".into(), json!(ORPHANED));
        map.insert("session_id".into(), json!(o.session_id));
        map.insert("session_pid".into(), json!(o.session_pid));
        map.insert("session_alive".into(), json!(false));
        map.insert("pgid".into(), json!(o.pgid));
        map.insert("live_pids".into(), json!(o.live_pids));
        map.insert(
            "age_seconds".into(),
            json!(now.saturating_sub(o.started_at_ms) / 1000),
        );
    }
    value
}

/// `--kill-orphans`: ends them and says what was ended.
fn kill(orphans: &[OrphanGroup], json: bool) -> i32 {
    let grace = kaji_tasks::limits::kill_grace_from_env();
    let outcomes = kill_orphans(orphans, grace);
    let survived = outcomes.iter().any(|k| !k.survivors.is_empty());
    let mut out = std::io::stdout().lock();
    let written = if json {
        let item = |k: &kaji_tasks::runtime::KilledOrphan| {
            json!({
                "session_id": k.group.session_id,
                "session_pid": k.group.session_pid,
                "pgid": k.group.pgid,
                "command": k.group.command,
                "task_id": k.group.task.as_ref().map(|t| t.id.as_str()),
                "pids": k.group.live_pids,
                "survivors": k.survivors,
            })
        };
        let value = json!({
            "killed": outcomes.iter().filter(|k| k.survivors.is_empty()).map(item).collect::<Vec<_>>(),
            "survived": outcomes.iter().filter(|k| !k.survivors.is_empty()).map(item).collect::<Vec<_>>(),
        });
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        )
    } else {
        write_kills(&mut out, &outcomes)
    };
    finish(written, i32::from(survived))
}

fn write_kills(
    out: &mut impl Write,
    outcomes: &[kaji_tasks::runtime::KilledOrphan],
) -> std::io::Result<()> {
    if outcomes.is_empty() {
        return writeln!(out, "No orphaned processes of dead kaji sessions.");
    }
    for k in outcomes {
        let g = &k.group;
        let what = g.task.as_ref().map_or_else(
            || one_line(&g.command),
            |t| format!("{} ({})", t.id, one_line(&t.description)),
        );
        let pids: Vec<String> = g.live_pids.iter().map(i32::to_string).collect();
        if k.survivors.is_empty() {
            writeln!(
                out,
                "ended group {} of dead session {}: {what}; pids {}",
                g.pgid,
                g.session_id,
                pids.join(" ")
            )?;
        } else {
            writeln!(
                out,
                "could not end group {} of dead session {}: {what}; still alive: {:?}",
                g.pgid, g.session_id, k.survivors
            )?;
        }
    }
    Ok(())
}

fn write_table(
    out: &mut impl Write,
    rows: &[(&str, u32, &RuntimeTaskInfo)],
    orphans: &[OrphanGroup],
    now: u64,
) -> std::io::Result<()> {
    if rows.is_empty() && orphans.is_empty() {
        return writeln!(out, "No runtime tasks in any running kaji session.");
    }
    let mut cells: Vec<[String; 5]> = rows
        .iter()
        .map(|(_, _, t)| {
            [
                t.id.to_string(),
                t.task_type.to_string(),
                match (&t.activity, t.status.is_terminal()) {
                    (Some(activity), false) => format!("{} ({})", t.status, one_line(activity)),
                    _ => t.status.to_string(),
                },
                format_age(now.saturating_sub(t.started_at_ms) / 1000),
                one_line(&t.description),
            ]
        })
        .collect();
    cells.extend(orphans.iter().map(|o| {
        let (id, kind, what) = match &o.task {
            Some(t) => (
                t.id.to_string(),
                t.task_type.to_string(),
                t.description.clone(),
            ),
            None => (
                "-".to_string(),
                "process_group".to_string(),
                o.command.clone(),
            ),
        };
        [
            id,
            kind,
            ORPHANED.to_string(),
            format_age(now.saturating_sub(o.started_at_ms) / 1000),
            one_line(&format!(
                "{what} (pgid {}, dead session {})",
                o.pgid, o.session_id
            )),
        ]
    }));
    let header = ["ID", "TYPE", "STATUS", "AGE", "DESCRIPTION"];
    let mut widths = header.map(str::len);
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cols: [&str; 5]| {
        format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {:>w3$}  {}",
            cols[0],
            cols[1],
            cols[2],
            cols[3],
            cols[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3],
        )
    };
    writeln!(out, "{}", line(header))?;
    for row in &cells {
        writeln!(
            out,
            "{}",
            line([&row[0], &row[1], &row[2], &row[3], &row[4]]).trim_end()
        )?;
    }
    Ok(())
}

/// `45s`, `12m`, `3h`, `2d`.
fn format_age(seconds: u64) -> String {
    match seconds {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// The description on one line, control characters replaced.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
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
    fn ages_are_short() {
        assert_eq!(format_age(5), "5s");
        assert_eq!(format_age(125), "2m");
        assert_eq!(format_age(7300), "2h");
        assert_eq!(format_age(200_000), "2d");
    }

    #[test]
    fn descriptions_stay_on_one_line() {
        assert_eq!(one_line("a\nb\tc"), "a b c");
    }
}
