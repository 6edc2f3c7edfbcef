//! The JSON-RPC 2.0 peer of one MCP connection, independent of framing:
//! it numbers kaji's requests, matches the server's responses to them by
//! id, answers the server's own requests (`ping` with `{}`, anything else
//! with "method not found") and hands the server's notifications on.
//!
//! Transports feed it whole messages through [`Inbox::receive`] and send
//! what [`Peer`] gives them through their [`Outbox`]. The peer never reads
//! or writes bytes itself, never panics on what a server sends (a message
//! it cannot use is reported back as [`Received::Ignored`]), and never
//! keeps the entry of a request whose caller went away.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// JSON-RPC's "method not found".
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;

/// Sends one message (a JSON-RPC object) to the server. An HTTP outbox
/// also reads the reply and feeds it to the peer's [`Inbox`].
pub(crate) trait Outbox: Send + Sync {
    /// Sends `message`; `Err` says why it could not be sent.
    fn send(&self, message: Value) -> BoxFuture<'_, Result<(), String>>;
}

/// Why a request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum RequestError {
    /// The server answered with a JSON-RPC error.
    #[error("{message} (JSON-RPC error {code})")]
    Server {
        /// The error code.
        code: i64,
        /// The server's message.
        message: String,
    },
    /// The connection ended before the answer came.
    #[error("the connection is closed: {0}")]
    Closed(String),
    /// The request could not be sent, or its reply not received.
    #[error("{0}")]
    Transport(String),
    /// The answer is not what the method returns.
    #[error("its answer to `{method}` could not be read: {error}")]
    Invalid {
        /// The method asked.
        method: &'static str,
        /// What was wrong with the answer.
        error: String,
    },
}

/// A notification from the server.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Notification {
    /// Its method, e.g. `notifications/tools/list_changed`.
    pub method: String,
    /// Its params (null when it had none).
    pub params: Value,
}

/// What [`Inbox::receive`] made of a message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Received {
    /// A response or notification, passed on.
    Handled,
    /// A request of the server: the transport must send this answer.
    Reply(Value),
    /// Not usable; the transport logs why.
    Ignored(String),
}

type Answer = Result<Value, RequestError>;

struct Shared {
    next_id: AtomicU64,
    pending: Mutex<HashMap<u64, oneshot::Sender<Answer>>>,
    closed: CancellationToken,
    close_reason: Mutex<Option<String>>,
    notifications: mpsc::UnboundedSender<Notification>,
}

impl Shared {
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Answer>>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn close_reason(&self) -> String {
        self.close_reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_else(|| "the connection was closed".to_string())
    }
}

/// The receiving side of a peer, held by the transport's readers.
#[derive(Clone)]
pub(crate) struct Inbox {
    shared: Arc<Shared>,
}

/// The sending side: requests and notifications to the server. Cheap to
/// clone; all clones share one connection.
#[derive(Clone)]
pub(crate) struct Peer {
    shared: Arc<Shared>,
    outbox: Arc<dyn Outbox>,
}

impl Inbox {
    /// A new peer's inbox, and the receiver of the server's notifications.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<Notification>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Shared {
            next_id: AtomicU64::new(0),
            pending: Mutex::new(HashMap::new()),
            closed: CancellationToken::new(),
            close_reason: Mutex::new(None),
            notifications: tx,
        };
        let inbox = Self {
            shared: Arc::new(shared),
        };
        (inbox, rx)
    }

    /// The peer that sends through `outbox`.
    pub fn peer(&self, outbox: Arc<dyn Outbox>) -> Peer {
        Peer {
            shared: self.shared.clone(),
            outbox,
        }
    }

    /// Ends the connection: pending and later requests fail with `reason`
    /// (the first reason given wins).
    pub fn close(&self, reason: &str) {
        {
            let mut slot = self
                .shared
                .close_reason
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert_with(|| reason.to_string());
        }
        self.shared.closed.cancel();
        let pending = std::mem::take(&mut *self.shared.pending());
        for (_, tx) in pending {
            let _ = tx.send(Err(RequestError::Closed(reason.to_string())));
        }
    }

    /// Cancelled once the connection has ended.
    pub fn closed(&self) -> &CancellationToken {
        &self.shared.closed
    }

    /// Whether request `id` still waits for its answer.
    pub fn is_pending(&self, id: u64) -> bool {
        self.shared.pending().contains_key(&id)
    }

    /// Takes one message (the text of one line or event) from the server.
    pub fn receive(&self, text: &str) -> Received {
        let text = text.trim_start_matches('\u{feff}').trim();
        if text.is_empty() {
            return Received::Handled;
        }
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(message)) => self.dispatch(message),
            Ok(_) => Received::Ignored(format!(
                "a JSON value that is not a JSON-RPC message: {}",
                snippet(text)
            )),
            Err(e) => {
                Received::Ignored(format!("a line that is not JSON ({e}): {}", snippet(text)))
            }
        }
    }

    fn dispatch(&self, message: serde_json::Map<String, Value>) -> Received {
        let id = message.get("id").filter(|id| !id.is_null()).cloned();
        match (message.get("method").and_then(Value::as_str), id) {
            (Some(method), Some(id)) => Received::Reply(answer_request(method, id)),
            (Some(method), None) => {
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                let _ = self.shared.notifications.send(Notification {
                    method: method.to_string(),
                    params,
                });
                Received::Handled
            }
            (None, Some(id)) => self.deliver(&id, &message),
            (None, None) => Received::Ignored(format!(
                "a message with neither a method nor an id: {}",
                snippet(&Value::Object(message).to_string())
            )),
        }
    }

    /// Hands a response to the request waiting for it.
    fn deliver(&self, id: &Value, message: &serde_json::Map<String, Value>) -> Received {
        let waiting = id_number(id).and_then(|n| self.shared.pending().remove(&n));
        let Some(tx) = waiting else {
            return Received::Ignored(format!(
                "a response to id {id}, which no request of kaji's is waiting for"
            ));
        };
        let answer = match (message.get("error"), message.get("result")) {
            (Some(error), _) => Err(RequestError::Server {
                code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                message: error
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| error.to_string(), str::to_string),
            }),
            (None, Some(result)) => Ok(result.clone()),
            (None, None) => Err(RequestError::Transport(
                "the server answered with neither a result nor an error".to_string(),
            )),
        };
        let _ = tx.send(answer);
        Received::Handled
    }
}

