//! [`McpManager`]: every configured MCP server of a session, started in the
//! background, watched, restarted on next use after a failure, and stopped
//! together.
//!
//! The manager never blocks its caller on a server: [`McpManager::start`]
//! returns at once, [`McpManager::wait_ready`] waits only as long as asked,
//! and a server that is down makes calls to it fail fast with the reason
//! (and its stderr tail) until its restart back-off has passed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::config::McpServerConfig;
use crate::connection::{self, Connection, Ended};
use crate::content;
use crate::error::McpError;
use crate::jsonrpc::RequestError;
use crate::model::{JsonObject, Tool as McpToolDef};
use crate::names;
use crate::stderr::StderrTail;

mod switch;

/// How long a failed call waits for the connection's watcher to report why
/// the server went away (so the message can carry the whole stderr tail).
const END_REPORT_LIMIT: Duration = Duration::from_secs(3);

/// One server tool as offered to the model: see
/// [`McpManager::offered_tools`].
pub(crate) struct OfferedTool {
    /// The server it belongs to.
    pub server: String,
    /// Its qualified name, unique among the offered tools.
    pub name: &'static str,
    /// The server's definition.
    pub def: McpToolDef,
}

/// Tunables of an [`McpManager`]; the defaults suit kaji.
#[derive(Debug, Clone)]
pub struct McpManagerOptions {
    /// Wait before the first restart of a failed server (default 1 s); it
    /// doubles with each consecutive failure.
    pub restart_backoff_initial: Duration,
    /// Longest wait between restarts (default 60 s).
    pub restart_backoff_max: Duration,
    /// Time a stopped server gets between `SIGTERM` and `SIGKILL` (default
    /// 2 s).
    pub kill_grace: Duration,
    /// The session's child-process environment policy: which of kaji's
    /// variables the servers do not inherit (default: the built-in
    /// secret names).
    pub env_policy: std::sync::Arc<kaji_tasks::process::EnvPolicy>,
}

impl Default for McpManagerOptions {
    fn default() -> Self {
        Self {
            restart_backoff_initial: Duration::from_secs(1),
            restart_backoff_max: Duration::from_secs(60),
            kill_grace: kaji_tasks::process::DEFAULT_KILL_GRACE,
            env_policy: std::sync::Arc::default(),
        }
    }
}

impl McpManagerOptions {
    /// The wait before restarting after `failures` consecutive failures.
    pub fn backoff(&self, failures: u32) -> Duration {
        let exponent = failures.saturating_sub(1).min(20);
        self.restart_backoff_initial
            .saturating_mul(1u32 << exponent)
            .min(self.restart_backoff_max)
    }
}

/// Where one server stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum McpServerStatus {
    /// `enabled = false`: never started.
    Disabled,
    /// Starting, or restarting.
    Connecting,
    /// Connected; these are its tools.
    Connected {
        /// Its tools, in the server's order.
        tools: Vec<McpToolInfo>,
    },
    /// Down: it failed to start, crashed, or hung.
    Failed {
        /// Why, naming what happened.
        why: String,
        /// The last lines it wrote to stderr.
        stderr_tail: String,
    },
    /// [`McpManager::shutdown`] has run.
    Stopped,
}

/// One tool of a connected server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpToolInfo {
    /// The server's own name for it.
    pub name: String,
    /// The name kaji offers it under (`mcp__<server>__<tool>`).
    pub qualified_name: String,
    /// Its description.
    pub description: String,
}

/// A server's name, transport and status, as reported by
/// [`McpManager::status`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpServerReport {
    /// The `<name>` of `[mcp_servers.<name>]`.
    pub name: String,
    /// `"stdio"` or `"http"`.
    pub transport: &'static str,
    /// Where it stands.
    pub status: McpServerStatus,
}

/// A server that is down, as reported by [`McpManager::failures`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpFailure {
    /// The `<name>` of `[mcp_servers.<name>]`.
    pub name: String,
    /// Why it is down, naming what happened.
    pub why: String,
    /// The last lines it wrote to stderr (may be empty).
    pub stderr_tail: String,
}

