//! A project's `.mcp.json`: its MCP servers in Claude Code's format, read
//! into the same [`McpServerConfig`] as `[mcp_servers.<name>]` tables.
//!
//! ```json
//! {"mcpServers": {
//!   "files": {"command": "npx", "args": ["-y", "server-filesystem", "."], "env": {"A": "1"}},
//!   "tracker": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
//! }}
//! ```
//!
//! `type` is `stdio` (the default when `command` is given), `http` (the
//! default when only `url` is given) or `sse`. kaji speaks streamable HTTP only, so an `sse` server is reached
//! at its URL with streamable HTTP (servers that speak only the old SSE
//! transport fail to connect, with their error in `kaji mcp list`).
//! `${VAR}` and `${VAR:-default}` in `command`, `args`, `env`, `url` and
//! `headers` are expanded from the environment, as Claude Code does; a
//! variable that is not set and has no default is an error. Keys this
//! format does not define are ignored.
//!
//! This module only reads and validates; it never starts a server and
//! never decides whether the project is trusted (the caller does).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::config::{McpServerConfig, McpTransportConfig};

/// The file's name in the project directory.
pub const MCP_JSON_FILE: &str = ".mcp.json";

/// Why a `.mcp.json` could not be used. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum McpJsonError {
    /// The file exists but cannot be read.
    #[error("{path}: cannot be read: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not JSON.
    #[error("{path}: not valid JSON: {message}")]
    Json {
        /// The file.
        path: PathBuf,
        /// serde_json's message, with line and column.
        message: String,
    },
    /// A key holds something the format does not allow.
    #[error("{path}: key `{key}`: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The key, e.g. `mcpServers.files.args[1]`.
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// Reads `project_dir/.mcp.json`. A missing file is no servers.
pub fn load_mcp_json(
    project_dir: &Path,
) -> Result<BTreeMap<String, McpServerConfig>, McpJsonError> {
    let path = project_dir.join(MCP_JSON_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(source) => return Err(McpJsonError::Read { path, source }),
    };
    parse_mcp_json(&text, &path, &|name| std::env::var(name).ok())
}

/// What a `.mcp.json` gives when each server is taken on its own: the
/// servers that can be used, and one error (naming the file and the
/// server's key) for each that cannot.
#[derive(Debug, Default)]
pub struct McpJsonServers {
    /// Usable servers, by name.
    pub servers: BTreeMap<String, McpServerConfig>,
    /// Servers skipped, with why.
    pub skipped: Vec<(String, McpJsonError)>,
}

/// As [`load_mcp_json`], but a server that cannot be used is skipped
/// (listed with why) instead of failing the file; only a file that cannot
/// be read or is not a JSON object fails.
pub fn load_mcp_json_servers(project_dir: &Path) -> Result<McpJsonServers, McpJsonError> {
    let path = project_dir.join(MCP_JSON_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(McpJsonServers::default()),
        Err(source) => return Err(McpJsonError::Read { path, source }),
    };
    parse_mcp_json_servers(&text, &path, &|name| std::env::var(name).ok())
}

