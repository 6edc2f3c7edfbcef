//! kaji's settings files: what they may contain, where they are found, and
//! how the user's and the project's settings combine.
//!
//! Three files are read, all optional:
//!
//! 1. the user's: `$KAJI_HOME/config.toml`;
//! 2. the project's: the nearest `.kaji/config.toml` walking up from the
//!    working directory to the repository root (the first directory that
//!    holds `.git`); outside a repository only the working directory's;
//! 3. the project-local one (not committed): the nearest
//!    `.kaji/config.local.toml`, found the same way.
//!
//! Later files add to earlier ones (user < project < project-local):
//! scalar keys from the later file win, hook lists and `[permissions]`
//! rule lists are concatenated (user entries first), and `mcp_servers`
//! tables merge by server name with the later table replacing the
//! earlier. Every key is documented in `docs/configuration.md`.
//!
//! A file that is not valid TOML, has a key kaji does not know, or a value
//! of the wrong type is an error naming the file, the line and the key
//! ([`ConfigError`]); nothing is silently ignored. This module only reads:
//! it never writes a settings file, and knows nothing of what the keys
//! drive (the CLI picks the provider, kaji-mcp types the servers).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kaji_mcp::McpServerConfig;
use kaji_policy::{Decision, Rule, RuleSource};
use serde::Deserialize;
use toml::Spanned;

use crate::PermissionMode;
use crate::hooks::{DEFAULT_HOOK_TIMEOUT, HookEvent, HookSpec, HooksConfig, ToolMatcher};
use crate::permissions::PermissionRule;

/// The settings file's name, in `$KAJI_HOME` and in a project's `.kaji/`.
pub const CONFIG_FILE_NAME: &str = "config.toml";

/// The project-local settings file's name in a project's `.kaji/` (not
/// committed).
pub const LOCAL_CONFIG_FILE_NAME: &str = "config.local.toml";

/// The default of `tool_result_max_chars`.
pub const DEFAULT_TOOL_RESULT_MAX_CHARS: usize = 50_000;

/// What a reply with text and no tool call does (`on_text_reply`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TextReply {
    /// The seed's outer loop: the model is nudged to use a tool, and the
    /// reply counts as a mistake (the default of `kaji exec`, `kaji
    /// worker`).
    Nudge,
    /// The reply ends the turn: the user answers (the UI, `kaji acp`,
    /// sub-agents, whose final text is their result).
    Finish,
}

impl std::str::FromStr for TextReply {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "nudge" => Ok(Self::Nudge),
            "finish" => Ok(Self::Finish),
            other => Err(format!(
                "unknown on_text_reply {other:?}: expected nudge or finish"
            )),
        }
    }
}

/// When the conversation is compacted (`compaction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compaction {
    /// Before a request that would pass the threshold, and after a
    /// context-overflow error; `/compact` too.
    #[default]
    Auto,
    /// Only on `/compact`; an overflow error still compacts once.
    Manual,
    /// Never: an overflow ends the round with an error naming this setting.
    Off,
}

