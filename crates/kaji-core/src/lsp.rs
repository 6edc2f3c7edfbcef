//! Which language servers a session may start: kaji's built-in defaults,
//! the `[lsp.<name>]` settings and, in trusted projects, Claude Code's
//! `.lsp.json` — and the session's pool of them.
//!
//! Project-defined servers run code the project chose: an untrusted
//! project's `[lsp]` tables are stripped by the settings loader and its
//! `.lsp.json` is never read here. This module never starts a server.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kaji_lsp::{LspPool, LspSettings, ServerConfig, config};

use crate::config::KajiConfig;

/// The servers of `settings` for `project_dir`, and what was wrong with
/// the definitions (one warning each, naming the file or table).
pub fn servers(
    settings: &KajiConfig,
    project_dir: &Path,
    trusted: bool,
) -> (Vec<ServerConfig>, Vec<String>) {
    let mut servers = config::builtin_servers();
    let mut warnings = Vec::new();
    if trusted && let Err(e) = config::add_lsp_json(&mut servers, project_dir) {
        warnings.push(format!("language servers: {e}; the file was not used"));
    }
    warnings.extend(config::apply_settings(&mut servers, &settings.lsp));
    (servers, warnings)
}

/// The session's pool: `servers`, waiting `lsp_wait_ms` for diagnostics,
/// programs looked up on `path`, processes started with `env`.
pub fn pool(
    servers: Vec<ServerConfig>,
    settings: &KajiConfig,
    path: Option<std::ffi::OsString>,
    env: Arc<kaji_tasks::process::EnvPolicy>,
) -> Arc<LspPool> {
    let wait = Duration::from_millis(settings.lsp_wait_ms.unwrap_or(config::DEFAULT_WAIT_MS));
    Arc::new(LspPool::new(
        LspSettings {
            servers,
            wait,
            path,
        },
        env,
    ))
}
