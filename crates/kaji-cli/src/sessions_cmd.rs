//! `kaji sessions`: list, show and remove the sessions kaji saved under
//! `$KAJI_HOME/sessions/`.
//!
//! A thin layer over kaji-core's [`SessionStore`]: `list` reads only the
//! index, `show` renders a session file as `kaji exec` renders a live
//! transcript (through [`ExecFrontend`]), `rm` deletes a session that no
//! process has open. Every id may be a unique prefix. Exit codes: 0 ok,
//! 1 unknown or ambiguous id, a session that is open, an unreadable file;
//! 2 usage error. It never writes a session file.

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use kaji_core::TaskFrontend;
use kaji_core::session::transcript::{Transcript, origins_recorded};
use kaji_core::storage::index::IndexEntry;
use kaji_core::storage::record::LoadedSession;
use kaji_core::storage::record::{SessionKind, SessionRecord};
use kaji_core::storage::replay::replay;
use kaji_core::storage::store::SessionStore;
use kaji_protocol::{Message, Role, SayKind, TaskEvent};

use crate::agent::UsageError;
use crate::exec::ExecFrontend;

/// The shortest id prefix `list` shows.
const SHORT_ID: usize = 8;

/// Arguments of `kaji sessions`.
#[derive(Debug, Args)]
pub struct SessionsArgs {
    #[command(subcommand)]
    command: SessionsCommand,
}

#[derive(Debug, Subcommand)]
enum SessionsCommand {
    /// This directory's main sessions and forks, newest first.
    List {
        /// Also sessions of other directories, and sub-agent sessions.
        #[arg(long)]
        all: bool,
        /// Print a JSON array of index entries instead of a table.
        #[arg(long)]
        json: bool,
        /// The directory whose sessions to list (default: the current one).
        #[arg(short = 'C', long = "cd", value_name = "DIR")]
        cwd: Option<PathBuf>,
    },
    /// Print a session's transcript as `kaji exec` prints one.
    Show {
        /// The session id, or a unique prefix of it.
        id: String,
        /// Print the session's records as JSON lines instead.
        #[arg(long)]
        json: bool,
    },
    /// Delete a session (refused while a process has it open).
    Rm {
        /// The session id, or a unique prefix of it.
        id: String,
    },
}

/// Runs `kaji sessions`; returns the exit code.
pub fn run(args: SessionsArgs) -> i32 {
    let store = SessionStore::new(&crate::paths::kaji_home());
    let result = match args.command {
        SessionsCommand::List { all, json, cwd } => list(&store, all, json, cwd),
        SessionsCommand::Show { id, json } => show(&store, &id, json),
        SessionsCommand::Rm { id } => rm(&store, &id),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("kaji sessions: {e:#}");
            if e.downcast_ref::<UsageError>().is_some() {
                2
            } else {
                1
            }
        }
    }
}

fn list(store: &SessionStore, all: bool, json: bool, cwd: Option<PathBuf>) -> Result<()> {
    let listing = store.list()?;
    if listing.rebuilt {
        eprintln!(
            "kaji sessions: the index was missing or damaged; rebuilt it from the session files"
        );
    }
    for skipped in &listing.skipped {
        eprintln!("kaji sessions: skipping {skipped}");
    }
    let here = if all { None } else { Some(directory(cwd)?) };
    let shown: Vec<&IndexEntry> = listing
        .entries
        .iter()
        .filter(|e| match &here {
            None => true,
            Some(dir) => e.kind != SessionKind::Subagent && &e.cwd == dir,
        })
        .collect();
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&shown)?)?;
        return Ok(());
    }
    let all_ids: Vec<&str> = listing.entries.iter().map(|e| e.id.as_str()).collect();
    let short = short_len(&all_ids);
    let rows: Vec<[String; 6]> = shown
        .iter()
        .map(|e| {
            [
                e.id.chars().take(short).collect(),
                format_time(e.updated),
                e.turns.to_string(),
                format_tokens(e.input_tokens + e.output_tokens),
                e.status.clone(),
                e.title.clone(),
            ]
        })
        .collect();
    write_table(
        &mut out,
        ["ID", "UPDATED", "TURNS", "TOKENS", "STATUS", "TITLE"],
        &rows,
    )?;
    Ok(())
}

/// The canonical directory whose sessions are listed.
fn directory(cwd: Option<PathBuf>) -> Result<PathBuf> {
    let dir = match cwd {
        Some(d) => d,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    dir.canonicalize()
        .map_err(|e| UsageError(format!("directory {}: {e}", dir.display())).into())
}

/// The shortest prefix length (at least [`SHORT_ID`]) that tells every id
/// apart.
fn short_len(ids: &[&str]) -> usize {
    let longest = ids.iter().map(|i| i.len()).max().unwrap_or(0);
    (SHORT_ID..longest.max(SHORT_ID))
        .find(|&n| {
            let mut seen = HashSet::new();
            ids.iter().all(|id| seen.insert(id.get(..n).unwrap_or(id)))
        })
        .unwrap_or(longest.max(SHORT_ID))
}

fn write_table(out: &mut impl Write, header: [&str; 6], rows: &[[String; 6]]) -> Result<()> {
    let mut widths = header.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 6]| -> String {
        let mut s = String::new();
        for (i, cell) in cells.iter().enumerate() {
            s.push_str(cell);
            if i + 1 < cells.len() {
                let pad = widths[i] - cell.chars().count() + 2;
                s.push_str(&" ".repeat(pad));
            }
        }
        s.trim_end().to_string()
    };
    writeln!(out, "{}", line(header))?;
    for row in rows {
        writeln!(
            out,
            "{}",
            line([&row[0], &row[1], &row[2], &row[3], &row[4], &row[5]])
        )?;
    }
    Ok(())
}

