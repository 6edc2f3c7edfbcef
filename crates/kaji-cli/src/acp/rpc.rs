//! A JSON-RPC 2.0 peer over the connection's lines ([`super::wire`]): the
//! agent side of ACP without the protocol's SDK, whose build was a large
//! part of a cold install (issue 37).
//!
//! Incoming requests are routed by a [`Handler`] in arrival order and each
//! answered from its own task, so the dispatch loop never waits for one (a
//! prompt's turn waits for permission answers the loop must keep
//! reading). Outgoing requests get ids and wait for the client's response
//! in a pending map; notifications go out as they come. Every line out
//! goes through the wire's one writer.
//!
//! It knows no ACP method and never writes anywhere but the wire: what a
//! method means is the handler's business.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::channel::{mpsc, oneshot};
use futures::{FutureExt, Stream, StreamExt};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::task::JoinSet;

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{}", self.describe())]
pub struct RpcError {
    /// The error code.
    pub code: i64,
    /// A short description.
    pub message: String,
    /// More about it; omitted when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// `-32700`.
    pub const PARSE_ERROR: i64 = -32700;
    /// `-32600`.
    pub const INVALID_REQUEST: i64 = -32600;
    /// `-32601`.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// `-32602`.
    pub const INVALID_PARAMS: i64 = -32602;
    /// `-32603`.
    pub const INTERNAL_ERROR: i64 = -32603;

    /// An error with `code` and `message` and no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same error with `data`.
    pub fn data(mut self, data: impl Into<Value>) -> Self {
        self.data = Some(data.into());
        self
    }

    /// `-32600 Invalid request`.
    pub fn invalid_request() -> Self {
        Self::new(Self::INVALID_REQUEST, "Invalid request")
    }

    /// `-32601 Method not found`, naming the method.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(Self::METHOD_NOT_FOUND, "Method not found").data(method)
    }

    /// `-32602 Invalid params`.
    pub fn invalid_params() -> Self {
        Self::new(Self::INVALID_PARAMS, "Invalid params")
    }

    /// `-32603 Internal error`.
    pub fn internal_error() -> Self {
        Self::new(Self::INTERNAL_ERROR, "Internal error")
    }

    /// The message, then the data when there is some.
    fn describe(&self) -> String {
        match &self.data {
            None => self.message.clone(),
            Some(Value::String(s)) => format!("{}: {s}", self.message),
            Some(data) => format!("{}: {data}", self.message),
        }
    }
}

/// `params` as a `T` (missing params as `{}`); `-32602` saying what is
/// wrong otherwise.
pub fn params<T: DeserializeOwned>(method: &str, params: Value) -> Result<T, RpcError> {
    let params = match params {
        Value::Null => Value::Object(serde_json::Map::new()),
        params => params,
    };
    serde_json::from_value(params).map_err(|e| {
        RpcError::new(
            RpcError::INVALID_PARAMS,
            format!("Invalid params for {method}: {e}"),
        )
    })
}

/// The answer to one request: a result or an error, computed in its own task.
pub type Reply = Pin<Box<dyn Future<Output = Result<Value, RpcError>> + Send>>;

/// A reply that is ready now.
pub fn ready(result: Result<Value, RpcError>) -> Reply {
    Box::pin(std::future::ready(result))
}

/// `value` as a result.
pub fn to_result<T: Serialize>(value: &T) -> Result<Value, RpcError> {
    serde_json::to_value(value).map_err(|e| RpcError::internal_error().data(e.to_string()))
}

/// What the connection's messages mean.
pub trait Handler: Send + Sync + 'static {
    /// Routes request `method`. Called in the dispatch loop in arrival
    /// order, so it must not block: what takes time goes in the returned
    /// [`Reply`], which runs in its own task.
    fn request(self: &Arc<Self>, method: &str, params: Value) -> Reply;

    /// Notification `method`, in arrival order; it must not block.
    fn notification(self: &Arc<Self>, method: &str, params: Value);
}

type Pending = HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>;

/// This side of the connection: sends requests, notifications and
/// responses, and matches the client's responses to the requests.
pub struct Peer {
    out: mpsc::UnboundedSender<String>,
    next_id: AtomicU64,
    /// Requests waiting for their response; `None` once the connection is
    /// closed, so nothing waits for an answer that cannot come.
    pending: Mutex<Option<Pending>>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer").finish_non_exhaustive()
    }
}

