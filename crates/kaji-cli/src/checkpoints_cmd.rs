//! `kaji checkpoints`: list, diff and restore the checkpoints kaji took of
//! a working directory.
//!
//! A thin layer over kaji-core's [`CheckpointStore`]: parse, call, print.
//! Exit codes: 0 ok, 1 failure (git failed, unreadable shadow repository,
//! a restore refused because it would overwrite what it cannot save, a
//! shadow busy with another git), 2 usage error (no such directory,
//! unknown or ambiguous checkpoint id).
//! Listing and diffing between two checkpoints never change anything;
//! `diff ID` (to the present) refreshes the shadow repository's index, and
//! `restore` changes the directory's files — after taking a checkpoint of
//! their present state, which it prints so the restore can be undone.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use kaji_core::checkpoints::{Checkpoint, CheckpointError, CheckpointId, CheckpointStore};

/// Arguments of `kaji checkpoints`.
#[derive(Debug, Args)]
pub struct CheckpointsArgs {
    /// The working directory whose checkpoints to use (default: the
    /// current directory).
    #[arg(short = 'C', value_name = "DIR", global = true)]
    pub dir: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: CheckpointsCommand,
}

/// The subcommands of `kaji checkpoints`.
#[derive(Debug, Subcommand)]
pub enum CheckpointsCommand {
    /// List the checkpoints, newest first.
    List {
        /// Print a JSON array of {id, label, time} (time in seconds since
        /// the Unix epoch; `skipped` lists the files a checkpoint left out
        /// because they could not be read) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show a unified diff from checkpoint ID to ID2, or to the present
    /// files when ID2 is not given.
    Diff {
        /// The older checkpoint (full id or unambiguous prefix).
        id: String,
        /// The newer checkpoint.
        id2: Option<String>,
    },
    /// Bring the files back to checkpoint ID (files created since are
    /// removed, deleted ones come back). The present state is
    /// checkpointed first; the command prints how to undo.
    Restore {
        /// The checkpoint (full id or unambiguous prefix).
        id: String,
        /// Only show what would change (files removed, brought back,
        /// reverted); change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Do not ask for confirmation in a terminal.
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

/// Runs `kaji checkpoints`; returns the exit code.
pub async fn run(args: CheckpointsArgs) -> i32 {
    let dir = match args.dir {
        Some(dir) => dir,
        None => match std::env::current_dir() {
            Ok(dir) => dir,
            Err(e) => {
                eprintln!("kaji checkpoints: cannot read the current directory: {e}");
                return 1;
            }
        },
    };
    let store = match CheckpointStore::open(&crate::paths::kaji_home(), &dir) {
        Ok(store) => store,
        Err(e) => return fail(&e),
    };
    let result = match args.command {
        CheckpointsCommand::List { json } => list(&store, json).await,
        CheckpointsCommand::Diff { id, id2 } => diff(&store, &id, id2.as_deref()).await,
        CheckpointsCommand::Restore { id, dry_run, yes } => {
            restore(&store, &id, dry_run, yes).await
        }
    };
    match result {
        Ok(()) => 0,
        Err(Failure::Checkpoint(e)) => fail(&e),
        // A closed pipe (`kaji checkpoints list | head`) is not worth a complaint.
        Err(Failure::Write(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(Failure::Write(e)) => {
            eprintln!("kaji checkpoints: cannot write the output: {e}");
            1
        }
    }
}

enum Failure {
    Checkpoint(CheckpointError),
    Write(std::io::Error),
}

impl From<CheckpointError> for Failure {
    fn from(e: CheckpointError) -> Self {
        Self::Checkpoint(e)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Self::Write(e)
    }
}

fn fail(e: &CheckpointError) -> i32 {
    eprintln!("kaji checkpoints: {e}");
    match e {
        CheckpointError::UnknownCheckpoint { .. } | CheckpointError::BadWorkDir { .. } => 2,
        _ => 1,
    }
}

async fn list(store: &CheckpointStore, json: bool) -> Result<(), Failure> {
    let checkpoints = store.list().await?;
    let mut out = std::io::stdout().lock();
    if json {
        let text = serde_json::to_string_pretty(&checkpoints).map_err(std::io::Error::other)?;
        writeln!(out, "{text}")?;
        return Ok(());
    }
    if checkpoints.is_empty() {
        writeln!(out, "No checkpoints for {}.", store.work_tree().display())?;
        return Ok(());
    }
    writeln!(out, "{:<12}  {:<20}  LABEL", "ID", "TIME (UTC)")?;
    for Checkpoint {
        id,
        label,
        time,
        skipped,
    } in &checkpoints
    {
        let note = match skipped.len() {
            0 => String::new(),
            1 => format!("  (left out, cannot be read: {})", skipped[0]),
            n => format!("  (left out, cannot be read: {n} files, see --json)"),
        };
        writeln!(
            out,
            "{:<12}  {:<20}  {label}{note}",
            id.short(),
            format_time(*time)
        )?;
    }
    Ok(())
}

async fn diff(store: &CheckpointStore, id: &str, id2: Option<&str>) -> Result<(), Failure> {
    let from = store.resolve(id).await?;
    let to = match id2 {
        Some(id2) => Some(store.resolve(id2).await?),
        None => None,
    };
    let patch = store.diff(&from, to.as_ref()).await?;
    std::io::stdout().lock().write_all(patch.as_bytes())?;
    Ok(())
}

/// What restoring a checkpoint does to each file, from the diff of the
/// checkpoint to the present: `remove` what was created since, `restore`
/// what was deleted since, `revert` what changed.
fn restore_plan(patch: &str) -> Vec<(&'static str, String)> {
    let mut plan: Vec<(&'static str, String)> = Vec::new();
    for line in patch.lines() {
        if let Some(rest) = line.strip_prefix("diff --git a/") {
            let path = rest.split(" b/").next().unwrap_or(rest).to_string();
            plan.push(("revert", path));
        } else if line.starts_with("new file mode") {
            if let Some(last) = plan.last_mut() {
                last.0 = "remove";
            }
        } else if line.starts_with("deleted file mode") {
            if let Some(last) = plan.last_mut() {
                last.0 = "restore";
            }
        } else if let Some(to) = line.strip_prefix("rename to ")
            && let Some(last) = plan.last_mut()
        {
            last.1 = format!("{to} (back to {})", last.1);
        }
    }
    plan
}

async fn restore(
    store: &CheckpointStore,
    id: &str,
    dry_run: bool,
    yes: bool,
) -> Result<(), Failure> {
    use std::io::IsTerminal;
    let target: CheckpointId = store.resolve(id).await?;
    let plan = restore_plan(&store.diff(&target, None).await?);
    {
        let mut out = std::io::stdout().lock();
        if plan.is_empty() {
            writeln!(
                out,
                "Nothing to change: the files are as at checkpoint {}.",
                target.short()
            )?;
            return Ok(());
        }
        writeln!(
            out,
            "Restoring checkpoint {} in {} would:",
            target.short(),
            store.work_tree().display()
        )?;
        for (what, path) in &plan {
            let why = match *what {
                "remove" => " (created after the checkpoint)",
                "restore" => " (deleted after the checkpoint)",
                _ => "",
            };
            writeln!(out, "  {what:<7} {path}{why}")?;
        }
    }
    if dry_run {
        return Ok(());
    }
    if !yes && std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        print!("Restore? [y/N] ");
        std::io::stdout().flush()?;
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            println!("Nothing changed.");
            return Ok(());
        }
    }
    let outcome = store.restore(&target).await?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "Restored {} to checkpoint {}.",
        store.work_tree().display(),
        target.short()
    )?;
    writeln!(
        out,
        "The state before the restore is checkpoint {}; undo with: kaji checkpoints -C {} restore {}",
        outcome.before.short(),
        shell_quote(&store.work_tree().to_string_lossy()),
        outcome.before.short()
    )?;
    Ok(())
}

fn format_time(secs: u64) -> String {
    i64::try_from(secs)
        .ok()
        .and_then(|s| kaji_protocol::UtcDateTime::from_unix(s, 0))
        .map_or_else(|| secs.to_string(), |t| t.to_second())
}

/// Quotes a path for a copy-pasteable command line when it needs it.
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:,@".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
