//! One running language server: its process, a writer task, a reader task,
//! requests waiting for answers and the diagnostics it published.
//!
//! The reader never blocks on the rest of kaji: it answers the server's
//! own requests at once, keeps only the latest diagnostics per document
//! (a flood overwrites, never queues) and, at the end of the stream or on
//! garbage, marks the connection dead and fails every waiting request.
//! Nothing here waits without a bound chosen by the caller.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use kaji_tasks::process::{EnvPolicy, GroupChild, SpawnOptions, spawn_in_group_with};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::ServerConfig;
use crate::diagnostics::Diagnostic;
use crate::framing::{frame, read_message};
use crate::uri::path_to_uri;

/// How long a server that does not version its diagnostics must stay
/// quiet before its latest publish is taken as complete.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(200);

/// The most diagnostics kept for one document.
const MAX_DIAGNOSTICS: usize = 1000;

/// The diagnostics last published for a document.
#[derive(Debug, Clone, Default)]
pub(crate) struct Published {
    /// The publish's place in the connection's event sequence.
    pub seq: u64,
    /// The document version they are for, when the server says.
    pub version: Option<i64>,
    /// The diagnostics.
    pub diagnostics: Vec<Diagnostic>,
}

type Reply = oneshot::Sender<Result<Value, String>>;

#[derive(Default)]
struct Shared {
    pending: Mutex<HashMap<i64, Reply>>,
    published: Mutex<HashMap<String, Published>>,
    dead: Mutex<Option<String>>,
}

