//! One live connection to one MCP server: starting it (a child process in
//! its own process group, or an HTTP session), the MCP handshake, and the
//! watcher task that notices when it ends and kills what is left.
//!
//! A connection never outlives its [`Connection`] handle: dropping the
//! handle cancels the watcher, which closes the session and kills the
//! server's whole process group.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kaji_tasks::process::{GroupChild, SpawnOptions, spawn_in_group_with};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::config::{McpServerConfig, McpTransportConfig};
use crate::jsonrpc::{Notification, Peer};
use crate::model::Tool as McpToolDef;
use crate::stderr::StderrTail;
use crate::transport::{Link, http, stdio};

/// How long the watcher waits, after the server process died, for the rest
/// of its stderr to arrive (a grandchild that escaped the group may hold
/// the pipe open forever).
const STDERR_DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// How long closing a transport may take (an HTTP session's `DELETE`).
const CLOSE_LIMIT: Duration = Duration::from_secs(2);

/// A running MCP session plus the process behind it.
pub(crate) struct Connection {
    /// Sends requests to the server.
    pub peer: Peer,
    /// The server's tools: listed right after the handshake, listed again
    /// whenever the server says its list changed.
    pub tools: SharedTools,
    /// Whether the server announced resources.
    pub has_resources: bool,
    /// Which connect attempt of the server this is.
    pub generation: u64,
    /// The server's stderr (empty for HTTP servers).
    pub stderr: StderrTail,
    /// `Some(reason)` once the connection has ended.
    pub ended: watch::Receiver<Option<String>>,
    /// Set before `stop` is cancelled when kaji abandons the server (a
    /// hung call); the watcher then reports it as failed with this reason.
    pub abandon_reason: Mutex<Option<String>>,
    /// Stops the watcher (and with it the server).
    pub stop: CancellationToken,
    /// The watcher task, taken by a shutdown that waits for it.
    pub watcher: Mutex<Option<JoinHandle<()>>>,
    _stop_on_drop: DropGuard,
}

impl Connection {
    /// Stops the server because it misbehaved; the watcher marks the
    /// server failed with `reason`.
    pub fn abandon(&self, reason: String) {
        *self
            .abandon_reason
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(reason);
        self.stop.cancel();
    }

    /// Waits (up to `limit`) until the connection has ended and returns why.
    pub async fn ended_reason(&self, limit: Duration) -> Option<String> {
        let mut ended = self.ended.clone();
        let wait = ended.wait_for(Option::is_some);
        match tokio::time::timeout(limit, wait).await {
            Ok(Ok(reason)) => reason.clone(),
            _ => None,
        }
    }
}

/// What the watcher reports when a connection ends by itself.
pub(crate) struct Ended {
    /// The attempt that ended.
    pub generation: u64,
    /// Why.
    pub reason: String,
}

/// A connection that finished its handshake, before its watcher runs.
pub(crate) struct Started {
    server: String,
    link: Link,
    child: Option<GroupChild>,
    stderr_task: Option<JoinHandle<()>>,
    tools: SharedTools,
    has_resources: bool,
}

/// Why a start failed, with the server's stderr so far.
pub(crate) struct StartError {
    pub reason: String,
}

/// A server's current tool list, shared with the task that refreshes it.
#[derive(Debug, Clone)]
pub(crate) struct SharedTools(Arc<watch::Sender<Vec<McpToolDef>>>);

impl Default for SharedTools {
    fn default() -> Self {
        Self(Arc::new(watch::Sender::new(Vec::new())))
    }
}

impl SharedTools {
    /// The current list.
    pub fn get(&self) -> Vec<McpToolDef> {
        self.0.borrow().clone()
    }

    fn set(&self, tools: Vec<McpToolDef>) {
        self.0.send_replace(tools);
    }

    /// Follows changes of the list.
    #[cfg(test)]
    fn subscribe(&self) -> watch::Receiver<Vec<McpToolDef>> {
        self.0.subscribe()
    }
}

