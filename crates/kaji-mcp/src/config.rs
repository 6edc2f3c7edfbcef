//! The `[mcp_servers.<name>]` tables of kaji's configuration.
//!
//! A table describes one server: how to reach it (a stdio command or a
//! streamable HTTP URL), whether it is enabled, and how long its tool calls
//! may take. Unknown keys are rejected so that typos are caught, and a table
//! must name exactly one of `command` and `url`.
//!
//! This module only describes and validates; it never starts anything.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Default limit for one tool call: 60 seconds.
pub const DEFAULT_TOOL_TIMEOUT_SECS: u64 = 60;

/// Default limit for starting a server and finishing the MCP handshake:
/// 30 seconds.
pub const DEFAULT_STARTUP_TIMEOUT_SECS: u64 = 30;

/// One `[mcp_servers.<name>]` table.
///
/// ```toml
/// [mcp_servers.files]
/// command = "npx"
/// args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]
/// env = { LOG_LEVEL = "warn" }
/// timeout = 120
///
/// [mcp_servers.tracker]
/// url = "https://mcp.example.com/mcp"
/// headers = { Authorization = "Bearer …" }
/// enabled = false
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "RawMcpServerConfig", into = "RawMcpServerConfig")]
pub struct McpServerConfig {
    /// How to reach the server.
    pub transport: McpTransportConfig,
    /// `enabled` (default `true`): a disabled server is listed but never
    /// started.
    pub enabled: bool,
    /// `timeout` in seconds (default 60): the limit for one tool call or
    /// resource read.
    pub timeout_secs: u64,
    /// `startup_timeout` in seconds (default 30): the limit for starting the
    /// server and finishing the MCP handshake.
    pub startup_timeout_secs: u64,
}

impl McpServerConfig {
    /// A stdio server running `command` with `args`, with every other
    /// setting at its default.
    pub fn stdio(
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self::with_transport(McpTransportConfig::Stdio {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            cwd: None,
        })
    }

    /// A streamable HTTP server at `url`, with every other setting at its
    /// default.
    pub fn http(url: impl Into<String>) -> Self {
        Self::with_transport(McpTransportConfig::Http {
            url: url.into(),
            headers: BTreeMap::new(),
        })
    }

    fn with_transport(transport: McpTransportConfig) -> Self {
        Self {
            transport,
            enabled: true,
            timeout_secs: DEFAULT_TOOL_TIMEOUT_SECS,
            startup_timeout_secs: DEFAULT_STARTUP_TIMEOUT_SECS,
        }
    }

    /// The tool-call limit as a [`Duration`].
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs)
    }

    /// The start-up limit as a [`Duration`].
    pub fn startup_timeout(&self) -> Duration {
        Duration::from_secs(self.startup_timeout_secs)
    }
}

/// How kaji reaches an MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransportConfig {
    /// A child process speaking JSON-RPC on its stdin and stdout. It runs
    /// in a process group of its own and is killed with it.
    Stdio {
        /// `command`: the program. A bare name is looked up on `PATH`; a
        /// relative path containing `/` is resolved against the server's
        /// working directory.
        command: String,
        /// `args`: its arguments.
        args: Vec<String>,
        /// `env`: variables added to kaji's environment for the server.
        env: BTreeMap<String, String>,
        /// `cwd`: its working directory; relative paths are resolved
        /// against the task's working directory, which is also the default.
        cwd: Option<PathBuf>,
    },
    /// A server speaking MCP's streamable HTTP transport.
    Http {
        /// `url`: the endpoint, e.g. `https://host/mcp`.
        url: String,
        /// `headers`: HTTP headers sent with every request (e.g.
        /// `Authorization`).
        headers: BTreeMap<String, String>,
    },
}

impl McpTransportConfig {
    /// `"stdio"` or `"http"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Stdio { .. } => "stdio",
            Self::Http { .. } => "http",
        }
    }

    /// The working directory a stdio server runs in, given the task's.
    pub fn resolved_cwd(&self, task_cwd: &Path) -> PathBuf {
        match self {
            Self::Stdio { cwd: Some(cwd), .. } => task_cwd.join(cwd),
            _ => task_cwd.to_path_buf(),
        }
    }
}