/// A running server.
pub(crate) struct Connection {
    out: mpsc::UnboundedSender<Vec<u8>>,
    shared: Arc<Shared>,
    events: watch::Receiver<u64>,
    next_id: AtomicI64,
    /// The open documents and their versions.
    docs: Mutex<HashMap<String, i64>>,
    /// The server's `capabilities`.
    pub capabilities: Value,
    child: Mutex<Option<GroupChild>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Connection {
    /// Starts `config`'s server for `root` and initializes it. The caller
    /// bounds how long this may take.
    pub async fn start(
        config: &ServerConfig,
        program: &Path,
        root: &Path,
        env: Arc<EnvPolicy>,
    ) -> Result<Connection, String> {
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(&config.args)
            .envs(&config.env)
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let options = SpawnOptions::default().with_env(env);
        let mut child = spawn_in_group_with(cmd, &options)
            .map_err(|e| format!("{} could not be started: {e}", config.command))?;
        let stdin = child.child_mut().stdin.take().ok_or("no stdin")?;
        let stdout = child.child_mut().stdout.take().ok_or("no stdout")?;
        let (out, out_rx) = mpsc::unbounded_channel();
        let (events_tx, events) = watch::channel(0u64);
        let shared = Arc::new(Shared::default());
        tokio::spawn(write_loop(stdin, out_rx));
        tokio::spawn(read_loop(
            stdout,
            Arc::clone(&shared),
            events_tx,
            out.clone(),
        ));
        let mut conn = Connection {
            out,
            shared,
            events,
            next_id: AtomicI64::new(1),
            docs: Mutex::new(HashMap::new()),
            capabilities: Value::Null,
            child: Mutex::new(Some(child)),
        };
        let mut params = initialize_params(root);
        if !config.initialization_options.is_null() {
            params["initializationOptions"] = config.initialization_options.clone();
        }
        let result = conn.request("initialize", params).await?;
        conn.capabilities = result.get("capabilities").cloned().unwrap_or(Value::Null);
        conn.notify("initialized", json!({}));
        Ok(conn)
    }

    /// Why the connection is dead, if it is.
    pub fn dead(&self) -> Option<String> {
        lock(&self.shared.dead).clone()
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Value) {
        let _ = self.out.send(frame(
            &json!({"jsonrpc": "2.0", "method": method, "params": params}),
        ));
    }

    /// Sends a request and waits for its answer (unbounded: the caller
    /// puts a timeout around it).
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, String> {
        if let Some(reason) = self.dead() {
            return Err(reason);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.shared.pending).insert(id, tx);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if self.out.send(frame(&msg)).is_err() {
            lock(&self.shared.pending).remove(&id);
            return Err("the server's input is closed".into());
        }
        // A death between the check above and the insert would leave the
        // reply waiting: check again.
        if let Some(reason) = self.dead() {
            lock(&self.shared.pending).remove(&id);
            return Err(reason);
        }
        let answer = rx
            .await
            .unwrap_or_else(|_| Err("the server went away".into()));
        answer.map_err(|e| format!("{method}: {e}"))
    }

    /// Opens or updates the document at `path` with `text`; returns its new
    /// version and the event sequence number before the update was sent.
    pub fn sync(&self, path: &Path, language: &str, text: &str) -> (i64, u64) {
        let uri = path_to_uri(path);
        let seq = *self.events.borrow();
        let previous = lock(&self.docs).get(&uri).copied();
        let version = previous.map_or(1, |v| v + 1);
        lock(&self.docs).insert(uri.clone(), version);
        match previous {
            None => self.notify(
                "textDocument/didOpen",
                json!({"textDocument": {"uri": uri, "languageId": language, "version": version, "text": text}}),
            ),
            Some(_) => self.notify(
                "textDocument/didChange",
                json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}),
            ),
        }
        (version, seq)
    }

    /// Waits until the server published diagnostics for `path` at
    /// `version`. A server that does not say versions (typescript-language-
    /// server) may publish in parts, and late for an older version: its
    /// publishes after event `seq` are taken until none came for
    /// [`SETTLE`], or `deadline` (then the latest counts). Returns `Err`
    /// when the server died first. Unbounded until the first fresh
    /// publish: the caller puts a timeout around it.
    pub async fn diagnostics(
        &self,
        path: &Path,
        version: i64,
        seq: u64,
        deadline: tokio::time::Instant,
    ) -> Result<Vec<Diagnostic>, String> {
        let uri = path_to_uri(path);
        let mut events = self.events.clone();
        loop {
            let latest = lock(&self.shared.published).get(&uri).cloned();
            if let Some(p) = latest {
                match p.version {
                    Some(v) if v >= version => return Ok(p.diagnostics),
                    None if p.seq > seq => return Ok(self.settle(&uri, p, deadline).await),
                    _ => {}
                }
            }
            if let Some(reason) = self.dead() {
                return Err(reason);
            }
            if events.changed().await.is_err() {
                return Err(self.dead().unwrap_or_else(|| "the server went away".into()));
            }
        }
    }

    /// The last of the unversioned publishes for `uri` that follow `first`
    /// until a quiet [`SETTLE`] or `deadline`.
    async fn settle(
        &self,
        uri: &str,
        first: Published,
        deadline: tokio::time::Instant,
    ) -> Vec<Diagnostic> {
        let mut events = self.events.clone();
        let mut latest = first;
        loop {
            let quiet = (tokio::time::Instant::now() + SETTLE).min(deadline);
            match tokio::time::timeout_at(quiet, events.changed()).await {
                Ok(Ok(())) => {
                    if let Some(p) = lock(&self.shared.published).get(uri)
                        && p.seq > latest.seq
                    {
                        latest = p.clone();
                    }
                }
                Ok(Err(_)) | Err(_) => return latest.diagnostics,
            }
        }
    }

    /// Asks the server to shut down, then ends its process group.
    pub async fn shutdown(&self) {
        let polite = tokio::time::timeout(
            std::time::Duration::from_secs(1),
            self.request("shutdown", Value::Null),
        );
        if polite.await.is_ok() {
            self.notify("exit", Value::Null);
        }
        let child = lock(&self.child).take();
        if let Some(mut child) = child {
            let _ = child.shutdown(std::time::Duration::from_millis(500)).await;
        }
    }
}

