//! The OpenAI Chat Completions API: `POST {base}/chat/completions` with
//! `stream: true` and `stream_options.include_usage`.
//!
//! One provider for OpenAI and every server that copies its API (Ollama,
//! vLLM, llama.cpp's server, LM Studio, OpenRouter), so the decoder is
//! lenient where those servers differ: usage may never come, `[DONE]` may
//! be missing after a `finish_reason`, tool-call ids may be missing (an id
//! `call_{index}` is made up), reasoning may arrive as
//! `delta.reasoning_content` or `delta.reasoning`, and a `finish_reason` of
//! `stop` on a reply that called tools means the tools should run.
//!
//! Tool calls are closed (`ToolCallEnd`) as soon as the next call begins or
//! their arguments form a complete JSON object, so tools can start before
//! the reply ends. A call is told apart by its `index` and, for servers that
//! send every call with `index: 0`, by its `id`. After `finish_reason:
//! "length"` a call with incomplete arguments stays open (cut off by the
//! output limit). `content_filter` and `delta.refusal` are refusals.
//!
//! Request: the `reasoning` setting is sent as `reasoning_effort`
//! (`low`/`medium`/`high`, nothing for `off`); reasoning blocks are dropped
//! (the API has no way to send them back), tool results become `role: "tool"` messages with `tool_call_id`
//! (an error result's content is prefixed with `Error: `).

use std::collections::HashMap;

use bytes::Bytes;
use kaji_protocol::{ContentBlock, Message, Role, StopReason, StreamEvent, Usage};
use reqwest::header::{HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::json_scan::JsonScan;
use crate::sse::SseEvent;
use crate::transport::{
    EventError, HttpCall, ReplyDecoder, RetryPolicy, json_error_message, stream_reply,
};
use crate::wire_cache::{MESSAGES_SENTINEL, push_item, splice_messages};
use crate::{LlmError, ModelProvider, ModelRequest, ModelStream, ProviderConfig};

/// Provider for the OpenAI Chat Completions API and compatible servers.
pub struct OpenAiProvider {
    client: reqwest::Client,
    url: String,
    model: String,
    headers: HeaderMap,
    policy: RetryPolicy,
    /// `max_completion_tokens` (api.openai.com) or `max_tokens` (others).
    max_tokens_field: &'static str,
    reasoning: crate::Reasoning,
    /// An API key was configured (OPENAI_API_KEY).
    keyed: bool,
}

impl OpenAiProvider {
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
                    provider: "openai",
                    message: "the API key (OPENAI_API_KEY) contains characters not allowed in an HTTP header".into(),
                })?;
            value.set_sensitive(true);
            headers.insert("authorization", value);
        }
        let base = cfg.base_url.trim_end_matches('/');
        let max_tokens_field = if base.contains("://api.openai.com") {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        Ok(Self {
            client,
            url: format!("{base}/chat/completions"),
            model: cfg.model.clone(),
            headers,
            policy,
            max_tokens_field,
            reasoning: cfg.reasoning,
            keyed: cfg.api_key.as_ref().is_some_and(|k| !k.is_empty()),
        })
    }

    /// The URL requests are posted to.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl ModelProvider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let body = request_text(&request, &self.model, self.max_tokens_field, self.reasoning);
        let call = HttpCall {
            provider: "openai",
            key_source: crate::openai::key_source(self.keyed),
            client: self.client.clone(),
            url: self.url.clone(),
            headers: self.headers.clone(),
            body: Bytes::from(body),
            policy: self.policy,
        };
        stream_reply(call, OpenAiDecoder::default)
    }
}

/// Where an OpenAI-format provider's key came from, for a 401 or 403.
pub(crate) fn key_source(keyed: bool) -> &'static str {
    if keyed {
        "OPENAI_API_KEY"
    } else {
        "nowhere: set OPENAI_API_KEY"
    }
}

/// The JSON body of a streaming chat completion request. `max_tokens_field`
/// is `max_tokens` or `max_completion_tokens`.
pub fn request_body(request: &ModelRequest, default_model: &str, max_tokens_field: &str) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = system_message(request) {
        messages.push(system);
    }
    for message in request.messages.iter() {
        push_message(message, &mut messages);
    }
    body_with(
        request,
        default_model,
        max_tokens_field,
        Value::Array(messages),
    )
}

