//! The OpenAI Responses API: `POST {base}/responses` with `stream: true`.
//!
//! Request: the system prompt goes in `instructions`, the conversation in
//! `input` as items (`{role, content}` messages, `function_call` and
//! `function_call_output` items, and `reasoning` items replayed verbatim).
//! Requests are stateless (`store: false`) and ask for
//! `include: ["reasoning.encrypted_content"]`, so that each reasoning item
//! comes back with its encrypted content and can be sent back in the next
//! round, which the API needs to continue its reasoning across tool calls.
//!
//! A reasoning item is kept in kaji's history as a reasoning block whose
//! signature is [`REASONING_PREFIX`] followed by the item's JSON (`id`,
//! `summary`, `encrypted_content`); the summary text is the block's text.
//! An item without any summary becomes a redacted reasoning block with the
//! same data. Only blocks carrying the prefix are replayed here (Anthropic
//! signatures are dropped), and the Anthropic provider drops these.
//!
//! A request's [`ModelRequest::web_search`] offers the hosted `web_search`
//! tool ([`web_search_tool`]) and asks for its sources; the reply's
//! `web_search_call` items are kept ([`ContentBlock::Server`]) and go back
//! in later requests as they came, less their `id` (stateless requests
//! cannot name stored items).
//!
//! Reply events: `response.output_item.added/done`,
//! `response.output_text.delta`, `response.refusal.delta`,
//! `response.function_call_arguments.delta/done`,
//! `response.reasoning_summary_text.delta` (and `response.reasoning_text.delta`
//! of open-weight models), `response.completed`, `response.incomplete`,
//! `response.failed` and `error`; anything else is ignored. This module
//! must never hold state across requests.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use kaji_protocol::{ContentBlock, Message, Role, StopReason, StreamEvent, Usage};
use reqwest::header::{HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::Reasoning;
use crate::sse::SseEvent;
use crate::transport::{EventError, HttpCall, ReplyDecoder, RetryPolicy, stream_reply};
use crate::wire_cache::{MESSAGES_SENTINEL, push_item, splice_messages};
use crate::{LlmError, ModelProvider, ModelRequest, ModelStream, ProviderConfig};

/// The prefix of a reasoning block's signature (or redacted data) that
/// holds a Responses API reasoning item.
pub const REASONING_PREFIX: &str = "openai-responses:";

const PROVIDER: &str = "openai-responses";

/// Provider for the OpenAI Responses API.
pub struct ResponsesProvider {
    client: reqwest::Client,
    url: String,
    model: String,
    headers: HeaderMap,
    policy: RetryPolicy,
    reasoning: Reasoning,
    /// An API key was configured (OPENAI_API_KEY).
    keyed: bool,
}

impl ResponsesProvider {
    pub(crate) fn new(
        cfg: &ProviderConfig,
        client: reqwest::Client,
        policy: RetryPolicy,
    ) -> Result<Self, LlmError> {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert("accept", HeaderValue::from_static("text/event-stream"));
        if let Some(key) = cfg.api_key.as_ref().filter(|k| !k.is_empty()) {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| LlmError::InvalidConfig {
                    provider: PROVIDER,
                    message: "the API key (OPENAI_API_KEY) contains characters not allowed in an HTTP header".into(),
                })?;
            value.set_sensitive(true);
            headers.insert("authorization", value);
        }
        Ok(Self {
            client,
            url: format!("{}/responses", cfg.base_url.trim_end_matches('/')),
            model: cfg.model.clone(),
            headers,
            policy,
            reasoning: cfg.reasoning,
            keyed: cfg.api_key.as_ref().is_some_and(|k| !k.is_empty()),
        })
    }

    /// The URL requests are posted to.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl ModelProvider for ResponsesProvider {
    fn name(&self) -> &str {
        PROVIDER
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let body = request_text(&request, &self.model, self.reasoning);
        let call = HttpCall {
            provider: PROVIDER,
            key_source: crate::openai::key_source(self.keyed),
            client: self.client.clone(),
            url: self.url.clone(),
            headers: self.headers.clone(),
            body: Bytes::from(body),
            policy: self.policy,
        };
        stream_reply(call, ResponsesDecoder::default)
    }
}