/// Lists the tools again whenever the server says they changed (each
/// listing in a task of its own), until the connection ends.
fn follow_tool_changes(
    server: String,
    peer: Peer,
    tools: SharedTools,
    mut notifications: mpsc::UnboundedReceiver<Notification>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let notification = tokio::select! {
                _ = peer.closed().cancelled() => return,
                notification = notifications.recv() => notification,
            };
            let Some(notification) = notification else {
                return;
            };
            if notification.method != "notifications/tools/list_changed" {
                continue; // kaji follows no other notification
            }
            let (peer, tools, server) = (peer.clone(), tools.clone(), server.clone());
            tokio::spawn(async move {
                match peer.list_all_tools().await {
                    Ok(list) => {
                        tracing::info!(server = %server, tools = list.len(), "MCP server changed its tools");
                        tools.set(list);
                    }
                    Err(e) => {
                        tracing::warn!(server = %server, "listing the changed tools failed: {e}")
                    }
                }
            });
        }
    })
}

/// Starts the server and performs the handshake and the first tool listing.
/// Not bounded in time: the caller applies the start-up limit (dropping the
/// future kills the process group).
pub(crate) async fn start(
    name: &str,
    config: &McpServerConfig,
    task_cwd: &Path,
    stderr: &StderrTail,
    env_policy: &std::sync::Arc<kaji_tasks::process::EnvPolicy>,
) -> Result<Started, StartError> {
    match &config.transport {
        McpTransportConfig::Stdio {
            command, args, env, ..
        } => {
            let cwd = config.transport.resolved_cwd(task_cwd);
            start_stdio(name, command, args, env, &cwd, stderr, env_policy).await
        }
        McpTransportConfig::Http { url, headers } => start_http(name, url, headers).await,
    }
}

async fn start_stdio(
    name: &str,
    command: &str,
    args: &[String],
    env: &std::collections::BTreeMap<String, String>,
    cwd: &Path,
    stderr: &StderrTail,
    env_policy: &std::sync::Arc<kaji_tasks::process::EnvPolicy>,
) -> Result<Started, StartError> {
    if !cwd.is_dir() {
        return Err(StartError {
            reason: format!("its working directory {} does not exist", cwd.display()),
        });
    }
    let program = if command.contains('/') {
        cwd.join(command)
    } else {
        command.into()
    };
    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(args)
        .envs(env)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let options = SpawnOptions::default().with_env(std::sync::Arc::clone(env_policy));
    let mut child = spawn_in_group_with(cmd, &options).map_err(|e| StartError {
        reason: format!("cannot start `{command}`: {e}"),
    })?;
    let pipes = (
        child.child_mut().stdout.take(),
        child.child_mut().stdin.take(),
        child.child_mut().stderr.take(),
    );
    let (Some(stdout), Some(stdin), Some(child_stderr)) = pipes else {
        return Err(StartError {
            reason: "the server's stdio pipes could not be opened".to_string(),
        });
    };
    let stderr_task = tokio::spawn(stderr.clone().collect(name.to_string(), child_stderr));

    let link = stdio::connect(name, stdout, stdin);
    let handshake = async {
        let announced = handshake(&link, "the MCP handshake failed").await?;
        let tools = list_tools(&link, &announced).await?;
        Ok::<_, String>((tools, announced.resources))
    };
    match handshake.await {
        Ok((tools, has_resources)) => Ok(Started {
            server: name.to_string(),
            link,
            child: Some(child),
            stderr_task: Some(stderr_task),
            tools,
            has_resources,
        }),
        Err(why) => {
            // Kill whatever is left and say how the process ended.
            let reason = match child.kill_now().await {
                // It ended by itself: that is the news, not the broken pipe.
                Ok(status) if status.code().is_some() => {
                    format!("the server exited ({status}) before finishing the MCP handshake")
                }
                _ => why,
            };
            let _ = tokio::time::timeout(STDERR_DRAIN_LIMIT, stderr_task).await;
            Err(StartError { reason })
        }
    }
}