/// The body as sent, with `reasoning` applied: the same bytes as
/// [`request_body`] serialised, but each message is serialised once per
/// conversation when the request carries a
/// [`WireCache`](crate::WireCache).
pub fn request_text(
    request: &ModelRequest,
    default_model: &str,
    max_tokens_field: &str,
    reasoning: crate::Reasoning,
) -> String {
    let make = |m: &Message| {
        let mut values = Vec::new();
        push_message(m, &mut values);
        let texts: Vec<String> = values.iter().map(Value::to_string).collect();
        texts.join(",")
    };
    let mut body = body_with(
        request,
        default_model,
        max_tokens_field,
        Value::String(MESSAGES_SENTINEL.into()),
    );
    if let Some(effort) = reasoning.effort() {
        body["reasoning_effort"] = json!(effort);
    }
    let cache = request.wire_cache.as_deref();
    splice_messages(&body.to_string(), "messages", cache, |out| {
        if let Some(system) = system_message(request) {
            push_item(out, &system.to_string());
        }
        match cache {
            Some(cache) => cache.write(out, "openai", &request.messages, make),
            None => request
                .messages
                .iter()
                .for_each(|m| push_item(out, &make(m))),
        }
    })
}

/// The system prompt as the first message, unless it is empty.
fn system_message(request: &ModelRequest) -> Option<Value> {
    (!request.system.is_empty()).then(|| json!({"role": "system", "content": request.system}))
}

/// The body around `messages`.
fn body_with(
    request: &ModelRequest,
    default_model: &str,
    max_tokens_field: &str,
    messages: Value,
) -> Value {
    let model = if request.model.is_empty() {
        default_model
    } else {
        &request.model
    };
    let mut body = json!({
        "model": model,
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": messages,
    });
    body[max_tokens_field] = json!(request.max_tokens);
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema,
                }})
            })
            .collect();
    }
    if let Some(t) = request.temperature {
        body["temperature"] = json!(crate::temperature_json(t));
    }
    body
}

fn push_message(message: &Message, out: &mut Vec<Value>) {
    let mut text = String::new();
    let mut push_text = |t: &str| {
        if !text.is_empty() && !t.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(t);
    };
    match message.role {
        Role::User => {
            // Tool results must directly follow the assistant message that
            // called the tools, so they go before the user's text. Tool
            // messages carry only text: images (a tool's, or the user's)
            // go in the user message after them.
            let mut images = Vec::new();
            let mut last_result: Option<&str> = None;
            for block in &message.content {
                match block {
                    ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } => {
                        let content = if *is_error {
                            format!("Error: {content}")
                        } else {
                            content.clone()
                        };
                        out.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}));
                        last_result = Some(tool_use_id);
                    }
                    ContentBlock::Text { text, .. } => {
                        push_text(text);
                        last_result = None;
                    }
                    ContentBlock::Image { media_type, data } => {
                        if let Some(id) = last_result {
                            images.push(json!({"type": "text", "text": format!("The image returned by tool call {id}:")}));
                        }
                        images.push(json!({"type": "image_url", "image_url": {
                            "url": format!("data:{media_type};base64,{data}"),
                        }}));
                    }
                    _ => {}
                }
            }
            if !images.is_empty() {
                if !text.is_empty() {
                    images.push(json!({"type": "text", "text": text}));
                }
                out.push(json!({"role": "user", "content": images}));
            } else if !text.is_empty() {
                out.push(json!({"role": "user", "content": text}));
            }
        }
        Role::Assistant => {
            let mut calls = Vec::new();
            for block in &message.content {
                match block {
                    ContentBlock::Text { text, .. } => push_text(text),
                    ContentBlock::ToolUse { id, name, input } => calls.push(json!({
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": input.to_string()},
                    })),
                    _ => {}
                }
            }
            if text.is_empty() && calls.is_empty() {
                return;
            }
            let mut msg = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
            if !calls.is_empty() {
                msg["tool_calls"] = Value::Array(calls);
            }
            out.push(msg);
        }
    }
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    /// Which choice (a request with `n` > 1 streams several, interleaved).
    #[serde(default)]
    index: u32,
    #[serde(default)]
    delta: Option<ChunkDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChunkDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// A tool call being streamed.
