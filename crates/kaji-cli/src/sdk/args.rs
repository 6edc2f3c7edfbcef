//! The flags of Claude Code's headless mode that the Agent SDKs pass, with
//! Claude Code's names and meanings, and how each maps onto kaji's
//! [`AgentArgs`]. Parsing only: nothing runs here.

use std::path::PathBuf;

use crate::agent::{AgentArgs, UsageError};

/// `--output-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// The final answer as text.
    Text,
    /// The `result` message as one JSON object (with `--verbose`: an array
    /// of every message).
    Json,
    /// One JSON message per line, as they happen.
    StreamJson,
}

/// `--input-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// The prompt from the command line (or standard input).
    Text,
    /// JSON lines on standard input: user messages and control requests.
    StreamJson,
}

/// The Agent SDK's flags (Claude Code's headless mode); see docs/sdk.md.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SdkArgs {
    /// Headless output: text, json or stream-json (the Agent SDK's
    /// protocol; docs/sdk.md).
    #[arg(long, value_name = "FORMAT")]
    pub output_format: Option<OutputFormat>,
    /// Headless input: text or stream-json.
    #[arg(long, value_name = "FORMAT")]
    pub input_format: Option<InputFormat>,
    /// With --output-format json: every message, not only the result.
    #[arg(long)]
    pub verbose: bool,
    /// With --output-format stream-json: the model's reply as it streams
    /// (`stream_event` messages).
    #[arg(long)]
    pub include_partial_messages: bool,
    /// Claude Code's system prompt replacement (empty: kaji's own).
    #[arg(long, value_name = "PROMPT")]
    pub system_prompt: Option<String>,
    /// Text added to the system prompt.
    #[arg(long, value_name = "PROMPT")]
    pub append_system_prompt: Option<String>,
    /// A file whose text replaces the system prompt.
    #[arg(long, value_name = "FILE")]
    pub system_prompt_file: Option<PathBuf>,
    /// A file whose text is added to the system prompt.
    #[arg(long, value_name = "FILE")]
    pub append_system_prompt_file: Option<PathBuf>,
    /// The tools the model gets (comma-separated; `default`: all).
    #[arg(long, value_name = "TOOLS")]
    pub tools: Option<String>,
    /// Allow rules, comma- or space-separated (alias of --allow).
    #[arg(long = "allowedTools", alias = "allowed-tools", value_name = "RULES")]
    pub allowed_tools: Vec<String>,
    /// Deny rules, comma- or space-separated (alias of --deny).
    #[arg(
        long = "disallowedTools",
        alias = "disallowed-tools",
        value_name = "RULES"
    )]
    pub disallowed_tools: Vec<String>,
    /// A model to use when the main one is overloaded.
    #[arg(long, value_name = "MODEL")]
    pub fallback_model: Option<String>,
    /// The id the new session is to take.
    #[arg(long, value_name = "ID")]
    pub session_id: Option<String>,
    /// With --resume/--continue: continue in a new session.
    #[arg(long)]
    pub fork_session: bool,
    /// A settings file, or settings as inline JSON.
    #[arg(long, value_name = "FILE|JSON")]
    pub settings: Option<String>,
    /// More directories the tools may reach.
    #[arg(long = "add-dir", value_name = "DIR")]
    pub add_dir: Vec<PathBuf>,
    /// MCP servers: a file or inline JSON (`{"mcpServers":{…}}`).
    #[arg(long, value_name = "FILE|JSON")]
    pub mcp_config: Vec<String>,
    /// Only the servers of --mcp-config.
    #[arg(long)]
    pub strict_mcp_config: bool,
    /// Which settings to read: user, project, local (comma-separated).
    #[arg(long, value_name = "SOURCES")]
    pub setting_sources: Option<String>,
    /// A JSON Schema the final answer must match; it is returned as
    /// `structured_output`.
    #[arg(long, value_name = "SCHEMA")]
    pub json_schema: Option<String>,
    /// A thinking budget, mapped to kaji's reasoning levels.
    #[arg(long, value_name = "N")]
    pub max_thinking_tokens: Option<u64>,
    /// adaptive, enabled or disabled, mapped to kaji's reasoning levels.
    #[arg(long, value_name = "MODE")]
    pub thinking: Option<String>,
    /// How thinking is shown (summarized, omitted).
    #[arg(long, value_name = "MODE")]
    pub thinking_display: Option<String>,
    /// low, medium, high, xhigh or max, mapped to kaji's reasoning levels.
    #[arg(long, value_name = "LEVEL")]
    pub effort: Option<String>,
    /// A Claude Code plugin directory.
    #[arg(long = "plugin-dir", value_name = "DIR")]
    pub plugin_dir: Vec<PathBuf>,
    /// Anthropic beta headers.
    #[arg(long, value_name = "BETAS")]
    pub betas: Option<String>,
    /// The MCP tool (or `stdio`) that answers permission prompts.
    #[arg(long, value_name = "TOOL")]
    pub permission_prompt_tool: Option<String>,
    /// Hook events as system messages.
    #[arg(long)]
    pub include_hook_events: bool,
    /// Resume up to this message.
    #[arg(long, value_name = "UUID")]
    pub resume_session_at: Option<String>,
    /// Resume dropping this turn.
    #[arg(long, value_name = "UUID")]
    pub resume_drops_turn: Option<String>,
    /// Mirror the transcript to the SDK's session store.
    #[arg(long)]
    pub session_mirror: bool,
    /// A token budget the model is told of.
    #[arg(long, value_name = "TOKENS")]
    pub task_budget: Option<u64>,
    /// (TypeScript SDK) The agent type the main thread runs as.
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// (TypeScript SDK) Claude Code's debug logging.
    #[arg(long)]
    pub debug: bool,
    /// (TypeScript SDK) Claude Code's debug log file.
    #[arg(long, value_name = "FILE")]
    pub debug_file: Option<PathBuf>,
    /// (TypeScript SDK) How permission prompts are delivered.
    #[arg(long, value_name = "MODE")]
    pub permission_prompts: Option<String>,
    /// (TypeScript SDK) Message channels.
    #[arg(long, value_name = "CHANNEL")]
    pub channels: Vec<String>,
    /// (TypeScript SDK) Lets --permission-mode bypassPermissions be chosen
    /// (kaji always lets it).
    #[arg(long)]
    pub allow_dangerously_skip_permissions: bool,
    /// (TypeScript SDK) Where project settings are looked up.
    #[arg(long, value_name = "DIR")]
    pub project_config_root: Option<PathBuf>,
    /// (TypeScript SDK) Wait for the initialize request before starting
    /// (kaji always reads it before any prompt).
    #[arg(long)]
    pub await_initialize: bool,
    /// (TypeScript SDK) A plugin directory whose MCP servers are skipped.
    #[arg(long = "plugin-dir-no-mcp", value_name = "DIR")]
    pub plugin_dir_no_mcp: Vec<PathBuf>,
    /// (TypeScript SDK) Options sent in the initialize request instead.
    #[arg(long, value_name = "FIELDS")]
    pub initialize_fields: Option<String>,
    /// (TypeScript SDK) Managed settings, inline.
    #[arg(long, value_name = "JSON")]
    pub managed_settings: Option<String>,
    /// (TypeScript SDK) Managed settings sent in the initialize request.
    #[arg(long)]
    pub managed_settings_in_initialize: bool,
}