/// `2026-12-01 11:50` (UTC).
fn format_time(millis: u64) -> String {
    kaji_protocol::UtcDateTime::from_unix_millis(millis)
        .map_or_else(|| "-".into(), |t| t.to_minute())
}

/// `950`, `12.3k`, `4.5M`.
fn format_tokens(n: u64) -> String {
    match n {
        n if n < 1000 => n.to_string(),
        n if n < 1_000_000 => format!("{:.1}k", n as f64 / 1000.0),
        n => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

/// Resolves a prefix and loads the session, printing its warnings.
fn load(store: &SessionStore, prefix: &str) -> Result<LoadedSession> {
    let id = store.resolve(prefix)?;
    let loaded = store.load(&id)?;
    for warning in &loaded.warnings {
        eprintln!("kaji sessions: warning: {warning}");
    }
    Ok(loaded)
}

fn show(store: &SessionStore, prefix: &str, json: bool) -> Result<()> {
    let loaded = load(store, prefix)?;
    if json {
        let mut out = std::io::stdout().lock();
        let header = SessionRecord::Header(loaded.header.clone());
        for record in std::iter::once(&header).chain(&loaded.records) {
            writeln!(out, "{}", serde_json::to_string(record)?)?;
        }
        return Ok(());
    }
    let restored = replay(&loaded);
    let frontend = ExecFrontend::new(
        false,
        restored.permission_mode.as_deref().unwrap_or("default"),
    );
    for event in transcript_events(&loaded, restored.history.last()) {
        frontend.emit(kaji_protocol::SessionEvent {
            session_id: loaded.header.session_id.clone(),
            task_id: String::new(),
            agent: "main".into(),
            parent_tool_use_id: None,
            event,
        });
    }
    let status = match (&restored.last_status, restored.task_open) {
        (_, true) => "interrupted",
        (Some(s), false) => s.as_str(),
        (None, false) => "new",
    };
    println!(
        "\n[{status}] {} turn(s), {} input / {} output tokens",
        restored.turns, restored.usage.input_tokens, restored.usage.output_tokens
    );
    Ok(())
}

/// The events `kaji exec` would have shown for the session's records, in
/// order (kaji-core's [`Transcript`], as a resumed session shows them).
/// `last` is the replayed history's last message: when replay had to
/// answer open tool calls, that answer is shown too.
pub(crate) fn transcript_events(loaded: &LoadedSession, last: Option<&Message>) -> Vec<TaskEvent> {
    let mut transcript = Transcript::new(origins_recorded(recorded_messages(loaded)));
    let mut open_calls = false;
    // A reply written ahead of its tools, shown once it is known whether
    // its whole version follows.
    let mut partial: Option<&Message> = None;
    for record in &loaded.records {
        match record {
            SessionRecord::Message { message } => {
                if let Some(p) = partial.take()
                    && message.role != Role::Assistant
                {
                    transcript.message(p);
                }
                open_calls =
                    message.role == Role::Assistant && message.tool_uses().next().is_some();
                transcript.message(message);
            }
            SessionRecord::PartialReply { message } => partial = Some(message),
            SessionRecord::HistoryReplaced { reason, .. } => {
                partial = None;
                open_calls = false;
                transcript.note(SayKind::Info, &format!("(history replaced: {reason})"));
            }
            SessionRecord::TaskEnded { status, .. } => {
                transcript.note(SayKind::Info, &format!("(prompt ended: {status})"));
            }
            _ => {}
        }
    }
    if let Some(p) = partial {
        transcript.message(p);
        open_calls = true;
    }
    if open_calls && let Some(answer) = last.filter(|m| m.role == Role::User) {
        transcript.message(answer);
    }
    transcript.into_events()
}

/// Every message the session's records hold.
fn recorded_messages(loaded: &LoadedSession) -> impl Iterator<Item = &Message> {
    loaded.records.iter().flat_map(|record| match record {
        SessionRecord::Message { message } | SessionRecord::PartialReply { message } => {
            std::slice::from_ref(message)
        }
        SessionRecord::HistoryReplaced { history, .. } => history.as_slice(),
        _ => &[],
    })
}

fn rm(store: &SessionStore, prefix: &str) -> Result<()> {
    let id = store.resolve(prefix)?;
    store.remove(&id)?;
    println!("removed session {id}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ids_grow_until_they_tell_ids_apart() {
        assert_eq!(short_len(&["abcdefgh12", "abcdefgh34"]), 9);
        assert_eq!(short_len(&["abcdefgh12", "zbcdefgh34"]), 8);
        assert_eq!(short_len(&["ab"]), 8);
        assert_eq!(short_len(&[]), 8);
    }

    #[test]
    fn tokens_and_times_are_short() {
        assert_eq!(format_tokens(950), "950");
        assert_eq!(format_tokens(12_345), "12.3k");
        assert_eq!(format_tokens(4_500_000), "4.5M");
        assert_eq!(format_time(1_700_000_000_000), "2023-11-14 22:13");
    }
}