struct OpenCall {
    id: String,
    /// The id came from the server (not made up).
    id_given: bool,
    name: String,
    /// Arguments received before the name (sent once it is known).
    pending_args: String,
    started: bool,
    /// Its `ToolCallEnd` has been sent.
    closed: bool,
    scan: JsonScan,
}

/// Maps chat completion chunks to [`StreamEvent`]s.
#[derive(Default)]
pub(crate) struct OpenAiDecoder {
    /// Every call of the reply, in the order they began.
    calls: Vec<OpenCall>,
    /// `index` → position in `calls` of the call that index stands for now.
    by_index: HashMap<u64, usize>,
    any_tool_call: bool,
    finish: Option<String>,
    /// `delta.refusal` text (OpenAI's refusal message).
    refusal: String,
}

impl OpenAiDecoder {
    /// Ends call `pos`: a call whose name never came is still reported, so
    /// the caller can answer it with an error.
    fn close(&mut self, pos: usize, out: &mut Vec<StreamEvent>) {
        let call = &mut self.calls[pos];
        if call.closed {
            return;
        }
        if !call.started {
            call.started = true;
            out.push(StreamEvent::ToolCallStart {
                id: call.id.clone(),
                name: call.name.clone(),
            });
            if !call.pending_args.is_empty() {
                out.push(StreamEvent::ToolCallDelta {
                    id: call.id.clone(),
                    arguments: std::mem::take(&mut call.pending_args),
                });
            }
        }
        call.closed = true;
        out.push(StreamEvent::ToolCallEnd {
            id: call.id.clone(),
        });
    }

    /// At the finish: every open call ends, except after `length`, where a
    /// call with incomplete arguments stays open (it was cut off and must
    /// not run).
    fn end_calls(&mut self, cut_off: bool, out: &mut Vec<StreamEvent>) {
        for pos in 0..self.calls.len() {
            if cut_off {
                let call = &mut self.calls[pos];
                if !call.closed && !call.started {
                    call.started = true;
                    out.push(StreamEvent::ToolCallStart {
                        id: call.id.clone(),
                        name: call.name.clone(),
                    });
                    if !call.pending_args.is_empty() {
                        out.push(StreamEvent::ToolCallDelta {
                            id: call.id.clone(),
                            arguments: std::mem::take(&mut call.pending_args),
                        });
                    }
                }
                if !call.closed && (call.scan.is_empty() && call.pending_args.is_empty()) {
                    self.close(pos, out);
                }
                continue;
            }
            self.close(pos, out);
        }
    }

    fn stop(&mut self, out: &mut Vec<StreamEvent>) {
        let finish = self.finish.take();
        self.end_calls(finish.as_deref() == Some("length"), out);
        let refusal = std::mem::take(&mut self.refusal);
        let reason = match finish.as_deref() {
            Some("content_filter") => StopReason::Refusal {
                category: None,
                explanation: Some(refusal).filter(|r| !r.is_empty()),
            },
            _ if !refusal.is_empty() => StopReason::Refusal {
                category: None,
                explanation: Some(refusal),
            },
            Some("tool_calls") | Some("function_call") => StopReason::ToolUse,
            Some("stop") | None if self.any_tool_call => StopReason::ToolUse,
            Some("stop") | None => StopReason::EndTurn,
            Some("length") => StopReason::MaxTokens,
            Some(other) => StopReason::Other(other.to_string()),
        };
        out.push(StreamEvent::Stop { reason });
    }