#[derive(Serialize)]
struct OutRequest<'a, P> {
    jsonrpc: &'static str,
    id: u64,
    method: &'a str,
    params: P,
}

#[derive(Serialize)]
struct OutNotification<'a, P> {
    jsonrpc: &'static str,
    method: &'a str,
    params: P,
}

impl Peer {
    /// A peer writing its lines to `out`.
    pub fn new(out: mpsc::UnboundedSender<String>) -> Self {
        Self {
            out,
            next_id: AtomicU64::new(0),
            pending: Mutex::new(Some(HashMap::new())),
        }
    }

    fn send_line(&self, line: String) -> Result<(), RpcError> {
        self.out
            .unbounded_send(line)
            .map_err(|_| RpcError::internal_error().data("the connection is closed"))
    }

    /// Sends request `method` and waits for the client's response.
    pub async fn request<R: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> Result<R, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let line = serde_json::to_string(&OutRequest {
            jsonrpc: "2.0",
            id,
            method,
            params,
        })
        .map_err(|e| RpcError::internal_error().data(e.to_string()))?;
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            let Some(pending) = pending.as_mut() else {
                return Err(closed());
            };
            pending.insert(id, tx);
        }
        if let Err(e) = self.send_line(line) {
            self.forget(id);
            return Err(e);
        }
        let value = rx.await.map_err(|_| closed())??;
        serde_json::from_value(value).map_err(|e| {
            RpcError::new(
                RpcError::INVALID_PARAMS,
                format!("the client's response to {method} is not understood: {e}"),
            )
        })
    }

    fn forget(&self, id: u64) {
        if let Some(p) = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            p.remove(&id);
        }
    }

    /// Sends notification `method`.
    pub fn notify(&self, method: &str, params: impl Serialize) -> Result<(), RpcError> {
        let line = serde_json::to_string(&OutNotification {
            jsonrpc: "2.0",
            method,
            params,
        })
        .map_err(|e| RpcError::internal_error().data(e.to_string()))?;
        self.send_line(line)
    }

    /// Answers the request `id`.
    fn respond(&self, id: Value, result: Result<Value, RpcError>) {
        let message = match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        };
        if self.send_line(message.to_string()).is_err() {
            eprintln!("kaji acp: cannot answer request {id}: the connection is closed");
        }
    }

    /// A response from the client: wakes the request waiting for it.
    fn resolve(&self, id: &Value, result: Result<Value, RpcError>) {
        let waiter = id.as_u64().and_then(|n| {
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_mut()
                .and_then(|p| p.remove(&n))
        });
        match waiter {
            Some(tx) => {
                let _ = tx.send(result);
            }
            None => eprintln!("kaji acp: a response to unknown request id {id} was ignored"),
        }
    }

    /// Closes the way out once everything is answered: the writer sends
    /// what is queued and ends.
    pub fn shutdown(&self) {
        self.out.close_channel();
    }

    /// The connection is closed: requests waiting fail, later ones too.
    fn close(&self) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }
}

fn closed() -> RpcError {
    RpcError::internal_error().data("the connection closed before the client answered")
}

/// The request handlers still running when the connection closed.
pub struct Running {
    handlers: JoinSet<()>,
    read_error: Option<String>,
}

impl Running {
    /// Why reading stopped, when it was not the end of the input.
    pub fn read_error(&self) -> Option<&str> {
        self.read_error.as_deref()
    }

    /// Waits for each handler to answer.
    pub async fn wait(mut self) {
        while self.handlers.join_next().await.is_some() {}
    }
}

/// Reads `lines` until they end, dispatching each message; returns the
/// handlers still running.
pub async fn serve<H, S>(peer: Arc<Peer>, handler: Arc<H>, lines: S) -> Running
where
    H: Handler,
    S: Stream<Item = std::io::Result<String>> + Unpin,
{
    let mut lines = lines;
    let mut handlers = JoinSet::new();
    let mut read_error = None;
    while let Some(line) = lines.next().await {
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                read_error = Some(format!("cannot read stdin: {e}"));
                break;
            }
        };
        while handlers.try_join_next().is_some() {}
        dispatch(&peer, &handler, &line, &mut handlers);
    }
    peer.close();
    Running {
        handlers,
        read_error,
    }
}