impl SdkArgs {
    /// Whether any of these flags was given (they need print mode).
    pub fn any(&self) -> bool {
        let d = Self::default();
        self.output_format.is_some()
            || self.input_format.is_some()
            || self.verbose
            || self.include_partial_messages
            || self.system_prompt.is_some()
            || self.append_system_prompt.is_some()
            || self.system_prompt_file.is_some()
            || self.append_system_prompt_file.is_some()
            || self.tools.is_some()
            || self.allowed_tools != d.allowed_tools
            || self.disallowed_tools != d.disallowed_tools
            || self.json_schema.is_some()
            || self.allow_dangerously_skip_permissions
            || self.await_initialize
            || !self.unhonoured().is_empty()
    }

    /// The flags kaji accepts but does not act on, each with why: they go
    /// into the `init` message's `kaji_warnings` and to standard error.
    pub fn unhonoured(&self) -> Vec<String> {
        let mut w = Vec::new();
        let mut note = |set: bool, flag: &str, why: &str| {
            if set {
                w.push(format!("{flag} is accepted but not honoured: {why}"));
            }
        };
        note(
            self.tools.as_deref().is_some_and(|t| t != "default"),
            "--tools",
            "the model gets all of kaji's tools (use --disallowedTools to refuse some)",
        );
        note(
            self.fallback_model.is_some(),
            "--fallback-model",
            "kaji retries the same model when it is overloaded; a fallback model is not supported yet",
        );
        note(
            !self.add_dir.is_empty(),
            "--add-dir",
            "kaji's permissions and kernel sandbox have one project root: reading elsewhere works already, but writes outside the project still ask and commands cannot write there",
        );
        note(
            self.strict_mcp_config,
            "--strict-mcp-config",
            "not supported yet",
        );
        note(
            self.thinking_display.is_some(),
            "--thinking-display",
            "thinking is always returned as kaji gets it",
        );
        note(
            !self.plugin_dir.is_empty(),
            "--plugin-dir",
            "kaji loads no Claude Code plugins; put a plugin's agents, commands and skills in .claude/agents, .claude/commands and .claude/skills, where kaji reads them",
        );
        note(self.betas.is_some(), "--betas", "not supported");
        note(
            self.permission_prompt_tool.as_deref().is_some_and(|t| {
                t != "stdio" || self.input_format != Some(InputFormat::StreamJson)
            }),
            "--permission-prompt-tool",
            "only `stdio` with --input-format stream-json is served (can_use_tool); other asks are denied in headless runs",
        );
        note(
            self.include_hook_events,
            "--include-hook-events",
            "not supported yet",
        );
        note(
            self.resume_session_at.is_some(),
            "--resume-session-at",
            "a resumed session goes on from its end",
        );
        note(
            self.resume_drops_turn.is_some(),
            "--resume-drops-turn",
            "a resumed session goes on from its end",
        );
        note(self.session_mirror, "--session-mirror", "not supported");
        note(
            self.task_budget.is_some(),
            "--task-budget",
            "not supported yet",
        );
        w
    }