/// The hosted `web_search` tool a request offers (its
/// `filters.allowed_domains` when given; the API has no blocked list).
pub fn web_search_tool(search: &crate::ProviderWebSearch) -> Value {
    let mut tool = json!({"type": "web_search"});
    if !search.allowed_domains.is_empty() {
        tool["filters"] = json!({"allowed_domains": search.allowed_domains});
    }
    tool
}

/// The `url_citation` annotations of a finished message item, each as a
/// [`StreamEvent::ServerBlock`].
fn citations(item: &Value, out: &mut Vec<StreamEvent>) {
    let parts = item.get("content").and_then(Value::as_array);
    for part in parts.into_iter().flatten() {
        let notes = part.get("annotations").and_then(Value::as_array);
        for note in notes.into_iter().flatten() {
            if note.get("type").and_then(Value::as_str) == Some("url_citation") {
                out.push(StreamEvent::ServerBlock {
                    block: note.clone(),
                });
            }
        }
    }
}

/// Adds `reasoning: {effort, summary: "auto"}` unless `reasoning` is off.
pub fn apply_reasoning(body: &mut Value, reasoning: Reasoning) {
    if let Some(effort) = reasoning.effort() {
        body["reasoning"] = json!({"effort": effort, "summary": "auto"});
    }
}

/// The JSON body of a streaming, stateless Responses request.
pub fn request_body(request: &ModelRequest, default_model: &str) -> Value {
    let mut input = Vec::new();
    for message in request.messages.iter() {
        push_items(message, &mut input);
    }
    body_with(request, default_model, Value::Array(input))
}

/// The body as sent, with `reasoning` applied: the same bytes as
/// [`request_body`] serialised, but each message's items are serialised
/// once per conversation when the request carries a
/// [`WireCache`](crate::WireCache).
pub fn request_text(request: &ModelRequest, default_model: &str, reasoning: Reasoning) -> String {
    let make = |m: &Message| {
        let mut items = Vec::new();
        push_items(m, &mut items);
        let texts: Vec<String> = items.iter().map(Value::to_string).collect();
        texts.join(",")
    };
    let mut body = body_with(
        request,
        default_model,
        Value::String(MESSAGES_SENTINEL.into()),
    );
    apply_reasoning(&mut body, reasoning);
    let cache = request.wire_cache.as_deref();
    splice_messages(&body.to_string(), "input", cache, |out| match cache {
        Some(cache) => cache.write(out, PROVIDER, &request.messages, make),
        None => request
            .messages
            .iter()
            .for_each(|m| push_item(out, &make(m))),
    })
}

/// The body around `input`.
fn body_with(request: &ModelRequest, default_model: &str, input: Value) -> Value {
    let model = if request.model.is_empty() {
        default_model
    } else {
        &request.model
    };
    let mut body = json!({
        "model": model,
        "stream": true,
        "store": false,
        "include": ["reasoning.encrypted_content"],
        "max_output_tokens": request.max_tokens,
        "input": input,
    });
    if !request.system.is_empty() {
        body["instructions"] = json!(request.system);
    }
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(|t| {
            json!({"type": "function", "name": t.name, "description": t.description,
                   "parameters": t.input_schema, "strict": false})
        })
        .collect();
    if let Some(search) = &request.web_search {
        tools.push(web_search_tool(search));
        body["include"] = json!([
            "reasoning.encrypted_content",
            "web_search_call.action.sources"
        ]);
    }
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    if let Some(t) = request.temperature {
        body["temperature"] = json!(crate::temperature_json(t));
    }
    body
}

/// The reasoning item a block's signature or redacted data holds, if it is
/// one of this API's.
fn reasoning_item(data: &str) -> Option<Value> {
    let raw = data.strip_prefix(REASONING_PREFIX)?;
    let mut item: Value = serde_json::from_str(raw).ok()?;
    let object = item.as_object_mut()?;
    object.insert("type".into(), json!("reasoning"));
    if !object.get("summary").is_some_and(Value::is_array) {
        object.insert("summary".into(), json!([]));
    }
    Some(item)
}

