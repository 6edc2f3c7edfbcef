//! The checks of `kaji doctor` that reach outside the machine or start
//! something: the provider (which one the settings select, whether its key
//! is set, whether its base URL answers), the configured MCP servers (each
//! started and asked for its tools, then stopped), and the terminal.
//!
//! It never prints or returns a key's value (only whether one is set), and
//! every wait is bounded: `KAJI_DOCTOR_TIMEOUT_MS` (default 5000) for the
//! provider, `KAJI_DOCTOR_MCP_WAIT_MS` (default 10000) for MCP servers.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use kaji_core::config::KajiConfig;
use kaji_llm::selection::{ConfigFile, SelectionFlags};
use kaji_llm::{ProviderConfig, ProviderKind};
use kaji_mcp::{McpManager, McpServerConfig, McpServerStatus};
use kaji_protocol::error_chain;
use serde_json::{Value, json};

fn millis_from_env(var: &str, default: u64) -> Duration {
    let ms = std::env::var(var)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .unwrap_or(default);
    Duration::from_millis(ms)
}

/// The provider the settings select, and whether it answered.
pub struct ProviderCheck {
    /// The selection, or why there is none (no key, a bad setting).
    pub selected: Result<ProviderConfig, String>,
    /// The answer of `GET <models URL>`: `Ok("HTTP 200")`, or why nothing
    /// came back. `None` when no provider was selected.
    pub answer: Option<Result<String, String>>,
}

/// Selects the provider as a session would (settings, environment) and
/// asks its base URL for the model list.
pub async fn provider(settings: Option<&KajiConfig>) -> ProviderCheck {
    let file = settings
        .map(|s| ConfigFile {
            path: s.sources().last().cloned(),
            provider: s.provider.clone(),
            model: s.model.clone(),
            base_url: s.base_url.clone(),
        })
        .unwrap_or_default();
    let env = |k: &str| std::env::var(k).ok();
    let selected = kaji_llm::selection::select(SelectionFlags::default(), &env, file)
        .await
        .map_err(|e| e.to_string());
    let answer = match &selected {
        Ok(config) => Some(ask_models(config).await),
        Err(_) => None,
    };
    ProviderCheck { selected, answer }
}

/// `GET` of the provider's model list, with its key: any HTTP answer
/// counts as answering (401 says the key was refused).
async fn ask_models(config: &ProviderConfig) -> Result<String, String> {
    let base = config.base_url.trim_end_matches('/');
    let url = match config.kind {
        ProviderKind::Anthropic => format!("{base}/v1/models"),
        ProviderKind::OpenAi | ProviderKind::OpenAiResponses => format!("{base}/models"),
    };
    let client = kaji_llm::tls::client_builder()
        .timeout(millis_from_env("KAJI_DOCTOR_TIMEOUT_MS", 5000))
        .build()
        .map_err(|e| e.to_string())?;
    let mut request = client.get(&url);
    request = match (config.kind, &config.auth_token, &config.api_key) {
        (ProviderKind::Anthropic, Some(token), _) => request.bearer_auth(token),
        (ProviderKind::Anthropic, None, Some(key)) => request.header("x-api-key", key),
        (_, _, Some(key)) => request.bearer_auth(key),
        _ => request,
    };
    if config.kind == ProviderKind::Anthropic {
        request = request.header("anthropic-version", "2023-06-01");
    }
    match request.send().await {
        Ok(reply) => {
            let status = reply.status();
            let note = match status.as_u16() {
                401 | 403 => " (the key was refused)",
                _ => "",
            };
            Ok(format!("HTTP {}{note}", status.as_u16()))
        }
        Err(e) if e.is_timeout() => Err(format!("{url}: no answer in time")),
        Err(e) => Err(format!("{url}: {}", error_chain(&e))),
    }
}

impl ProviderCheck {
    /// What is broken about the provider, if anything: none selected, no
    /// answer, or its key refused.
    pub fn broken(&self) -> Option<String> {
        match (&self.selected, &self.answer) {
            (Err(e), _) => Some(format!("no provider: {e}")),
            (Ok(_), Some(Err(e))) => Some(format!("the provider does not answer: {e}")),
            (Ok(_), Some(Ok(a))) if a.contains("refused") => {
                Some(format!("the provider refused the key: {a}"))
            }
            _ => None,
        }
    }

    /// The JSON of `provider` in `kaji doctor --json`.
    pub fn to_json(&self) -> Value {
        match &self.selected {
            Ok(c) => json!({
                "kind": c.kind.as_str(),
                "model": c.model,
                "base_url": c.base_url,
                "key_set": c.api_key.is_some() || c.auth_token.is_some(),
                "answers": self.answer.as_ref().is_some_and(|a| a.is_ok()),
                "answer": self.answer.as_ref().and_then(|a| a.as_ref().ok()),
                "error": self.answer.as_ref().and_then(|a| a.as_ref().err()),
            }),
            Err(e) => json!({ "error": e }),
        }
    }