    /// Puts the flags kaji honours into `agent`: allow and deny rules,
    /// Claude Code's permission modes, the reasoning level.
    pub fn apply(&self, agent: &mut AgentArgs) -> Result<(), UsageError> {
        agent
            .allow
            .extend(self.allowed_tools.iter().flat_map(|r| split_rules(r)));
        agent
            .deny
            .extend(self.disallowed_tools.iter().flat_map(|r| split_rules(r)));
        if let Some(mode) = &agent.permission_mode {
            // In these formats the values are Claude Code's: dontAsk denies
            // what no rule allows, as every headless kaji run does.
            let kaji = match mode.as_str() {
                "dontAsk" => "default",
                other => other,
            };
            agent.permission_mode = Some(kaji.to_string());
        }
        if agent.reasoning.is_none() {
            agent.reasoning = self.reasoning()?.map(str::to_string);
        }
        Ok(())
    }

    /// `--settings` (a file, or inline JSON in Claude Code's settings
    /// format): `permissions.allow`, `permissions.deny`,
    /// `permissions.defaultMode` and `model` go into `agent` (flags given
    /// beside them win); every other key is returned as a warning, named.
    pub fn apply_settings(&self, agent: &mut AgentArgs) -> Result<Vec<String>, UsageError> {
        let Some(given) = &self.settings else {
            return Ok(Vec::new());
        };
        let text = if given.trim_start().starts_with('{') {
            given.clone()
        } else {
            std::fs::read_to_string(given)
                .map_err(|e| UsageError(format!("--settings: cannot read {given}: {e}")))?
        };
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| UsageError(format!("--settings: not JSON: {e}")))?;
        let Some(map) = value.as_object() else {
            return Err(UsageError("--settings: not a JSON object".into()));
        };
        let strings =
            |v: Option<&serde_json::Value>, key: &str| -> Result<Vec<String>, UsageError> {
                match v {
                    None => Ok(Vec::new()),
                    Some(serde_json::Value::Array(items)) => items
                        .iter()
                        .map(|i| {
                            i.as_str().map(str::to_string).ok_or_else(|| {
                                UsageError(format!("--settings: {key} holds a non-string: {i}"))
                            })
                        })
                        .collect(),
                    Some(other) => Err(UsageError(format!(
                        "--settings: {key} is not a list: {other}"
                    ))),
                }
            };
        let mut ignored = Vec::new();
        for (key, v) in map {
            match key.as_str() {
                "model" => {
                    if agent.model.is_none() {
                        agent.model = v.as_str().map(str::to_string);
                    }
                }
                "permissions" => {
                    let Some(p) = v.as_object() else {
                        return Err(UsageError(
                            "--settings: permissions is not an object".into(),
                        ));
                    };
                    for (pk, pv) in p {
                        match pk.as_str() {
                            "allow" => agent.allow.extend(strings(Some(pv), "permissions.allow")?),
                            "deny" => agent.deny.extend(strings(Some(pv), "permissions.deny")?),
                            "defaultMode" => {
                                if agent.permission_mode.is_none() {
                                    agent.permission_mode = pv.as_str().map(str::to_string);
                                }
                            }
                            other => ignored.push(format!("permissions.{other}")),
                        }
                    }
                }
                other => ignored.push(other.to_string()),
            }
        }
        Ok(if ignored.is_empty() {
            Vec::new()
        } else {
            vec![format!(
                "--settings: {} accepted but not honoured (kaji honours model, permissions.allow, permissions.deny and permissions.defaultMode there; the rest belongs in kaji's settings files)",
                ignored.join(", ")
            )]
        })
    }

    /// The kaji reasoning level --effort, --thinking or
    /// --max-thinking-tokens ask for (in that order of precedence).
    fn reasoning(&self) -> Result<Option<&'static str>, UsageError> {
        if let Some(effort) = &self.effort {
            return match effort.as_str() {
                "low" => Ok(Some("low")),
                "medium" => Ok(Some("medium")),
                "high" | "xhigh" | "max" => Ok(Some("high")),
                other => Err(UsageError(format!(
                    "--effort: unknown level {other:?}: expected low, medium, high, xhigh or max"
                ))),
            };
        }
        if let Some(thinking) = &self.thinking {
            return match thinking.as_str() {
                "disabled" => Ok(Some("off")),
                "adaptive" | "enabled" => Ok(Some("medium")),
                other => Err(UsageError(format!(
                    "--thinking: unknown mode {other:?}: expected adaptive, enabled or disabled"
                ))),
            };
        }
        Ok(self.max_thinking_tokens.map(|n| match n {
            0 => "off",
            1..=7_999 => "low",
            8_000..=23_999 => "medium",
            _ => "high",
        }))
    }
}