/// A resource a server offers, as listed by
/// [`McpManager::list_resources`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpResourceInfo {
    /// The server offering it.
    pub server: String,
    /// Its URI (or URI template, for templates).
    pub uri: String,
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: Option<String>,
    /// Its MIME type.
    pub mime_type: Option<String>,
    /// Whether `uri` is a URI template (RFC 6570) rather than a URI.
    pub template: bool,
}

/// The outcome of a tool call that reached the server.
#[derive(Debug, Clone, PartialEq)]
pub struct McpCallOutput {
    /// The result as text (images and other binary content as
    /// placeholders, see [`crate::content`]).
    pub text: String,
    /// Whether the server flagged the result as an error (`isError`).
    pub is_error: bool,
    /// The tool's structured result, if it gave one.
    pub structured: Option<Value>,
    /// Its PNG, JPEG, GIF and WebP images, passed to the model as images
    /// (each also has its placeholder in `text`).
    pub images: Vec<kaji_tools::ToolImage>,
}

/// Every MCP server of a session. Cheap to clone (an `Arc` inside); all
/// clones share the same servers.
///
/// Dropping the last clone (including the tools from
/// [`McpManager::tools`], which hold one) stops every server; call
/// [`McpManager::shutdown`] to stop them and wait until they are gone.
#[derive(Clone)]
pub struct McpManager {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for McpManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpManager")
            .field("servers", &self.inner.servers.keys().collect::<Vec<_>>())
            .finish()
    }
}

struct Inner {
    servers: BTreeMap<String, Arc<Server>>,
    /// The runtime the manager was started on; background work is spawned
    /// there even when a method is called from elsewhere.
    runtime: tokio::runtime::Handle,
    cwd: PathBuf,
    options: McpManagerOptions,
    changed: Arc<watch::Sender<u64>>,
    /// Connect attempts that may still run, awaited by shutdown.
    connecting: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    shutdown: CancellationToken,
    _shutdown_on_drop: DropGuard,
}

struct Server {
    name: String,
    config: McpServerConfig,
    state: Mutex<ServerState>,
}

struct ServerState {
    phase: Phase,
    /// Consecutive failures; reset by a successful request.
    failures: u32,
    /// Counts connect attempts, so late reports of old attempts are ignored.
    generation: u64,
    /// The tools of the last successful connection, still offered while the
    /// server is down so that using one restarts it.
    last_tools: Vec<McpToolDef>,
}

enum Phase {
    Disabled,
    Connecting,
    Connected(Arc<Connection>),
    Failed {
        why: String,
        stderr_tail: String,
        retry_at: Instant,
    },
    Stopped,
}

impl Server {
    fn lock(&self) -> MutexGuard<'_, ServerState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl McpManager {
    /// Starts every enabled server in the background and returns at once.
    /// `cwd` is the task's working directory: stdio servers run there
    /// unless their `cwd` says otherwise.
    ///
    /// Must be called within a Tokio runtime (it panics otherwise, like
    /// `tokio::spawn`); the servers' background work runs on that runtime.
    pub fn start(servers: BTreeMap<String, McpServerConfig>, cwd: impl Into<PathBuf>) -> Self {
        Self::start_with_options(servers, cwd, McpManagerOptions::default())
    }

    /// [`McpManager::start`] with explicit options (tests use zero back-off).
    pub fn start_with_options(
        servers: BTreeMap<String, McpServerConfig>,
        cwd: impl Into<PathBuf>,
        options: McpManagerOptions,
    ) -> Self {
        let shutdown = CancellationToken::new();
        let (changed, _) = watch::channel(0);
        let inner = Arc::new(Inner {
            servers: servers
                .into_iter()
                .map(|(name, config)| {
                    let phase = if config.enabled {
                        Phase::Connecting
                    } else {
                        Phase::Disabled
                    };
                    let server = Server {
                        name: name.clone(),
                        config,
                        state: Mutex::new(ServerState {
                            phase,
                            failures: 0,
                            generation: 0,
                            last_tools: Vec::new(),
                        }),
                    };
                    (name, Arc::new(server))
                })
                .collect(),
            cwd: cwd.into(),
            runtime: tokio::runtime::Handle::current(),
            options,
            changed: Arc::new(changed),
            connecting: Mutex::new(Vec::new()),
            _shutdown_on_drop: shutdown.clone().drop_guard(),
            shutdown,
        });
        for server in inner.servers.values() {
            let mut state = server.lock();
            if matches!(state.phase, Phase::Connecting) {
                inner.spawn_connect(server, &mut state);
            }
        }
        Self { inner }
    }