    /// The position of the call a delta belongs to, starting a new one when
    /// the delta begins a call: a new `index`, a different server-given id
    /// at the same index (servers that send every call with `index: 0`), or
    /// a name after the index's call was closed. Starting a call closes
    /// every earlier one.
    fn call_for(
        &mut self,
        index: u64,
        id: Option<&str>,
        has_name: bool,
        out: &mut Vec<StreamEvent>,
    ) -> usize {
        if let Some(&pos) = self.by_index.get(&index) {
            let call = &self.calls[pos];
            let other_id = matches!(id, Some(id) if call.id_given && id != call.id);
            let begins_anew = other_id || (call.closed && has_name);
            if !begins_anew {
                return pos;
            }
        }
        for pos in 0..self.calls.len() {
            self.close(pos, out);
        }
        let pos = self.calls.len();
        let (id, id_given) = match id {
            Some(id) => (id.to_string(), true),
            None => (format!("call_{pos}"), false),
        };
        self.calls.push(OpenCall {
            id,
            id_given,
            name: String::new(),
            pending_args: String::new(),
            started: false,
            closed: false,
            scan: JsonScan::default(),
        });
        self.by_index.insert(index, pos);
        pos
    }

    fn tool_delta(
        &mut self,
        delta: ToolCallDelta,
        position: usize,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), EventError> {
        let index = delta.index.unwrap_or(position as u64);
        let function = delta.function.unwrap_or(FunctionDelta {
            name: None,
            arguments: None,
        });
        let id = delta.id.filter(|id| !id.is_empty());
        let name = function.name.filter(|n| !n.is_empty());
        let pos = self.call_for(index, id.as_deref(), name.is_some(), out);
        let call = &mut self.calls[pos];
        let args = function.arguments.unwrap_or_default();
        if call.closed {
            if !args.trim().is_empty() {
                return Err(EventError::InvalidJson(format!(
                    "the arguments of tool call {} continue after a complete JSON object: {}",
                    call.id,
                    crate::sse::excerpt(args.as_bytes())
                )));
            }
            return Ok(());
        }
        if !call.started {
            if let Some(id) = id
                && !call.id_given
            {
                call.id = id;
                call.id_given = true;
            }
            if let Some(name) = &name {
                call.name.push_str(name);
            }
            call.pending_args.push_str(&args);
            if call.name.is_empty() {
                return Ok(());
            }
            call.started = true;
            self.any_tool_call = true;
            out.push(StreamEvent::ToolCallStart {
                id: call.id.clone(),
                name: call.name.clone(),
            });
            let pending = std::mem::take(&mut call.pending_args);
            call.scan.feed(&pending);
            if !pending.is_empty() {
                out.push(StreamEvent::ToolCallDelta {
                    id: call.id.clone(),
                    arguments: pending,
                });
            }
        } else if !args.is_empty() {
            call.scan.feed(&args);
            out.push(StreamEvent::ToolCallDelta {
                id: call.id.clone(),
                arguments: args,
            });
        }
        if call.scan.is_complete() {
            self.close(pos, out);
        }
        Ok(())
    }
}