/// The servers of `--mcp-config` (each a file or inline JSON,
/// `{"mcpServers": {…}}`): those kaji starts, and the names of the
/// program's own (`"type": "sdk"`), which it reaches over the control
/// protocol. A server that cannot be used is a warning.
pub struct McpConfig {
    /// Servers kaji starts.
    pub servers: std::collections::BTreeMap<String, kaji_mcp::McpServerConfig>,
    /// The program's own servers.
    pub sdk: Vec<String>,
    /// Servers skipped, with why.
    pub warnings: Vec<String>,
}

impl SdkArgs {
    /// The system prompt flags: `--system-prompt` (empty: kaji's own) or
    /// `--system-prompt-file` replace kaji's introduction;
    /// `--append-system-prompt` and `--append-system-prompt-file` add
    /// text at the end.
    pub fn custom_prompt(&self) -> Result<kaji_core::CustomPrompt, UsageError> {
        let read = |flag: &str, path: &PathBuf| {
            std::fs::read_to_string(path)
                .map_err(|e| UsageError(format!("{flag}: cannot read {}: {e}", path.display())))
        };
        let replace = match (&self.system_prompt, &self.system_prompt_file) {
            (Some(_), Some(_)) => {
                return Err(UsageError(
                    "--system-prompt and --system-prompt-file cannot be used together".into(),
                ));
            }
            (Some(p), None) => Some(p.clone()).filter(|p| !p.trim().is_empty()),
            (None, Some(path)) => Some(read("--system-prompt-file", path)?),
            (None, None) => None,
        };
        let mut append: Vec<String> = self.append_system_prompt.iter().cloned().collect();
        if let Some(path) = &self.append_system_prompt_file {
            append.push(read("--append-system-prompt-file", path)?);
        }
        append.retain(|a| !a.trim().is_empty());
        Ok(kaji_core::CustomPrompt {
            replace,
            append: (!append.is_empty()).then(|| append.join("\n\n")),
        })
    }