/// The settings kaji runs with: the user's file, then the project's, merged.
#[derive(Debug, Clone, Default)]
pub struct KajiConfig {
    /// `provider`: the model provider (`anthropic`, `openai` or `openai-responses`).
    pub provider: Option<String>,
    /// `model`: the model name.
    pub model: Option<String>,
    /// `base_url`: the provider's API base URL.
    pub base_url: Option<String>,
    /// `reasoning`: how hard the model is asked to think (`off`, `low`,
    /// `medium`, `high`; default off).
    pub reasoning: Option<kaji_llm::Reasoning>,
    /// `permission_mode`: the mode a task starts in unless the command line
    /// gives one.
    pub permission_mode: Option<PermissionMode>,
    /// `max_mistakes`: consecutive mistakes before the mistake limit is
    /// reached.
    pub max_mistakes: Option<u32>,
    /// `tool_result_max_chars`: the cap on every tool result the model
    /// gets (default 50,000); the whole result is spilled to a file.
    pub tool_result_max_chars: Option<usize>,
    /// `[models."<name>"]`: context window and prices per model.
    pub models: kaji_llm::pricing::ModelOverrides,
    /// `[model_aliases]`: what an agent file's `model: sonnet` (or any
    /// alias) means with this provider.
    pub model_aliases: BTreeMap<String, String>,
    /// `token_budget`: the total tokens a sub-agent may use unless its
    /// type sets `token_budget` itself.
    pub token_budget: Option<u64>,
    /// `max_agent_depth`: how deep sub-agents nest (default 2).
    pub max_agent_depth: Option<u32>,
    /// `max_requests`: the model requests of a whole run, sub-agents and
    /// teammates included (`--max-requests` wins).
    pub max_requests: Option<u64>,
    /// `max_budget_usd`: the cost of a whole run, in USD
    /// (`--max-budget-usd` wins).
    pub max_budget_usd: Option<f64>,
    /// `on_text_reply`: `nudge` or `finish` (default: the front end's).
    pub on_text_reply: Option<TextReply>,
    /// `compaction`: `auto` (default), `manual` or `off`.
    pub compaction: Option<Compaction>,
    /// `auto_compact_threshold`: the share of the context window (0–1,
    /// default 0.85) past which the conversation is compacted before the
    /// next request.
    pub auto_compact_threshold: Option<f64>,
    /// `[[hooks.<Event>]]`: every hook, user hooks first.
    pub hooks: HooksConfig,
    /// `[mcp_servers.<name>]`: the MCP servers, checked when the file is
    /// read (unknown keys, both or neither of `command` and `url`), and
    /// those of the project's `.mcp.json` (trusted projects only; a
    /// `[mcp_servers]` table of the same name wins).
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// The `.mcp.json` servers that were skipped (a server kaji cannot
    /// use, or the whole file when it is not JSON), one warning each
    /// naming the file, the server and why.
    pub mcp_json_skipped: Vec<String>,
    /// `[permissions]`: the `allow`, `ask` and `deny` rules of every file,
    /// user rules first, each checked when the file is read.
    pub permissions: Vec<PermissionRule>,
    /// `sandbox`: `read-only`, `workspace-write` or `off` (default: chosen
    /// from the permission mode where the kernel supports the sandbox).
    pub sandbox: Option<kaji_sandbox::SandboxMode>,
    /// `sandbox_network`: whether sandboxed commands may open network
    /// sockets (default false).
    pub sandbox_network: Option<bool>,
    /// `sandbox_deny_read`: more paths sandboxed commands may not read
    /// (`~/` is the home directory); lists concatenate.
    pub sandbox_deny_read: Vec<String>,
    /// `sandbox_allow_unix_sockets`: Unix sockets (or directories of them)
    /// outside the workspace that sandboxed commands may still connect to
    /// (`~/` is the home directory); lists concatenate. Trust-gated.
    pub sandbox_allow_unix_sockets: Vec<String>,
    /// `protected_paths`: more path patterns (relative to the project
    /// root) whose edits always ask; lists concatenate.
    pub protected_paths: Vec<String>,
    /// `env_passthrough`: secret-looking variables children may inherit.
    pub env_passthrough: Vec<String>,
    /// `secret_env`: more variable names children must not inherit.
    pub secret_env: Vec<String>,
    /// `task_list_url`: the PostgreSQL database of the task list
    /// (`postgres://…`; unset: the file store). `KAJI_TASK_LIST_URL` wins.
    pub task_list_url: Option<String>,
    /// `lease_ms`: how long a worker's lease on a database list lasts
    /// without a heartbeat (default 30000). `KAJI_LEASE_MS` wins.
    pub lease_ms: Option<u64>,
    /// `claude_setting_sources`: which of Claude Code's settings files are
    /// read (`user`, `project`, `local`; default all three).
    pub claude_setting_sources: Option<Vec<crate::claude_settings::SettingSource>>,
    /// Claude Code's `env` (every settings file, later sources winning):
    /// set for every process kaji starts.
    pub claude_env: BTreeMap<String, String>,
    /// What Claude Code's settings files held that kaji does not honour or
    /// refused: one warning each, naming the file, the line and the key.
    pub claude_warnings: Vec<String>,
    /// `[web_search]`: which search `WebSearch` uses (unset: the
    /// provider's own, where it has one).
    pub web_search: Option<kaji_tools::web_search::WebSearchSettings>,
    /// `[lsp.<name>]`: language servers added or changed (docs/lsp.md);
    /// a project's only in trusted projects.
    pub lsp: BTreeMap<String, kaji_lsp::ServerSettings>,
    /// `lsp_wait_ms`: how long an edit waits for diagnostics (default
    /// 1500).
    pub lsp_wait_ms: Option<u64>,
    sources: Vec<PathBuf>,
}

/// A project setting that was not applied because the project is not
/// trusted: the key and the file it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredSetting {
    /// The key (`hooks`, `mcp_servers`, `permission_mode`, `base_url`,
    /// `permissions.allow`, `env_passthrough`, `sandbox`,
    /// `sandbox_network`, `task_list_url`, `web_search`, `provider`, `model`,
    /// `model_aliases`, `models`, `reasoning`, and a limit that would rise: `max_agent_depth`,
    /// `tool_result_max_chars`, `token_budget`, `max_mistakes`,
    /// `auto_compact_threshold`; `mcpServers` for a `.mcp.json`).
    pub key: &'static str,
    /// The project settings file.
    pub path: PathBuf,
}

impl KajiConfig {
    /// Loads and merges the user's settings (`kaji_home/config.toml`) and
    /// the project's ([`KajiConfig::project_path`] for `cwd`). Missing
    /// files are fine; any other problem is an error naming the file.
    pub fn load(kaji_home: &Path, cwd: &Path) -> Result<Self, ConfigError> {
        Self::load_gated(kaji_home, cwd, true).map(|(config, _)| config)
    }

    /// As [`KajiConfig::load`], but when `trusted` is false the project
    /// files' (`.kaji/config.toml`, `.kaji/config.local.toml`) settings
    /// that run code, widen permissions or redirect traffic — hooks, MCP
    /// servers, `permission_mode`, `base_url`, `env_passthrough`,
    /// `sandbox`, `sandbox_network` — are left out and listed. Their
    /// `[permissions]` rules are kept (tagged project or local): the
    /// caller marks their allow rules untrusted, and lists them here too.
    pub fn load_gated(
        kaji_home: &Path,
        cwd: &Path,
        trusted: bool,
    ) -> Result<(Self, Vec<IgnoredSetting>), ConfigError> {
        let claude = crate::claude_settings::ClaudeSources {
            home: None,
            enabled: vec![
                crate::claude_settings::SettingSource::Project,
                crate::claude_settings::SettingSource::Local,
            ],
        };
        Self::load_with(kaji_home, cwd, trusted, &claude)
    }

