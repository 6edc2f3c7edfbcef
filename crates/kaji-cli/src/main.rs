//! The `kaji` binary: argument parsing and dispatch to the subcommands.
//!
//! Each subcommand lives in its own module and returns the process exit
//! code; `main` only parses, dispatches and exits. Only this crate prints.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod agent;
mod checkpoints_cmd;
mod demo;
mod doctor_cmd;
mod exec;
mod exec_events;
mod mcp_cmd;
mod paths;
mod permissions_cmd;
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
    /// List, add, remove and check permission rules (`Bash(cargo test:*)`,
    /// `Edit(src/**)`, …) and where they come from.
    Permissions(permissions_cmd::PermissionsArgs),
    /// Trust a project, so its settings that run code or widen permissions
    /// take effect (`--revoke` to stop trusting it).
    Trust(permissions_cmd::TrustArgs),
    /// List the runtime tasks (background shells and agents) of every
    /// running kaji session on this machine.
    Ps(ps_cmd::PsArgs),
    /// Check what this machine gives kaji: sandbox support (Landlock, user
    /// namespaces, seccomp), settings files, provider keys, git.
    Doctor(doctor_cmd::DoctorArgs),
    /// List, show and remove saved sessions.
    Sessions(sessions_cmd::SessionsArgs),
    /// The interactive terminal UI: type prompts, watch the task, answer
    /// its questions.
    Tui(tui::TuiArgs),
    /// Open the terminal UI on a saved session (no ID: pick one of this
    /// directory's).
    Resume(ResumeArgs),
}

#[derive(Debug, clap::Args)]
struct ResumeArgs {
    /// The session id, or a unique prefix of it.
    #[arg(value_name = "ID")]
    id: Option<String>,
    #[command(flatten)]
    agent: agent::AgentArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Some(Command::Exec(args)) => block_on(exec::run(args)),
        Some(Command::Demo(args)) => block_on(demo::run(args)),
        Some(Command::Checkpoints(args)) => block_on(checkpoints_cmd::run(args)),
        Some(Command::Tasks(args)) => tasks_cmd::run(args),
        Some(Command::Ps(args)) => ps_cmd::run(args),
        Some(Command::Doctor(args)) => block_on(doctor_cmd::run(args)),
        Some(Command::Rules(args)) => rules_cmd::run(args),
        Some(Command::Permissions(args)) => permissions_cmd::run(args),
        Some(Command::Trust(args)) => permissions_cmd::run_trust(args),
        Some(Command::Sessions(args)) => sessions_cmd::run(args),
        Some(Command::Mcp(args)) => block_on(mcp_cmd::run(args)),
        Some(Command::Tui(args)) => block_on(tui::run(args)),
        Some(Command::Resume(args)) => block_on(tui::run(tui::TuiArgs {
            agent: args.agent,
            prompt: Vec::new(),
            continue_: false,
            resume: Some(args.id),
        })),
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
        Ok(rt) => {
            let code = rt.block_on(future);
            // Blocking work that will not end (a read of a FIFO, a held
            // lock) must not keep kaji alive once the command is done.
            rt.shutdown_timeout(std::time::Duration::from_millis(500));
            code
        }
        Err(e) => {
            eprintln!("kaji: cannot start the async runtime: {e}");
            1
        }
    }
}
