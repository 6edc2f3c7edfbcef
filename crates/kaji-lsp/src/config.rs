//! Which language servers exist: kaji's built-in defaults, the user's and
//! project's `[lsp.<name>]` settings and Claude Code's `.lsp.json`, merged
//! into one list of [`ServerConfig`]s.
//!
//! This module only describes servers; it never starts one. It reads
//! `PATH` only through the caller ([`on_path`] takes it as an argument).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The name of Claude Code's language-server file at a project's root.
pub const LSP_JSON_FILE: &str = ".lsp.json";

/// How long an edit waits for a server's diagnostics by default.
pub const DEFAULT_WAIT_MS: u64 = 1500;

/// One `[lsp.<name>]` table of kaji's settings. Every field is optional:
/// a table named like a built-in server changes only what it sets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSettings {
    /// The program.
    pub command: Option<String>,
    /// Its arguments.
    pub args: Option<Vec<String>>,
    /// The file extensions it serves, without the dot (`py`, `ts`).
    pub extensions: Option<Vec<String>>,
    /// Variables set for it.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Never start it.
    #[serde(default)]
    pub disabled: bool,
}

/// Where a server's definition came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerSource {
    /// kaji's built-in defaults.
    Builtin,
    /// A settings file's `[lsp.<name>]`.
    Settings,
    /// The project's `.lsp.json`.
    LspJson,
}

impl ServerSource {
    /// How `kaji doctor` names it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Builtin => "built-in",
            Self::Settings => "settings",
            Self::LspJson => ".lsp.json",
        }
    }
}

/// A language server kaji may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Its name (`pyright`, a settings table's name).
    pub name: String,
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extension (no dot) → LSP language id.
    pub languages: BTreeMap<String, String>,
    /// Variables set for it.
    pub env: BTreeMap<String, String>,
    /// Never start it.
    pub disabled: bool,
    /// Where it was defined.
    pub source: ServerSource,
    /// `initializationOptions` sent with `initialize` (`null`: none).
    pub initialization_options: serde_json::Value,
}

impl ServerConfig {
    /// The language id of `path`, when this server serves its extension.
    pub fn language_of(&self, path: &Path) -> Option<&str> {
        let ext = path.extension()?.to_str()?;
        self.languages.get(ext).map(String::as_str)
    }
}

/// The language id LSP uses for an extension kaji knows, else the
/// extension itself.
pub fn language_id(ext: &str) -> String {
    let id = match ext {
        "py" | "pyi" => "python",
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "typescriptreact",
        "js" | "mjs" | "cjs" => "javascript",
        "jsx" => "javascriptreact",
        "rs" => "rust",
        "go" => "go",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => "cpp",
        other => other,
    };
    id.to_string()
}

fn builtin(name: &str, command: &str, args: &[&str], exts: &[&str]) -> ServerConfig {
    ServerConfig {
        name: name.to_string(),
        command: command.to_string(),
        args: args.iter().map(|a| a.to_string()).collect(),
        languages: exts
            .iter()
            .map(|e| (e.to_string(), language_id(e)))
            .collect(),
        env: BTreeMap::new(),
        disabled: false,
        source: ServerSource::Builtin,
        initialization_options: serde_json::Value::Null,
    }
}

/// kaji's built-in servers, in the order they are preferred for an
/// extension. They are used only when their program is on `PATH`.
pub fn builtin_servers() -> Vec<ServerConfig> {
    // typescript-language-server answers from a syntax-only server while
    // the project loads (an imported name's definition is then its
    // import): kaji waits for the real answer instead.
    let mut typescript = builtin(
        "typescript",
        "typescript-language-server",
        &["--stdio"],
        &["ts", "tsx", "js", "jsx", "mts", "cts", "mjs", "cjs"],
    );
    typescript.initialization_options =
        serde_json::json!({"tsserver": {"useSyntaxServer": "never"}});
    vec![
        builtin(
            "pyright",
            "pyright-langserver",
            &["--stdio"],
            &["py", "pyi"],
        ),
        builtin(
            "basedpyright",
            "basedpyright-langserver",
            &["--stdio"],
            &["py", "pyi"],
        ),
        typescript,
        builtin("rust-analyzer", "rust-analyzer", &[], &["rs"]),
        builtin("gopls", "gopls", &[], &["go"]),
        builtin(
            "clangd",
            "clangd",
            &[],
            &["c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx"],
        ),
    ]
}