impl ReplyDecoder for OpenAiDecoder {
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, EventError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.stop(out);
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Chunk =
            serde_json::from_str(data).map_err(|e| EventError::InvalidJson(e.to_string()))?;
        if let Some(error) = chunk.error {
            let value = json!({"error": error});
            return Err(EventError::Server {
                what: "sent an error in the stream".into(),
                message: json_error_message(&value).unwrap_or_default(),
                retryable: false,
            });
        }
        // Only the first choice is the reply: the others of a multi-choice
        // stream are dropped, never interleaved into it.
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0).take(1) {
            if let Some(delta) = choice.delta {
                if let Some(text) = delta
                    .reasoning_content
                    .or(delta.reasoning)
                    .filter(|t| !t.is_empty())
                {
                    out.push(StreamEvent::ReasoningDelta { text });
                }
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    out.push(StreamEvent::TextDelta { text });
                }
                if let Some(text) = delta.refusal.filter(|t| !t.is_empty()) {
                    self.refusal.push_str(&text);
                }
                for (position, call) in delta.tool_calls.unwrap_or_default().into_iter().enumerate()
                {
                    self.tool_delta(call, position, out)?;
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.end_calls(reason == "length", out);
                self.finish = Some(reason);
            }
        }
        if let Some(usage) = chunk.usage {
            // OpenAI's prompt_tokens include the cached ones; kaji's
            // input_tokens never do (as Anthropic counts).
            let cached = usage
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0)
                .min(usage.prompt_tokens);
            out.push(StreamEvent::Usage(Usage {
                input_tokens: usage.prompt_tokens - cached,
                output_tokens: usage.completion_tokens,
                cache_read_input_tokens: cached,
                cache_creation_input_tokens: 0,
            }));
        }
        Ok(false)
    }

    fn is_keepalive(&self, event: &SseEvent) -> bool {
        event.data.trim().is_empty()
    }

    fn on_eof(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), String> {
        if self.finish.is_some() {
            self.stop(out);
            Ok(())
        } else {
            Err("the stream ended before a `finish_reason` and `data: [DONE]`".to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kaji_protocol::ToolSpec;

    fn run(datas: &[&str]) -> (Vec<StreamEvent>, Result<bool, EventError>) {
        let mut decoder = OpenAiDecoder::default();
        let mut out = Vec::new();
        let mut last = Ok(false);
        for data in datas {
            let ev = SseEvent {
                event: String::new(),
                data: data.to_string(),
                offset: 0,
            };
            last = decoder.on_event(&ev, &mut out);
            if last.is_err() {
                break;
            }
        }
        (out, last)
    }

    #[test]
    fn maps_text_reasoning_tools_and_usage() {
        let (out, last) = run(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"think"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning":" more"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hello"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"Read","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"Glob","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}"#,
            "[DONE]",
        ]);
        assert!(matches!(last, Ok(true)));
        assert_eq!(
            out,
            vec![
                StreamEvent::ReasoningDelta {
                    text: "think".into()
                },
                StreamEvent::ReasoningDelta {
                    text: " more".into()
                },
                StreamEvent::TextDelta {
                    text: "Hello".into()
                },
                StreamEvent::ToolCallStart {
                    id: "a".into(),
                    name: "Read".into()
                },
                StreamEvent::ToolCallDelta {
                    id: "a".into(),
                    arguments: "{\"x\":".into()
                },
                StreamEvent::ToolCallDelta {
                    id: "a".into(),
                    arguments: "1}".into()
                },
                StreamEvent::ToolCallEnd { id: "a".into() },
                StreamEvent::ToolCallStart {
                    id: "b".into(),
                    name: "Glob".into()
                },
                StreamEvent::ToolCallDelta {
                    id: "b".into(),
                    arguments: "{}".into()
                },
                StreamEvent::ToolCallEnd { id: "b".into() },
                StreamEvent::Usage(Usage {
                    input_tokens: 5,
                    output_tokens: 3,
                    cache_read_input_tokens: 2,
                    cache_creation_input_tokens: 0
                }),
                StreamEvent::Stop {
                    reason: StopReason::ToolUse
                },
            ]
        );
    }

    #[test]
    fn lenient_with_compatible_servers() {
        // No id, name after arguments, finish_reason "stop" with tools, no [DONE].
        let mut decoder = OpenAiDecoder::default();
        let mut out = Vec::new();
        for data in [
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"Bash","arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
        ] {
            let ev = SseEvent {
                event: String::new(),
                data: data.into(),
                offset: 0,
            };
            decoder.on_event(&ev, &mut out).unwrap();
        }
        decoder.on_eof(&mut out).unwrap();
        assert_eq!(
            out,
            vec![
                StreamEvent::ToolCallStart {
                    id: "call_0".into(),
                    name: "Bash".into()
                },
                StreamEvent::ToolCallDelta {
                    id: "call_0".into(),
                    arguments: "{\"a\":1}".into()
                },
                StreamEvent::ToolCallEnd {
                    id: "call_0".into()
                },
                StreamEvent::Stop {
                    reason: StopReason::ToolUse
                },
            ]
        );
    }

    #[test]
    fn calls_close_early_and_index_zero_calls_stay_apart() {
        let (out, last) = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"Read","arguments":"{\"p\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"Glob","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":2}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"  "}}]}}]}"#,
        ]);
        assert!(matches!(last, Ok(false)));
        let ends: Vec<_> = out
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolCallEnd { id } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        // `a` ends when `b` begins (its arguments incomplete), `b` once its
        // arguments are a complete object; both before any finish_reason.
        assert_eq!(ends, vec!["a", "b"]);
        let (_, last) = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"Read","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
        ]);
        assert!(
            matches!(last, Err(EventError::InvalidJson(ref m)) if m.contains("continue after"))
        );
    }

    #[test]
    fn length_leaves_a_cut_call_open_and_refusals_explain() {
        let (out, _) = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"Write","arguments":"{\"content\":\"hel"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#,
            "[DONE]",
        ]);
        assert!(
            !out.iter()
                .any(|e| matches!(e, StreamEvent::ToolCallEnd { .. }))
        );
        assert_eq!(
            out.last(),
            Some(&StreamEvent::Stop {
                reason: StopReason::MaxTokens
            })
        );
        let (out, _) = run(&[
            r#"{"choices":[{"delta":{"refusal":"I can't "}}]}"#,
            r#"{"choices":[{"delta":{"refusal":"help with that."},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]);
        assert_eq!(
            out.last(),
            Some(&StreamEvent::Stop {
                reason: StopReason::Refusal {
                    category: None,
                    explanation: Some("I can't help with that.".into())
                }
            })
        );
    }

    #[test]
    fn eof_without_finish_is_broken() {
        let mut decoder = OpenAiDecoder::default();
        assert!(decoder.on_eof(&mut Vec::new()).is_err());
    }

    #[test]
    fn error_chunk_and_bad_json() {
        let (_, last) = run(&[r#"{"error":{"message":"upstream failed","code":502}}"#]);
        assert!(
            matches!(last, Err(EventError::Server { ref message, .. }) if message == "upstream failed")
        );
        let (_, last) = run(&["{not json"]);
        assert!(matches!(last, Err(EventError::InvalidJson(_))));
    }

    #[test]
    fn request_body_maps_history() {
        let request = ModelRequest {
            model: "m".into(),
            system: "sys".into(),
            messages: vec![
                Message::user_text("hi"),
                Message {
                    role: Role::Assistant,
                    content: vec![
                        ContentBlock::Reasoning {
                            text: "dropped".into(),
                            signature: None,
                        },
                        ContentBlock::text("ok"),
                        ContentBlock::ToolUse {
                            id: "c1".into(),
                            name: "Read".into(),
                            input: json!({"p": 1}),
                        },
                    ],
                },
                Message {
                    role: Role::User,
                    content: vec![
                        ContentBlock::tool_result("c1", "boom", true),
                        ContentBlock::text("next"),
                    ],
                },
            ]
            .into(),
            tools: vec![ToolSpec {
                name: "Read".into(),
                description: "d".into(),
                input_schema: json!({"type": "object"}),
            }],
            max_tokens: 9,
            temperature: None,
            web_search: None,
            wire_cache: None,
        };
        assert_eq!(
            request_body(&request, "default", "max_tokens"),
            json!({
                "model": "m",
                "stream": true,
                "stream_options": {"include_usage": true},
                "max_tokens": 9,
                "tools": [{"type": "function", "function": {"name": "Read", "description": "d", "parameters": {"type": "object"}}}],
                "messages": [
                    {"role": "system", "content": "sys"},
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "ok", "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{\"p\":1}"}}
                    ]},
                    {"role": "tool", "tool_call_id": "c1", "content": "Error: boom"},
                    {"role": "user", "content": "next"},
                ],
            })
        );
    }

    #[test]
    fn images_go_in_a_user_message_after_the_tool_messages() {
        let request = ModelRequest {
            model: "m".into(),
            system: String::new(),
            messages: vec![Message {
                role: Role::User,
                content: vec![
                    ContentBlock::tool_result("c1", "Image a.png", false),
                    ContentBlock::image("image/png", "iVBO"),
                    ContentBlock::text("look"),
                ],
            }]
            .into(),
            tools: vec![],
            max_tokens: 9,
            temperature: None,
            web_search: None,
            wire_cache: None,
        };
        let body = request_body(&request, "default", "max_tokens");
        let messages = body["messages"].as_array().expect("messages");
        let tail = &messages[messages.len() - 2..];
        assert_eq!(
            tail,
            [
                json!({"role": "tool", "tool_call_id": "c1", "content": "Image a.png"}),
                json!({"role": "user", "content": [
                    {"type": "text", "text": "The image returned by tool call c1:"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
                    {"type": "text", "text": "look"},
                ]}),
            ]
        );
    }
}
