//! The streamable HTTP transport (MCP 2025-03-26 and later): every message
//! kaji sends is a `POST` to the server's URL with
//! `Accept: application/json, text/event-stream`; the reply is a JSON body
//! or an event stream whose `data:` events carry the response (and the
//! server's requests and notifications before it). A notification's `POST`
//! answers 202. The `Mcp-Session-Id` the server gives is sent back on every
//! later request, `MCP-Protocol-Version` once the handshake chose one; a
//! session with an id also gets a `GET` stream for messages the server
//! starts, and a `DELETE` when kaji closes it.
//!
//! It must never retry a request on its own, never lose a JSON-RPC error the
//! server sent with an HTTP error status, and never panic on a reply.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::future::BoxFuture;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::sync::mpsc;

use super::Link;
use super::sse::SseDecoder;
use crate::jsonrpc::{Inbox, Outbox};
use kaji_protocol::error_chain;

/// The session id header.
pub(crate) const SESSION_ID: &str = "mcp-session-id";
/// The negotiated protocol version header.
pub(crate) const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// Headers the transport sets itself; configuring them is an error.
const RESERVED: &[&str] = &["accept", SESSION_ID, "last-event-id"];
/// What kaji accepts in reply to a `POST`.
const POST_ACCEPT: &str = "application/json, text/event-stream";
/// The most of an error body quoted in a message.
const BODY_QUOTE_LIMIT: usize = 500;

/// One streamable HTTP session.
pub(crate) struct HttpOutbox {
    server: String,
    url: String,
    client: reqwest::Client,
    headers: HeaderMap,
    session: Mutex<Option<HeaderValue>>,
    version: Mutex<Option<HeaderValue>>,
    inbox: Inbox,
    replies: mpsc::UnboundedSender<Value>,
}

/// The configured headers, checked.
fn header_map(headers: &BTreeMap<String, String>) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (key, value) in headers {
        let name = HeaderName::from_bytes(key.as_bytes())
            .map_err(|e| format!("invalid header name `{key}`: {e}"))?;
        if RESERVED.contains(&name.as_str()) {
            return Err(format!(
                "header `{key}` is set by the MCP transport itself and cannot be configured"
            ));
        }
        let value = HeaderValue::from_str(value)
            .map_err(|e| format!("invalid value for header `{key}`: {e}"))?;
        map.insert(name, value);
    }
    Ok(map)
}

/// Prepares a session with the server at `url` (nothing is sent yet).
pub(crate) fn connect(
    server: &str,
    url: &str,
    headers: &BTreeMap<String, String>,
) -> Result<Link, String> {
    let headers = header_map(headers)?;
    kaji_tasks::tls::install_crypto_provider();
    let client = reqwest::Client::builder()
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {}", error_chain(&e)))?;
    let (inbox, notifications) = Inbox::new();
    let (replies, queue) = mpsc::unbounded_channel();
    let outbox = Arc::new(HttpOutbox {
        server: server.to_string(),
        url: url.to_string(),
        client,
        headers,
        session: Mutex::new(None),
        version: Mutex::new(None),
        inbox: inbox.clone(),
        replies,
    });
    let replier = tokio::spawn(send_replies(outbox.clone(), queue));
    let peer = inbox.peer(outbox.clone());
    let mut link = Link::new(peer, inbox, notifications, vec![replier]);
    link.http = Some(outbox);
    Ok(link)
}

/// Posts kaji's answers to the server's requests.
async fn send_replies(outbox: Arc<HttpOutbox>, mut queue: mpsc::UnboundedReceiver<Value>) {
    loop {
        let reply = tokio::select! {
            _ = outbox.inbox.closed().cancelled() => return,
            reply = queue.recv() => reply,
        };
        let Some(reply) = reply else { return };
        if let Err(e) = outbox.post(reply).await {
            tracing::warn!(server = %outbox.server, "answering a request of MCP server `{}` failed: {e}", outbox.server);
        }
    }
}

impl Outbox for HttpOutbox {
    fn send(&self, message: Value) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(self.post(message))
    }
}

impl HttpOutbox {
    /// Sends `MCP-Protocol-Version: version` from now on.
    pub fn set_protocol_version(&self, version: &str) {
        if let Ok(value) = HeaderValue::from_str(version) {
            *lock(&self.version) = Some(value);
        }
    }

    /// The session id the server gave, if any.
    #[cfg(test)]
    pub fn session_id(&self) -> Option<String> {
        lock(&self.session)
            .as_ref()
            .and_then(|v| v.to_str().ok().map(str::to_string))
    }

    /// A request to the server's URL with the configured and session headers.
    fn request(&self, method: Method) -> reqwest::RequestBuilder {
        let mut headers = self.headers.clone();
        if let Some(session) = lock(&self.session).clone() {
            headers.insert(SESSION_ID, session);
        }
        if let Some(version) = lock(&self.version).clone() {
            headers.insert(PROTOCOL_VERSION, version);
        }
        self.client.request(method, &self.url).headers(headers)
    }