fn push_items(message: &Message, out: &mut Vec<Value>) {
    let mut text = String::new();
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let flush = |text: &mut String, out: &mut Vec<Value>| {
        if !text.is_empty() {
            out.push(json!({"role": role, "content": std::mem::take(text)}));
        }
    };
    for block in &message.content {
        match block {
            ContentBlock::Text { text: t, .. } if !t.is_empty() => {
                if !text.is_empty() {
                    text.push_str("\n\n");
                }
                text.push_str(t);
            }
            ContentBlock::Text { .. } => {}
            ContentBlock::Reasoning {
                signature: Some(data),
                ..
            }
            | ContentBlock::RedactedReasoning { data } => {
                if let Some(item) = reasoning_item(data) {
                    flush(&mut text, out);
                    out.push(item);
                }
            }
            ContentBlock::Reasoning { .. } => {}
            ContentBlock::ToolUse { id, name, input } => {
                flush(&mut text, out);
                out.push(json!({"type": "function_call", "call_id": id, "name": name,
                                "arguments": input.to_string()}));
            }
            // An image (a Read of a PNG, say) goes as an input image of its
            // own user message, after the call outputs before it.
            ContentBlock::Image { media_type, data } => {
                flush(&mut text, out);
                out.push(json!({"role": "user", "content": [{
                    "type": "input_image",
                    "image_url": format!("data:{media_type};base64,{data}"),
                }]}));
            }
            // A search the API ran goes back as its item, without the id:
            // requests are stateless and cannot name stored items.
            ContentBlock::Server { block } if block["type"] == "web_search_call" => {
                flush(&mut text, out);
                let mut item = block.clone();
                if let Some(object) = item.as_object_mut() {
                    object.shift_remove("id");
                }
                out.push(item);
            }
            ContentBlock::Server { .. } => {}
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                // Outputs must follow their calls, before the user's text.
                let output = if *is_error {
                    format!("Error: {content}")
                } else {
                    content.clone()
                };
                out.push(json!({"type": "function_call_output", "call_id": tool_use_id, "output": output}));
            }
        }
    }
    flush(&mut text, out);
}

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    item_id: Option<String>,
    #[serde(default)]
    output_index: Option<u64>,
    #[serde(default)]
    summary_index: Option<u64>,
    #[serde(default)]
    delta: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    response: Option<Value>,
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: Option<String>,
}

/// A function call being streamed.
struct Call {
    call_id: String,
    had_args: bool,
    closed: bool,
}

/// Maps Responses API events to [`StreamEvent`]s.
#[derive(Default)]
pub(crate) struct ResponsesDecoder {
    /// Function calls by item id (or `#output_index` without one).
    calls: HashMap<String, Call>,
    any_tool_call: bool,
    refusal: String,
    /// Reasoning items whose text was streamed, with their last summary index.
    reasoning: HashMap<String, u64>,
    /// Reasoning items already reported.
    reasoning_done: HashSet<String>,
}

fn item_key(item_id: &Option<String>, output_index: Option<u64>) -> String {
    match item_id {
        Some(id) if !id.is_empty() => id.clone(),
        _ => format!("#{}", output_index.unwrap_or(0)),
    }
}