/// As [`parse_mcp_json`], each server on its own (see
/// [`load_mcp_json_servers`]).
pub fn parse_mcp_json_servers(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<McpJsonServers, McpJsonError> {
    let value: Value = serde_json::from_str(text).map_err(|e| McpJsonError::Json {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let reader = Reader { path, env };
    let root = reader.object(&value, "(top level)")?;
    let mut out = McpJsonServers::default();
    let Some(servers) = root.get("mcpServers") else {
        return Ok(out);
    };
    let servers = reader.object(servers, "mcpServers")?;
    for (name, entry) in servers {
        match reader.server(entry, &format!("mcpServers.{name}")) {
            Ok(server) => {
                out.servers.insert(name.clone(), server);
            }
            Err(e) => out.skipped.push((name.clone(), e)),
        }
    }
    Ok(out)
}

/// Parses the text of a `.mcp.json` (named `path` in errors), expanding
/// variables with `env`.
pub fn parse_mcp_json(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, McpServerConfig>, McpJsonError> {
    let value: Value = serde_json::from_str(text).map_err(|e| McpJsonError::Json {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let reader = Reader { path, env };
    let root = reader.object(&value, "(top level)")?;
    let Some(servers) = root.get("mcpServers") else {
        return Ok(BTreeMap::new());
    };
    let servers = reader.object(servers, "mcpServers")?;
    servers
        .iter()
        .map(|(name, entry)| {
            let key = format!("mcpServers.{name}");
            Ok((name.clone(), reader.server(entry, &key)?))
        })
        .collect()
}

struct Reader<'a> {
    path: &'a Path,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Reader<'_> {
    fn invalid(&self, key: &str, message: impl Into<String>) -> McpJsonError {
        McpJsonError::Invalid {
            path: self.path.to_path_buf(),
            key: key.to_string(),
            message: message.into(),
        }
    }

    fn object<'v>(
        &self,
        value: &'v Value,
        key: &str,
    ) -> Result<&'v Map<String, Value>, McpJsonError> {
        value
            .as_object()
            .ok_or_else(|| self.invalid(key, format!("expected an object, got {}", kind(value))))
    }

    fn string(&self, value: &Value, key: &str) -> Result<String, McpJsonError> {
        match value.as_str() {
            Some(text) => self.expand(text, key),
            None => Err(self.invalid(key, format!("expected a string, got {}", kind(value)))),
        }
    }

    fn strings(
        &self,
        entry: &Map<String, Value>,
        name: &str,
        key: &str,
    ) -> Result<Vec<String>, McpJsonError> {
        let key = format!("{key}.{name}");
        match entry.get(name) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| self.string(item, &format!("{key}[{i}]")))
                .collect(),
            Some(other) => Err(self.invalid(
                &key,
                format!("expected an array of strings, got {}", kind(other)),
            )),
        }
    }

    fn map(
        &self,
        entry: &Map<String, Value>,
        name: &str,
        key: &str,
    ) -> Result<BTreeMap<String, String>, McpJsonError> {
        let key = format!("{key}.{name}");
        match entry.get(name) {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(value) => self
                .object(value, &key)?
                .iter()
                .map(|(k, v)| Ok((k.clone(), self.string(v, &format!("{key}.{k}"))?)))
                .collect(),
        }
    }

    fn server(&self, value: &Value, key: &str) -> Result<McpServerConfig, McpJsonError> {
        let entry = self.object(value, key)?;
        let kind = match entry.get("type") {
            None | Some(Value::Null) => None,
            Some(value) => Some(self.string(value, &format!("{key}.type"))?),
        };
        let has_command = entry.contains_key("command");
        // A `url` without `type` (and without `command`) is HTTP, as Claude
        // Code takes it.
        let kind = match kind {
            None if !has_command && entry.contains_key("url") => Some("http".to_string()),
            kind => kind,
        };
        match kind.as_deref() {
            Some("stdio") | None if has_command => {
                let command = self.string(&entry["command"], &format!("{key}.command"))?;
                if command.trim().is_empty() {
                    return Err(self.invalid(&format!("{key}.command"), "is empty"));
                }
                let mut config = McpServerConfig::stdio(command, self.strings(entry, "args", key)?);
                if let McpTransportConfig::Stdio { env, .. } = &mut config.transport {
                    *env = self.map(entry, "env", key)?;
                }
                Ok(config)
            }
            Some("stdio") | None => Err(self.invalid(
                key,
                "a stdio server needs `command` (or give `type: \"http\"` and `url`)",
            )),
            Some("http" | "sse") => {
                let Some(url) = entry.get("url") else {
                    return Err(self.invalid(
                        key,
                        format!(
                            "a `{}` server needs `url`",
                            kind.as_deref().unwrap_or("http")
                        ),
                    ));
                };
                let url = self.string(url, &format!("{key}.url"))?;
                if url.trim().is_empty() {
                    return Err(self.invalid(&format!("{key}.url"), "is empty"));
                }
                let mut config = McpServerConfig::http(url);
                if let McpTransportConfig::Http { headers, .. } = &mut config.transport {
                    *headers = self.map(entry, "headers", key)?;
                }
                Ok(config)
            }
            Some(other) => Err(self.invalid(
                &format!("{key}.type"),
                format!("{other:?} is not a transport: expected \"stdio\", \"http\" or \"sse\""),
            )),
        }
    }

    /// Expands `${VAR}` and `${VAR:-default}`.
    fn expand(&self, text: &str, key: &str) -> Result<String, McpJsonError> {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                return Err(self.invalid(key, format!("`${{` without a closing `}}` in {text:?}")));
            };
            let inner = &after[..end];
            let (name, default) = match inner.split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (inner, None),
            };
            match ((self.env)(name), default) {
                (Some(value), _) => out.push_str(&value),
                (None, Some(default)) => out.push_str(default),
                (None, None) => {
                    return Err(self.invalid(
                        key,
                        format!("the environment variable {name} is not set (write ${{{name}:-default}} for a default)"),
                    ));
                }
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<BTreeMap<String, McpServerConfig>, McpJsonError> {
        let env = |name: &str| (name == "TOKEN").then(|| "t0k".to_string());
        parse_mcp_json(text, Path::new("/p/.mcp.json"), &env)
    }

    #[test]
    fn a_url_without_type_is_http_and_a_bad_server_is_skipped_alone() {
        let env = |_: &str| None;
        let found = parse_mcp_json_servers(
            r#"{"mcpServers": {
                "web": {"url": "https://h/mcp"},
                "needs": {"command": "${UNSET}/bin"},
                "ok": {"command": "srv"}
            }}"#,
            Path::new("/p/.mcp.json"),
            &env,
        )
        .expect("the file is read");
        assert_eq!(
            found.servers.keys().collect::<Vec<_>>(),
            ["ok", "web"],
            "{:?}",
            found.skipped
        );
        assert!(matches!(
            found.servers["web"].transport,
            McpTransportConfig::Http { .. }
        ));
        assert_eq!(found.skipped.len(), 1);
        let (name, e) = &found.skipped[0];
        assert_eq!(name, "needs");
        assert!(e.to_string().contains("UNSET"), "{e}");
        assert!(e.to_string().contains("/p/.mcp.json"), "{e}");
    }

    #[test]
    fn reads_stdio_http_and_sse_servers() {
        let servers = parse(
            r#"{"mcpServers": {
                "files": {"command": "npx", "args": ["-y", "${HOME_DIR:-/srv}"], "env": {"A": "1"}},
                "typed": {"type": "stdio", "command": "srv", "someFutureKey": true},
                "remote": {"type": "http", "url": "https://h/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
                "old": {"type": "sse", "url": "https://h/sse"}
            }}"#,
        )
        .expect("parses");
        assert_eq!(
            servers["files"].transport,
            McpTransportConfig::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "/srv".into()],
                env: BTreeMap::from([("A".into(), "1".into())]),
                cwd: None,
            }
        );
        assert_eq!(
            servers["typed"],
            McpServerConfig::stdio("srv", Vec::<String>::new())
        );
        assert_eq!(
            servers["remote"].transport,
            McpTransportConfig::Http {
                url: "https://h/mcp".into(),
                headers: BTreeMap::from([("Authorization".into(), "Bearer t0k".into())]),
            }
        );
        assert_eq!(servers["old"].transport.kind(), "http");
        assert!(parse("{}").expect("empty").is_empty());
    }

    #[test]
    fn errors_name_the_file_and_the_key() {
        let cases = [
            (
                r#"{"mcpServers": {"a": {"command": "x", "args": ["ok", 3]}}}"#,
                "key `mcpServers.a.args[1]`: expected a string, got a number",
            ),
            (
                r#"{"mcpServers": {"a": {"type": "websocket", "url": "u"}}}"#,
                "key `mcpServers.a.type`",
            ),
            (
                r#"{"mcpServers": {"a": {"type": "http"}}}"#,
                "key `mcpServers.a`: a `http` server needs `url`",
            ),
            (
                r#"{"mcpServers": {"a": {"args": []}}}"#,
                "key `mcpServers.a`: a stdio server needs `command`",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "${NOPE}"}}}"#,
                "NOPE is not set",
            ),
            (
                r#"{"mcpServers": []}"#,
                "key `mcpServers`: expected an object, got an array",
            ),
            ("{\"mcpServers\": {", "not valid JSON"),
        ];
        for (text, expected) in cases {
            let err = parse(text).expect_err(text).to_string();
            assert!(err.starts_with("/p/.mcp.json: "), "{err}");
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    #[test]
    fn a_missing_file_is_no_servers() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(load_mcp_json(dir.path()).expect("missing").is_empty());
    }
}