/// Types the `[mcp_servers]` tables of a configuration, as held by a
/// loader that keeps them as written (`name → table`).
pub fn servers_from_tables(
    tables: BTreeMap<String, toml::Table>,
) -> Result<BTreeMap<String, McpServerConfig>, McpServerTableError> {
    tables
        .into_iter()
        .map(
            |(server, table)| match McpServerConfig::deserialize(table) {
                Ok(config) => Ok((server, config)),
                Err(e) => Err(McpServerTableError {
                    server,
                    message: e.message().to_string(),
                }),
            },
        )
        .collect()
}

/// A `[mcp_servers.<name>]` table that [`servers_from_tables`] rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("[mcp_servers.{server}]: {message}")]
pub struct McpServerTableError {
    /// The server's name.
    pub server: String,
    /// What is wrong, naming the key.
    pub message: String,
}

/// A configuration table that does not describe a usable server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpConfigError {
    /// Both `command` and `url` are set.
    #[error("an MCP server needs either `command` (stdio) or `url` (streamable HTTP), not both")]
    BothTransports,
    /// Neither `command` nor `url` is set.
    #[error("an MCP server needs `command` (stdio) or `url` (streamable HTTP); neither is set")]
    NoTransport,
    /// A key of one transport is used with the other.
    #[error("`{key}` only applies to {applies_to} servers, but this one uses {used}")]
    WrongTransportKey {
        /// The key.
        key: &'static str,
        /// The transport it belongs to.
        applies_to: &'static str,
        /// The key that chose the transport (`command` or `url`).
        used: &'static str,
    },
    /// `command` or `url` is empty.
    #[error("`{0}` is empty")]
    Empty(&'static str),
    /// A timeout of zero seconds.
    #[error("`{0}` must be at least 1 second")]
    ZeroTimeout(&'static str),
}

/// The table as written, before validation. Kept private: the validated
/// [`McpServerConfig`] is the only public shape.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawMcpServerConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    args: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    env: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cwd: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    headers: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    startup_timeout: Option<u64>,
}

impl TryFrom<RawMcpServerConfig> for McpServerConfig {
    type Error = McpConfigError;

    fn try_from(raw: RawMcpServerConfig) -> Result<Self, Self::Error> {
        let transport = match (raw.command, raw.url) {
            (Some(_), Some(_)) => return Err(McpConfigError::BothTransports),
            (None, None) => return Err(McpConfigError::NoTransport),
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(McpConfigError::Empty("command"));
                }
                if raw.headers.is_some() {
                    return Err(McpConfigError::WrongTransportKey {
                        key: "headers",
                        applies_to: "streamable HTTP (`url`)",
                        used: "command",
                    });
                }
                McpTransportConfig::Stdio {
                    command,
                    args: raw.args.unwrap_or_default(),
                    env: raw.env.unwrap_or_default(),
                    cwd: raw.cwd,
                }
            }
            (None, Some(url)) => {
                if url.trim().is_empty() {
                    return Err(McpConfigError::Empty("url"));
                }
                for (key, set) in [
                    ("args", raw.args.is_some()),
                    ("env", raw.env.is_some()),
                    ("cwd", raw.cwd.is_some()),
                ] {
                    if set {
                        return Err(McpConfigError::WrongTransportKey {
                            key,
                            applies_to: "stdio (`command`)",
                            used: "url",
                        });
                    }
                }
                McpTransportConfig::Http {
                    url,
                    headers: raw.headers.unwrap_or_default(),
                }
            }
        };
        let timeout_secs = raw.timeout.unwrap_or(DEFAULT_TOOL_TIMEOUT_SECS);
        if timeout_secs == 0 {
            return Err(McpConfigError::ZeroTimeout("timeout"));
        }
        let startup_timeout_secs = raw.startup_timeout.unwrap_or(DEFAULT_STARTUP_TIMEOUT_SECS);
        if startup_timeout_secs == 0 {
            return Err(McpConfigError::ZeroTimeout("startup_timeout"));
        }
        Ok(Self {
            transport,
            enabled: raw.enabled.unwrap_or(true),
            timeout_secs,
            startup_timeout_secs,
        })
    }
}