    /// As [`KajiConfig::load_gated`], reading Claude Code's settings files
    /// of `claude` (the user's among them when it has a home) after kaji's
    /// own; `claude_setting_sources` narrows `claude.enabled` further.
    pub fn load_with(
        kaji_home: &Path,
        cwd: &Path,
        trusted: bool,
        claude: &crate::claude_settings::ClaudeSources,
    ) -> Result<(Self, Vec<IgnoredSetting>), ConfigError> {
        let mut ignored = Vec::new();
        let user_path = Self::user_path(kaji_home);
        let mut config = Self::load_file(&user_path)?.unwrap_or_default();
        let project_files = [
            (
                Self::project_path(cwd),
                RuleSource::Project as fn(PathBuf) -> _,
            ),
            (Self::local_path(cwd), RuleSource::Local),
        ];
        for (path, tag) in project_files {
            if let Some(path) = path
                && !same_file(&path, &user_path)
                && let Some(mut project) = Self::load_file(&path)?
            {
                for rule in &mut project.permissions {
                    rule.source = tag(path.clone());
                }
                if !trusted {
                    project.strip_untrusted(&path, &mut ignored);
                    project.narrow_untrusted(&config, &path, &mut ignored);
                }
                config.merge(project);
            }
        }
        config.add_mcp_json(cwd, trusted, &mut ignored)?;
        config.add_claude_settings(cwd, trusted, claude, &mut ignored);
        Ok((config, ignored))
    }

