//! The session's language servers: one per (server, root), started on
//! first use, shared by every Task and sub-agent of the session, ended
//! with it.
//!
//! Every public call here is bounded: a server that is missing, slow to
//! start, hung, crashed or writing garbage costs a caller at most the wait
//! it asked for, and the answer then says why nothing came. A server is
//! started in a task of its own, so a caller that gives up does not kill a
//! start that is merely slow (the next edit finds it ready).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kaji_tasks::process::EnvPolicy;
use serde_json::Value;
use tokio::sync::watch;

use crate::config::{ServerConfig, ServerSource, on_path};
use crate::connection::Connection;
use crate::diagnostics::Diagnostic;

/// How long a server may take to start and answer `initialize`.
const START_LIMIT: Duration = Duration::from_secs(120);
/// How often one (server, root) is started again after it died.
const MAX_RESTARTS: u32 = 2;

/// What the pool is built from.
#[derive(Debug, Clone)]
pub struct LspSettings {
    /// The servers, in order of preference per extension.
    pub servers: Vec<ServerConfig>,
    /// How long an edit waits for diagnostics (each of the baseline and
    /// the result).
    pub wait: Duration,
    /// The `PATH` programs are looked up on (read once at start-up).
    pub path: Option<OsString>,
}

type StartResult = Option<Result<Arc<Connection>, String>>;

struct Slot {
    ready: watch::Receiver<StartResult>,
    restarts: u32,
}

/// The state of one configured server, for `kaji doctor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    /// Its name.
    pub name: String,
    /// Where it was defined (`built-in`, `settings`, `.lsp.json`).
    pub source: &'static str,
    /// Its program as configured.
    pub command: String,
    /// The extensions it serves.
    pub extensions: Vec<String>,
    /// `disabled`, `not found`, `available at <path>`.
    pub state: String,
}

/// The diagnostics of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileDiagnostics {
    /// No server serves the file's extension (nothing to report).
    NoServer,
    /// A server serves it but gave nothing in time; why.
    Unavailable {
        /// The server.
        server: String,
        /// Why.
        reason: String,
    },
    /// What the server published for the file's text.
    Ready {
        /// The server.
        server: String,
        /// Its diagnostics.
        diagnostics: Vec<Diagnostic>,
    },
}

/// The session's servers: see the module docs.
pub struct LspPool {
    settings: LspSettings,
    env: Arc<EnvPolicy>,
    slots: Mutex<HashMap<(String, PathBuf), Slot>>,
    /// Set when the pool shuts down or is dropped: starts under way stop
    /// (and their processes are killed).
    closed: watch::Sender<bool>,
}

impl Drop for LspPool {
    fn drop(&mut self) {
        self.closed.send_replace(true);
    }
}