fn str_field(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

impl ResponsesDecoder {
    fn start_call(&mut self, key: String, item: &Value, out: &mut Vec<StreamEvent>) {
        if self.calls.contains_key(&key) {
            return;
        }
        let call_id = str_field(item, "call_id")
            .or_else(|| str_field(item, "id"))
            .unwrap_or_else(|| format!("call_{}", self.calls.len()));
        let name = str_field(item, "name").unwrap_or_default();
        self.any_tool_call = true;
        out.push(StreamEvent::ToolCallStart {
            id: call_id.clone(),
            name,
        });
        self.calls.insert(
            key.clone(),
            Call {
                call_id,
                had_args: false,
                closed: false,
            },
        );
        if let Some(args) = str_field(item, "arguments") {
            self.call_args(&key, args, out);
        }
    }

    fn call_args(&mut self, key: &str, args: String, out: &mut Vec<StreamEvent>) {
        let Some(call) = self.calls.get_mut(key) else {
            return;
        };
        if call.closed || args.is_empty() {
            return;
        }
        call.had_args = true;
        out.push(StreamEvent::ToolCallDelta {
            id: call.call_id.clone(),
            arguments: args,
        });
    }

    /// The call's arguments are complete (`.done` or its item is done).
    fn finish_call(&mut self, key: &str, arguments: Option<String>, out: &mut Vec<StreamEvent>) {
        let had_args = self.calls.get(key).is_some_and(|c| c.had_args);
        if !had_args && let Some(args) = arguments {
            self.call_args(key, args, out);
        }
        if let Some(call) = self.calls.get_mut(key)
            && !call.closed
        {
            call.closed = true;
            out.push(StreamEvent::ToolCallEnd {
                id: call.call_id.clone(),
            });
        }
    }

    fn reasoning_delta(
        &mut self,
        key: String,
        index: u64,
        text: String,
        out: &mut Vec<StreamEvent>,
    ) {
        if text.is_empty() {
            return;
        }
        match self.reasoning.insert(key, index) {
            Some(last) if last != index => out.push(StreamEvent::ReasoningDelta {
                text: "\n\n".into(),
            }),
            _ => {}
        }
        out.push(StreamEvent::ReasoningDelta { text });
    }

    /// A finished reasoning item: its summary (if not streamed) and the
    /// data that replays it.
    fn reasoning_item_done(&mut self, item: &Value, out: &mut Vec<StreamEvent>) {
        let id = str_field(item, "id").unwrap_or_default();
        if !self.reasoning_done.insert(id.clone()) {
            return;
        }
        let summary = item.get("summary").cloned().unwrap_or_else(|| json!([]));
        let mut kept = json!({"id": id, "summary": summary});
        if let Some(content) = item.get("encrypted_content").filter(|c| c.is_string()) {
            kept["encrypted_content"] = content.clone();
        }
        let data = format!("{REASONING_PREFIX}{kept}");
        let streamed = self.reasoning.contains_key(&id);
        let text = summary
            .as_array()
            .map(|parts| {
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n\n")
            })
            .unwrap_or_default();
        if streamed || !text.is_empty() {
            if !streamed {
                out.push(StreamEvent::ReasoningDelta { text });
            }
            out.push(StreamEvent::ReasoningSignature { signature: data });
        } else {
            out.push(StreamEvent::RedactedReasoning { data });
        }
    }

    fn usage(response: &Value, out: &mut Vec<StreamEvent>) {
        let Some(usage) = response.get("usage").filter(|u| u.is_object()) else {
            return;
        };
        let number = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
        let input = number(usage.get("input_tokens"));
        let cached = number(usage.pointer("/input_tokens_details/cached_tokens")).min(input);
        out.push(StreamEvent::Usage(Usage {
            input_tokens: input - cached,
            output_tokens: number(usage.get("output_tokens")),
            cache_read_input_tokens: cached,
            cache_creation_input_tokens: 0,
        }));
    }

    /// `response.completed` or `response.incomplete`.
    fn finish(&mut self, response: &Value, out: &mut Vec<StreamEvent>) {
        let incomplete = response
            .pointer("/incomplete_details/reason")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| {
                (response.get("status").and_then(Value::as_str) == Some("incomplete"))
                    .then(|| "incomplete".to_string())
            });
        if incomplete.is_none() {
            // A completed reply: calls whose `.done` never came end here.
            let mut open: Vec<String> = self
                .calls
                .iter()
                .filter(|(_, c)| !c.closed)
                .map(|(k, _)| k.clone())
                .collect();
            open.sort();
            for key in open {
                self.finish_call(&key, None, out);
            }
        }
        Self::usage(response, out);
        let refusal = std::mem::take(&mut self.refusal);
        let reason = match incomplete.as_deref() {
            Some("content_filter") => StopReason::Refusal {
                category: None,
                explanation: Some(refusal).filter(|r| !r.is_empty()),
            },
            _ if !refusal.is_empty() => StopReason::Refusal {
                category: None,
                explanation: Some(refusal),
            },
            Some("max_output_tokens") => StopReason::MaxTokens,
            Some(other) => StopReason::Other(other.to_string()),
            None if self.any_tool_call => StopReason::ToolUse,
            None => StopReason::EndTurn,
        };
        out.push(StreamEvent::Stop { reason });
    }
}

