//! `kaji agents list`: the agent types a session started in a directory
//! offers to the `Agent` tool — built-in, user and project ones — and the
//! file each comes from.
//!
//! A thin layer over `kaji_core::subagent::types::AgentCatalog::discover`:
//! one line per type (or JSON with `--json`), warnings about agent files on
//! stderr. It only reads; it never changes an agent file. Exit codes: 0
//! listed, 2 the directory does not exist.

use std::io::Write;
use std::path::PathBuf;

use kaji_core::subagent::types::AgentCatalog;
use serde_json::json;

/// Arguments of `kaji agents`.
#[derive(Debug, clap::Args)]
pub struct AgentsArgs {
    #[command(subcommand)]
    pub command: AgentsCommand,
}

/// The `kaji agents` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum AgentsCommand {
    /// List the agent types and where each comes from.
    List {
        /// The project directory to look from (default: the current one).
        #[arg(short = 'C', value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `kaji agents`; returns the exit code.
pub fn run(args: AgentsArgs) -> i32 {
    let AgentsCommand::List { dir, json } = args.command;
    let dir = match dir.map(Ok).unwrap_or_else(std::env::current_dir) {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("kaji agents: cannot read the current directory: {e}");
            return 2;
        }
    };
    let dir = match dir.canonicalize() {
        Ok(dir) if dir.is_dir() => dir,
        Ok(dir) => {
            eprintln!("kaji agents: {} is not a directory", dir.display());
            return 2;
        }
        Err(e) => {
            eprintln!("kaji agents: {}: {e}", dir.display());
            return 2;
        }
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let catalog = AgentCatalog::discover(&crate::paths::kaji_home(), &dir, home.as_deref());
    for warning in &catalog.warnings {
        eprintln!("kaji agents: warning: {warning}");
    }
    let mut known = kaji_tools::builtin_tools().names();
    known.push(kaji_tools::skill::SKILL_TOOL);
    if let Some(warning) = catalog.unknown_tools_warning(&known) {
        eprintln!("kaji agents: warning: {warning}");
    }
    let mut out = std::io::stdout().lock();
    let written = if json {
        let agents: Vec<_> = catalog
            .agents
            .iter()
            .map(|a| {
                json!({
                    "name": a.name,
                    "description": a.description,
                    "source": a.source.to_string(),
                    "tools": a.tools,
                    "disallowed_tools": a.disallowed_tools,
                    "read_only": a.read_only,
                    "model": a.model,
                    "permission_mode": a.permission_mode.map(|m| m.as_str()),
                    "max_turns": a.max_turns,
                    "token_budget": a.token_budget,
                })
            })
            .collect();
        writeln!(out, "{}", json!({"agents": agents}))
    } else {
        catalog.agents.iter().try_for_each(|a| {
            writeln!(
                out,
                "{:<20} {:<10} {}",
                a.name,
                a.source,
                one_line(&a.description)
            )
        })
    };
    if written.is_err() {
        return 1;
    }
    0
}

fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(100)
        .collect()
}
