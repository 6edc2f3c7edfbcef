//! The scripted model server: a real HTTP server on 127.0.0.1 that answers
//! `POST /v1/messages` (Anthropic) and `POST /v1/chat/completions`
//! (OpenAI) from a [`Script`], records every request, and serves faults.
//!
//! The turn is chosen from the request itself: a request whose `messages`
//! already hold `n` assistant messages gets turn `n`, so retries of the same
//! request get the same turn. Faults are counted per turn: the `k`-th
//! request for a turn gets the turn's `k`-th fault, later ones the plain
//! reply. The server reads of a body only what decides the reply, reusing
//! what it read of the previous body up to their common prefix
//! (`request_scan`), so its work per request does not grow with the
//! conversation; bodies are parsed whole only when a test asks for the
//! [`RecordedRequest`]s. This server must never panic on a request,
//! whatever it holds, and never reach past the loopback interface.

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use hyper::StatusCode;
use hyper::header::HeaderValue;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::http::{Response, full, streamed};
use crate::request_scan::{Reader, Summary};
use crate::script::{Fault, Script, Turn};
use crate::wire::{context_length_error, error_body, error_kind, first_content_frame, render};
use crate::wire_parts::{RenderContext, WireFormat};

/// Headers whose values are replaced by `[redacted]` in recordings.
const SECRET_HEADERS: &[&str] = &[
    "x-api-key",
    "authorization",
    "proxy-authorization",
    "api-key",
    "cookie",
];

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// HTTP method.
    pub method: String,
    /// Request path, e.g. `/v1/messages`.
    pub path: String,
    /// Headers, names lowercase. Secrets keep their scheme only:
    /// `x-api-key: [redacted]`, `authorization: Bearer [redacted]`.
    pub headers: BTreeMap<String, String>,
    /// The JSON body (a JSON string holding the raw text when it is not JSON).
    pub body: Value,
    /// The body's bytes as sent (lossy UTF-8), for byte-for-byte checks.
    #[serde(default, skip_serializing)]
    pub raw_body: String,
    /// Which wire format the path asked for, if any.
    pub format: Option<WireFormat>,
    /// The turn the request was answered with (0-based), if one was.
    pub turn: Option<usize>,
    /// Which attempt at that turn this was (1-based).
    pub attempt: usize,
    /// The marker of the agent script that answered it (see
    /// [`crate::Script::agents`]); `None`: the main script.
    #[serde(default)]
    pub agent: Option<String>,
}