    /// Adds Claude Code's settings files (user, project, local, in that
    /// order): their rules join kaji's (tagged with their file), their
    /// hooks run after kaji's, their `env` is kept, and `defaultMode`
    /// counts only when no `permission_mode` of kaji's is set (kaji's TOML
    /// wins a clash; among Claude Code's files the later wins). An
    /// untrusted project's files keep only their rules (allow rules
    /// untrusted, as for kaji's files); the rest is listed as ignored.
    fn add_claude_settings(
        &mut self,
        cwd: &Path,
        trusted: bool,
        claude: &crate::claude_settings::ClaudeSources,
        ignored: &mut Vec<IgnoredSetting>,
    ) {
        use crate::claude_settings::{self as cs, SettingSource};
        let root = repository_root(cwd).unwrap_or_else(|| cwd.to_path_buf());
        let mut claude = claude.clone();
        if let Some(only) = &self.claude_setting_sources {
            claude.enabled.retain(|s| only.contains(s));
        }
        let mut mode = None;
        let mut toml_rules: Vec<PermissionRule> = self.permissions.clone();
        for source in SettingSource::ALL {
            let Some(path) = claude.path(source, &root) else {
                continue;
            };
            let mut file = match cs::read(&path, source) {
                Ok(Some(file)) => file,
                Ok(None) => continue,
                Err(warning) => {
                    self.claude_warnings.push(warning);
                    continue;
                }
            };
            let gated = source != SettingSource::User && !trusted;
            if gated {
                let mut note = |key: &'static str, present: bool| {
                    if present {
                        ignored.push(IgnoredSetting {
                            key,
                            path: path.clone(),
                        });
                    }
                };
                note("hooks", !file.hooks.is_empty());
                note("env", !file.env.is_empty());
                note("permissions.defaultMode", file.default_mode.is_some());
                note(
                    "permissions.allow",
                    file.permissions.iter().any(|r| r.kind == Decision::Allow),
                );
                file.hooks = HooksConfig::new();
                file.env.clear();
                file.default_mode = None;
            }
            for (rule, line) in file.permissions.iter().zip(&file.rule_lines) {
                if let Some(clash) = toml_rules
                    .iter()
                    .find(|t| t.rule == rule.rule && t.kind != rule.kind)
                {
                    self.claude_warnings.push(format!(
                        "{}:{line}: key `permissions.{}`: the rule {} is also in {} under `permissions.{}`, with the opposite effect; both are kept, and deny wins over ask over allow",
                        path.display(),
                        rule.kind,
                        rule.rule,
                        clash
                            .source
                            .path()
                            .map_or_else(String::new, |p| p.display().to_string()),
                        clash.kind,
                    ));
                }
            }
            toml_rules.extend(file.permissions.iter().cloned());
            self.claude_warnings.append(&mut file.warnings);
            self.permissions.append(&mut file.permissions);
            self.hooks.extend(file.hooks);
            self.claude_env.append(&mut file.env);
            mode = file.default_mode.or(mode);
            self.sources.push(path);
        }
        if self.permission_mode.is_none() {
            self.permission_mode = mode;
        }
    }

    /// Adds the servers of the project's `.mcp.json` (Claude Code's
    /// format, at the repository root, else in `cwd`) that no
    /// `[mcp_servers]` table names. An untrusted project's file is not
    /// read, only listed as ignored (key `mcpServers`).
    fn add_mcp_json(
        &mut self,
        cwd: &Path,
        trusted: bool,
        ignored: &mut Vec<IgnoredSetting>,
    ) -> Result<(), ConfigError> {
        let root = repository_root(cwd).unwrap_or_else(|| cwd.to_path_buf());
        let path = root.join(kaji_mcp::MCP_JSON_FILE);
        if !path.is_file() {
            return Ok(());
        }
        if !trusted {
            ignored.push(IgnoredSetting {
                key: "mcpServers",
                path,
            });
            return Ok(());
        }
        // A server kaji cannot use is skipped with a warning; the others
        // and the session go on.
        let found = match kaji_mcp::load_mcp_json_servers(&root) {
            Ok(found) => found,
            Err(e) => {
                self.mcp_json_skipped
                    .push(format!("{e}; no server of it is used"));
                return Ok(());
            }
        };
        for (name, e) in found.skipped {
            self.mcp_json_skipped
                .push(format!("MCP server `{name}` skipped: {e}"));
        }
        for (name, server) in found.servers {
            self.mcp_servers.entry(name).or_insert(server);
        }
        self.sources.push(path);
        Ok(())
    }

    /// Removes what an untrusted project file may not set, noting each key.
    fn strip_untrusted(&mut self, path: &Path, ignored: &mut Vec<IgnoredSetting>) {
        let mut note = |key: &'static str, present: bool| {
            if present {
                ignored.push(IgnoredSetting {
                    key,
                    path: path.to_path_buf(),
                });
            }
        };
        note("hooks", !self.hooks.is_empty());
        note("mcp_servers", !self.mcp_servers.is_empty());
        note("permission_mode", self.permission_mode.take().is_some());
        note("base_url", self.base_url.take().is_some());
        note(
            "permissions.allow",
            self.permissions.iter().any(|r| r.kind == Decision::Allow),
        );
        note("env_passthrough", !self.env_passthrough.is_empty());
        if self.sandbox == Some(kaji_sandbox::SandboxMode::Off) {
            self.sandbox = None;
            note("sandbox", true);
        }
        note("sandbox_network", self.sandbox_network.take().is_some());
        note(
            "sandbox_allow_unix_sockets",
            !std::mem::take(&mut self.sandbox_allow_unix_sockets).is_empty(),
        );
        note("task_list_url", self.task_list_url.take().is_some());
        note("web_search", self.web_search.take().is_some());
        note("lsp", !std::mem::take(&mut self.lsp).is_empty());
        self.hooks = HooksConfig::new();
        self.mcp_servers.clear();
        self.env_passthrough.clear();
    }

    /// Keeps of an untrusted project file's settings that spend the user's
    /// money or raise a limit only what narrows `base` (the settings laid
    /// down so far, else the defaults), and only the model the user chose
    /// ([`KajiConfig::keep_users_model`]). Notes each.
    fn narrow_untrusted(
        &mut self,
        base: &KajiConfig,
        path: &Path,
        ignored: &mut Vec<IgnoredSetting>,
    ) {
        fn narrow<T: PartialOrd + Copy>(
            top: &mut Option<T>,
            base: Option<T>,
            default: Option<T>,
        ) -> bool {
            let limit = base.or(default);
            let raises = matches!((*top, limit), (Some(t), Some(l)) if t > l);
            if raises {
                *top = None;
            }
            raises
        }
        let mut note = |key: &'static str, present: bool| {
            if present {
                ignored.push(IgnoredSetting {
                    key,
                    path: path.to_path_buf(),
                });
            }
        };
        let depth = Some(crate::subagent::limits::DEFAULT_MAX_DEPTH);
        note(
            "max_agent_depth",
            narrow(&mut self.max_agent_depth, base.max_agent_depth, depth),
        );
        let cap = Some(crate::config::DEFAULT_TOOL_RESULT_MAX_CHARS);
        note(
            "tool_result_max_chars",
            narrow(
                &mut self.tool_result_max_chars,
                base.tool_result_max_chars,
                cap,
            ),
        );
        note(
            "token_budget",
            narrow(&mut self.token_budget, base.token_budget, None),
        );
        note(
            "max_mistakes",
            narrow(&mut self.max_mistakes, base.max_mistakes, Some(3)),
        );
        note(
            "auto_compact_threshold",
            narrow(
                &mut self.auto_compact_threshold,
                base.auto_compact_threshold,
                Some(0.85),
            ),
        );
        self.keep_users_model(base, path, ignored);
    }

    /// Drops of an untrusted project file's settings what chooses where
    /// the user's key goes and how much it spends: a `provider` or `model`
    /// other than `base`'s, `[model_aliases]`, `[models]` and a
    /// `reasoning` other than `off` or `base`'s. Notes each.
    fn keep_users_model(
        &mut self,
        base: &KajiConfig,
        path: &Path,
        ignored: &mut Vec<IgnoredSetting>,
    ) {
        let mut note = |key: &'static str, present: bool| {
            if present {
                ignored.push(IgnoredSetting {
                    key,
                    path: path.to_path_buf(),
                });
            }
        };
        // Which provider and model get the user's key is the user's
        // choice: a project may only repeat it.
        let chooses = |top: &mut Option<String>, base: &Option<String>| {
            let differs = top.is_some() && top != base;
            if differs {
                *top = None;
            }
            differs
        };
        note("provider", chooses(&mut self.provider, &base.provider));
        note("model", chooses(&mut self.model, &base.model));
        note("model_aliases", !self.model_aliases.is_empty());
        self.model_aliases.clear();
        note("models", !self.models.is_empty());
        self.models.clear();
        let thinks = self
            .reasoning
            .is_some_and(|r| r != kaji_llm::Reasoning::Off && Some(r) != base.reasoning);
        if thinks {
            self.reasoning = None;
        }
        note("reasoning", thinks);
    }

    /// The user's settings file: `kaji_home/config.toml`.
    pub fn user_path(kaji_home: &Path) -> PathBuf {
        kaji_home.join(CONFIG_FILE_NAME)
    }

    /// The project's settings file for `cwd`: the nearest existing
    /// `.kaji/config.toml` from `cwd` up to the repository root (the
    /// nearest directory holding `.git`), or `None`. Outside a repository
    /// only `cwd` itself is looked at.
    pub fn project_path(cwd: &Path) -> Option<PathBuf> {
        find_up(cwd, CONFIG_FILE_NAME)
    }

    /// The project-local settings file for `cwd`: the nearest existing
    /// `.kaji/config.local.toml`, looked for as [`KajiConfig::project_path`]
    /// looks for `.kaji/config.toml`, or `None`.
    pub fn local_path(cwd: &Path) -> Option<PathBuf> {
        find_up(cwd, LOCAL_CONFIG_FILE_NAME)
    }

    /// Reads one settings file; `Ok(None)` when it does not exist.
    pub fn load_file(path: &Path) -> Result<Option<Self>, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        Self::from_toml_str(&text, path).map(Some)
    }

    /// Parses the text of one settings file; `path` is only used in
    /// messages and recorded in [`KajiConfig::sources`] and in each hook.
    pub fn from_toml_str(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let file: ConfigFile = parse(text, path)?;
        let invalid = |span: std::ops::Range<usize>, key: &str, message: String| {
            let (line, column) = line_column(text, span.start);
            ConfigError::Invalid {
                path: path.to_path_buf(),
                line,
                column,
                key: key.to_string(),
                message,
            }
        };
        let permission_mode = parsed(file.permission_mode, "permission_mode", &invalid)?;
        let hooks = hooks_of(file.hooks, path, &invalid)?;
        let permissions = file.permissions.rules(path, &invalid)?;
        let reasoning = parsed(file.reasoning, "reasoning", &invalid)?;
        let sandbox = parsed(file.sandbox, "sandbox", &invalid)?;
        let auto_compact_threshold = fraction(file.auto_compact_threshold, &invalid)?;
        let lease_ms = lease(file.lease_ms, &invalid)?;
        let claude_setting_sources = match file.claude_setting_sources {
            None => None,
            Some(list) => Some(
                list.get_ref()
                    .iter()
                    .map(|s| s.parse())
                    .collect::<Result<Vec<_>, String>>()
                    .map_err(|e| invalid(list.span(), "claude_setting_sources", e))?,
            ),
        };
        Ok(Self {
            provider: file.provider,
            model: file.model,
            base_url: file.base_url,
            reasoning,
            permission_mode,
            max_mistakes: file.max_mistakes,
            tool_result_max_chars: file.tool_result_max_chars,
            models: file.models,
            model_aliases: file.model_aliases,
            token_budget: file.token_budget,
            max_agent_depth: file.max_agent_depth,
            max_requests: file.max_requests,
            max_budget_usd: file.max_budget_usd,
            compaction: file.compaction,
            on_text_reply: file.on_text_reply,
            auto_compact_threshold,
            hooks,
            mcp_servers: file.mcp_servers,
            permissions,
            sandbox,
            sandbox_network: file.sandbox_network,
            sandbox_deny_read: file.sandbox_deny_read,
            sandbox_allow_unix_sockets: file.sandbox_allow_unix_sockets,
            protected_paths: file.protected_paths,
            env_passthrough: file.env_passthrough,
            secret_env: file.secret_env,
            task_list_url: file.task_list_url,
            lease_ms,
            claude_setting_sources,
            claude_env: BTreeMap::new(),
            claude_warnings: Vec::new(),
            web_search: file.web_search,
            lsp: file.lsp,
            lsp_wait_ms: file.lsp_wait_ms,
            sources: vec![path.to_path_buf()],
            mcp_json_skipped: Vec::new(),
        })
    }

    /// Lays `project` over these settings: its scalar keys win, its hooks
    /// run after these, its MCP servers replace same-named ones.
    pub fn merge(&mut self, project: KajiConfig) {
        fn over<T>(base: &mut Option<T>, top: Option<T>) {
            if top.is_some() {
                *base = top;
            }
        }
        over(&mut self.provider, project.provider);
        over(&mut self.model, project.model);
        over(&mut self.base_url, project.base_url);
        over(&mut self.reasoning, project.reasoning);
        over(&mut self.permission_mode, project.permission_mode);
        over(&mut self.max_mistakes, project.max_mistakes);
        over(
            &mut self.tool_result_max_chars,
            project.tool_result_max_chars,
        );
        over(&mut self.compaction, project.compaction);
        over(&mut self.on_text_reply, project.on_text_reply);
        over(
            &mut self.auto_compact_threshold,
            project.auto_compact_threshold,
        );
        self.models.extend(project.models);
        self.model_aliases.extend(project.model_aliases);
        over(&mut self.token_budget, project.token_budget);
        over(&mut self.max_agent_depth, project.max_agent_depth);
        over(&mut self.max_requests, project.max_requests);
        over(&mut self.max_budget_usd, project.max_budget_usd);
        self.hooks.extend(project.hooks);
        self.mcp_servers.extend(project.mcp_servers);
        self.permissions.extend(project.permissions);
        over(&mut self.sandbox, project.sandbox);
        over(&mut self.sandbox_network, project.sandbox_network);
        self.sandbox_deny_read.extend(project.sandbox_deny_read);
        self.sandbox_allow_unix_sockets
            .extend(project.sandbox_allow_unix_sockets);
        self.protected_paths.extend(project.protected_paths);
        self.env_passthrough.extend(project.env_passthrough);
        self.secret_env.extend(project.secret_env);
        over(&mut self.task_list_url, project.task_list_url);
        over(&mut self.lease_ms, project.lease_ms);
        // Sources can only be turned off: both lists must name one.
        self.claude_setting_sources = match (
            self.claude_setting_sources.take(),
            project.claude_setting_sources,
        ) {
            (Some(a), Some(b)) => Some(a.into_iter().filter(|s| b.contains(s)).collect()),
            (a, b) => a.or(b),
        };
        over(&mut self.web_search, project.web_search);
        self.lsp.extend(project.lsp);
        over(&mut self.lsp_wait_ms, project.lsp_wait_ms);
        self.sources.extend(project.sources);
    }

    /// The files these settings were read from, user first.
    pub fn sources(&self) -> &[PathBuf] {
        &self.sources
    }
}