    /// Names of every configured server, enabled or not, in order.
    pub fn server_names(&self) -> Vec<String> {
        self.inner.servers.keys().cloned().collect()
    }

    /// Waits up to `timeout` for servers still connecting. Returns the
    /// names of those that were still connecting when the time ran out
    /// (they go on connecting in the background); they are also logged.
    pub async fn wait_ready(&self, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut changed = self.inner.changed.subscribe();
            let connecting = self.connecting_servers();
            if connecting.is_empty() {
                return connecting;
            }
            tokio::select! {
                _ = changed.changed() => {}
                _ = tokio::time::sleep_until(deadline) => {
                    let connecting = self.connecting_servers();
                    if !connecting.is_empty() {
                        tracing::warn!(
                            servers = %connecting.join(", "),
                            "MCP servers still connecting after {:.1} s; going on without them",
                            timeout.as_secs_f64()
                        );
                    }
                    return connecting;
                }
            }
        }
    }

    /// The server still connecting whose tools `tool_name` (as offered to
    /// the model, `mcp__<server>__<tool>`) would be one of, if any.
    pub fn connecting_server_of(&self, tool_name: &str) -> Option<String> {
        self.connecting_servers().into_iter().find(|server| {
            let prefix = format!(
                "{}{}__",
                crate::names::MCP_TOOL_PREFIX,
                crate::names::sanitize(server)
            );
            tool_name.starts_with(&prefix)
        })
    }

    fn connecting_servers(&self) -> Vec<String> {
        self.inner
            .servers
            .values()
            .filter(|s| matches!(s.lock().phase, Phase::Connecting))
            .map(|s| s.name.clone())
            .collect()
    }

    /// Every server's status, in name order.
    pub fn status(&self) -> Vec<McpServerReport> {
        self.inner
            .servers
            .values()
            .map(|server| {
                let state = server.lock();
                let status = match &state.phase {
                    Phase::Disabled => McpServerStatus::Disabled,
                    Phase::Connecting => McpServerStatus::Connecting,
                    Phase::Connected(conn) => McpServerStatus::Connected {
                        tools: conn
                            .tools
                            .get()
                            .iter()
                            .map(|t| McpToolInfo {
                                name: t.name.to_string(),
                                qualified_name: names::qualified_tool_name(&server.name, &t.name),
                                description: description_of(t),
                            })
                            .collect(),
                    },
                    Phase::Failed {
                        why, stderr_tail, ..
                    } => McpServerStatus::Failed {
                        why: why.clone(),
                        stderr_tail: stderr_tail.clone(),
                    },
                    Phase::Stopped => McpServerStatus::Stopped,
                };
                McpServerReport {
                    name: server.name.clone(),
                    transport: server.config.transport.kind(),
                    status,
                }
            })
            .collect()
    }

    /// The enabled servers that are down (failed to start, crashed or
    /// hung), in name order, with why: what a front end warns about after
    /// [`McpManager::wait_ready`]. Servers still connecting are not in it
    /// (`wait_ready` returns those).
    pub fn failures(&self) -> Vec<McpFailure> {
        self.status()
            .into_iter()
            .filter_map(|report| match report.status {
                McpServerStatus::Failed { why, stderr_tail } => Some(McpFailure {
                    name: report.name,
                    why,
                    stderr_tail,
                }),
                _ => None,
            })
            .collect()
    }

    /// The server tools to offer the model, each with its server and a
    /// qualified name (`mcp__<server>__<tool>`) unique among them; the
    /// kaji tools are made of them by [`McpManager::tools`].
    ///
    /// A server that went down after connecting keeps its last tools here,
    /// so that calling one restarts it (or reports why it is down); a
    /// failed server whose back-off has passed is restarted in the
    /// background by this call. A server that connected since the last call
    /// has its tools in this one.
    pub(crate) fn offered_tools(&self) -> Vec<OfferedTool> {
        let mut offered = Vec::new();
        let mut taken = BTreeSet::new();
        let now = Instant::now();
        for server in self.inner.servers.values() {
            let mut state = server.lock();
            if let Phase::Failed { retry_at, .. } = &state.phase
                && *retry_at <= now
                && !self.inner.shutdown.is_cancelled()
            {
                self.inner.spawn_connect(server, &mut state);
            }
            let defs = match &state.phase {
                Phase::Connected(conn) => conn.tools.get(),
                Phase::Failed { .. } | Phase::Connecting => state.last_tools.clone(),
                Phase::Disabled | Phase::Stopped => Vec::new(),
            };
            drop(state);
            for def in defs {
                let mut qualified = names::qualified_tool_name(&server.name, &def.name);
                let mut n = 2;
                while taken.contains(&qualified) {
                    let suffix = format!("_{n}");
                    let keep = qualified.len().min(names::MAX_TOOL_NAME_LEN - suffix.len());
                    qualified = format!("{}{suffix}", &qualified[..keep]);
                    n += 1;
                }
                taken.insert(qualified.clone());
                offered.push(OfferedTool {
                    server: server.name.clone(),
                    name: names::intern(&qualified),
                    def,
                });
            }
        }
        offered
    }

    /// Whether any server is enabled (then the resource tools are offered).
    pub(crate) fn any_enabled(&self) -> bool {
        self.inner.servers.values().any(|s| s.config.enabled)
    }

    /// Calls `tool` of `server` with `arguments` (a JSON object, or null for
    /// none), within the server's `timeout`.
    ///
    /// A server that is down fails fast with why (restarting it first when
    /// its back-off has passed). A result the server flags with `isError` is
    /// returned as `Ok` with `is_error` set. A call that times out makes
    /// kaji stop the server (it is restarted on next use) and returns
    /// [`McpError::Timeout`].
    pub async fn call_tool(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
        cancel: &CancellationToken,
    ) -> Result<McpCallOutput, McpError> {
        let srv = self.inner.server(server)?;
        let operation = format!("the call to tool `{tool}`");
        let arguments = match arguments {
            Value::Null => None,
            Value::Object(map) => Some(map as JsonObject),
            other => {
                return Err(McpError::Server {
                    server: server.to_string(),
                    operation,
                    message: format!("tool arguments must be a JSON object, not {other}"),
                });
            }
        };
        let deadline = Instant::now() + srv.config.timeout();
        // No check against the listed tools: the server may have added
        // some since, and it answers unknown names itself.
        let conn = self.inner.connection(&srv, deadline, cancel).await?;
        let result = self
            .inner
            .request(
                &srv,
                &conn,
                &operation,
                deadline,
                cancel,
                conn.peer.call_tool(tool, arguments),
            )
            .await?;
        Ok(McpCallOutput {
            text: content::call_result_text(&result),
            is_error: result.is_error.unwrap_or(false),
            structured: result.structured_content.clone(),
            images: content::call_result_images(&result),
        })
    }

    /// Lists the resources (and resource templates) of `server`, or of
    /// every connected server when `None`. A named server that is down is
    /// restarted (after its back-off) or fails fast; with `None`, servers
    /// that are not connected, or fail to answer, are skipped.
    pub async fn list_resources(
        &self,
        server: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Vec<McpResourceInfo>, McpError> {
        let targets = self.resource_targets(server, cancel).await?;
        let mut resources = Vec::new();
        for (srv, conn) in targets {
            if !conn.has_resources {
                continue;
            }
            let deadline = Instant::now() + srv.config.timeout();
            let listed = self
                .inner
                .request(
                    &srv,
                    &conn,
                    "listing resources",
                    deadline,
                    cancel,
                    conn.peer.list_all_resources(),
                )
                .await;
            let listed = match listed {
                Ok(listed) => listed,
                // Asked for one server: its failure is the answer.
                Err(e) if server.is_some() => return Err(e),
                // Listing every server: one failing server hides nothing else.
                Err(McpError::Cancelled) => return Err(McpError::Cancelled),
                Err(e) => {
                    tracing::warn!(server = %srv.name, "listing resources failed: {e}");
                    continue;
                }
            };
            resources.extend(listed.into_iter().map(|r| McpResourceInfo {
                server: srv.name.clone(),
                uri: r.uri.clone(),
                name: r.name.clone(),
                description: r.description.clone(),
                mime_type: r.mime_type.clone(),
                template: false,
            }));
            resources.extend(self.templates(&srv, &conn, deadline, cancel).await);
        }
        Ok(resources)
    }

    /// The servers whose resources are listed, with their connections:
    /// the one named (connected first, or its failure), else every
    /// connected server.
    async fn resource_targets(
        &self,
        server: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Vec<(Arc<Server>, Arc<Connection>)>, McpError> {
        let Some(name) = server else {
            return Ok(self
                .inner
                .servers
                .values()
                .filter_map(|s| match &s.lock().phase {
                    Phase::Connected(conn) => Some((s.clone(), conn.clone())),
                    _ => None,
                })
                .collect());
        };
        let srv = self.inner.server(name)?;
        let deadline = Instant::now() + srv.config.timeout();
        let conn = self.inner.connection(&srv, deadline, cancel).await?;
        Ok(vec![(srv, conn)])
    }

    /// The resource templates of one server. Templates are optional: a
    /// server without them may answer with "method not found", so any
    /// failure gives none.
    async fn templates(
        &self,
        srv: &Arc<Server>,
        conn: &Arc<Connection>,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Vec<McpResourceInfo> {
        let templates = self
            .inner
            .request(
                srv,
                conn,
                "listing resource templates",
                deadline,
                cancel,
                conn.peer.list_all_resource_templates(),
            )
            .await;
        let Ok(templates) = templates else {
            return Vec::new();
        };
        templates
            .into_iter()
            .map(|t| McpResourceInfo {
                server: srv.name.clone(),
                uri: t.uri_template.clone(),
                name: t.name.clone(),
                description: t.description.clone(),
                mime_type: t.mime_type.clone(),
                template: true,
            })
            .collect()
    }

    /// Reads the resource `uri` of `server` and returns it as text (binary
    /// contents as placeholders).
    pub async fn read_resource(
        &self,
        server: &str,
        uri: &str,
        cancel: &CancellationToken,
    ) -> Result<String, McpError> {
        let srv = self.inner.server(server)?;
        let deadline = Instant::now() + srv.config.timeout();
        let conn = self.inner.connection(&srv, deadline, cancel).await?;
        let operation = format!("reading resource `{uri}`");
        let result = self
            .inner
            .request(
                &srv,
                &conn,
                &operation,
                deadline,
                cancel,
                conn.peer.read_resource(uri),
            )
            .await?;
        Ok(content::read_result_text(&result))
    }

    /// Stops every server and waits until their processes are gone (each
    /// gets [`McpManagerOptions::kill_grace`] after `SIGTERM`). Servers
    /// still connecting are killed at once. Later calls fail with
    /// [`McpError::ShutDown`].
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        let mut watchers = Vec::new();
        for server in self.inner.servers.values() {
            let mut state = server.lock();
            let old = std::mem::replace(&mut state.phase, Phase::Stopped);
            if let Phase::Connected(conn) = old {
                conn.stop.cancel();
                if let Some(handle) = conn
                    .watcher
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take()
                {
                    watchers.push(handle);
                }
            }
        }
        self.inner.notify();
        // Connect attempts end at the cancellation, killing what they started.
        let connecting = std::mem::take(
            &mut *self
                .inner
                .connecting
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        futures::future::join_all(connecting).await;
        futures::future::join_all(watchers).await;
    }

    /// The working directory servers are started in by default.
    pub fn cwd(&self) -> &Path {
        &self.inner.cwd
    }
}

impl Inner {
    fn notify(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn server(&self, name: &str) -> Result<Arc<Server>, McpError> {
        self.servers
            .get(name)
            .cloned()
            .ok_or_else(|| McpError::UnknownServer {
                server: name.to_string(),
                known: self.servers.keys().cloned().collect(),
            })
    }

    /// Starts a connect attempt; the state becomes `Connecting`.
    fn spawn_connect(&self, server: &Arc<Server>, state: &mut ServerState) {
        state.generation += 1;
        state.phase = Phase::Connecting;
        let generation = state.generation;
        let server = server.clone();
        let changed = self.changed.clone();
        let cwd = self.cwd.clone();
        let options = self.options.clone();
        let shutdown = self.shutdown.clone();
        let task = self.runtime.spawn(async move {
            let stderr = StderrTail::new();
            let limit = server.config.startup_timeout();
            let attempt = tokio::time::timeout(
                limit,
                connection::start(
                    &server.name,
                    &server.config,
                    &cwd,
                    &stderr,
                    &options.env_policy,
                ),
            );
            let outcome = tokio::select! {
                _ = shutdown.cancelled() => return,
                outcome = attempt => outcome,
            };
            let started = match outcome {
                Ok(Ok(started)) => Ok(started),
                Ok(Err(e)) => Err(e.reason),
                Err(_) => Err(format!(
                    "it did not finish starting within {} s",
                    limit.as_secs()
                )),
            };
            let mut state = server.lock();
            if state.generation != generation || !matches!(state.phase, Phase::Connecting) {
                return; // superseded or shut down; dropping `started` kills it
            }
            match started {
                Ok(started) => {
                    let weak = Arc::downgrade(&server);
                    let on_end_changed = changed.clone();
                    let conn = connection::watch(
                        started,
                        generation,
                        stderr,
                        options.kill_grace,
                        move |ended| {
                            if let Some(server) = weak.upgrade() {
                                server.connection_ended(ended, &options);
                                on_end_changed.send_modify(|n| *n = n.wrapping_add(1));
                            }
                        },
                    );
                    tracing::info!(server = %server.name, tools = conn.tools.get().len(), "MCP server connected");
                    state.last_tools = conn.tools.get();
                    state.phase = Phase::Connected(conn);
                }
                Err(why) => {
                    state.failures += 1;
                    let retry_at = Instant::now() + options.backoff(state.failures);
                    tracing::warn!(server = %server.name, "MCP server failed to start: {why}");
                    state.phase = Phase::Failed {
                        why,
                        stderr_tail: stderr.text(),
                        retry_at,
                    };
                }
            }
            drop(state);
            changed.send_modify(|n| *n = n.wrapping_add(1));
        });
        let mut connecting = self.connecting.lock().unwrap_or_else(|p| p.into_inner());
        connecting.retain(|t| !t.is_finished());
        connecting.push(task);
    }

    /// The live connection of `server`: at once when connected; after
    /// waiting when connecting; after one restart when it failed and its
    /// back-off has passed; otherwise an error saying why it is down.
    async fn connection(
        &self,
        server: &Arc<Server>,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<Arc<Connection>, McpError> {
        let mut restarted = false;
        loop {
            let mut changed = self.changed.subscribe();
            {
                let mut state = server.lock();
                let now = Instant::now();
                match &state.phase {
                    Phase::Disabled => {
                        return Err(McpError::Disabled {
                            server: server.name.clone(),
                        });
                    }
                    Phase::Stopped => return Err(McpError::ShutDown),
                    Phase::Connected(conn) => return Ok(conn.clone()),
                    Phase::Connecting => {}
                    Phase::Failed {
                        why,
                        stderr_tail,
                        retry_at,
                    } => {
                        if restarted || *retry_at > now || self.shutdown.is_cancelled() {
                            return Err(McpError::Unavailable {
                                server: server.name.clone(),
                                reason: why.clone(),
                                stderr_tail: stderr_tail.clone(),
                                retry_in: (!restarted)
                                    .then(|| retry_at.saturating_duration_since(now)),
                            });
                        }
                        tracing::info!(server = %server.name, "restarting MCP server");
                        restarted = true;
                        self.spawn_connect(server, &mut state);
                    }
                }
            }
            tokio::select! {
                _ = changed.changed() => {}
                _ = tokio::time::sleep_until(deadline) => {
                    return Err(McpError::StillConnecting { server: server.name.clone() });
                }
                _ = cancel.cancelled() => return Err(McpError::Cancelled),
            }
        }
    }

    /// Runs one request on `conn`, bounded by `deadline` and `cancel`, and
    /// turns failures into [`McpError`]s: a broken connection marks the
    /// server failed, a timeout stops it.
    async fn request<T>(
        &self,
        server: &Arc<Server>,
        conn: &Arc<Connection>,
        operation: &str,
        deadline: Instant,
        cancel: &CancellationToken,
        request: impl Future<Output = Result<T, RequestError>>,
    ) -> Result<T, McpError> {
        let result = tokio::select! {
            result = request => result,
            _ = tokio::time::sleep_until(deadline) => {
                let limit = server.config.timeout();
                conn.abandon(format!(
                    "it did not answer {operation} within {} s, so kaji stopped it",
                    limit.as_secs()
                ));
                // Return once the server is down and marked failed, so the
                // next use sees it (bounded: the kill itself is bounded).
                conn.ended_reason(self.options.kill_grace + END_REPORT_LIMIT).await;
                return Err(McpError::Timeout {
                    server: server.name.clone(),
                    operation: operation.to_string(),
                    timeout: limit,
                });
            }
            _ = cancel.cancelled() => return Err(McpError::Cancelled),
        };
        match result {
            Ok(value) => {
                server.lock().failures = 0;
                Ok(value)
            }
            Err(RequestError::Server { message, .. }) => Err(McpError::Server {
                server: server.name.clone(),
                operation: operation.to_string(),
                message,
            }),
            Err(e)
                if matches!(e, RequestError::Closed(_))
                    || conn.peer.is_closed()
                    || conn.ended.borrow().is_some() =>
            {
                // Let the watcher finish so the reason and stderr are whole.
                let reason = conn
                    .ended_reason(END_REPORT_LIMIT)
                    .await
                    .unwrap_or_else(|| e.to_string());
                if conn.ended.borrow().is_none() {
                    conn.abandon(format!("{operation} failed: {e}"));
                }
                Err(McpError::ConnectionLost {
                    server: server.name.clone(),
                    operation: operation.to_string(),
                    reason,
                    stderr_tail: conn.stderr.text(),
                })
            }
            Err(e) => Err(McpError::Server {
                server: server.name.clone(),
                operation: operation.to_string(),
                message: e.to_string(),
            }),
        }
    }
}

impl Server {
    /// The watcher's report that a connection ended by itself.
    fn connection_ended(&self, ended: Ended, options: &McpManagerOptions) {
        let mut state = self.lock();
        let current =
            matches!(&state.phase, Phase::Connected(c) if c.generation == ended.generation);
        if !current {
            return;
        }
        let (stderr_tail, tools) = match &state.phase {
            Phase::Connected(c) => (c.stderr.text(), c.tools.get()),
            _ => (String::new(), Vec::new()),
        };
        state.last_tools = tools;
        state.failures += 1;
        let retry_at = Instant::now() + options.backoff(state.failures);
        tracing::warn!(server = %self.name, "MCP server went away: {}", ended.reason);
        state.phase = Phase::Failed {
            why: ended.reason,
            stderr_tail,
            retry_at,
        };
    }
}

/// A tool's description, falling back to its title and then to a generic
/// line.
pub(crate) fn description_of(tool: &McpToolDef) -> String {
    tool.description
        .as_deref()
        .map(str::to_string)
        .or_else(|| tool.title.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let options = McpManagerOptions::default();
        assert_eq!(options.backoff(1), Duration::from_secs(1));
        assert_eq!(options.backoff(2), Duration::from_secs(2));
        assert_eq!(options.backoff(3), Duration::from_secs(4));
        assert_eq!(options.backoff(10), Duration::from_secs(60));
        assert_eq!(options.backoff(u32::MAX), Duration::from_secs(60));
        let zero = McpManagerOptions {
            restart_backoff_initial: Duration::ZERO,
            ..McpManagerOptions::default()
        };
        assert_eq!(zero.backoff(5), Duration::ZERO);
    }
}