    /// Posts one message and feeds the reply to the inbox. A request whose
    /// reply ends without its answer is an error.
    async fn post(&self, message: Value) -> Result<(), String> {
        let request_id = message
            .get("method")
            .and(message.get("id"))
            .and_then(Value::as_u64);
        let had_session = lock(&self.session).is_some();
        let response = self
            .request(Method::POST)
            .header(ACCEPT, POST_ACCEPT)
            .header(CONTENT_TYPE, "application/json")
            .body(message.to_string())
            .send()
            .await
            .map_err(|e| error_chain(&e))?;
        self.remember_session(response.headers());
        let status = response.status();
        if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
            return Ok(());
        }
        if !status.is_success() {
            return self.status_error(response, had_session).await;
        }
        let Some(id) = request_id else {
            return Ok(()); // a notification or an answer: nothing to wait for
        };
        self.read_reply(response).await?;
        if self.inbox.is_pending(id) {
            return Err(format!(
                "the server's reply to POST {} ended without the answer",
                self.url
            ));
        }
        Ok(())
    }

    fn remember_session(&self, headers: &HeaderMap) {
        if let Some(session) = headers.get(SESSION_ID) {
            let mut slot = lock(&self.session);
            if slot.is_none() {
                *slot = Some(session.clone());
            }
        }
    }

    /// A JSON body or an event stream, passed to the inbox.
    async fn read_reply(&self, response: reqwest::Response) -> Result<(), String> {
        let content_type = content_type(response.headers());
        if content_type.starts_with("text/event-stream") {
            return self.read_events(response, "the reply's event stream").await;
        }
        if !content_type.starts_with("application/json") {
            return Err(format!(
                "the server answered POST {} with `{content_type}` instead of JSON or an event stream",
                self.url
            ));
        }
        let body = response
            .text()
            .await
            .map_err(|e| format!("reading the reply failed: {}", error_chain(&e)))?;
        self.take(&body, "a JSON reply");
        Ok(())
    }

    /// Feeds every event of `response` to the inbox, until it ends.
    async fn read_events(&self, response: reqwest::Response, source: &str) -> Result<(), String> {
        let mut body = response.bytes_stream();
        let mut decoder = SseDecoder::default();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| format!("{source} broke: {}", error_chain(&e)))?;
            for data in decoder.push(&chunk).map_err(|e| format!("{source}: {e}"))? {
                self.take(&data, source);
            }
        }
        if let Some(data) = decoder.finish().map_err(|e| format!("{source}: {e}"))? {
            self.take(&data, source);
        }
        Ok(())
    }

    fn take(&self, text: &str, source: &str) {
        if let Some(reply) = super::receive(&self.server, &self.inbox, text, source) {
            let _ = self.replies.send(reply);
        }
    }

    /// An HTTP error status: a JSON-RPC error in its body goes to the
    /// request it answers; otherwise the status and what the body says.
    async fn status_error(
        &self,
        response: reqwest::Response,
        had_session: bool,
    ) -> Result<(), String> {
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        if let Ok(Value::Object(message)) = serde_json::from_str::<Value>(&body) {
            let answers = message
                .get("id")
                .and_then(Value::as_u64)
                .is_some_and(|id| self.inbox.is_pending(id));
            if answers && message.contains_key("error") {
                self.take(&body, "an HTTP error reply");
                return Ok(());
            }
        }
        let said = body_message(&body);
        let error = format!(
            "the server answered POST {} with HTTP {status}{said}",
            self.url
        );
        if status == StatusCode::NOT_FOUND && had_session {
            self.inbox.close(&format!(
                "the server ended the HTTP session (HTTP {status}{said})"
            ));
        }
        Err(error)
    }

    /// Opens the `GET` stream for messages the server starts, when the
    /// session has an id; a server without one (405) is fine.
    pub fn listen(self: &Arc<Self>) -> Option<tokio::task::JoinHandle<()>> {
        lock(&self.session).as_ref()?;
        let this = self.clone();
        Some(tokio::spawn(async move {
            tokio::select! {
                _ = this.inbox.closed().cancelled() => {}
                () = this.read_get_stream() => {}
            }
        }))
    }

    async fn read_get_stream(&self) {
        let sent = self
            .request(Method::GET)
            .header(ACCEPT, "text/event-stream")
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(e) => {
                tracing::warn!(server = %self.server, "the event stream of MCP server `{}` could not be opened: {}", self.server, error_chain(&e));
                return;
            }
        };
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            tracing::debug!(server = %self.server, "MCP server offers no event stream of its own");
            return;
        }
        if !status.is_success()
            || !content_type(response.headers()).starts_with("text/event-stream")
        {
            tracing::warn!(server = %self.server, "the event stream of MCP server `{}` was refused: HTTP {status}", self.server);
            return;
        }
        if let Err(e) = self
            .read_events(response, "the server's event stream")
            .await
        {
            tracing::warn!(server = %self.server, "MCP server `{}`: {e}", self.server);
        }
    }

    /// Ends the session on the server (`DELETE`), when it has an id.
    pub async fn end_session(&self) {
        if lock(&self.session).is_none() {
            return;
        }
        match self.request(Method::DELETE).send().await {
            Ok(response) => {
                tracing::debug!(server = %self.server, status = %response.status(), "MCP session ended")
            }
            Err(e) => {
                tracing::debug!(server = %self.server, "ending the MCP session failed: {}", error_chain(&e))
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase()
}

/// What an error body says: a JSON-RPC error's message, or the start of
/// the body; empty for an empty body.
fn body_message(body: &str) -> String {
    let message = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.pointer("/error/message")?.as_str().map(str::to_string));
    let text = message.unwrap_or_else(|| body.trim().chars().take(BODY_QUOTE_LIMIT).collect());
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

#[cfg(test)]
mod tests;