/// The nearest `.kaji/<name>` from `cwd` up to the repository root (only
/// `cwd` outside a repository).
fn find_up(cwd: &Path, name: &str) -> Option<PathBuf> {
    let in_repo = repository_root(cwd).is_some();
    for dir in cwd.ancestors() {
        let candidate = dir.join(".kaji").join(name);
        if candidate.is_file() {
            return Some(candidate);
        }
        if !in_repo || dir.join(".git").exists() {
            break;
        }
    }
    None
}

/// The nearest directory from `cwd` upwards that holds `.git` (a directory
/// or, in worktrees and submodules, a file).
pub fn repository_root(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Why the settings could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read.
    #[error("{}: cannot read settings: {source}", path.display())]
    Read {
        /// The settings file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML, or a key is unknown or has a wrong
    /// value.
    #[error("{}", InvalidDisplay { path, line: *line, column: *column, key, message })]
    Invalid {
        /// The settings file.
        path: PathBuf,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// The dotted key concerned (`hooks.PreToolUse[0].timeout`); empty
        /// when the problem is the file's syntax and no key could be named.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// The project's `.mcp.json` cannot be read or is not valid (the
    /// error names the file and the key).
    #[error(transparent)]
    McpJson(#[from] kaji_mcp::McpJsonError),
}

struct InvalidDisplay<'a> {
    path: &'a Path,
    line: usize,
    column: usize,
    key: &'a str,
    message: &'a str,
}

impl fmt::Display for InvalidDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.path.display(), self.line, self.column)?;
        if !self.key.is_empty() {
            write!(f, "key `{}`: ", self.key)?;
        }
        f.write_str(self.message)
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Deserializes `text` as `T`, turning any error into
/// [`ConfigError::Invalid`] with the line and the dotted key.
fn parse<T: serde::de::DeserializeOwned>(text: &str, path: &Path) -> Result<T, ConfigError> {
    let invalid = |err: &toml::de::Error, key: String| {
        let (line, column) = err.span().map_or((1, 1), |s| line_column(text, s.start));
        let mut key = key;
        let message = err.message().trim().to_string();
        if let Some(field) = unknown_field(&message)
            && key.rsplit('.').next() != Some(field)
        {
            key = if key.is_empty() {
                field.to_string()
            } else {
                format!("{key}.{field}")
            };
        }
        if key.is_empty() {
            key = key_on_line(text, line);
        }
        ConfigError::Invalid {
            path: path.to_path_buf(),
            line,
            column,
            key,
            message,
        }
    };
    let deserializer = toml::Deserializer::parse(text).map_err(|e| invalid(&e, String::new()))?;
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        // `Spanned` values show up as an inner field of serde's own making.
        let key = e
            .path()
            .to_string()
            .split('.')
            .filter(|segment| !segment.is_empty() && !segment.starts_with("$__serde_spanned"))
            .collect::<Vec<_>>()
            .join(".");
        invalid(e.inner(), key)
    })
}