/// Applies `[lsp.<name>]` tables over `servers`: a table of a known name
/// changes it; a new name adds a server (it must say `command` and
/// `extensions`, else it is returned as a problem).
pub fn apply_settings(
    servers: &mut Vec<ServerConfig>,
    settings: &BTreeMap<String, ServerSettings>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, s) in settings {
        let existing = servers.iter_mut().find(|c| &c.name == name);
        let server = match existing {
            Some(c) => c,
            None => {
                let (Some(command), Some(_)) = (&s.command, &s.extensions) else {
                    if !s.disabled {
                        problems.push(format!(
                            "[lsp.{name}]: a new server needs `command` and `extensions`"
                        ));
                    }
                    continue;
                };
                // Servers of one's own come before the defaults.
                let at = servers
                    .iter()
                    .take_while(|c| c.source != ServerSource::Builtin)
                    .count();
                servers.insert(at, builtin(name, command, &[], &[]));
                &mut servers[at]
            }
        };
        server.source = ServerSource::Settings;
        if let Some(c) = &s.command {
            server.command = c.clone();
        }
        if let Some(a) = &s.args {
            server.args = a.clone();
        }
        if let Some(exts) = &s.extensions {
            server.languages = exts
                .iter()
                .map(|e| e.trim_start_matches('.').to_string())
                .map(|e| (e.clone(), language_id(&e)))
                .collect();
        }
        server.env.extend(s.env.clone());
        server.disabled = s.disabled;
    }
    problems
}

/// One entry of Claude Code's `.lsp.json`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LspJsonServer {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    extension_to_language: BTreeMap<String, String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    initialization_options: serde_json::Value,
}

/// Why `.lsp.json` could not be used.
#[derive(Debug, thiserror::Error)]
pub enum LspJsonError {
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not what Claude Code's format says.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        message: String,
    },
}

/// The servers of `root/.lsp.json` (none when there is no such file).
/// Servers named like one in `servers` replace it.
pub fn add_lsp_json(servers: &mut Vec<ServerConfig>, root: &Path) -> Result<(), LspJsonError> {
    let path = root.join(LSP_JSON_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(LspJsonError::Read { path, source }),
    };
    let parsed: BTreeMap<String, LspJsonServer> =
        serde_json::from_str(&text).map_err(|e| LspJsonError::Invalid {
            path: path.clone(),
            message: e.to_string(),
        })?;
    for (name, s) in parsed {
        let config = ServerConfig {
            name: name.clone(),
            command: s.command,
            args: s.args,
            languages: s
                .extension_to_language
                .into_iter()
                .map(|(ext, lang)| (ext.trim_start_matches('.').to_string(), lang))
                .collect(),
            env: s.env,
            disabled: false,
            source: ServerSource::LspJson,
            initialization_options: s.initialization_options,
        };
        servers.retain(|c| c.name != name);
        let at = servers
            .iter()
            .take_while(|c| c.source != ServerSource::Builtin)
            .count();
        servers.insert(at, config);
    }
    Ok(())
}

/// Where `command` is found on `path` (a `PATH` value); a command with a
/// slash is taken as it is, when it exists.
pub fn on_path(command: &str, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if command.contains('/') {
        let p = PathBuf::from(command);
        return executable(&p).then_some(p);
    }
    std::env::split_paths(path?)
        .map(|dir| dir.join(command))
        .find(|p| executable(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_change_builtins_and_add_servers() {
        let mut servers = builtin_servers();
        let settings: BTreeMap<String, ServerSettings> = toml::from_str(
            r#"
            [pyright]
            disabled = true
            [mine]
            command = "my-ls"
            extensions = [".foo", "bar"]
            [broken]
            args = []
            "#,
        )
        .unwrap();
        let problems = apply_settings(&mut servers, &settings);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            servers
                .iter()
                .find(|s| s.name == "pyright")
                .unwrap()
                .disabled
        );
        let mine = servers.iter().find(|s| s.name == "mine").unwrap();
        assert_eq!(mine.language_of(Path::new("a.foo")), Some("foo"));
        assert_eq!(mine.language_of(Path::new("a.bar")), Some("bar"));
    }

    #[test]
    fn lsp_json_is_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(LSP_JSON_FILE),
            r#"{"go": {"command": "gopls", "args": ["serve"], "extensionToLanguage": {".go": "go"}}}"#,
        )
        .unwrap();
        let mut servers = builtin_servers();
        add_lsp_json(&mut servers, dir.path()).unwrap();
        let go = servers.iter().find(|s| s.name == "go").unwrap();
        assert_eq!(go.args, ["serve"]);
        assert_eq!(go.source, ServerSource::LspJson);
        std::fs::write(dir.path().join(LSP_JSON_FILE), r#"{"go": {"args": []}}"#).unwrap();
        let err = add_lsp_json(&mut servers, dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(".lsp.json") && err.contains("command"),
            "{err}"
        );
    }
}