    /// `--session-id`: the id of the session this run creates, a UUID (as
    /// Claude Code's). With `--resume`/`--continue` it needs
    /// `--fork-session` (the resumed session keeps its id).
    pub fn new_session_id(&self, resuming: bool) -> Result<Option<String>, UsageError> {
        let Some(id) = &self.session_id else {
            return Ok(None);
        };
        let id = id.trim_start_matches('=').to_ascii_lowercase();
        if !is_uuid(&id) {
            return Err(UsageError(format!(
                "--session-id: {id:?} is not a UUID (8-4-4-4-12 hexadecimal digits)"
            )));
        }
        if resuming && !self.fork_session {
            return Err(UsageError(
                "--session-id with --resume or --continue needs --fork-session (a resumed session keeps its id)".into(),
            ));
        }
        Ok(Some(id))
    }

    /// Reads every `--mcp-config`.
    pub fn mcp_config(&self) -> Result<McpConfig, UsageError> {
        let mut out = McpConfig {
            servers: Default::default(),
            sdk: Vec::new(),
            warnings: Vec::new(),
        };
        for given in &self.mcp_config {
            let (text, path) = if given.trim_start().starts_with('{') {
                (given.clone(), PathBuf::from("--mcp-config"))
            } else {
                let path = PathBuf::from(given);
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    UsageError(format!("--mcp-config: cannot read {}: {e}", path.display()))
                })?;
                (text, path)
            };
            let mut value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                UsageError(format!("--mcp-config {}: not JSON: {e}", path.display()))
            })?;
            if let Some(servers) = value
                .get_mut("mcpServers")
                .and_then(serde_json::Value::as_object_mut)
            {
                servers.retain(|name, server| {
                    let sdk = server.get("type").and_then(serde_json::Value::as_str) == Some("sdk");
                    if sdk && !out.sdk.contains(name) {
                        out.sdk.push(name.clone());
                    }
                    !sdk
                });
            }
            let parsed = kaji_mcp::parse_mcp_json_servers(&value.to_string(), &path, &|name| {
                std::env::var(name).ok()
            })
            .map_err(|e| UsageError(format!("--mcp-config: {e}")))?;
            out.servers.extend(parsed.servers);
            out.warnings.extend(
                parsed
                    .skipped
                    .into_iter()
                    .map(|(name, e)| format!("--mcp-config: server {name:?} skipped: {e}")),
            );
        }
        Ok(out)
    }
}

fn is_uuid(id: &str) -> bool {
    let parts: Vec<&str> = id.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Claude Code's rule list: rules separated by commas or spaces outside
/// parentheses (`Read,Bash(git log:*) Edit`).
pub fn split_rules(list: &str) -> Vec<String> {
    let mut rules = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in list.chars() {
        match c {
            '(' => {
                depth += 1;
                current.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            ',' | ' ' if depth == 0 => {
                if !current.trim().is_empty() {
                    rules.push(current.trim().to_string());
                }
                current.clear();
            }
            _ => current.push(c),
        }
    }
    if !current.trim().is_empty() {
        rules.push(current.trim().to_string());
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_lists_split_outside_parentheses() {
        assert_eq!(
            split_rules("Read,Bash(git log:*) Edit(src/a, b.rs)"),
            ["Read", "Bash(git log:*)", "Edit(src/a, b.rs)"]
        );
        assert!(split_rules(" , ").is_empty());
    }

    #[test]
    fn thinking_flags_map_to_reasoning_levels() {
        let mut a = SdkArgs {
            max_thinking_tokens: Some(10_000),
            ..SdkArgs::default()
        };
        assert_eq!(a.reasoning().unwrap(), Some("medium"));
        a.thinking = Some("disabled".into());
        assert_eq!(a.reasoning().unwrap(), Some("off"));
        a.effort = Some("max".into());
        assert_eq!(a.reasoning().unwrap(), Some("high"));
        a.effort = Some("huge".into());
        assert!(a.reasoning().is_err());
    }
}