/// The field named in serde's "unknown field `x`, expected …" message.
fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

/// Best effort for syntax errors: the key being assigned on `line`.
fn key_on_line(text: &str, line: usize) -> String {
    text.lines()
        .nth(line.saturating_sub(1))
        .and_then(|l| l.split_once('='))
        .map(|(k, _)| k.trim().to_string())
        .unwrap_or_default()
}

/// The settings file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    provider: Option<String>,
    model: Option<String>,
    base_url: Option<String>,
    reasoning: Option<Spanned<String>>,
    permission_mode: Option<Spanned<String>>,
    max_mistakes: Option<u32>,
    tool_result_max_chars: Option<usize>,
    #[serde(default)]
    models: kaji_llm::pricing::ModelOverrides,
    #[serde(default)]
    model_aliases: BTreeMap<String, String>,
    token_budget: Option<u64>,
    max_agent_depth: Option<u32>,
    max_requests: Option<u64>,
    max_budget_usd: Option<f64>,
    compaction: Option<Compaction>,
    on_text_reply: Option<TextReply>,
    auto_compact_threshold: Option<Spanned<f64>>,
    #[serde(default)]
    hooks: HooksFile,
    #[serde(default)]
    mcp_servers: BTreeMap<String, McpServerConfig>,
    #[serde(default)]
    permissions: PermissionsFile,
    sandbox: Option<Spanned<String>>,
    sandbox_network: Option<bool>,
    #[serde(default)]
    sandbox_deny_read: Vec<String>,
    #[serde(default)]
    sandbox_allow_unix_sockets: Vec<String>,
    #[serde(default)]
    protected_paths: Vec<String>,
    #[serde(default)]
    env_passthrough: Vec<String>,
    #[serde(default)]
    secret_env: Vec<String>,
    task_list_url: Option<String>,
    lease_ms: Option<Spanned<u64>>,
    claude_setting_sources: Option<Spanned<Vec<String>>>,
    web_search: Option<kaji_tools::web_search::WebSearchSettings>,
    #[serde(default)]
    lsp: BTreeMap<String, kaji_lsp::ServerSettings>,
    lsp_wait_ms: Option<u64>,
}

