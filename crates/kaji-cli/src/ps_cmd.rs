//! `kaji ps`: the runtime tasks (background shells and agents) of every
//! running kaji session on this machine.
//!
//! It reads the state files the sessions keep under `$KAJI_HOME/runs/`
//! (see `kaji_tasks::runtime::state`), skips sessions whose process is gone,
//! and prints one row per task: id, type, status, age, description. It
//! only reads: it never stops a task or cleans up a dead session's files.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use kaji_tasks::runtime::{RuntimeTaskInfo, scan_sessions};
use serde_json::{Value, json};

/// Arguments of `kaji ps`.
#[derive(Debug, clap::Args)]
pub struct PsArgs {
    /// Print a JSON array (one object per task) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `kaji ps`; returns the exit code.
pub fn run(args: PsArgs) -> i32 {
    let home = crate::paths::kaji_home();
    let scan = scan_sessions(&home);
    for skipped in &scan.skipped {
        eprintln!(
            "kaji ps: skipping {}: {}",
            skipped.path.display(),
            skipped.reason
        );
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
        let items: Vec<Value> = rows
            .iter()
            .map(|(session, pid, task)| {
                let mut value = serde_json::to_value(task).unwrap_or(Value::Null);
                if let Value::Object(map) = &mut value {
                    map.insert("session_id".into(), json!(session));
                    map.insert("session_pid".into(), json!(pid));
                    map.insert(
                        "age_seconds".into(),
                        json!(now.saturating_sub(task.started_at_ms) / 1000),
                    );
                }
                value
            })
            .collect();
        serde_json::to_string_pretty(&items)
            .map_err(std::io::Error::other)
            .and_then(|text| writeln!(out, "{text}"))
    } else {
        write_table(&mut out, &rows, now)
    };
    match written {
        Ok(()) => 0,
        // A closed pipe (`kaji ps | head`) is not worth a complaint.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("kaji ps: cannot write the listing: {e}");
            1
        }
    }
}

fn write_table(
    out: &mut impl Write,
    rows: &[(&str, u32, &RuntimeTaskInfo)],
    now: u64,
) -> std::io::Result<()> {
    if rows.is_empty() {
        return writeln!(out, "No runtime tasks in any running kaji session.");
    }
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|(_, _, t)| {
            [
                t.id.to_string(),
                t.task_type.to_string(),
                t.status.to_string(),
                format_age(now.saturating_sub(t.started_at_ms) / 1000),
                one_line(&t.description),
            ]
        })
        .collect();
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