async fn start_http(
    name: &str,
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<Started, StartError> {
    let mut link = http::connect(name, url, headers).map_err(|reason| StartError { reason })?;
    let connected = format!("cannot connect to {url}");
    let announced = handshake(&link, &connected)
        .await
        .map_err(|reason| StartError { reason })?;
    let tools = list_tools(&link, &announced)
        .await
        .map_err(|reason| StartError { reason })?;
    let has_resources = announced.resources;
    if let Some(listening) = link.http.as_ref().and_then(|http| http.listen()) {
        link.add_task(listening);
    }
    Ok(Started {
        server: name.to_string(),
        link,
        child: None,
        stderr_task: None,
        tools,
        has_resources,
    })
}

/// What a server announced in the handshake.
struct Announced {
    tools: bool,
    resources: bool,
}

/// The MCP handshake. `failed` starts its error.
async fn handshake(link: &Link, failed: &str) -> Result<Announced, String> {
    let info = link
        .peer
        .initialize()
        .await
        .map_err(|e| format!("{failed}: {e}"))?;
    if let Some(http) = &link.http {
        http.set_protocol_version(&info.protocol_version);
    }
    Ok(Announced {
        tools: info.capabilities.tools.is_some(),
        resources: info.capabilities.resources.is_some(),
    })
}

/// Lists the tools of a server that announced the tools capability.
async fn list_tools(link: &Link, announced: &Announced) -> Result<SharedTools, String> {
    let shared = SharedTools::default();
    if !announced.tools {
        return Ok(shared);
    }
    let tools = link
        .peer
        .list_all_tools()
        .await
        .map_err(|e| format!("listing its tools failed: {e}"))?;
    shared.set(tools);
    Ok(shared)
}

/// Why a connection's watcher woke up.
enum Why {
    /// kaji stopped it.
    Stopped,
    /// The MCP session ended (the server closed its end).
    SessionEnded,
    /// The server process exited.
    Exited(std::process::ExitStatus),
    /// Waiting for the process failed.
    WaitFailed(std::io::Error),
}

impl Why {
    /// What requests still waiting are told.
    fn close_reason(&self) -> &'static str {
        match self {
            Self::Stopped => "kaji stopped the server",
            Self::SessionEnded => "the server closed the connection",
            Self::Exited(_) | Self::WaitFailed(_) => "the server process ended",
        }
    }

    /// The reason reported to the manager (`None`: kaji stopped it and
    /// gave no reason). `final_status` is how the process group ended
    /// after the watcher shut it down; `abandoned` the reason kaji gave
    /// when it stopped the server.
    fn reason(
        self,
        final_status: Option<std::process::ExitStatus>,
        abandoned: Option<String>,
    ) -> Option<String> {
        match self {
            Self::Stopped => abandoned,
            Self::Exited(status) => Some(format!("the server process ended ({status})")),
            Self::SessionEnded => Some(match final_status {
                // Its stdout closed because it exited by itself.
                Some(status) if status.code().is_some() => {
                    format!("the server process ended ({status})")
                }
                Some(_) => {
                    "the server closed the connection, so kaji stopped its process".to_string()
                }
                None => "the server closed the connection".to_string(),
            }),
            Self::WaitFailed(e) => Some(format!("waiting for the server process failed: {e}")),
        }
    }
}