/// What one line is.
#[derive(Debug, PartialEq)]
enum Message {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    Response {
        id: Value,
        result: Result<Value, RpcError>,
    },
    /// Not a message: answered with this error (to this id).
    Invalid {
        id: Value,
        error: RpcError,
    },
    /// A response that cannot be matched: noted on stderr, never answered
    /// (answering it could start an endless exchange of errors).
    Stray(String),
}

fn dispatch<H: Handler>(peer: &Arc<Peer>, handler: &Arc<H>, line: &str, running: &mut JoinSet<()>) {
    match classify(line) {
        Message::Request { id, method, params } => {
            let reply = handler.request(&method, params);
            let peer = Arc::clone(peer);
            running.spawn(async move {
                let result = AssertUnwindSafe(reply).catch_unwind().await;
                let result = result.unwrap_or_else(|_| {
                    Err(RpcError::internal_error().data(format!("the {method} handler panicked")))
                });
                peer.respond(id, result);
            });
        }
        Message::Notification { method, params } => handler.notification(&method, params),
        Message::Response { id, result } => peer.resolve(&id, result),
        Message::Invalid { id, error } => peer.respond(id, Err(error)),
        Message::Stray(what) => eprintln!("kaji acp: {what} was ignored"),
    }
}

fn invalid(id: Value, why: &str) -> Message {
    Message::Invalid {
        id,
        error: RpcError::new(RpcError::INVALID_REQUEST, format!("Invalid request: {why}")),
    }
}

fn classify(line: &str) -> Message {
    let value: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            return Message::Invalid {
                id: Value::Null,
                error: RpcError::new(
                    RpcError::PARSE_ERROR,
                    format!("Parse error: the line is not JSON ({e})"),
                ),
            };
        }
    };
    let Value::Object(mut object) = value else {
        return match value {
            Value::Array(_) => invalid(Value::Null, "batches are not supported"),
            _ => invalid(Value::Null, "a message is a JSON object"),
        };
    };
    let id = object.remove("id");
    let id_or_null = id.clone().unwrap_or(Value::Null);
    if !matches!(
        id,
        None | Some(Value::Null | Value::Number(_) | Value::String(_))
    ) {
        return invalid(Value::Null, "the id is neither a number nor a string");
    }
    match object.get("jsonrpc") {
        None => {}
        Some(v) if v == "2.0" => {}
        Some(_) => return invalid(id_or_null, "jsonrpc must be \"2.0\""),
    }
    let params = object.remove("params").unwrap_or(Value::Null);
    match (object.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Message::Request { id, method, params },
        (Some(Value::String(method)), None) => Message::Notification { method, params },
        (Some(_), _) => invalid(id_or_null, "the method is not a string"),
        (None, id) => response(object, id),
    }
}

