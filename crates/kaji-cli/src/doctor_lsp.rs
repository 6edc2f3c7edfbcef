//! `kaji doctor`'s language-server section: every server a session here
//! could start (built-in, settings, `.lsp.json` when the project is
//! trusted), where it came from and whether its program is found. Never
//! starts a server.

use std::path::Path;

use kaji_core::config::KajiConfig;
use serde_json::{Value, json};

/// The servers of a session started in `cwd`, and the problems with their
/// definitions.
pub struct LspCheck {
    servers: Vec<kaji_lsp::ServerStatus>,
    warnings: Vec<String>,
}

/// Looks at the settings (`None`: they could not be read; the defaults).
pub fn check(settings: Option<&KajiConfig>, kaji_home: &Path, cwd: &Path) -> LspCheck {
    let trusted = kaji_core::trust::is_trusted(kaji_home, cwd).unwrap_or(false);
    let fallback = KajiConfig::default();
    let (servers, warnings) = kaji_core::lsp::servers(settings.unwrap_or(&fallback), cwd, trusted);
    let path = std::env::var_os("PATH");
    LspCheck {
        servers: kaji_lsp::server_status(&servers, path.as_deref()),
        warnings,
    }
}

impl LspCheck {
    /// The `language_servers` value of `kaji doctor --json`.
    pub fn to_json(&self) -> Value {
        json!({
            "servers": self.servers.iter().map(|s| json!({
                "name": s.name,
                "source": s.source,
                "command": s.command,
                "extensions": s.extensions,
                "state": s.state,
            })).collect::<Vec<_>>(),
            "warnings": self.warnings,
        })
    }

    /// The text section.
    pub fn to_text(&self) -> String {
        let mut out = String::from("Language servers (docs/lsp.md)\n");
        for s in &self.servers {
            out.push_str(&format!(
                "  {} ({}): {} [{}] — {}\n",
                s.name,
                s.source,
                s.command,
                s.extensions.join(", "),
                s.state
            ));
        }
        for w in &self.warnings {
            out.push_str(&format!("  problem: {w}\n"));
        }
        out
    }
}