/// `[permissions]`: lists of rule strings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PermissionsFile {
    #[serde(default)]
    allow: Vec<Spanned<String>>,
    #[serde(default)]
    ask: Vec<Spanned<String>>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
}

impl PermissionsFile {
    /// Parses every rule (tagged as the user's; [`KajiConfig::load`]
    /// re-tags project files), or the first bad one as an error.
    fn rules(self, path: &Path, invalid: &Invalid) -> Result<Vec<PermissionRule>, ConfigError> {
        let mut rules = Vec::new();
        let lists = [
            (Decision::Allow, "allow", self.allow),
            (Decision::Ask, "ask", self.ask),
            (Decision::Deny, "deny", self.deny),
        ];
        for (kind, name, list) in lists {
            for (index, text) in list.into_iter().enumerate() {
                let rule = text.get_ref().parse::<Rule>().map_err(|e| {
                    invalid(
                        text.span(),
                        &format!("permissions.{name}[{index}]"),
                        e.to_string(),
                    )
                })?;
                rules.push(PermissionRule {
                    kind,
                    rule,
                    source: RuleSource::User(path.to_path_buf()),
                });
            }
        }
        Ok(rules)
    }
}

/// `[hooks]`: one array of tables per event.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(non_snake_case)]
struct HooksFile {
    #[serde(default)]
    TaskStart: Vec<HookEntry>,
    #[serde(default)]
    TaskResume: Vec<HookEntry>,
    #[serde(default)]
    TaskCancel: Vec<HookEntry>,
    #[serde(default)]
    TaskComplete: Vec<HookEntry>,
    #[serde(default)]
    UserPromptSubmit: Vec<HookEntry>,
    #[serde(default)]
    PreToolUse: Vec<HookEntry>,
    #[serde(default)]
    PostToolUse: Vec<HookEntry>,
    #[serde(default)]
    PreCompact: Vec<HookEntry>,
    #[serde(default)]
    SessionStart: Vec<HookEntry>,
    #[serde(default)]
    SessionEnd: Vec<HookEntry>,
    #[serde(default)]
    Stop: Vec<HookEntry>,
    #[serde(default)]
    SubagentStop: Vec<HookEntry>,
    #[serde(default)]
    Notification: Vec<HookEntry>,
    #[serde(default)]
    PostToolUseFailure: Vec<HookEntry>,
    #[serde(default)]
    SubagentStart: Vec<HookEntry>,
    #[serde(default)]
    PermissionRequest: Vec<HookEntry>,
    #[serde(default)]
    TaskCreated: Vec<HookEntry>,
    #[serde(default)]
    TaskCompleted: Vec<HookEntry>,
}

impl HooksFile {
    fn into_events(self) -> [(HookEvent, Vec<HookEntry>); 18] {
        [
            (HookEvent::TaskStart, self.TaskStart),
            (HookEvent::TaskResume, self.TaskResume),
            (HookEvent::TaskCancel, self.TaskCancel),
            (HookEvent::TaskComplete, self.TaskComplete),
            (HookEvent::UserPromptSubmit, self.UserPromptSubmit),
            (HookEvent::PreToolUse, self.PreToolUse),
            (HookEvent::PostToolUse, self.PostToolUse),
            (HookEvent::PreCompact, self.PreCompact),
            (HookEvent::SessionStart, self.SessionStart),
            (HookEvent::SessionEnd, self.SessionEnd),
            (HookEvent::Stop, self.Stop),
            (HookEvent::SubagentStop, self.SubagentStop),
            (HookEvent::Notification, self.Notification),
            (HookEvent::PostToolUseFailure, self.PostToolUseFailure),
            (HookEvent::SubagentStart, self.SubagentStart),
            (HookEvent::PermissionRequest, self.PermissionRequest),
            (HookEvent::TaskCreated, self.TaskCreated),
            (HookEvent::TaskCompleted, self.TaskCompleted),
        ]
    }
}

/// One `[[hooks.<Event>]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HookEntry {
    command: Spanned<String>,
    matcher: Option<Spanned<String>>,
    timeout: Option<Spanned<u64>>,
    /// Claude Code's key: `"command"` is the only type kaji runs.
    #[serde(rename = "type")]
    kind: Option<Spanned<String>>,
    #[serde(rename = "statusMessage", alias = "status_message")]
    status_message: Option<String>,
    #[serde(rename = "async")]
    run_async: Option<bool>,
}