/// Waits until kaji stops the connection, the MCP session ends or the
/// server process exits, whichever comes first.
async fn wait_for_end(
    stop: &CancellationToken,
    peer: &Peer,
    child: &mut Option<GroupChild>,
) -> Why {
    let session = peer.closed().cancelled();
    let exit = async {
        match child.as_mut() {
            Some(child) => child.wait().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = stop.cancelled() => Why::Stopped,
        _ = session => Why::SessionEnded,
        status = exit => match status {
            Ok(status) => Why::Exited(status),
            Err(e) => Why::WaitFailed(e),
        },
    }
}

/// Turns a started server into a [`Connection`], spawning its watcher. When
/// the connection ends by itself (process exit, closed session, abandoned),
/// `on_end` is called once with why.
pub(crate) fn watch(
    started: Started,
    generation: u64,
    stderr: StderrTail,
    kill_grace: Duration,
    on_end: impl FnOnce(Ended) + Send + 'static,
) -> std::sync::Arc<Connection> {
    let Started {
        server,
        mut link,
        child,
        stderr_task,
        tools,
        has_resources,
    } = started;
    let peer = link.peer.clone();
    if let Some(notifications) = link.notifications.take() {
        let follower = follow_tool_changes(server, peer.clone(), tools.clone(), notifications);
        link.add_task(follower);
    }
    let stop = CancellationToken::new();
    let (ended_tx, ended_rx) = watch::channel(None);
    let connection = std::sync::Arc::new(Connection {
        peer,
        tools,
        has_resources,
        generation,
        stderr,
        ended: ended_rx,
        abandon_reason: Mutex::new(None),
        stop: stop.clone(),
        watcher: Mutex::new(None),
        _stop_on_drop: stop.clone().drop_guard(),
    });
    let weak = std::sync::Arc::downgrade(&connection);
    let handle = tokio::spawn(async move {
        let mut child = child;
        let why = wait_for_end(&stop, &link.peer, &mut child).await;
        // Close the session (and with it the server's stdin), then end the
        // whole process group.
        link.close(why.close_reason(), CLOSE_LIMIT).await;
        let final_status = match child.as_mut() {
            Some(child) => child.shutdown(kill_grace).await.ok(),
            None => None,
        };
        if let Some(task) = stderr_task {
            let _ = tokio::time::timeout(STDERR_DRAIN_LIMIT, task).await;
        }
        let abandoned = weak.upgrade().and_then(|c| {
            c.abandon_reason
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
        });
        let reason = why.reason(final_status, abandoned);
        // Report to the manager first, so that whoever waits on `ended`
        // finds the server already marked failed.
        let shown = reason
            .clone()
            .unwrap_or_else(|| "stopped by kaji".to_string());
        if let Some(reason) = reason {
            on_end(Ended { generation, reason });
        }
        let _ = ended_tx.send(Some(shown));
    });
    *connection.watcher.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
    connection
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    #[tokio::test]
    async fn a_changed_tool_list_is_listed_again() {
        let (kaji, server) = tokio::io::duplex(64 * 1024);
        let (kaji_read, kaji_write) = tokio::io::split(kaji);
        let (server_read, mut server_write) = tokio::io::split(server);
        let mut lines = BufReader::new(server_read).lines();
        let tools = SharedTools::default();
        let started = Started {
            server: "fake".to_string(),
            link: stdio::connect("fake", kaji_read, kaji_write),
            child: None,
            stderr_task: None,
            tools: tools.clone(),
            has_resources: false,
        };
        let mut changes = tools.subscribe();
        let conn = watch(started, 1, StderrTail::new(), Duration::ZERO, |_| {});
        let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
        server_write
            .write_all(format!("{changed}\n").as_bytes())
            .await
            .unwrap();
        let line = lines.next_line().await.unwrap().unwrap();
        let request: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(request["method"], "tools/list");
        let reply = json!({"jsonrpc": "2.0", "id": request["id"],
            "result": {"tools": [{"name": "new", "inputSchema": {}}]}});
        server_write
            .write_all(format!("{reply}\n").as_bytes())
            .await
            .unwrap();
        changes.changed().await.unwrap();
        assert_eq!(conn.tools.get()[0].name, "new");
    }
}
