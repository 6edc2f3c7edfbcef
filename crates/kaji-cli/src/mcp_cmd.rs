//! `kaji mcp list`: every configured MCP server, its status (connected,
//! failed with why, disabled) and its tools.
//!
//! It starts the enabled servers the way a task would, waits up to 10
//! seconds for them, prints what it found (a table, or JSON with `--json`),
//! and stops them again. It only reads the configuration; it never changes
//! it.
//!
//! Until the shared configuration loader exists, this module reads the
//! `[mcp_servers]` tables itself ([`load_servers_from`]); everything else in
//! the files is left to that loader.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kaji_mcp::{McpManager, McpServerConfig, McpServerReport, McpServerStatus};

/// How long `kaji mcp list` waits for servers to connect (the same limit a
/// task waits before its first request).
pub const MCP_LIST_WAIT: Duration = Duration::from_secs(10);

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

/// Runs `kaji mcp`; returns the exit code (0, or 1 when the configuration
/// cannot be read).
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
            let servers = match load_servers_from(&config_paths(&cwd)) {
                Ok(servers) => servers,
                Err(e) => {
                    eprintln!("kaji mcp list: {e}");
                    return 1;
                }
            };
            list(servers, &cwd, json).await
        }
    }
}

/// Starts `servers` in `cwd`, waits up to [`MCP_LIST_WAIT`], prints their
/// status, stops them, and returns the exit code.
pub async fn list(servers: BTreeMap<String, McpServerConfig>, cwd: &Path, json: bool) -> i32 {
    let manager = McpManager::start(servers, cwd);
    manager.wait_ready(MCP_LIST_WAIT).await;
    let reports = manager.status();
    manager.shutdown().await;

    let mut out = std::io::stdout().lock();
    let written = if json {
        serde_json::to_string_pretty(&reports)
            .map_err(std::io::Error::other)
            .and_then(|text| writeln!(out, "{text}"))
    } else {
        write_table(&mut out, &reports)
    };
    match written {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
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

/// The configuration files that may hold `[mcp_servers]`, user first:
/// `$KAJI_HOME/config.toml`, then the project's — the nearest
/// `.kaji/config.toml` walking up from `cwd` to the repository root (the
/// nearest directory holding `.git`; only `cwd` itself outside a
/// repository). The same file is never listed twice.
pub fn config_paths(cwd: &Path) -> Vec<PathBuf> {
    let user = crate::paths::kaji_home().join("config.toml");
    let root = cwd.ancestors().find(|dir| dir.join(".git").exists());
    let project = match root {
        Some(root) => cwd
            .ancestors()
            .take_while(|dir| dir.starts_with(root))
            .map(|dir| dir.join(".kaji/config.toml"))
            .find(|path| path.exists()),
        None => Some(cwd.join(".kaji/config.toml")),
    };
    let mut paths = vec![user];
    if let Some(project) = project {
        let same = match (paths[0].canonicalize(), project.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if !same {
            paths.push(project);
        }
    }
    paths
}

/// A configuration file whose `[mcp_servers]` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum McpConfigLoadError {
    /// The file exists but cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid TOML, or a server table is wrong (the message
    /// names the line and the key).
    #[error("{}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// toml's description, with line, column and key.
        message: String,
    },
}

/// Reads the `[mcp_servers.<name>]` tables of `paths` (missing files are
/// skipped). Later files add to earlier ones; a server defined again
/// replaces the earlier definition as a whole. Other tables in the files
/// are ignored here.
pub fn load_servers_from(
    paths: &[PathBuf],
) -> Result<BTreeMap<String, McpServerConfig>, McpConfigLoadError> {
    #[derive(serde::Deserialize)]
    struct ConfigFile {
        #[serde(default)]
        mcp_servers: BTreeMap<String, McpServerConfig>,
    }

    let mut servers = BTreeMap::new();
    for path in paths {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(McpConfigLoadError::Read {
                    path: path.clone(),
                    source,
                });
            }
        };
        let file: ConfigFile = toml::from_str(&text).map_err(|e| McpConfigLoadError::Parse {
            path: path.clone(),
            message: e.to_string(),
        })?;
        servers.extend(file.mcp_servers);
    }
    Ok(servers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_files_add_to_and_replace_earlier_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let user = dir.path().join("user.toml");
        let project = dir.path().join("project.toml");
        std::fs::write(
            &user,
            "model = \"x\"\n[mcp_servers.a]\ncommand = \"a\"\n[mcp_servers.b]\ncommand = \"b-user\"\n",
        )
        .expect("write");
        std::fs::write(&project, "[mcp_servers.b]\nurl = \"http://h/mcp\"\n").expect("write");
        let missing = dir.path().join("missing.toml");
        let servers = load_servers_from(&[user, missing, project]).expect("loads");
        assert_eq!(servers.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(servers["b"].transport.kind(), "http");
    }

    #[test]
    fn errors_name_the_file_line_and_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "[mcp_servers.a]\ncommand = \"a\"\ntimout = 5\n").expect("write");
        let err = load_servers_from(std::slice::from_ref(&path)).expect_err("typo");
        let text = err.to_string();
        assert!(text.starts_with(&path.display().to_string()), "{text}");
        assert!(text.contains("line 3"), "{text}");
        assert!(text.contains("timout"), "{text}");
    }
}