impl From<McpServerConfig> for RawMcpServerConfig {
    fn from(config: McpServerConfig) -> Self {
        let mut raw = RawMcpServerConfig {
            enabled: Some(config.enabled),
            timeout: Some(config.timeout_secs),
            startup_timeout: Some(config.startup_timeout_secs),
            ..RawMcpServerConfig::default()
        };
        match config.transport {
            McpTransportConfig::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                raw.command = Some(command);
                raw.args = Some(args);
                raw.env = Some(env);
                raw.cwd = cwd;
            }
            McpTransportConfig::Http { url, headers } => {
                raw.url = Some(url);
                raw.headers = Some(headers);
            }
        }
        raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<BTreeMap<String, McpServerConfig>, toml::de::Error> {
        #[derive(Deserialize)]
        struct File {
            mcp_servers: BTreeMap<String, McpServerConfig>,
        }
        toml::from_str::<File>(text).map(|f| f.mcp_servers)
    }

    #[test]
    fn parses_stdio_and_http_with_defaults() {
        let servers = parse(
            r#"
            [mcp_servers.files]
            command = "mcp-server-filesystem"
            args = ["/tmp"]
            env = { A = "1" }
            cwd = "sub"

            [mcp_servers.remote]
            url = "http://127.0.0.1:1/mcp"
            headers = { Authorization = "Bearer x" }
            enabled = false
            timeout = 5
            "#,
        )
        .expect("parses");
        let files = &servers["files"];
        assert!(files.enabled);
        assert_eq!(files.timeout_secs, 60);
        assert_eq!(files.startup_timeout_secs, 30);
        assert_eq!(
            files.transport,
            McpTransportConfig::Stdio {
                command: "mcp-server-filesystem".into(),
                args: vec!["/tmp".into()],
                env: BTreeMap::from([("A".into(), "1".into())]),
                cwd: Some(PathBuf::from("sub")),
            }
        );
        let remote = &servers["remote"];
        assert!(!remote.enabled);
        assert_eq!(remote.timeout(), Duration::from_secs(5));
        assert_eq!(remote.transport.kind(), "http");
    }

    #[test]
    fn rejects_unknown_keys_with_their_name() {
        let err = parse("[mcp_servers.x]\ncommand = \"a\"\nargz = []\n").expect_err("typo");
        let text = err.to_string();
        assert!(text.contains("argz"), "{text}");
    }

    #[test]
    fn rejects_both_or_neither_transport() {
        let err =
            parse("[mcp_servers.x]\ncommand = \"a\"\nurl = \"http://h\"\n").expect_err("both");
        assert!(err.to_string().contains("not both"), "{err}");
        let err = parse("[mcp_servers.x]\nenabled = true\n").expect_err("neither");
        assert!(err.to_string().contains("neither is set"), "{err}");
    }

    #[test]
    fn rejects_keys_of_the_other_transport_and_zero_timeouts() {
        let err = parse("[mcp_servers.x]\nurl = \"http://h\"\nargs = [\"a\"]\n")
            .expect_err("args with url");
        assert!(
            err.to_string().contains("`args` only applies to stdio"),
            "{err}"
        );
        let err = parse("[mcp_servers.x]\ncommand = \"a\"\nheaders = {}\n")
            .expect_err("headers with command");
        assert!(err.to_string().contains("`headers` only applies"), "{err}");
        let err = parse("[mcp_servers.x]\ncommand = \"a\"\ntimeout = 0\n").expect_err("zero");
        assert!(err.to_string().contains("at least 1 second"), "{err}");
        let err = parse("[mcp_servers.x]\ncommand = \"  \"\n").expect_err("empty");
        assert!(err.to_string().contains("`command` is empty"), "{err}");
    }

    #[test]
    fn types_tables_held_by_a_loader() {
        let tables: BTreeMap<String, toml::Table> =
            toml::from_str("[good]\ncommand = \"a\"\n[bad]\ncommand = \"b\"\ntimeuot = 3\n")
                .expect("toml");
        let err = servers_from_tables(tables.clone()).expect_err("bad table");
        assert_eq!(err.server, "bad");
        assert!(
            err.to_string()
                .starts_with("[mcp_servers.bad]: unknown field `timeuot`"),
            "{err}"
        );
        let good = tables.into_iter().filter(|(k, _)| k == "good").collect();
        let servers = servers_from_tables(good).expect("good table");
        assert_eq!(
            servers["good"],
            McpServerConfig::stdio("a", Vec::<String>::new())
        );
    }

    #[test]
    fn round_trips_through_toml() {
        let config = McpServerConfig::stdio("srv", ["--flag"]);
        let text = toml::to_string(&config).expect("serializes");
        let back: McpServerConfig = toml::from_str(&text).expect("parses back");
        assert_eq!(back, config);
    }
}
