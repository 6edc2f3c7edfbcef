//! `kaji mcp list`: every configured MCP server, its status (connected,
//! failed with why, disabled) and its tools.
//!
//! It starts the enabled servers the way a task would, waits up to 10
//! seconds for them, prints what it found (a table, or JSON with `--json`),
//! and stops them again. It only reads the configuration; it never changes
//! it. It never exits 0 when an enabled server is down: exit 0 means every
//! enabled server connected, [`EXIT_SERVERS_DOWN`] that some did not.
//!
//! The servers come from the settings files, read by
//! [`kaji_core::config::KajiConfig`] like every other setting.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use kaji_core::config::KajiConfig;
use kaji_mcp::{McpManager, McpServerConfig, McpServerReport, McpServerStatus};

/// How long `kaji mcp list` waits for servers to connect (the same limit a
/// task waits before its first request).
pub const MCP_LIST_WAIT: Duration = Duration::from_secs(10);

/// The exit code of `kaji mcp list` when an enabled server failed to start
/// or was still connecting after [`MCP_LIST_WAIT`] (the list is printed
/// all the same). 1 is a configuration or output error, 2 a usage error.
pub const EXIT_SERVERS_DOWN: i32 = 3;

/// Arguments of `kaji mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: McpCommand,
}

/// The subcommands of `kaji mcp`.
#[derive(Debug, clap::Subcommand)]
pub enum McpCommand {
    /// Start the configured MCP servers, show each one's status and tools,
    /// and stop them again.
    List {
        /// Print a JSON array (one object per server) instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `kaji mcp`; returns the exit code (0; 2 when the configuration
/// cannot be read, as every other command; [`EXIT_SERVERS_DOWN`] when a server is down).
pub async fn run(args: McpArgs) -> i32 {
    match args.command {
        McpCommand::List { json } => {
            let cwd = match std::env::current_dir() {
                Ok(cwd) => cwd,
                Err(e) => {
                    eprintln!("kaji mcp list: cannot read the working directory: {e}");
                    return 1;
                }
            };
            let servers = match KajiConfig::load(&crate::paths::kaji_home(), &cwd) {
                Ok(settings) => settings.mcp_servers,
                Err(e) => {
                    eprintln!("kaji mcp list: {e}");
                    return 2;
                }
            };
            list(servers, &cwd, json).await
        }
    }
}

/// Starts `servers` in `cwd`, waits up to [`MCP_LIST_WAIT`], prints their
/// status, stops them, and returns the exit code: 0 when every enabled
/// server connected, [`EXIT_SERVERS_DOWN`] when one failed or was still
/// connecting, 1 when the output could not be written.
pub async fn list(servers: BTreeMap<String, McpServerConfig>, cwd: &Path, json: bool) -> i32 {
    let manager = McpManager::start(servers, cwd);
    manager.wait_ready(MCP_LIST_WAIT).await;
    let reports = manager.status();
    manager.shutdown().await;
    let down: Vec<&str> = reports
        .iter()
        .filter(|r| {
            matches!(
                r.status,
                McpServerStatus::Failed { .. } | McpServerStatus::Connecting
            )
        })
        .map(|r| r.name.as_str())
        .collect();

    let mut out = std::io::stdout().lock();
    let written = if json {
        serde_json::to_string_pretty(&reports)
            .map_err(std::io::Error::other)
            .and_then(|text| writeln!(out, "{text}"))
    } else {
        write_table(&mut out, &reports)
    };
    let ok = if down.is_empty() {
        0
    } else {
        eprintln!(
            "kaji mcp list: not connected: {} (exit code {EXIT_SERVERS_DOWN})",
            down.join(", ")
        );
        EXIT_SERVERS_DOWN
    };
    match written {
        Ok(()) => ok,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ok,
        Err(e) => {
            eprintln!("kaji mcp list: cannot write the output: {e}");
            1
        }
    }
}

fn write_table(out: &mut impl Write, reports: &[McpServerReport]) -> std::io::Result<()> {
    if reports.is_empty() {
        return writeln!(
            out,
            "No MCP servers configured. Add [mcp_servers.<name>] tables to $KAJI_HOME/config.toml or \
             .kaji/config.toml (see docs/mcp.md)."
        );
    }
    let width = reports.iter().map(|r| r.name.len()).max().unwrap_or(0);
    for (i, report) in reports.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        let name = &report.name;
        let transport = report.transport;
        match &report.status {
            McpServerStatus::Connected { tools } => {
                let count = match tools.len() {
                    1 => "1 tool".to_string(),
                    n => format!("{n} tools"),
                };
                writeln!(out, "{name:width$}  {transport:5}  connected ({count})")?;
                let tool_width = tools
                    .iter()
                    .map(|t| t.qualified_name.len())
                    .max()
                    .unwrap_or(0);
                for tool in tools {
                    let summary = tool.description.lines().next().unwrap_or_default();
                    writeln!(out, "    {:tool_width$}  {summary}", tool.qualified_name)?;
                }
            }
            McpServerStatus::Failed { why, stderr_tail } => {
                writeln!(out, "{name:width$}  {transport:5}  failed: {why}")?;
                if !stderr_tail.trim().is_empty() {
                    writeln!(out, "    stderr (last lines):")?;
                    for line in stderr_tail.lines() {
                        writeln!(out, "    | {line}")?;
                    }
                }
            }
            McpServerStatus::Disabled => writeln!(out, "{name:width$}  {transport:5}  disabled")?,
            McpServerStatus::Connecting => writeln!(
                out,
                "{name:width$}  {transport:5}  still connecting after {} s",
                MCP_LIST_WAIT.as_secs()
            )?,
            McpServerStatus::Stopped => writeln!(out, "{name:width$}  {transport:5}  stopped")?,
        }
    }
    Ok(())
}
