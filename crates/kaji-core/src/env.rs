//! What kaji reads from the environment: the settings' environment
//! overrides a session is built with ([`StartupEnv`], read once, when its
//! [`crate::session::SessionBuilder`] is made, and passed down), and the
//! timeouts and polling intervals that tests shorten
//! ([`duration_from_env`]: `KAJI_MCP_CONNECT_WAIT_MS`,
//! `KAJI_HOOK_TIMEOUT_MS`, `KAJI_TEAMMATE_POLL_MS`). Reads only; a value
//! that does not parse is warned about and the default is used, never an
//! error. It never writes the environment.

use std::path::PathBuf;
use std::time::Duration;

/// The environment a session is built with, read in one place at start-up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartupEnv {
    /// `HOME`: the user's home (`~/.claude/skills`, `~/.claude/agents`; no
    /// checkpoints of the home directory itself).
    pub home: Option<PathBuf>,
    /// `KAJI_TASK_LIST_ID`: the task list's name, after `--task-list`.
    pub task_list_id: Option<String>,
    /// `KAJI_TASK_LIST_URL`: the task list's database; wins over the
    /// `task_list_url` setting.
    pub task_list_url: Option<String>,
    /// `KAJI_LEASE_MS`, when it is a positive number of milliseconds: it
    /// wins over the `lease_ms` setting.
    pub lease_ms: Option<u64>,
    /// `KAJI_AGENT_NAME`: the main agent's owner name, after `--name`.
    pub agent_name: Option<String>,
    /// `PATH`: where language servers' programs are looked up.
    pub path: Option<std::ffi::OsString>,
}

impl StartupEnv {
    /// How long a worker's lease lasts: `KAJI_LEASE_MS`, else the
    /// `lease_ms` setting, else 30 s.
    pub fn lease(&self, setting: Option<u64>) -> std::time::Duration {
        let ms = self
            .lease_ms
            .or(setting.filter(|ms| *ms > 0))
            .unwrap_or(kaji_tasks::list::pg::DEFAULT_LEASE_MS);
        std::time::Duration::from_millis(ms)
    }

    /// Reads the process's environment (empty values count as unset).
    pub fn read() -> Self {
        let text = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        Self {
            home: std::env::var_os("HOME").map(PathBuf::from),
            task_list_id: text(kaji_tasks::list::TASK_LIST_ID_ENV),
            task_list_url: text(kaji_tasks::list::pg::TASK_LIST_URL_ENV),
            lease_ms: text(kaji_tasks::list::pg::LEASE_MS_ENV)
                .and_then(|v| v.trim().parse().ok())
                .filter(|ms| *ms > 0),
            agent_name: text("KAJI_AGENT_NAME"),
            path: std::env::var_os("PATH"),
        }
    }
}

/// Milliseconds from the environment variable `name`, else `default`.
pub(crate) fn duration_from_env(name: &str, default: Duration) -> Duration {
    let Some(value) = std::env::var_os(name) else {
        return default;
    };
    match value.to_str().and_then(|v| v.trim().parse::<u64>().ok()) {
        Some(ms) => Duration::from_millis(ms),
        None => {
            tracing::warn!("{name}={value:?} is not a number of milliseconds; using {default:?}");
            default
        }
    }
}
