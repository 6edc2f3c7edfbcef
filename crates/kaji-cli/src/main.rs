//! The `kaji` binary: argument parsing and dispatch to the subcommands.
//!
//! Each subcommand lives in its own module and returns the process exit
//! code; `main` only parses, dispatches and exits. Only this crate prints.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod agent;
mod checkpoints_cmd;
mod demo;
mod exec;
mod mcp_cmd;
mod paths;
mod ps_cmd;
mod rules_cmd;
mod sessions_cmd;
mod tasks_cmd;
mod tui;

/// kaji — a coding agent for the terminal.
#[derive(Debug, Parser)]
#[command(
    name = "kaji",
    version,
    about,
    long_about = None,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Without a subcommand: the interactive terminal UI (`kaji tui`).
    #[command(flatten)]
    tui: tui::TuiArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one task non-interactively and print its transcript (or JSON
    /// lines with --json).
    Exec(exec::ExecArgs),
    /// List, diff and restore the checkpoints kaji took of a working
    /// directory.
    Checkpoints(checkpoints_cmd::CheckpointsArgs),
    /// Watch kaji fix a bug in a scratch repository, offline: the model is
    /// a scripted replay, the tools are real.
    Demo(demo::DemoArgs),
    /// Read, create, update and claim tasks of a shared task list.
    Tasks(tasks_cmd::TasksArgs),
    /// Manage MCP servers: `kaji mcp list` shows each configured server,
    /// its status and its tools.
    Mcp(mcp_cmd::McpArgs),
    /// Show which rule files (AGENTS.md, CLAUDE.md, .clinerules, global
    /// rules) would go into the system prompt, and from where.
    Rules(rules_cmd::RulesArgs),
    /// List the runtime tasks (background shells and agents) of every
    /// running kaji session on this machine.
    Ps(ps_cmd::PsArgs),
    /// List, show and remove saved sessions.
    Sessions(sessions_cmd::SessionsArgs),
    /// The interactive terminal UI: type prompts, watch the task, answer
    /// its questions.
    Tui(tui::TuiArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Some(Command::Exec(args)) => block_on(exec::run(args)),
        Some(Command::Demo(args)) => block_on(demo::run(args)),
        Some(Command::Checkpoints(args)) => block_on(checkpoints_cmd::run(args)),
        Some(Command::Tasks(args)) => tasks_cmd::run(args),
        Some(Command::Ps(args)) => ps_cmd::run(args),
        Some(Command::Rules(args)) => rules_cmd::run(args),
        Some(Command::Sessions(args)) => sessions_cmd::run(args),
        Some(Command::Mcp(args)) => block_on(mcp_cmd::run(args)),
        Some(Command::Tui(args)) => block_on(tui::run(args)),
        None => block_on(tui::run(cli.tui)),
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// Runs an async command on a multi-threaded tokio runtime.
fn block_on<F: std::future::Future<Output = i32>>(future: F) -> i32 {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(future),
        Err(e) => {
            eprintln!("kaji: cannot start the async runtime: {e}");
            1
        }
    }
}