fn initialize_params(root: &Path) -> Value {
    let uri = path_to_uri(root);
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    json!({
        "processId": std::process::id(),
        "clientInfo": {"name": "kaji", "version": env!("CARGO_PKG_VERSION")},
        "rootUri": uri,
        "rootPath": root.to_string_lossy(),
        "workspaceFolders": [{"uri": uri, "name": name}],
        "capabilities": {
            "workspace": {"workspaceFolders": true, "configuration": true, "symbol": {}},
            "textDocument": {
                "synchronization": {"didSave": false, "dynamicRegistration": false},
                "publishDiagnostics": {"versionSupport": true, "relatedInformation": false},
                "hover": {"contentFormat": ["plaintext", "markdown"]},
                "definition": {"linkSupport": true},
                "implementation": {"linkSupport": true},
                "references": {},
                "documentSymbol": {"hierarchicalDocumentSymbolSupport": true},
                "callHierarchy": {}
            },
            "window": {"workDoneProgress": false}
        }
    })
}

async fn write_loop(
    mut stdin: tokio::process::ChildStdin,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    while let Some(bytes) = rx.recv().await {
        if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
}

async fn read_loop(
    stdout: tokio::process::ChildStdout,
    shared: Arc<Shared>,
    events: watch::Sender<u64>,
    out: mpsc::UnboundedSender<Vec<u8>>,
) {
    let mut reader = tokio::io::BufReader::new(stdout);
    let reason = loop {
        match read_message(&mut reader).await {
            Ok(Some(msg)) => handle(msg, &shared, &events, &out),
            Ok(None) => break "the server exited".to_string(),
            Err(e) => break e.to_string(),
        }
    };
    *lock(&shared.dead) = Some(reason.clone());
    for (_, reply) in lock(&shared.pending).drain() {
        let _ = reply.send(Err(reason.clone()));
    }
    events.send_modify(|n| *n += 1);
}

fn handle(
    msg: Value,
    shared: &Shared,
    events: &watch::Sender<u64>,
    out: &mpsc::UnboundedSender<Vec<u8>>,
) {
    let method = msg.get("method").and_then(Value::as_str);
    let id = msg.get("id").cloned();
    match (method, id) {
        (Some(method), Some(id)) => {
            // The server asks us something: answer at once.
            let result = match method {
                "workspace/configuration" => {
                    let n = msg
                        .pointer("/params/items")
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len);
                    Value::Array(vec![Value::Null; n])
                }
                _ => Value::Null,
            };
            let _ = out.send(frame(
                &json!({"jsonrpc": "2.0", "id": id, "result": result}),
            ));
        }
        (Some("textDocument/publishDiagnostics"), None) => {
            let Some(uri) = msg.pointer("/params/uri").and_then(Value::as_str) else {
                return;
            };
            let diagnostics = msg
                .pointer("/params/diagnostics")
                .and_then(Value::as_array)
                .map(|list| {
                    list.iter()
                        .take(MAX_DIAGNOSTICS)
                        .filter_map(Diagnostic::from_lsp)
                        .collect()
                })
                .unwrap_or_default();
            let version = msg.pointer("/params/version").and_then(Value::as_i64);
            let mut seq = 0;
            events.send_modify(|n| {
                *n += 1;
                seq = *n;
            });
            lock(&shared.published).insert(
                uri.to_string(),
                Published {
                    seq,
                    version,
                    diagnostics,
                },
            );
            events.send_modify(|_| {});
        }
        (None, Some(id)) => {
            let Some(id) = id.as_i64() else { return };
            let Some(reply) = lock(&shared.pending).remove(&id) else {
                return;
            };
            let answer = match msg.get("error") {
                Some(e) => Err(e
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("error")
                    .to_string()),
                None => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
            };
            let _ = reply.send(answer);
        }
        _ => {}
    }
}