impl RecordedRequest {
    /// A header's value by (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// The body's `messages` array, or for the Responses API its `input`
    /// array (empty when there is none).
    pub fn messages(&self) -> &[Value] {
        self.body
            .get("messages")
            .or_else(|| self.body.get("input"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }
}

struct Shared {
    script: Script,
    state: Mutex<ServerState>,
    requests_seen: watch::Sender<usize>,
    streams_aborted: watch::Sender<usize>,
    /// How many streams have reached a [`crate::Part::Hold`].
    holds_reached: watch::Sender<usize>,
    /// How many times the test released held streams.
    releases: watch::Sender<usize>,
    /// Requests whose response has not ended yet, and the most there were
    /// at once.
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// Reads request bodies, reusing what it read of recent ones.
    reader: Reader,
}

#[derive(Default)]
struct ServerState {
    requests: Vec<Stored>,
    attempts: HashMap<(Option<usize>, usize), usize>,
    /// How long the server took to read each request and choose its
    /// reply (before the reply starts).
    handling: Vec<Duration>,
}

/// A recorded request whose `body` and `raw_body` are filled from `raw`
/// when a test first asks for the requests (most requests are never
/// looked at: parsing each whole would make the server's work grow with
/// the conversation).
struct Stored {
    request: RecordedRequest,
    raw: Option<Bytes>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, ServerState> {
        // A panic while holding the lock cannot leave the state half
        // written (every update is a single push or insert), so a poisoned
        // lock is still good.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running scripted model server. Dropping it stops the server.
pub struct ScriptedModelServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl ScriptedModelServer {
    /// Starts a server for `script` on a free port of 127.0.0.1.
    ///
    /// # Panics
    /// When no loopback port can be bound (test convenience; use
    /// [`ScriptedModelServer::bind`] to handle that as an error).
    pub async fn start(script: impl Into<Script>) -> Self {
        match Self::bind(script, 0).await {
            Ok(server) => server,
            Err(e) => panic!("the scripted model server could not bind 127.0.0.1: {e}"),
        }
    }

    /// Starts a server for `script` on 127.0.0.1:`port` (0 for any free port).
    pub async fn bind(script: impl Into<Script>, port: u16) -> std::io::Result<Self> {
        let listener =
            tokio::net::TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            script: script.into(),
            state: Mutex::new(ServerState::default()),
            requests_seen: watch::channel(0).0,
            streams_aborted: watch::channel(0).0,
            holds_reached: watch::channel(0).0,
            releases: watch::channel(0).0,
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            reader: Reader::default(),
        });
        let task = tokio::spawn(crate::http::serve(listener, shared.clone(), handle));
        Ok(Self { addr, shared, task })
    }

    /// `http://127.0.0.1:PORT`: the base URL for the Anthropic provider
    /// (which posts to `{base}/v1/messages`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The base URL for the Anthropic provider; same as [`Self::base_url`].
    pub fn anthropic_base_url(&self) -> String {
        self.base_url()
    }

    /// `http://127.0.0.1:PORT/v1`: the base URL for the OpenAI provider
    /// (which posts to `{base}/chat/completions`).
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.base_url())
    }

    /// The base URL for the Responses provider (which posts to
    /// `{base}/responses`); same as [`Self::openai_base_url`].
    pub fn responses_base_url(&self) -> String {
        self.openai_base_url()
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The script being served.
    pub fn script(&self) -> &Script {
        &self.shared.script
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        let unread: Vec<(usize, Bytes)> = (self.shared.state().requests.iter().enumerate())
            .filter_map(|(i, stored)| Some((i, stored.raw.clone()?)))
            .collect();
        // Parsed outside the lock: the server goes on meanwhile.
        let read: Vec<(usize, Value, String)> = unread
            .into_iter()
            .map(|(i, raw)| {
                let text = String::from_utf8_lossy(&raw).into_owned();
                let body =
                    serde_json::from_slice(&raw).unwrap_or_else(|_| Value::String(text.clone()));
                (i, body, text)
            })
            .collect();
        let mut state = self.shared.state();
        for (i, body, text) in read {
            let stored = &mut state.requests[i];
            if stored.raw.take().is_some() {
                stored.request.body = body;
                stored.request.raw_body = text;
            }
        }
        state.requests.iter().map(|s| s.request.clone()).collect()
    }

    /// How long the server took to read each request and choose its reply
    /// (the reply's streaming not included), in arrival order: the test
    /// double's own cost per request, for benchmarks.
    pub fn handling_times(&self) -> Vec<Duration> {
        self.shared.state().handling.clone()
    }

    /// Waits until at least `n` requests have arrived (and been recorded).
    pub async fn wait_for_requests(&self, n: usize) {
        let mut rx = self.shared.requests_seen.subscribe();
        // The sender lives as long as `self`, so this cannot fail.
        let _ = rx.wait_for(|seen| *seen >= n).await;
    }

    /// How many reply streams were dropped by the client (or the
    /// connection) before they were complete.
    pub fn aborted_streams(&self) -> usize {
        *self.shared.streams_aborted.borrow()
    }

    /// Waits until at least `n` reply streams have been dropped before they
    /// were complete: proof that a client closed its connection.
    pub async fn wait_for_aborted_streams(&self, n: usize) {
        let mut rx = self.shared.streams_aborted.subscribe();
        let _ = rx.wait_for(|aborted| *aborted >= n).await;
    }
}

impl ScriptedModelServer {
    /// Lets the next held stream go on: the `k`-th [`crate::Part::Hold`]
    /// any stream reaches waits until `release` has been called `k` times
    /// (a release before the hold is reached is kept for it).
    pub fn release(&self) {
        self.shared.releases.send_modify(|n| *n += 1);
    }