/// A message without a method: a response to one of ours, or invalid.
fn response(mut object: serde_json::Map<String, Value>, id: Option<Value>) -> Message {
    let id_or_null = id.clone().unwrap_or(Value::Null);
    let result = match (object.remove("result"), object.remove("error")) {
        (Some(result), None) => Ok(result),
        (None, Some(error)) => Err(serde_json::from_value(error.clone())
            .unwrap_or_else(|_| RpcError::internal_error().data(error))),
        (None, None) => return invalid(id_or_null, "a request without a method"),
        (Some(_), Some(_)) => return invalid(id_or_null, "a response with both result and error"),
    };
    match id {
        Some(id) if !id.is_null() => Message::Response { id, result },
        _ => Message::Stray(format!("a response without an id ({result:?})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handler with a request that waits for another, one that asks the
    /// client, and one with typed params.
    struct Test {
        peer: Arc<Peer>,
        gate: Mutex<Option<oneshot::Receiver<()>>>,
        opener: Mutex<Option<oneshot::Sender<()>>>,
        notes: mpsc::UnboundedSender<String>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Typed {
        #[allow(dead_code)]
        session_id: String,
    }

    impl Handler for Test {
        fn request(self: &Arc<Self>, method: &str, params: Value) -> Reply {
            match method {
                "echo" => ready(Ok(params)),
                "wait" => {
                    let gate = self.gate.lock().unwrap().take().unwrap();
                    Box::pin(async move {
                        gate.await.unwrap();
                        Ok(json!("waited"))
                    })
                }
                "open" => {
                    let _ = self.opener.lock().unwrap().take().unwrap().send(());
                    ready(Ok(json!("opened")))
                }
                "ask" => {
                    let peer = Arc::clone(&self.peer);
                    Box::pin(async move {
                        let answer: Value =
                            peer.request("client/question", json!({"q": 1})).await?;
                        Ok(json!({"client said": answer}))
                    })
                }
                "typed" => ready(super::params::<Typed>(method, params).map(|_| json!("ok"))),
                _ => ready(Err(RpcError::method_not_found(method))),
            }
        }

        fn notification(self: &Arc<Self>, method: &str, _params: Value) {
            self.notes.unbounded_send(method.to_string()).unwrap();
        }
    }

    /// A peer writing to `output` and the test handler answering through
    /// it: `wait` is held until `open` runs.
    fn test_peer(
        output: mpsc::UnboundedSender<String>,
        notes: mpsc::UnboundedSender<String>,
    ) -> (Arc<Peer>, Arc<Test>) {
        let (open_tx, gate_rx) = oneshot::channel();
        let peer = Arc::new(Peer::new(output));
        let handler = Arc::new(Test {
            peer: Arc::clone(&peer),
            gate: Mutex::new(Some(gate_rx)),
            opener: Mutex::new(Some(open_tx)),
            notes,
        });
        (peer, handler)
    }

    struct Harness {
        input: mpsc::UnboundedSender<std::io::Result<String>>,
        output: mpsc::UnboundedReceiver<String>,
        notes: mpsc::UnboundedReceiver<String>,
        served: tokio::task::JoinHandle<Running>,
    }

    impl Harness {
        fn start() -> Self {
            let (in_tx, in_rx) = mpsc::unbounded();
            let (out_tx, out_rx) = mpsc::unbounded();
            let (notes_tx, notes_rx) = mpsc::unbounded();
            let (peer, handler) = test_peer(out_tx, notes_tx);
            let served = tokio::spawn(serve(peer, handler, in_rx));
            Self {
                input: in_tx,
                output: out_rx,
                notes: notes_rx,
                served,
            }
        }

        fn send(&self, line: &str) {
            self.input.unbounded_send(Ok(line.to_string())).unwrap();
        }

        async fn recv(&mut self) -> Value {
            let line = self.output.next().await.expect("a line out");
            serde_json::from_str(&line).unwrap()
        }

        /// Ends the input; returns every line still written.
        async fn finish(self) -> Vec<Value> {
            drop(self.input);
            self.served.await.unwrap().wait().await;
            let mut output = self.output;
            let mut rest = Vec::new();
            while let Ok(line) = output.try_recv() {
                rest.push(serde_json::from_str(&line).unwrap());
            }
            rest
        }
    }

    /// The loop reads on while a handler waits: polled once with two
    /// requests queued, it routes both, though the first cannot end
    /// before the second runs (no timer: one poll, by hand).
    #[tokio::test]
    async fn a_waiting_handler_does_not_hold_up_the_next_request() {
        let (in_tx, in_rx) = mpsc::unbounded();
        let (out_tx, mut out_rx) = mpsc::unbounded();
        let (notes_tx, _notes_rx) = mpsc::unbounded();
        let (peer, handler) = test_peer(out_tx, notes_tx);
        let mut served = Box::pin(serve(peer, Arc::clone(&handler), in_rx));
        let send = |line: &str| in_tx.unbounded_send(Ok(line.to_string())).unwrap();
        send(r#"{"jsonrpc":"2.0","id":1,"method":"wait","params":{}}"#);
        send(r#"{"jsonrpc":"2.0","id":"two","method":"open","params":{}}"#);
        assert!(futures::poll!(&mut served).is_pending());
        assert!(
            handler.opener.lock().unwrap().is_none(),
            "the loop did not route `open` while `wait` waited for it"
        );
        drop(in_tx);
        served.await.wait().await;
        let mut answers: Vec<Value> = Vec::new();
        while let Ok(line) = out_rx.try_recv() {
            answers.push(serde_json::from_str(&line).unwrap());
        }
        answers.sort_by_key(|a| a["id"].to_string());
        assert_eq!(
            answers,
            [
                json!({"jsonrpc":"2.0","id":"two","result":"opened"}),
                json!({"jsonrpc":"2.0","id":1,"result":"waited"}),
            ]
        );
    }

    #[tokio::test]
    async fn a_response_reaches_the_handler_waiting_for_it() {
        let mut h = Harness::start();
        h.send(r#"{"jsonrpc":"2.0","id":7,"method":"ask","params":{}}"#);
        let asked = h.recv().await;
        assert_eq!(asked["method"], "client/question");
        assert_eq!(asked["params"], json!({"q": 1}));
        let id = asked["id"].clone();
        assert!(id.is_u64(), "{asked}");
        // An unknown id is ignored; the right one answers the request.
        h.send(r#"{"jsonrpc":"2.0","id":999,"result":"stray"}"#);
        h.send(&json!({"jsonrpc":"2.0","id":id,"result":"yes"}).to_string());
        let answer = h.recv().await;
        assert_eq!(
            answer,
            json!({"jsonrpc":"2.0","id":7,"result":{"client said":"yes"}})
        );
        assert!(h.finish().await.is_empty());
    }

    #[tokio::test]
    async fn an_error_from_the_client_is_the_requests_error() {
        let mut h = Harness::start();
        h.send(r#"{"jsonrpc":"2.0","id":8,"method":"ask"}"#);
        let id = h.recv().await["id"].clone();
        let error = json!({"code": -32002, "message": "no such file"});
        h.send(&json!({"jsonrpc":"2.0","id":id,"error":error}).to_string());
        assert_eq!(
            h.recv().await,
            json!({"jsonrpc":"2.0","id":8,"error":error})
        );
        assert!(h.finish().await.is_empty());
    }

    #[tokio::test]
    async fn unknown_methods_and_bad_params_are_answered() {
        let mut h = Harness::start();
        h.send(r#"{"jsonrpc":"2.0","id":1,"method":"fly","params":{}}"#);
        let v = h.recv().await;
        assert_eq!(v["id"], 1);
        assert_eq!(v["error"]["code"], -32601, "{v}");
        assert_eq!(v["error"]["data"], "fly", "{v}");
        h.send(r#"{"jsonrpc":"2.0","id":2,"method":"typed","params":{"session":"x"}}"#);
        let v = h.recv().await;
        assert_eq!(v["id"], 2);
        assert_eq!(v["error"]["code"], -32602, "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("typed") && message.contains("sessionId"),
            "{v}"
        );
        h.send(r#"{"jsonrpc":"2.0","id":3,"method":"typed","params":{"sessionId":"x"}}"#);
        assert_eq!(h.recv().await["result"], "ok");
        assert!(h.finish().await.is_empty());
    }

    #[tokio::test]
    async fn a_notification_is_not_answered() {
        let mut h = Harness::start();
        h.send(r#"{"jsonrpc":"2.0","method":"note","params":{"a":1}}"#);
        h.send(r#"{"jsonrpc":"2.0","id":4,"method":"echo","params":[1]}"#);
        assert_eq!(h.recv().await, json!({"jsonrpc":"2.0","id":4,"result":[1]}));
        assert_eq!(h.notes.next().await.as_deref(), Some("note"));
        assert!(h.finish().await.is_empty());
    }

    /// Each bad line is answered in turn (in the loop, so in order), a
    /// response without an id is not, and the next request is served.
    #[tokio::test]
    async fn malformed_messages_are_answered_and_reading_goes_on() {
        let h = Harness::start();
        h.send("{not json");
        h.send(r#"{"jsonrpc":"2.0","id":5,"params":{}}"#);
        h.send(r#"[{"jsonrpc":"2.0","id":6,"method":"echo"}]"#);
        h.send(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#);
        h.send(r#"{"jsonrpc":"2.0","id":9,"method":"echo","params":"still here"}"#);
        let answers = h.finish().await;
        let codes: Vec<_> = answers
            .iter()
            .map(|v| (v["id"].clone(), v["error"]["code"].clone()))
            .collect();
        assert_eq!(
            codes,
            [
                (Value::Null, json!(-32700)),
                (json!(5), json!(-32600)),
                (Value::Null, json!(-32600)),
                (json!(9), Value::Null),
            ],
            "{answers:?}"
        );
        let message = answers[1]["error"]["message"].as_str().unwrap();
        assert!(message.contains("without a method"), "{message}");
        assert_eq!(answers[3]["result"], "still here");
    }

    #[tokio::test]
    async fn a_request_waiting_when_the_connection_closes_fails() {
        let mut h = Harness::start();
        h.send(r#"{"jsonrpc":"2.0","id":3,"method":"ask"}"#);
        assert_eq!(h.recv().await["method"], "client/question");
        let rest = h.finish().await;
        assert_eq!(rest.len(), 1, "{rest:?}");
        assert_eq!(rest[0]["id"], 3);
        assert_eq!(rest[0]["error"]["code"], -32603, "{rest:?}");
    }
}