    /// The lines of `kaji doctor`.
    pub fn to_text(&self) -> String {
        match &self.selected {
            Ok(c) => {
                let key = if c.api_key.is_some() || c.auth_token.is_some() {
                    "set"
                } else {
                    "NOT set"
                };
                let answer = match &self.answer {
                    Some(Ok(a)) => format!("answers ({a})"),
                    Some(Err(e)) => format!("does NOT answer: {e}"),
                    None => String::new(),
                };
                format!(
                    "Provider\n  {} · model {} · {}\n  key: {key}\n  {answer}\n",
                    c.kind, c.model, c.base_url
                )
            }
            Err(e) => format!("Provider\n  none selected: {e}\n"),
        }
    }
}

/// One MCP server and how it stands after starting it.
pub struct McpCheck {
    /// Its name in the settings.
    pub name: String,
    /// `connected`, `failed`, `disabled` or `connecting` (still, at the
    /// end of the wait).
    pub status: &'static str,
    /// The number of tools, when connected; why, when failed.
    pub detail: String,
}

/// Starts the configured servers in `cwd`, waits for them, notes each
/// one's status and stops them.
pub async fn mcp(servers: BTreeMap<String, McpServerConfig>, cwd: &Path) -> Vec<McpCheck> {
    if servers.is_empty() {
        return Vec::new();
    }
    let manager = McpManager::start(servers, cwd);
    manager
        .wait_ready(millis_from_env("KAJI_DOCTOR_MCP_WAIT_MS", 10_000))
        .await;
    let reports = manager.status();
    manager.shutdown().await;
    reports
        .into_iter()
        .map(|r| {
            let (status, detail) = match r.status {
                McpServerStatus::Disabled => ("disabled", String::new()),
                McpServerStatus::Stopped => ("stopped", String::new()),
                McpServerStatus::Connecting => ("connecting", "no answer in time".into()),
                McpServerStatus::Connected { tools } => {
                    ("connected", format!("{} tool(s)", tools.len()))
                }
                McpServerStatus::Failed { why, .. } => ("failed", why),
            };
            McpCheck {
                name: r.name,
                status,
                detail,
            }
        })
        .collect()
}

/// The JSON of `mcp_servers` in `kaji doctor --json`.
pub fn mcp_json(checks: &[McpCheck]) -> Value {
    json!(
        checks
            .iter()
            .map(|c| json!({ "name": c.name, "status": c.status, "detail": c.detail }))
            .collect::<Vec<_>>()
    )
}

/// The lines of `kaji doctor` for MCP servers.
pub fn mcp_text(checks: &[McpCheck]) -> String {
    let mut out = String::from("MCP servers\n");
    if checks.is_empty() {
        out.push_str("  none configured\n");
    }
    for c in checks {
        out.push_str(&format!("  {}: {} {}\n", c.name, c.status, c.detail));
    }
    out
}

/// What kaji knows of the terminal.
pub struct TerminalCheck {
    /// `$TERM`.
    pub term: Option<String>,
    /// `$COLORTERM` (`truecolor` for 24-bit colour).
    pub colorterm: Option<String>,
    /// Whether standard output is a terminal.
    pub stdout_is_terminal: bool,
    /// Columns and rows, when it is one.
    pub size: Option<(u16, u16)>,
}

/// Looks at the terminal (only reads).
pub fn terminal() -> TerminalCheck {
    use std::io::IsTerminal;
    let stdout_is_terminal = std::io::stdout().is_terminal();
    TerminalCheck {
        term: std::env::var("TERM").ok(),
        colorterm: std::env::var("COLORTERM").ok(),
        stdout_is_terminal,
        size: stdout_is_terminal
            .then(crossterm::terminal::size)
            .and_then(Result::ok),
    }
}

impl TerminalCheck {
    /// The JSON of `terminal` in `kaji doctor --json`.
    pub fn to_json(&self) -> Value {
        json!({
            "term": self.term,
            "colorterm": self.colorterm,
            "stdout_is_terminal": self.stdout_is_terminal,
            "columns": self.size.map(|s| s.0),
            "rows": self.size.map(|s| s.1),
        })
    }

    /// The lines of `kaji doctor`.
    pub fn to_text(&self) -> String {
        let size = match self.size {
            Some((w, h)) => format!(", {w}×{h}"),
            None => String::new(),
        };
        let tui = if self.stdout_is_terminal {
            "kaji tui can run here"
        } else {
            "not a terminal: kaji tui cannot run here, kaji exec can"
        };
        format!(
            "Terminal\n  TERM={} COLORTERM={}{size}\n  stdout is a terminal: {} ({tui})\n",
            self.term.as_deref().unwrap_or("(unset)"),
            self.colorterm.as_deref().unwrap_or("(unset)"),
            if self.stdout_is_terminal { "yes" } else { "no" },
        )
    }
}