/// kaji's answer to a request of the server.
fn answer_request(method: &str, id: Value) -> Value {
    if method == "ping" {
        json!({"jsonrpc": "2.0", "id": id, "result": {}})
    } else {
        json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": METHOD_NOT_FOUND,
            "message": format!("method not found: {method} (kaji declares no client capabilities)"),
        }})
    }
}

/// A response id as kaji numbers its requests (a number, or a string of
/// one from servers that echo ids as text).
fn id_number(id: &Value) -> Option<u64> {
    match id {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// The start of `text`, for messages about it.
fn snippet(text: &str) -> String {
    const LIMIT: usize = 200;
    match text.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// Removes a request's entry when its caller stops waiting.
struct PendingEntry<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for PendingEntry<'_> {
    fn drop(&mut self) {
        self.shared.pending().remove(&self.id);
    }
}

impl Peer {
    /// Sends request `method` and waits for its result, decoded as `T`.
    /// Dropping the future forgets the request.
    pub async fn request<T: DeserializeOwned>(
        &self,
        method: &'static str,
        params: Value,
    ) -> Result<T, RequestError> {
        let value = self.request_value(method, params).await?;
        serde_json::from_value(value).map_err(|e| RequestError::Invalid {
            method,
            error: e.to_string(),
        })
    }

    async fn request_value(
        &self,
        method: &'static str,
        params: Value,
    ) -> Result<Value, RequestError> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, mut rx) = oneshot::channel();
        if self.shared.closed.is_cancelled() {
            return Err(RequestError::Closed(self.shared.close_reason()));
        }
        self.shared.pending().insert(id, tx);
        let _entry = PendingEntry {
            shared: &self.shared,
            id,
        };
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        // An HTTP send also reads the answer: wait for both, and stop
        // sending once the answer is in.
        let send = self.outbox.send(message);
        tokio::pin!(send);
        let mut sent = false;
        loop {
            tokio::select! {
                biased;
                result = &mut send, if !sent => {
                    result.map_err(RequestError::Transport)?;
                    sent = true;
                }
                answer = &mut rx => {
                    return answer.unwrap_or_else(|_| Err(RequestError::Closed(self.shared.close_reason())));
                }
                _ = self.shared.closed.cancelled() => {
                    return Err(RequestError::Closed(self.shared.close_reason()));
                }
            }
        }
    }

    /// Sends notification `method` (no answer comes).
    pub async fn notify(&self, method: &'static str) -> Result<(), RequestError> {
        if self.shared.closed.is_cancelled() {
            return Err(RequestError::Closed(self.shared.close_reason()));
        }
        let message = json!({"jsonrpc": "2.0", "method": method});
        self.outbox
            .send(message)
            .await
            .map_err(RequestError::Transport)
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.is_cancelled()
    }

    /// Cancelled once the connection has ended.
    pub fn closed(&self) -> &CancellationToken {
        &self.shared.closed
    }

    /// The number of requests waiting for an answer.
    #[cfg(test)]
    pub fn pending_count(&self) -> usize {
        self.shared.pending().len()
    }
}

#[cfg(test)]
mod tests;