    /// How many streams have reached a hold so far.
    pub fn holds_reached(&self) -> usize {
        *self.shared.holds_reached.borrow()
    }

    /// Waits until at least `n` holds have been reached.
    pub async fn wait_for_holds(&self, n: usize) {
        let mut rx = self.shared.holds_reached.subscribe();
        let _ = rx.wait_for(|held| *held >= n).await;
    }

    /// The most requests that were in flight at once: a request is in
    /// flight from its arrival until its response has been sent to the
    /// end (or dropped). A client that waits for each reply before it
    /// sends the next request never gets above 1.
    pub fn max_requests_in_flight(&self) -> usize {
        self.shared.max_in_flight.load(AtomicOrdering::SeqCst)
    }
}

/// One request in flight, counted until dropped.
struct InFlight(Arc<Shared>);

impl InFlight {
    fn enter(shared: &Arc<Shared>) -> Self {
        let now = shared.in_flight.fetch_add(1, AtomicOrdering::SeqCst) + 1;
        shared.max_in_flight.fetch_max(now, AtomicOrdering::SeqCst);
        Self(shared.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, AtomicOrdering::SeqCst);
    }
}

/// Keeps `guard` until the response's body has been sent to its end (or
/// dropped); a body known in full needs no tracking.
fn track(response: Response, guard: InFlight) -> Response {
    use http_body_util::BodyExt as _;
    use hyper::body::Body as _;
    if response.body().size_hint().exact().is_some() {
        return response;
    }
    let (parts, body) = response.into_parts();
    let stream = futures::stream::unfold(
        (body.into_data_stream(), Some(guard)),
        |(mut body, mut guard)| async move {
            match body.next().await {
                Some(item) => Some((item, (body, guard))),
                None => {
                    guard.take();
                    None
                }
            }
        },
    );
    Response::from_parts(parts, streamed(stream))
}

impl Drop for ScriptedModelServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut response = Response::new(full(body.to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    response
}

fn redact(name: &str, value: &str) -> String {
    if !SECRET_HEADERS.contains(&name) {
        return value.to_string();
    }
    match value.split_once(' ') {
        Some((scheme, _)) => format!("{scheme} [redacted]"),
        None => "[redacted]".to_string(),
    }
}

async fn handle(shared: Arc<Shared>, request: crate::http::Request) -> Response {
    let crate::http::Request {
        method,
        uri,
        headers,
        body,
    } = request;
    let path = uri.path().to_string();
    let recorded_headers: BTreeMap<String, String> = headers
        .iter()
        .map(|(name, value)| {
            let name = name.as_str().to_ascii_lowercase();
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            let value = redact(&name, &value);
            (name, value)
        })
        .collect();
    let started = std::time::Instant::now();
    let format = match (method.as_str(), path.as_str()) {
        ("POST", "/v1/messages") => Some(WireFormat::Anthropic),
        ("POST", "/v1/chat/completions") => Some(WireFormat::OpenAi),
        ("POST", "/v1/responses") => Some(WireFormat::Responses),
        _ => None,
    };
    let mut record = RecordedRequest {
        method: method.to_string(),
        path: path.clone(),
        headers: recorded_headers,
        // Filled from the bytes when a test asks ([`ScriptedModelServer::requests`]).
        body: Value::Null,
        raw_body: String::new(),
        format,
        turn: None,
        attempt: 1,
        agent: None,
    };

    let in_flight = InFlight::enter(&shared);
    let outcome = match format {
        Some(format) => {
            let summary = read_body(&shared, format, &body);
            decide(&shared, format, &body, &summary, &mut record)
        }
        None => no_route(&record),
    };
    {
        let mut state = shared.state();
        state.requests.push(Stored {
            request: record,
            raw: Some(body.clone()),
        });
        state.handling.push(started.elapsed());
        let count = state.requests.len();
        shared.requests_seen.send_replace(count);
    }
    match outcome {
        Decision::Error(status, body) => json_response(status, &body),
        Decision::Serve {
            format,
            route,
            turn_index,
            attempt,
            model,
            include_usage,
        } => {
            let script = match route {
                Some(i) => &shared.script.agents[i].script,
                None => &shared.script,
            };
            let turn = &script.turns[turn_index];
            let fault = script
                .every_request
                .clone()
                .or_else(|| turn.faults.get(attempt - 1).cloned());
            let ctx = RenderContext {
                turn_index,
                model: &model,
                request_bytes: body.len(),
                include_usage,
                index_zero: fault == Some(Fault::ToolCallsIndexZero),
            };
            track(serve(&shared, format, turn, fault, &ctx), in_flight)
        }
    }
}

enum Decision {
    Error(StatusCode, Value),
    Serve {
        format: WireFormat,
        route: Option<usize>,
        turn_index: usize,
        attempt: usize,
        model: String,
        include_usage: bool,
    },
}

/// What the body says ([`Summary`]), read cheaply, or parsed whole when the
/// cheap reading declines it (the error of a body that is not JSON).
fn read_body(shared: &Shared, format: WireFormat, body: &Bytes) -> Result<Summary, String> {
    let list = list_key(format);
    if let Some(summary) = shared.reader.read(body, list) {
        return Ok(summary);
    }
    let parsed: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    Ok(Summary::of_value(&parsed, list))
}

/// The array a format's requests hold the conversation in.
fn list_key(format: WireFormat) -> &'static str {
    match format {
        WireFormat::Responses => "input",
        _ => "messages",
    }
}

fn no_route(record: &RecordedRequest) -> Decision {
    let message = format!(
        "the scripted model server has no route {} {}: give the Anthropic provider the base URL http://HOST:PORT (it posts to /v1/messages) and the OpenAI providers http://HOST:PORT/v1 (they post to /v1/chat/completions and /v1/responses)",
        record.method, record.path
    );
    Decision::Error(
        StatusCode::NOT_FOUND,
        json!({"error": {"type": "not_found_error", "message": message}}),
    )
}

fn decide(
    shared: &Shared,
    format: WireFormat,
    raw: &Bytes,
    summary: &Result<Summary, String>,
    record: &mut RecordedRequest,
) -> Decision {
    let body = match summary {
        Ok(body) => body,
        Err(e) => {
            return Decision::Error(
                StatusCode::BAD_REQUEST,
                error_body(
                    format,
                    "invalid_request_error",
                    &format!("the request body is not JSON: {e}"),
                ),
            );
        }
    };
    let list = list_key(format);
    let Some(messages) = &body.items else {
        return Decision::Error(
            StatusCode::BAD_REQUEST,
            error_body(
                format,
                "invalid_request_error",
                &format!("the request body has no `{list}` array"),
            ),
        );
    };
    let (route, script) = shared.script.route(&system_text(format, body));
    record.agent = route.map(|i| shared.script.agents[i].marker.clone());
    // As the body serialises compactly (only for scripts with a limit).
    let size = || serde_json::from_slice::<Value>(raw).map_or(raw.len(), |v| v.to_string().len());
    if let Some(max) = script.max_request_bytes
        && size() > max
    {
        let server = match format {
            WireFormat::Anthropic => "anthropic",
            WireFormat::OpenAi | WireFormat::Responses => "openai",
        };
        return Decision::Error(
            StatusCode::BAD_REQUEST,
            context_length_error(server, size() / 4, max / 4),
        );
    }
    let mut turn_index = match format {
        WireFormat::Responses => crate::wire_responses::assistant_turns(messages),
        _ => messages.iter().filter(|m| m.assistant).count(),
    };
    let last = || body.last_item(raw).map(|v| v.to_string());
    if !shared.script.routes.is_empty()
        && let Some(last) = last()
        && let Some(route) = shared
            .script
            .routes
            .iter()
            .find(|r| last.contains(&r.contains))
    {
        turn_index = route.turn;
    }
    let turns = script.turns.len();
    if script.every_request.is_some() && turns > 0 {
        turn_index = turn_index.min(turns - 1);
    }
    if turn_index >= turns {
        let message = format!(
            "script exhausted: the script has {turns} turn(s) but the request already holds {turn_index} assistant message(s), so it asks for turn {}",
            turn_index + 1
        );
        return Decision::Error(
            StatusCode::BAD_REQUEST,
            error_body(format, "script_exhausted", &message),
        );
    }
    let attempt = {
        let mut state = shared.state();
        let counter = state.attempts.entry((route, turn_index)).or_insert(0);
        *counter += 1;
        *counter
    };
    record.turn = Some(turn_index);
    record.attempt = attempt;
    let model = (body.model.as_ref())
        .and_then(Value::as_str)
        .unwrap_or("scripted-model")
        .to_string();
    let include_usage = (body.stream_options.as_ref())
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Decision::Serve {
        format,
        route,
        turn_index,
        attempt,
        model,
        include_usage,
    }
}

/// The system prompt of a request: Anthropic's `system` (text or blocks),
/// or OpenAI's `system` messages.
fn system_text(format: WireFormat, body: &Summary) -> String {
    let text_of = |v: &Value| -> String {
        match v {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    };
    match format {
        WireFormat::Anthropic => body.system.as_ref().map(text_of).unwrap_or_default(),
        WireFormat::Responses => body.instructions.as_ref().map(text_of).unwrap_or_default(),
        WireFormat::OpenAi => (body.items.iter().flatten())
            .filter_map(|m| m.system_content.as_ref())
            .map(text_of)
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// How a body stream ends after its frames.
#[derive(Clone, Copy)]
enum Ending {
    /// Normally.
    Complete,
    /// With an error, which makes hyper abort the connection.
    Abort,
    /// Never: hang until the client goes away.
    Hang,
}

fn serve(
    shared: &Arc<Shared>,
    format: WireFormat,
    turn: &Turn,
    fault: Option<Fault>,
    ctx: &RenderContext<'_>,
) -> Response {
    let frames = || render(format, turn, ctx);
    match fault {
        None => sse_response(shared, frames(), None, Ending::Complete),
        Some(Fault::Status {
            code,
            retry_after_secs,
            retry_after_ms,
            body,
        }) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = match body {
                Some(text) => {
                    let html = text.trim_start().starts_with('<');
                    let mut response = Response::new(full(text));
                    let ct = if html {
                        "text/html; charset=utf-8"
                    } else {
                        "application/json"
                    };
                    response
                        .headers_mut()
                        .insert("content-type", HeaderValue::from_static(ct));
                    response
                }
                None => {
                    let message = format!("scripted fault: HTTP {code}");
                    json_response(
                        StatusCode::OK,
                        &error_body(format, error_kind(format, code), &message),
                    )
                }
            };
            *response.status_mut() = status;
            if let Some(secs) = retry_after_secs {
                response
                    .headers_mut()
                    .insert("retry-after", HeaderValue::from(secs));
            }
            if let Some(ms) = retry_after_ms {
                response
                    .headers_mut()
                    .insert("retry-after-ms", HeaderValue::from(ms));
            }
            response
        }
        Some(Fault::DropMidStream { after_bytes }) => {
            sse_response(shared, truncate(frames(), after_bytes), None, Ending::Abort)
        }
        Some(Fault::Stall { after_bytes }) => {
            sse_response(shared, truncate(frames(), after_bytes), None, Ending::Hang)
        }
        Some(Fault::Slow { delay_ms }) => sse_response(
            shared,
            frames(),
            Some(Duration::from_millis(delay_ms)),
            Ending::Complete,
        ),
        Some(Fault::Empty) => {
            let empty = Turn {
                parts: Vec::new(),
                faults: Vec::new(),
                stop_reason: None,
                ..turn.clone()
            };
            sse_response(shared, render(format, &empty, ctx), None, Ending::Complete)
        }
        Some(Fault::MalformedSse) => {
            let mut out = frames().into_iter().take(1).collect::<Vec<_>>();
            out.push(Bytes::from_static(
                b"this line is not: a server-sent event\n\n",
            ));
            sse_response(shared, out, None, Ending::Complete)
        }
        Some(Fault::InvalidJsonChunk) => {
            let mut out = frames().into_iter().take(1).collect::<Vec<_>>();
            out.push(Bytes::from_static(match format {
                WireFormat::Anthropic => b"event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"text_delta\", \"text\": \"unterminated\n\n",
                WireFormat::OpenAi => b"data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"unterminated\n\n",
                WireFormat::Responses => b"event: response.output_text.delta\ndata: {\"type\": \"response.output_text.delta\", \"delta\": \"unterminated\n\n",
            }));
            sse_response(shared, out, None, Ending::Complete)
        }
        Some(Fault::HtmlErrorPage) => {
            let page = "<!DOCTYPE html>\n<html><head><title>Scripted gateway error</title></head>\n<body><h1>Scripted gateway error</h1><p>This page stands in for a proxy's error page.</p></body></html>\n";
            let mut response = Response::new(full(page));
            response.headers_mut().insert(
                "content-type",
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            response
        }
        Some(Fault::ErrorBodyWith200) => json_response(
            StatusCode::OK,
            &error_body(
                format,
                "api_error",
                "scripted fault: an error body with status 200",
            ),
        ),
        Some(Fault::ToolCallsIndexZero) => sse_response(shared, frames(), None, Ending::Complete),
        Some(Fault::ColonlessLines) => {
            let out = frames()
                .into_iter()
                .flat_map(|f| [Bytes::from_static(b"keep-alive\n"), f])
                .collect();
            sse_response(shared, out, None, Ending::Complete)
        }
        Some(Fault::ExtraChoices) => {
            let other = Bytes::from_static(
                b"data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"OTHER CHOICE \"}}]}\n\n",
            );
            let out = frames()
                .into_iter()
                .flat_map(|f| {
                    let extra = (format == WireFormat::OpenAi
                        && f.starts_with(b"data: {\"")
                        && f.windows(12).any(|w| w == b"\"choices\":[{"))
                    .then(|| other.clone());
                    std::iter::once(f).chain(extra)
                })
                .collect();
            sse_response(shared, out, None, Ending::Complete)
        }
        Some(Fault::BreakAfterFirstContent) => {
            let mut out = frames();
            let first = first_content_frame(format, &out);
            out.truncate(first + 1);
            sse_response(shared, out, None, Ending::Abort)
        }
        Some(Fault::ManyDataLines { lines, line_bytes }) => {
            many_data_lines(shared, format, frames(), lines, line_bytes)
        }
        Some(Fault::Endless) => endless(shared, format, ctx),
        Some(Fault::PingsOnly { interval_ms }) => pings_only(shared, format, frames(), interval_ms),
        Some(Fault::ContextLengthExceeded { server }) => {
            let server = server.unwrap_or_else(|| match format {
                WireFormat::Anthropic => "anthropic".into(),
                WireFormat::OpenAi | WireFormat::Responses => "openai".into(),
            });
            let tokens = (ctx.request_bytes / 4).max(2);
            json_response(
                StatusCode::BAD_REQUEST,
                &context_length_error(&server, tokens, tokens / 2),
            )
        }
        Some(Fault::Overloaded) => match format {
            WireFormat::Anthropic => {
                let mut out = frames().into_iter().take(1).collect::<Vec<_>>();
                out.push(Bytes::from(format!(
                    "event: error\ndata: {}\n\n",
                    error_body(format, "overloaded_error", "Overloaded")
                )));
                sse_response(shared, out, None, Ending::Complete)
            }
            WireFormat::OpenAi => json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                &error_body(format, "server_error", "scripted fault: overloaded"),
            ),
            WireFormat::Responses => {
                let mut out = frames().into_iter().take(1).collect::<Vec<_>>();
                out.push(Bytes::from(format!(
                    "event: response.failed\ndata: {}\n\n",
                    json!({"type": "response.failed", "response": {"status": "failed",
                        "error": {"code": "server_is_overloaded", "message": "scripted fault: overloaded"}}})
                )));
                sse_response(shared, out, None, Ending::Complete)
            }
        },
    }
}

/// The first `limit` bytes of the frames.
fn truncate(frames: Vec<Bytes>, limit: usize) -> Vec<Bytes> {
    let mut left = limit;
    let mut out = Vec::new();
    for frame in frames {
        if left == 0 {
            break;
        }
        let take = frame.len().min(left);
        left -= take;
        out.push(frame.slice(..take));
    }
    out
}

/// Counts a stream as aborted when dropped before it completed.
struct AbortGuard {
    shared: Arc<Shared>,
    completed: bool,
}

impl AbortGuard {
    /// The stream ended as scripted: its drop is not an abort.
    fn disarm(&mut self) {
        self.completed = true;
    }
}

impl Drop for AbortGuard {
    fn drop(&mut self) {
        if !self.completed {
            self.shared.streams_aborted.send_modify(|n| *n += 1);
        }
    }
}

fn sse_response(
    shared: &Arc<Shared>,
    frames: Vec<Bytes>,
    delay: Option<Duration>,
    ending: Ending,
) -> Response {
    stream_response(shared, futures::stream::iter(frames).boxed(), delay, ending)
}

/// The first frame, one event spread over `lines` `data:` lines (valid JSON
/// padded with whitespace, produced lazily), then the rest of the reply.
fn many_data_lines(
    shared: &Arc<Shared>,
    format: WireFormat,
    frames: Vec<Bytes>,
    lines: usize,
    line_bytes: usize,
) -> Response {
    let (open, close): (&[u8], &[u8]) = match format {
        WireFormat::Anthropic => (
            b"event: ping\ndata: {\"type\": \"ping\",\n",
            b"data: \"kaji\": 1}\n\n",
        ),
        WireFormat::OpenAi => (b"data: {\"choices\": [],\n", b"data: \"kaji\": 1}\n\n"),
        WireFormat::Responses => (
            b"event: response.in_progress\ndata: {\"type\": \"response.in_progress\",\n",
            b"data: \"kaji\": 1}\n\n",
        ),
    };
    let mut padding = b"data: ".to_vec();
    padding.resize(6 + line_bytes.max(1), b' ');
    padding.push(b'\n');
    let padding = Bytes::from(padding);
    let mut frames = frames.into_iter();
    let head: Vec<Bytes> = frames.next().into_iter().collect();
    let body = futures::stream::iter(
        head.into_iter()
            .chain(std::iter::once(Bytes::from_static(open)))
            .chain(std::iter::repeat_n(padding, lines.saturating_sub(2)))
            .chain(std::iter::once(Bytes::from_static(close)))
            .chain(frames),
    );
    stream_response(shared, body.boxed(), None, Ending::Complete)
}

/// A reply whose text never ends: 4096-byte text deltas for ever.
fn endless(shared: &Arc<Shared>, format: WireFormat, ctx: &RenderContext<'_>) -> Response {
    let start = Turn::text("x");
    let mut head = render(format, &start, ctx);
    let piece = "endless ".repeat(512);
    let frame = match format {
        WireFormat::Anthropic => {
            // message_start, ping, content_block_start of the text block.
            head.truncate(3);
            Bytes::from(format!(
                "event: content_block_delta\ndata: {}\n\n",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}})
            ))
        }
        WireFormat::OpenAi => {
            head.truncate(1);
            Bytes::from(format!(
                "data: {}\n\n",
                json!({"id": "chatcmpl-endless", "object": "chat.completion.chunk", "created": 0, "model": ctx.model,
                       "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]})
            ))
        }
        WireFormat::Responses => {
            // response.created and the text item's output_item.added.
            head.truncate(2);
            Bytes::from(format!(
                "event: response.output_text.delta\ndata: {}\n\n",
                json!({"type": "response.output_text.delta", "item_id": "msg_endless", "output_index": 0, "content_index": 0, "delta": piece})
            ))
        }
    };
    let body = futures::stream::iter(head).chain(futures::stream::repeat(frame));
    stream_response(shared, body.boxed(), None, Ending::Hang)
}

/// The first event, then keep-alives for ever, one every `interval_ms`.
fn pings_only(
    shared: &Arc<Shared>,
    format: WireFormat,
    frames: Vec<Bytes>,
    interval_ms: u64,
) -> Response {
    let head: Vec<Bytes> = frames.into_iter().take(1).collect();
    let pings: Vec<Bytes> = match format {
        WireFormat::Anthropic => vec![
            Bytes::from_static(b"event: ping\ndata: {\"type\": \"ping\"}\n\n"),
            Bytes::from_static(b": keep-alive\n\n"),
        ],
        WireFormat::Responses => vec![Bytes::from_static(b": keep-alive\n\n")],
        WireFormat::OpenAi => vec![
            Bytes::from_static(b": OPENROUTER PROCESSING\n\n"),
            Bytes::from_static(b": ping\n\n"),
        ],
    };
    let interval = Duration::from_millis(interval_ms);
    let pings = futures::stream::iter(pings)
        .cycle()
        .then(move |ping| async move {
            tokio::time::sleep(interval).await;
            ping
        });
    let body = futures::stream::iter(head).chain(pings);
    stream_response(shared, body.boxed(), None, Ending::Hang)
}

/// Waits at a hold until the test has released it.
async fn hold(shared: &Shared) {
    let mut reached = 0;
    shared.holds_reached.send_modify(|n| {
        *n += 1;
        reached = *n;
    });
    let mut rx = shared.releases.subscribe();
    let _ = rx.wait_for(|released| *released >= reached).await;
}

fn stream_response(
    shared: &Arc<Shared>,
    frames: futures::stream::BoxStream<'static, Bytes>,
    delay: Option<Duration>,
    ending: Ending,
) -> Response {
    let guard = AbortGuard {
        shared: shared.clone(),
        completed: false,
    };
    let state = (frames, guard, false);
    let stream =
        futures::stream::unfold(state, move |(mut frames, mut guard, finished)| async move {
            if finished {
                return None;
            }
            loop {
                if let Some(delay) = delay {
                    tokio::time::sleep(delay).await;
                }
                match frames.next().await {
                    Some(frame) if frame.is_empty() => hold(&guard.shared).await,
                    Some(frame) => {
                        return Some((Ok::<Bytes, std::io::Error>(frame), (frames, guard, false)));
                    }
                    None => break,
                }
            }
            match ending {
                Ending::Complete => {
                    guard.disarm();
                    None
                }
                Ending::Abort => {
                    guard.disarm();
                    // Let hyper flush what was sent before the abort: it
                    // flushes when the body is pending, and discards its
                    // buffer when the body fails.
                    tokio::task::yield_now().await;
                    let error = std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        "scripted fault: connection dropped mid-stream",
                    );
                    Some((Err(error), (frames, guard, true)))
                }
                Ending::Hang => {
                    futures::future::pending::<()>().await;
                    None
                }
            }
        });
    let mut response = Response::new(streamed(stream));
    let headers = response.headers_mut();
    headers.insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    response
}