/// The error of a value at a span of the file under a key (the file's
/// path, line and column filled in).
type Invalid<'a> = dyn Fn(std::ops::Range<usize>, &str, String) -> ConfigError + 'a;

/// A value written as a string and parsed (`permission_mode`,
/// `reasoning`, `sandbox`); what does not parse is an error at it.
fn parsed<T>(
    value: Option<Spanned<String>>,
    key: &str,
    invalid: &Invalid,
) -> Result<Option<T>, ConfigError>
where
    T: std::str::FromStr,
    T::Err: fmt::Display,
{
    value
        .map(|v| {
            v.get_ref()
                .parse::<T>()
                .map_err(|e| invalid(v.span(), key, e.to_string()))
        })
        .transpose()
}

/// `auto_compact_threshold`: between 0 and 1.
fn fraction(value: Option<Spanned<f64>>, invalid: &Invalid) -> Result<Option<f64>, ConfigError> {
    match value {
        Some(t) if !(0.0..=1.0).contains(t.get_ref()) => Err(invalid(
            t.span(),
            "auto_compact_threshold",
            format!("{} is not between 0 and 1", t.get_ref()),
        )),
        t => Ok(t.map(|t| *t.get_ref())),
    }
}

/// `lease_ms`: at least 1.
fn lease(value: Option<Spanned<u64>>, invalid: &Invalid) -> Result<Option<u64>, ConfigError> {
    match value {
        Some(ms) if *ms.get_ref() == 0 => Err(invalid(
            ms.span(),
            "lease_ms",
            "the lease must be at least 1 millisecond".into(),
        )),
        ms => Ok(ms.map(|ms| *ms.get_ref())),
    }
}

/// The hooks of one file, every entry checked, in the file's order.
fn hooks_of(file: HooksFile, path: &Path, invalid: &Invalid) -> Result<HooksConfig, ConfigError> {
    let mut hooks = HooksConfig::new();
    for (event, entries) in file.into_events() {
        for (index, entry) in entries.into_iter().enumerate() {
            let key = |field: &str| format!("hooks.{event}[{index}].{field}");
            hooks.push(event, hook_spec(event, entry, path, &key, invalid)?);
        }
    }
    Ok(hooks)
}

/// One hook entry of `event`, checked; `key` names a field of it in
/// errors (`hooks.PreToolUse[0].matcher`).
fn hook_spec(
    event: HookEvent,
    entry: HookEntry,
    path: &Path,
    key: &dyn Fn(&str) -> String,
    invalid: &Invalid,
) -> Result<HookSpec, ConfigError> {
    if let Some(kind) = &entry.kind
        && kind.get_ref() != "command"
    {
        return Err(invalid(
            kind.span(),
            &key("type"),
            format!(
                "{:?} hooks are not supported (only \"command\")",
                kind.get_ref()
            ),
        ));
    }
    let command = entry.command.get_ref().trim().to_string();
    if command.is_empty() {
        return Err(invalid(
            entry.command.span(),
            &key("command"),
            "the command is empty".into(),
        ));
    }
    let matcher = hook_matcher(event, entry.matcher, key, invalid)?;
    let timeout = match entry.timeout {
        None => default_hook_timeout(),
        Some(secs) if *secs.get_ref() == 0 => {
            return Err(invalid(
                secs.span(),
                &key("timeout"),
                "the timeout must be at least 1 second".into(),
            ));
        }
        Some(secs) => Duration::from_secs(*secs.get_ref()),
    };
    Ok(HookSpec {
        command,
        matcher,
        timeout,
        source: Some(path.to_path_buf()),
        status_message: entry.status_message,
        run_async: entry.run_async.unwrap_or(false),
    })
}

/// A hook entry's `matcher`: a regular expression over tool names, for
/// the events that have something to match (empty and `*`: anything).
fn hook_matcher(
    event: HookEvent,
    pattern: Option<Spanned<String>>,
    key: &dyn Fn(&str) -> String,
    invalid: &Invalid,
) -> Result<Option<ToolMatcher>, ConfigError> {
    let Some(pattern) = pattern else {
        return Ok(None);
    };
    let any = matches!(pattern.get_ref().trim(), "" | "*");
    if !any && !event.has_matcher() {
        return Err(invalid(
            pattern.span(),
            &key("matcher"),
            format!("{event} hooks have nothing to match; leave matcher out"),
        ));
    }
    ToolMatcher::new(pattern.get_ref()).map(Some).map_err(|e| {
        invalid(
            pattern.span(),
            &key("matcher"),
            format!("invalid regular expression for {event}: {e}"),
        )
    })
}

/// A hook's timeout when its entry sets none: 60 s, or
/// `KAJI_HOOK_TIMEOUT_MS` (so tests never wait for the real default).
fn default_hook_timeout() -> Duration {
    crate::env::duration_from_env("KAJI_HOOK_TIMEOUT_MS", DEFAULT_HOOK_TIMEOUT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_column_counts_from_one() {
        let text = "a = 1\nbé = x\n";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 6), (2, 1));
        assert_eq!(line_column(text, 10), (2, 4));
    }
}

#[cfg(test)]
#[path = "session/settings_walk.rs"]
mod settings_walk;