impl std::fmt::Debug for LspPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LspPool")
            .field("servers", &self.settings.servers.len())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl LspPool {
    /// A pool of `settings`' servers whose processes get `env`.
    pub fn new(settings: LspSettings, env: Arc<EnvPolicy>) -> Self {
        Self {
            settings,
            env,
            slots: Mutex::new(HashMap::new()),
            closed: watch::Sender::new(false),
        }
    }

    /// How long an edit waits for diagnostics.
    pub fn wait(&self) -> Duration {
        self.settings.wait
    }

    /// Every configured server and its state.
    pub fn status(&self) -> Vec<ServerStatus> {
        server_status(&self.settings.servers, self.settings.path.as_deref())
    }

    /// The server for `path`: the first enabled one serving its extension
    /// whose program exists, with the program and the language id.
    fn server_for(&self, path: &Path) -> Option<(&ServerConfig, PathBuf, String)> {
        self.settings
            .servers
            .iter()
            .filter(|s| !s.disabled)
            .filter_map(|s| s.language_of(path).map(|l| (s, l.to_string())))
            .find_map(|(s, l)| {
                on_path(&s.command, self.settings.path.as_deref()).map(|p| (s, p, l))
            })
    }

    /// Whether some configured server serves `path`'s extension, program
    /// found or not.
    pub fn serves(&self, path: &Path) -> Option<String> {
        self.settings
            .servers
            .iter()
            .find(|s| !s.disabled && s.language_of(path).is_some())
            .map(|s| s.name.clone())
    }

    /// The running connection for `config` at `root`, started if need be;
    /// waits at most `limit`.
    async fn connection(
        &self,
        config: &ServerConfig,
        program: &Path,
        root: &Path,
        limit: Duration,
    ) -> Result<Arc<Connection>, String> {
        let mut ready = self.slot(config, program, root);
        let waited = tokio::time::timeout(limit, ready.wait_for(Option::is_some)).await;
        match waited {
            Err(_) => Err(format!(
                "{} did not start within {} ms",
                config.name,
                limit.as_millis()
            )),
            Ok(Err(_)) => Err(format!("{} could not be started", config.name)),
            Ok(Ok(state)) => match state.as_ref() {
                Some(Ok(conn)) => Ok(Arc::clone(conn)),
                Some(Err(e)) => Err(e.clone()),
                None => Err(format!("{} could not be started", config.name)),
            },
        }
    }

    /// The slot of (`config`, `root`): a start under way or done. A dead
    /// connection is started again, at most [`MAX_RESTARTS`] times.
    fn slot(
        &self,
        config: &ServerConfig,
        program: &Path,
        root: &Path,
    ) -> watch::Receiver<StartResult> {
        let key = (config.name.clone(), root.to_path_buf());
        let mut slots = lock(&self.slots);
        let restarts = match slots.get(&key) {
            Some(slot) => {
                let dead = match &*slot.ready.borrow() {
                    Some(Ok(conn)) => conn.dead().is_some(),
                    _ => false,
                };
                if !dead || slot.restarts >= MAX_RESTARTS {
                    return slot.ready.clone();
                }
                slot.restarts + 1
            }
            None => 0,
        };
        let (tx, rx) = watch::channel(None);
        let (config, program, root_dir, env) = (
            config.clone(),
            program.to_path_buf(),
            root.to_path_buf(),
            Arc::clone(&self.env),
        );
        let mut closed = self.closed.subscribe();
        tokio::spawn(async move {
            let start = Connection::start(&config, &program, &root_dir, env);
            let result = tokio::select! {
                r = tokio::time::timeout(START_LIMIT, start) => match r {
                    Ok(Ok(conn)) => Ok(Arc::new(conn)),
                    Ok(Err(e)) => Err(format!("{}: {e}", config.name)),
                    Err(_) => Err(format!("{} did not answer `initialize`", config.name)),
                },
                // Dropping the start kills its process group.
                _ = closed.wait_for(|c| *c) => Err("the session ended".to_string()),
            };
            let _ = tx.send(Some(result));
        });
        slots.insert(
            key,
            Slot {
                ready: rx.clone(),
                restarts,
            },
        );
        rx
    }

    /// The diagnostics the file's server publishes for `text` as the
    /// content of `path` (absolute), in the workspace `root`; waits at most
    /// [`LspPool::wait`] in all.
    pub async fn diagnostics(&self, path: &Path, root: &Path, text: &str) -> FileDiagnostics {
        if self.serves(path).is_none() {
            return FileDiagnostics::NoServer;
        }
        let Some((config, program, language)) = self.server_for(path) else {
            // A built-in default that is not installed is no server at all;
            // one the user or project configured is missing.
            let configured = self.settings.servers.iter().find(|s| {
                !s.disabled && s.source != ServerSource::Builtin && s.language_of(path).is_some()
            });
            let Some(configured) = configured else {
                return FileDiagnostics::NoServer;
            };
            return FileDiagnostics::Unavailable {
                server: configured.name.clone(),
                reason: "its program is not installed (not found on PATH)".into(),
            };
        };
        let server = config.name.clone();
        let wait = self.settings.wait;
        let deadline = tokio::time::Instant::now() + wait;
        let work = async {
            let conn = self.connection(config, &program, root, wait).await?;
            let (version, seq) = conn.sync(path, &language, text);
            conn.diagnostics(path, version, seq, deadline).await
        };
        // A little past the deadline: a settling server's latest publish
        // (cut at the deadline) is still taken.
        match tokio::time::timeout_at(deadline + Duration::from_millis(100), work).await {
            Ok(Ok(diagnostics)) => FileDiagnostics::Ready {
                server,
                diagnostics,
            },
            // A built-in default that cannot even start (a rustup proxy
            // without its component) counts as not installed: no note on
            // every edit. `kaji doctor` shows it.
            Ok(Err(_))
                if config.source == ServerSource::Builtin && self.start_failed(config, root) =>
            {
                FileDiagnostics::NoServer
            }
            Ok(Err(reason)) => FileDiagnostics::Unavailable { server, reason },
            Err(_) => FileDiagnostics::Unavailable {
                server,
                reason: format!("no answer within {} ms", wait.as_millis()),
            },
        }
    }

    /// Whether the last start of `config` at `root` failed (before
    /// `initialize` was answered).
    fn start_failed(&self, config: &ServerConfig, root: &Path) -> bool {
        let key = (config.name.clone(), root.to_path_buf());
        lock(&self.slots)
            .get(&key)
            .is_some_and(|slot| matches!(&*slot.ready.borrow(), Some(Err(_))))
    }

    /// Sends `method` for the document `path` (absolute) with `text` as
    /// its content, in the workspace `root`. `params` gets the document's
    /// `textDocument` added. Waits at most `limit`.
    pub async fn request(
        &self,
        path: &Path,
        root: &Path,
        text: &str,
        method: &str,
        mut params: Value,
        limit: Duration,
    ) -> Result<Value, String> {
        let Some((config, program, language)) = self.server_for(path) else {
            return Err(match self.serves(path) {
                Some(name) => {
                    format!("the language server {name} is not installed (not found on PATH)")
                }
                None => format!("no language server is configured for {}", path.display()),
            });
        };
        let work = async {
            let conn = self.connection(config, &program, root, limit).await?;
            conn.sync(path, &language, text);
            if let Value::Object(map) = &mut params {
                map.insert(
                    "textDocument".into(),
                    serde_json::json!({"uri": crate::uri::path_to_uri(path)}),
                );
            }
            conn.request(method, params).await
        };
        tokio::time::timeout(limit, work).await.map_err(|_| {
            format!(
                "{} gave no answer within {} s",
                config.name,
                limit.as_secs()
            )
        })?
    }

    /// Like [`LspPool::request`] for a follow-up that names no document
    /// (`callHierarchy/incomingCalls`), on the server of `path`.
    pub async fn follow_up(
        &self,
        path: &Path,
        root: &Path,
        method: &str,
        params: Value,
        limit: Duration,
    ) -> Result<Value, String> {
        let (config, program, _) = self.server_for(path).ok_or("no language server")?;
        let work = async {
            let conn = self.connection(config, &program, root, limit).await?;
            conn.request(method, params).await
        };
        tokio::time::timeout(limit, work).await.map_err(|_| {
            format!(
                "{} gave no answer within {} s",
                config.name,
                limit.as_secs()
            )
        })?
    }

    /// Shuts every server down (politely, then by signal).
    pub async fn shutdown(&self) {
        self.closed.send_replace(true);
        let conns: Vec<Arc<Connection>> = lock(&self.slots)
            .drain()
            .filter_map(|(_, slot)| match &*slot.ready.borrow() {
                Some(Ok(c)) => Some(Arc::clone(c)),
                _ => None,
            })
            .collect();
        for conn in conns {
            conn.shutdown().await;
        }
    }
}

/// Every server of `servers` and its state, programs looked up on `path`.
pub fn server_status(
    servers: &[ServerConfig],
    path: Option<&std::ffi::OsStr>,
) -> Vec<ServerStatus> {
    servers
        .iter()
        .map(|s| ServerStatus {
            name: s.name.clone(),
            source: s.source.label(),
            command: s.command.clone(),
            extensions: s.languages.keys().cloned().collect(),
            state: if s.disabled {
                "disabled".into()
            } else {
                match on_path(&s.command, path) {
                    Some(p) => format!("available at {}", p.display()),
                    None => "not found".into(),
                }
            },
        })
        .collect()
}