/// The error a `response.failed` or `error` event reports. The code leads
/// the message (`context_length_exceeded: …`) so that a context overflow is
/// recognised; server errors and rate limits may be retried.
fn server_error(what: &str, code: Option<&Value>, message: Option<&str>) -> EventError {
    let code = code
        .and_then(|c| {
            c.as_str()
                .map(str::to_string)
                .or_else(|| Some(c.to_string()))
        })
        .filter(|c| c != "null");
    let message = message.unwrap_or("(no message)");
    let retryable = matches!(
        code.as_deref(),
        Some("server_error" | "rate_limit_exceeded" | "server_is_overloaded" | "slow_down")
    );
    EventError::Server {
        what: what.into(),
        message: match code {
            Some(code) => format!("{code}: {message}"),
            None => message.to_string(),
        },
        retryable,
    }
}

impl ReplyDecoder for ResponsesDecoder {
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, EventError> {
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(false);
        }
        let ev: Event =
            serde_json::from_str(data).map_err(|e| EventError::InvalidJson(e.to_string()))?;
        let key = item_key(&ev.item_id, ev.output_index);
        match ev.kind.as_str() {
            "response.output_text.delta" => {
                if let Some(text) = ev.delta.filter(|t| !t.is_empty()) {
                    out.push(StreamEvent::TextDelta { text });
                }
            }
            "response.refusal.delta" => self.refusal.push_str(&ev.delta.unwrap_or_default()),
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let index = ev.summary_index.unwrap_or(0);
                self.reasoning_delta(key, index, ev.delta.unwrap_or_default(), out);
            }
            "response.output_item.added" | "response.output_item.done" => {
                let item = ev.item.unwrap_or(Value::Null);
                let key = item_key(&str_field(&item, "id"), ev.output_index);
                let done = ev.kind.ends_with(".done");
                match item.get("type").and_then(Value::as_str) {
                    Some("function_call") => {
                        self.start_call(key.clone(), &item, out);
                        if done {
                            self.finish_call(&key, None, out);
                        }
                    }
                    Some("reasoning") if done => self.reasoning_item_done(&item, out),
                    Some("web_search_call") if done => {
                        out.push(StreamEvent::ServerBlock { block: item })
                    }
                    Some("message") if done => citations(&item, out),
                    _ => {}
                }
            }
            "response.function_call_arguments.delta" => {
                self.call_args(&key, ev.delta.unwrap_or_default(), out)
            }
            "response.function_call_arguments.done" => self.finish_call(&key, ev.arguments, out),
            "response.completed" | "response.incomplete" => {
                self.finish(&ev.response.unwrap_or(Value::Null), out);
                return Ok(true);
            }
            "response.failed" => {
                let response = ev.response.unwrap_or(Value::Null);
                let error = response.get("error").cloned().unwrap_or(Value::Null);
                return Err(server_error(
                    "reported `response.failed`",
                    error.get("code"),
                    error.get("message").and_then(Value::as_str),
                ));
            }
            "error" => {
                return Err(server_error(
                    "sent an error in the stream",
                    ev.code.as_ref(),
                    ev.message.as_deref(),
                ));
            }
            _ => {}
        }
        Ok(false)
    }

    fn is_keepalive(&self, event: &SseEvent) -> bool {
        let data = event.data.trim();
        data.is_empty() || event.event == "keepalive"
    }

    fn on_eof(&mut self, _out: &mut Vec<StreamEvent>) -> Result<(), String> {
        Err("the stream ended before `response.completed`".to_string())
    }
}

#[cfg(test)]
mod tests;
