//! The Anthropic Messages API: `POST {base}/v1/messages` with
//! `stream: true`.
//!
//! Request: the system prompt goes in `system` (one text block); prompt
//! cache breakpoints (`cache_control: {"type": "ephemeral"}`) go on the
//! last tool, the system prompt, and the last block of the last message and
//! of the user message before it (at most 4); thinking blocks that carry a
//! signature are sent back as `thinking` blocks (unsigned ones are dropped:
//! the API rejects them, as are Responses API reasoning items), redacted thinking as `redacted_thinking`, tool
//! results as `tool_result` blocks. The `reasoning` setting turns on
//! extended thinking with a budget ([`apply_reasoning`]) and the
//! interleaved-thinking beta. Reply: `message_start`,
//! `content_block_start/delta/stop`, `message_delta`, `message_stop`,
//! `ping` and `error` events. Blocks of tools the server runs
//! (`server_tool_use`, `web_search_tool_result`, …) are kept whole, their
//! input assembled from its deltas, as [`StreamEvent::ServerBlock`]s; blocks
//! of other types kaji does not know are ignored, as are unknown fields.
//! Text blocks that cite search results (`citations`, from
//! `citations_delta`s) are also given whole when they stop, after their
//! text. A request's [`ModelRequest::web_search`] offers the server-side
//! `web_search` tool ([`web_search_tool`]); the kept blocks
//! ([`ContentBlock::Server`]) go back unchanged in later requests, a cited
//! text block in place of the text block before it. A tool call whose arguments are not
//! complete JSON when its block stops gets its `ToolCallEnd` only if the
//! reply did not stop at `max_tokens`: a call cut off by the output limit
//! stays open, so the caller can tell the model. `stop_reason: "refusal"`
//! carries `stop_details.category` and `.explanation`. This module must
//! never hold state across requests.

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

/// The `anthropic-version` header value sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Provider for the Anthropic Messages API.
pub struct AnthropicProvider {
    client: reqwest::Client,
    url: String,
    model: String,
    headers: HeaderMap,
    policy: RetryPolicy,
    reasoning: crate::Reasoning,
    key_source: &'static str,
}

/// The beta that lets Claude think between tool calls.
pub const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";

impl AnthropicProvider {
    pub(crate) fn new(
        cfg: &ProviderConfig,
        client: reqwest::Client,
        policy: RetryPolicy,
    ) -> Result<Self, LlmError> {
        let invalid = |message: String| LlmError::InvalidConfig {
            provider: "anthropic",
            message,
        };
        let mut headers = HeaderMap::new();
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert("accept", HeaderValue::from_static("text/event-stream"));
        if let Some(token) = &cfg.auth_token {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| invalid("the auth token (ANTHROPIC_AUTH_TOKEN) contains characters not allowed in an HTTP header".into()))?;
            value.set_sensitive(true);
            headers.insert("authorization", value);
        } else if let Some(key) = &cfg.api_key {
            let mut value = HeaderValue::from_str(key)
                .map_err(|_| invalid("the API key (ANTHROPIC_API_KEY) contains characters not allowed in an HTTP header".into()))?;
            value.set_sensitive(true);
            headers.insert("x-api-key", value);
        }
        if cfg.reasoning != crate::Reasoning::Off {
            headers.insert(
                "anthropic-beta",
                HeaderValue::from_static(INTERLEAVED_THINKING_BETA),
            );
        }
        Ok(Self {
            client,
            url: format!("{}/v1/messages", cfg.base_url.trim_end_matches('/')),
            model: cfg.model.clone(),
            headers,
            policy,
            reasoning: cfg.reasoning,
            key_source: if cfg.auth_token.is_some() {
                "ANTHROPIC_AUTH_TOKEN"
            } else if cfg.api_key.is_some() {
                "ANTHROPIC_API_KEY"
            } else {
                "nowhere: set ANTHROPIC_API_KEY"
            },
        })
    }

    /// The URL requests are posted to.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl ModelProvider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let body = request_text(&request, &self.model, self.reasoning);
        let call = HttpCall {
            provider: "anthropic",
            key_source: self.key_source,
            client: self.client.clone(),
            url: self.url.clone(),
            headers: self.headers.clone(),
            body: Bytes::from(body),
            policy: self.policy,
        };
        stream_reply(call, AnthropicDecoder::default)
    }
}

/// The server-side web search tool's type.
pub const WEB_SEARCH_TOOL_TYPE: &str = "web_search_20250305";

/// The server-side `web_search` tool a request offers. The API takes
/// `allowed_domains` or `blocked_domains`, not both: with both, only the
/// allowed list is sent.
pub fn web_search_tool(search: &crate::ProviderWebSearch) -> Value {
    let mut tool = json!({"type": WEB_SEARCH_TOOL_TYPE, "name": "web_search", "max_uses": search.max_uses.max(1)});
    if !search.allowed_domains.is_empty() {
        tool["allowed_domains"] = json!(search.allowed_domains);
    } else if !search.blocked_domains.is_empty() {
        tool["blocked_domains"] = json!(search.blocked_domains);
    }
    tool
}

/// The JSON body of a streaming Messages request.
pub fn request_body(request: &ModelRequest, default_model: &str) -> Value {
    let mut messages: Vec<Value> = request.messages.iter().filter_map(message_json).collect();
    mark_conversation_end(&mut messages);
    body_with(request, default_model, Value::Array(messages))
}

/// The body as sent, with `reasoning` applied: the same bytes as
/// [`request_body`] serialised, but each message before the marked end is
/// serialised once per conversation when the request carries a
/// [`WireCache`](crate::WireCache).
pub fn request_text(
    request: &ModelRequest,
    default_model: &str,
    reasoning: crate::Reasoning,
) -> String {
    let (start, tail) = marked_tail(&request.messages);
    let make = |m: &Message| message_json(m).map(|v| v.to_string()).unwrap_or_default();
    let mut body = body_with(
        request,
        default_model,
        Value::String(MESSAGES_SENTINEL.into()),
    );
    apply_reasoning(&mut body, reasoning);
    let cache = request.wire_cache.as_deref();
    splice_messages(&body.to_string(), "messages", cache, |out| {
        let prefix = &request.messages[..start];
        match cache {
            Some(cache) => cache.write(out, "anthropic", prefix, make),
            None => prefix.iter().for_each(|m| push_item(out, &make(m))),
        }
        for value in &tail {
            push_item(out, &value.to_string());
        }
    })
}

/// The body around `messages`.
fn body_with(request: &ModelRequest, default_model: &str, messages: Value) -> Value {
    let model = if request.model.is_empty() {
        default_model
    } else {
        &request.model
    };
    let mut body = json!({
        "model": model,
        "max_tokens": request.max_tokens,
        "stream": true,
    });
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
        .collect();
    if let Some(last) = tools.last_mut() {
        last["cache_control"] = ephemeral();
    }
    if let Some(search) = &request.web_search {
        tools.insert(0, web_search_tool(search));
    }
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    if !request.system.is_empty() {
        body["system"] =
            json!([{"type": "text", "text": request.system, "cache_control": ephemeral()}]);
    }
    body["messages"] = messages;
    if let Some(t) = request.temperature {
        body["temperature"] = json!(crate::temperature_json(t));
    }
    body
}

/// Turns extended thinking on unless `reasoning` is off: `thinking:
/// {type: "enabled", budget_tokens}`, `max_tokens` raised above the budget
/// when it is not (by the request's own limit, at least 1024), and no
/// `temperature` (thinking allows none but the default).
pub fn apply_reasoning(body: &mut Value, reasoning: crate::Reasoning) {
    let Some(budget) = reasoning.budget_tokens() else {
        return;
    };
    let budget = u64::from(budget);
    body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
    let max = body["max_tokens"].as_u64().unwrap_or(0);
    if max <= budget {
        body["max_tokens"] = json!(budget + max.max(1024));
    }
    if let Some(object) = body.as_object_mut() {
        object.remove("temperature");
    }
}

/// Whether a reasoning block's signature or data belongs to another API
/// (a Responses reasoning item), which Anthropic would reject.
fn foreign(data: &str) -> bool {
    data.starts_with(crate::responses::REASONING_PREFIX)
}

/// A prompt-cache breakpoint.
fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// Puts breakpoints on the last cacheable block of the last message and of
/// the user message before it, so that each round reads the previous
/// round's prefix from the cache. With the tools' and the system prompt's
/// that makes at most 4, the API's limit. Thinking blocks cannot carry one.
fn mark_conversation_end(messages: &mut [Value]) {
    let mut marked = 0;
    for message in messages.iter_mut().rev() {
        if marked == 2 {
            break;
        }
        if mark(message, marked) {
            marked += 1;
        }
    }
}

/// The messages [`mark_conversation_end`] may touch, on the wire and
/// marked, and the index of the first of them: every message before it
/// goes as it is.
fn marked_tail(messages: &[Message]) -> (usize, Vec<Value>) {
    let (mut start, mut marked) = (messages.len(), 0);
    let mut tail = Vec::new();
    for (i, message) in messages.iter().enumerate().rev() {
        if marked == 2 {
            break;
        }
        start = i;
        if let Some(mut value) = message_json(message) {
            if mark(&mut value, marked) {
                marked += 1;
            }
            tail.push(value);
        }
    }
    tail.reverse();
    (start, tail)
}

/// Marks `message` as the next breakpoint from the end, `marked` being
/// how many are placed: whether it took one.
fn mark(message: &mut Value, marked: u32) -> bool {
    let is_user = message["role"] == "user";
    if marked == 1 && !is_user {
        return false;
    }
    let Some(blocks) = message.get_mut("content").and_then(Value::as_array_mut) else {
        return false;
    };
    let Some(block) = blocks.iter_mut().rev().find(|b| {
        !matches!(
            b.get("type").and_then(Value::as_str),
            Some("thinking" | "redacted_thinking")
        )
    }) else {
        return false;
    };
    block["cache_control"] = ephemeral();
    true
}

fn message_json(message: &Message) -> Option<Value> {
    let mut content: Vec<Value> = Vec::new();
    for block in &message.content {
        if let ContentBlock::Image { media_type, data } = block {
            let image = json!({
                "type": "image",
                "source": {"type": "base64", "media_type": media_type, "data": data},
            });
            match content.last_mut() {
                Some(last) if last["type"] == "tool_result" => attach_image(last, image),
                _ => content.push(image),
            }
        } else if let ContentBlock::Server { block } = block
            && block["type"] == "text"
        {
            cited_text(&mut content, block);
        } else if let Some(value) = block_json(block) {
            content.push(value);
        }
    }
    if content.is_empty() {
        return None;
    }
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    Some(json!({"role": role, "content": content}))
}

/// A kept text block with citations stands for the end of the text block
/// before it (kaji's history holds the reply's text in one piece): that
/// text loses it, and the cited block follows as it came.
fn cited_text(content: &mut Vec<Value>, cited: &Value) {
    let own = cited["text"].as_str().unwrap_or("");
    if let Some(last) = content.last_mut()
        && last["type"] == "text"
        && let Some(text) = last["text"].as_str()
        && text.ends_with(own)
    {
        let rest = text[..text.len() - own.len()].to_string();
        if rest.is_empty() {
            content.pop();
        } else {
            last["text"] = Value::String(rest);
        }
    }
    content.push(cited.clone());
}

/// Puts an image into a `tool_result`'s content, turning a text content
/// into a list of blocks first.
fn attach_image(tool_result: &mut Value, image: Value) {
    if let Some(text) = tool_result["content"].as_str() {
        let blocks = if text.is_empty() {
            Vec::new()
        } else {
            vec![json!({"type": "text", "text": text})]
        };
        tool_result["content"] = Value::Array(blocks);
    }
    if let Some(blocks) = tool_result["content"].as_array_mut() {
        blocks.push(image);
    }
}

/// One block on the wire; images are placed by [`message_json`].
fn block_json(block: &ContentBlock) -> Option<Value> {
    match block {
        ContentBlock::Text { text, .. } if text.is_empty() => None,
        ContentBlock::Text { text, .. } => Some(json!({"type": "text", "text": text})),
        // Another wire's reasoning (an OpenAI Responses item) is not sent.
        ContentBlock::Reasoning {
            signature: Some(sig),
            ..
        } if foreign(sig) => None,
        ContentBlock::RedactedReasoning { data } if foreign(data) => None,
        ContentBlock::Reasoning {
            text,
            signature: Some(sig),
        } => Some(json!({"type": "thinking", "thinking": text, "signature": sig})),
        ContentBlock::Reasoning {
            signature: None, ..
        } => None,
        ContentBlock::RedactedReasoning { data } => {
            Some(json!({"type": "redacted_thinking", "data": data}))
        }
        ContentBlock::ToolUse { id, name, input } => {
            let input = if input.is_object() {
                input.clone()
            } else {
                json!({})
            };
            Some(json!({"type": "tool_use", "id": id, "name": name, "input": input}))
        }
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let mut block =
                json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content});
            if *is_error {
                block["is_error"] = json!(true);
            }
            Some(block)
        }
        ContentBlock::Image { .. } => None,
        // The blocks of this API's server tools go back as they came.
        ContentBlock::Server { block } if is_server_block(block) => Some(block.clone()),
        ContentBlock::Server { .. } => None,
    }
}

/// Whether a kept provider block is one of this API's server tool blocks
/// (`server_tool_use`, `web_search_tool_result`, …).
fn is_server_block(block: &Value) -> bool {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
    kind == "server_tool_use" || kind.ends_with("_tool_result")
}

/// What a content block index stands for.
enum Block {
    /// A text block: its start block, text so far and citations (a text
    /// block citing web search results is kept whole, as a server block).
    Text {
        start: Value,
        text: String,
        citations: Vec<Value>,
    },
    Thinking,
    Tool {
        id: String,
        start_input: Option<String>,
        had_delta: bool,
        scan: JsonScan,
    },
    /// A block of a tool the server runs (`server_tool_use`,
    /// `web_search_tool_result`, …): given whole when it stops.
    Server {
        block: Value,
        input_json: String,
    },
    Other,
}

/// Maps Anthropic events to [`StreamEvent`]s.
#[derive(Default)]
pub(crate) struct AnthropicDecoder {
    blocks: HashMap<u64, Block>,
    usage: Usage,
    stop: Option<StopReason>,
    /// Tool calls whose block stopped with incomplete arguments: ended
    /// once the stop reason is known, unless it is `max_tokens`.
    cut: Vec<String>,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
}

#[derive(Deserialize)]
struct DeltaEvent<'a> {
    index: u64,
    #[serde(borrow)]
    delta: Delta<'a>,
}

/// A `content_block_delta`'s delta. A flat struct rather than a tagged
/// enum: serde buffers internally tagged enums, which halves throughput.
#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    text: Option<String>,
    thinking: Option<String>,
    signature: Option<String>,
    partial_json: Option<String>,
    citation: Option<Value>,
}

#[derive(Deserialize)]
struct StartEvent {
    index: u64,
    content_block: Value,
}

#[derive(Deserialize)]
struct StopEvent {
    index: u64,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

impl AnthropicDecoder {
    fn merge_usage(&mut self, u: &WireUsage) {
        if let Some(v) = u.input_tokens {
            self.usage.input_tokens = v;
        }
        if let Some(v) = u.output_tokens {
            self.usage.output_tokens = v;
        }
        if let Some(v) = u.cache_read_input_tokens {
            self.usage.cache_read_input_tokens = v;
        }
        if let Some(v) = u.cache_creation_input_tokens {
            self.usage.cache_creation_input_tokens = v;
        }
    }
}

fn parse<'a, T: Deserialize<'a>>(data: &'a str) -> Result<T, EventError> {
    serde_json::from_str(data).map_err(|e| EventError::InvalidJson(e.to_string()))
}

fn stop_reason(s: &str, details: Option<StopDetails>) -> StopReason {
    match s {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => {
            let details = details.unwrap_or_default();
            StopReason::Refusal {
                category: details.category.filter(|c| !c.is_empty()),
                explanation: details.explanation.filter(|e| !e.is_empty()),
            }
        }
        other => StopReason::Other(other.to_string()),
    }
}

/// `stop_details` of a `message_delta` (refusals).
#[derive(Deserialize, Default)]
struct StopDetails {
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    explanation: Option<String>,
}

impl ReplyDecoder for AnthropicDecoder {
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, EventError> {
        let data = event.data.as_str();
        // Fast path for the event that makes up nearly all of a reply: one
        // parse instead of two.
        let kind = if data.starts_with(r#"{"type":"content_block_delta""#) {
            "content_block_delta"
        } else {
            parse::<Envelope>(data)?.kind
        };
        match kind {
            "content_block_delta" => {
                let DeltaEvent { index, delta } = parse(data)?;
                let Delta {
                    kind,
                    text,
                    thinking,
                    signature,
                    partial_json,
                    citation,
                } = delta;
                let missing =
                    |field: &str| EventError::InvalidJson(format!("a {kind} lacks `{field}`"));
                match kind.as_ref() {
                    "text_delta" => {
                        let text = text.ok_or_else(|| missing("text"))?;
                        if let Some(Block::Text { text: all, .. }) = self.blocks.get_mut(&index) {
                            all.push_str(&text);
                        }
                        out.push(StreamEvent::TextDelta { text });
                    }
                    "citations_delta" => {
                        let citation = citation.ok_or_else(|| missing("citation"))?;
                        if let Some(Block::Text { citations, .. }) = self.blocks.get_mut(&index) {
                            citations.push(citation);
                        }
                    }
                    "thinking_delta" => out.push(StreamEvent::ReasoningDelta {
                        text: thinking.ok_or_else(|| missing("thinking"))?,
                    }),
                    "signature_delta" => out.push(StreamEvent::ReasoningSignature {
                        signature: signature.ok_or_else(|| missing("signature"))?,
                    }),
                    "input_json_delta" => {
                        let partial_json = partial_json.ok_or_else(|| missing("partial_json"))?;
                        match self.blocks.get_mut(&index) {
                            Some(Block::Tool {
                                id,
                                had_delta,
                                scan,
                                ..
                            }) => {
                                *had_delta = true;
                                scan.feed(&partial_json);
                                if !partial_json.is_empty() {
                                    out.push(StreamEvent::ToolCallDelta {
                                        id: id.clone(),
                                        arguments: partial_json,
                                    });
                                }
                            }
                            Some(Block::Server { input_json, .. }) => {
                                input_json.push_str(&partial_json);
                            }
                            Some(_) => {}
                            None => {
                                return Err(EventError::InvalidJson(format!(
                                    "input_json_delta for content block {index}, which never started"
                                )));
                            }
                        }
                    }
                    _ => {}
                }
            }
            "message_start" => {
                #[derive(Deserialize)]
                struct Start {
                    message: StartMessage,
                }
                #[derive(Deserialize)]
                struct StartMessage {
                    #[serde(default)]
                    usage: WireUsage,
                }
                let start: Start = parse(data)?;
                self.merge_usage(&start.message.usage);
            }
            "content_block_start" => {
                let StartEvent {
                    index,
                    content_block,
                } = parse(data)?;
                let kind = content_block
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let block = match kind {
                    "text" => {
                        let text = content_block
                            .get("text")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string();
                        if !text.is_empty() {
                            out.push(StreamEvent::TextDelta { text: text.clone() });
                        }
                        let citations = content_block
                            .get("citations")
                            .and_then(Value::as_array)
                            .cloned()
                            .unwrap_or_default();
                        Block::Text {
                            start: content_block,
                            text,
                            citations,
                        }
                    }
                    "thinking" => {
                        if let Some(text) = content_block.get("thinking").and_then(Value::as_str)
                            && !text.is_empty()
                        {
                            out.push(StreamEvent::ReasoningDelta {
                                text: text.to_string(),
                            });
                        }
                        if let Some(sig) = content_block.get("signature").and_then(Value::as_str)
                            && !sig.is_empty()
                        {
                            out.push(StreamEvent::ReasoningSignature {
                                signature: sig.to_string(),
                            });
                        }
                        Block::Thinking
                    }
                    "redacted_thinking" => {
                        let data = content_block
                            .get("data")
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        out.push(StreamEvent::RedactedReasoning {
                            data: data.to_string(),
                        });
                        Block::Other
                    }
                    "tool_use" => {
                        let id = content_block
                            .get("id")
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        let name = content_block
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        if id.is_empty() || name.is_empty() {
                            return Err(EventError::InvalidJson(format!(
                                "tool_use block {index} lacks an id or a name"
                            )));
                        }
                        out.push(StreamEvent::ToolCallStart {
                            id: id.to_string(),
                            name: name.to_string(),
                        });
                        let start_input = content_block
                            .get("input")
                            .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
                            .map(Value::to_string);
                        Block::Tool {
                            id: id.to_string(),
                            start_input,
                            had_delta: false,
                            scan: JsonScan::default(),
                        }
                    }
                    k if k == "server_tool_use" || k.ends_with("_tool_result") => Block::Server {
                        block: content_block,
                        input_json: String::new(),
                    },
                    _ => Block::Other,
                };
                self.blocks.insert(index, block);
            }
            "content_block_stop" => {
                let StopEvent { index } = parse(data)?;
                if let Some(block) = self.blocks.remove(&index) {
                    self.close_block(block, out);
                }
            }
            "message_delta" => {
                #[derive(Deserialize)]
                struct MessageDelta {
                    #[serde(default)]
                    delta: Option<StopDelta>,
                    #[serde(default)]
                    usage: Option<WireUsage>,
                }
                #[derive(Deserialize)]
                struct StopDelta {
                    stop_reason: Option<String>,
                    #[serde(default)]
                    stop_details: Option<StopDetails>,
                }
                let md: MessageDelta = parse(data)?;
                if let Some(StopDelta {
                    stop_reason: Some(reason),
                    stop_details,
                }) = md.delta
                {
                    self.stop = Some(stop_reason(&reason, stop_details));
                }
                if let Some(usage) = md.usage {
                    self.merge_usage(&usage);
                }
                out.push(StreamEvent::Usage(self.usage));
            }
            "message_stop" => {
                self.finish_open_tools(out);
                self.end_cut_calls(out);
                out.push(StreamEvent::Stop {
                    reason: self.stop.take().unwrap_or(StopReason::EndTurn),
                });
                return Ok(true);
            }
            "ping" => {}
            "error" => {
                let value: Value = parse(data)?;
                let kind = value
                    .get("error")
                    .and_then(|e| e.get("type"))
                    .and_then(Value::as_str)
                    .unwrap_or("error")
                    .to_string();
                let message = json_error_message(&value).unwrap_or_else(|| data.to_string());
                let retryable = matches!(
                    kind.as_str(),
                    "overloaded_error" | "api_error" | "rate_limit_error"
                );
                return Err(EventError::Server {
                    what: format!("sent an error event ({kind})"),
                    message,
                    retryable,
                });
            }
            _ => {}
        }
        Ok(false)
    }

    fn on_eof(&mut self, _out: &mut Vec<StreamEvent>) -> Result<(), String> {
        Err("the stream ended before `message_stop`".to_string())
    }

    fn is_keepalive(&self, event: &SseEvent) -> bool {
        event.event == "ping" || event.data.starts_with(r#"{"type":"ping""#)
    }
}

impl AnthropicDecoder {
    fn finish_open_tools(&mut self, out: &mut Vec<StreamEvent>) {
        let mut open: Vec<(u64, Block)> = self.blocks.drain().collect();
        open.sort_by_key(|(i, _)| *i);
        for (_, block) in open {
            self.close_block(block, out);
        }
    }

    /// A block stopped: a tool call with complete (or no) arguments ends;
    /// one with incomplete arguments waits for the stop reason.
    fn close_block(&mut self, block: Block, out: &mut Vec<StreamEvent>) {
        if let Block::Text {
            mut start,
            text,
            citations,
        } = block
        {
            if !citations.is_empty() {
                start["text"] = Value::String(text);
                start["citations"] = Value::Array(citations);
                out.push(StreamEvent::ServerBlock { block: start });
            }
            return;
        }
        if let Block::Server {
            mut block,
            input_json,
        } = block
        {
            if let Ok(input @ Value::Object(_)) = serde_json::from_str::<Value>(&input_json) {
                block["input"] = input;
            }
            out.push(StreamEvent::ServerBlock { block });
            return;
        }
        let Block::Tool {
            id,
            start_input,
            had_delta,
            scan,
        } = block
        else {
            return;
        };
        if let (Some(input), false) = (start_input, had_delta) {
            out.push(StreamEvent::ToolCallDelta {
                id: id.clone(),
                arguments: input,
            });
        } else if had_delta && !scan.is_empty() && !scan.is_complete() {
            self.cut.push(id);
            return;
        }
        out.push(StreamEvent::ToolCallEnd { id });
    }

    /// At `message_stop`, once the stop reason is known: calls cut off by
    /// `max_tokens` stay open (never run); any other incomplete call ends
    /// (its arguments then fail to parse, as they should).
    fn end_cut_calls(&mut self, out: &mut Vec<StreamEvent>) {
        let cut = std::mem::take(&mut self.cut);
        if self.stop == Some(StopReason::MaxTokens) {
            return;
        }
        out.extend(cut.into_iter().map(|id| StreamEvent::ToolCallEnd { id }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kaji_protocol::ToolSpec;

    fn run(events: &[(&str, &str)]) -> (Vec<StreamEvent>, Option<EventError>) {
        let mut decoder = AnthropicDecoder::default();
        let mut out = Vec::new();
        for (name, data) in events {
            let ev = SseEvent {
                event: name.to_string(),
                data: data.to_string(),
                offset: 0,
            };
            if let Err(e) = decoder.on_event(&ev, &mut out) {
                return (out, Some(e));
            }
        }
        (out, None)
    }

    fn cut_reply(stop: Option<&str>) -> Vec<StreamEvent> {
        let delta = match stop {
            Some(reason) => {
                format!(r#"{{"type":"message_delta","delta":{{"stop_reason":"{reason}"}}}}"#)
            }
            None => r#"{"type":"message_delta","delta":{}}"#.to_string(),
        };
        let (out, err) = run(&[
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"Write","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\": \"b"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
            ("message_delta", &delta),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ]);
        assert!(err.is_none());
        out
    }

    #[test]
    fn an_incomplete_call_ends_unless_max_tokens_cut_it() {
        let ended = |out: &[StreamEvent]| {
            out.iter()
                .any(|e| matches!(e, StreamEvent::ToolCallEnd { id } if id == "t"))
        };
        assert!(!ended(&cut_reply(Some("max_tokens"))));
        assert!(ended(&cut_reply(Some("tool_use"))));
        assert!(ended(&cut_reply(None)));
        let out = cut_reply(Some("refusal"));
        assert!(ended(&out));
        assert_eq!(
            out.last(),
            Some(&StreamEvent::Stop {
                reason: StopReason::refusal()
            })
        );
    }

    #[test]
    fn maps_a_full_reply() {
        let (out, err) = run(&[
            (
                "message_start",
                r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":3}}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"xyz"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":1}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}"#,
            ),
            ("ping", r#"{"type":"ping"}"#),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Hi"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":2}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"t1","name":"Read","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"1}"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":3}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}}"#,
            ),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ]);
        assert!(err.is_none());
        assert_eq!(
            out,
            vec![
                StreamEvent::ReasoningDelta { text: "hmm".into() },
                StreamEvent::ReasoningSignature {
                    signature: "sig".into()
                },
                StreamEvent::RedactedReasoning { data: "xyz".into() },
                StreamEvent::TextDelta { text: "Hi".into() },
                StreamEvent::ToolCallStart {
                    id: "t1".into(),
                    name: "Read".into()
                },
                StreamEvent::ToolCallDelta {
                    id: "t1".into(),
                    arguments: "{\"a\":".into()
                },
                StreamEvent::ToolCallDelta {
                    id: "t1".into(),
                    arguments: "1}".into()
                },
                StreamEvent::ToolCallEnd { id: "t1".into() },
                StreamEvent::Usage(Usage {
                    input_tokens: 10,
                    output_tokens: 42,
                    cache_read_input_tokens: 3,
                    cache_creation_input_tokens: 0
                }),
                StreamEvent::Stop {
                    reason: StopReason::ToolUse
                },
            ]
        );
    }

    #[test]
    fn tool_input_given_at_start_is_sent_as_one_delta() {
        let (out, _) = run(&[
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"X","input":{"k":"v"}}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
        ]);
        assert_eq!(
            out[1],
            StreamEvent::ToolCallDelta {
                id: "t".into(),
                arguments: r#"{"k":"v"}"#.into()
            }
        );
        assert_eq!(out[2], StreamEvent::ToolCallEnd { id: "t".into() });
    }

    #[test]
    fn error_events() {
        let (_, err) = run(&[(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )]);
        match err {
            Some(EventError::Server {
                retryable, message, ..
            }) => {
                assert!(retryable);
                assert_eq!(message, "overloaded_error: Overloaded");
            }
            other => panic!("{other:?}"),
        }
        let (_, err) = run(&[(
            "error",
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"no"}}"#,
        )]);
        assert!(matches!(
            err,
            Some(EventError::Server {
                retryable: false,
                ..
            })
        ));
        let (_, err) = run(&[("content_block_delta", "{oops")]);
        assert!(matches!(err, Some(EventError::InvalidJson(_))));
        let (_, err) = run(&[(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":9,"delta":{"type":"input_json_delta","partial_json":"{"}}"#,
        )]);
        assert!(matches!(err, Some(EventError::InvalidJson(_))));
    }

    #[test]
    fn a_request_offering_web_search_carries_the_server_tool() {
        let request = ModelRequest {
            model: String::new(),
            system: "sys".into(),
            messages: std::sync::Arc::new(vec![Message::user_text("search")]),
            tools: vec![kaji_protocol::ToolSpec {
                name: "Read".into(),
                description: "d".into(),
                input_schema: json!({"type": "object"}),
            }],
            max_tokens: 100,
            temperature: None,
            web_search: Some(crate::ProviderWebSearch {
                allowed_domains: vec!["docs.rs".into()],
                blocked_domains: vec!["spam.example".into()],
                max_uses: 3,
            }),
            wire_cache: None,
        };
        let body = request_body(&request, "m");
        assert_eq!(
            body["tools"],
            json!([
                {"type": "web_search_20250305", "name": "web_search", "max_uses": 3, "allowed_domains": ["docs.rs"]},
                {"name": "Read", "description": "d", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}},
            ])
        );
        let only_blocked = crate::ProviderWebSearch {
            allowed_domains: Vec::new(),
            blocked_domains: vec!["spam.example".into()],
            max_uses: 3,
        };
        assert_eq!(
            web_search_tool(&only_blocked)["blocked_domains"],
            json!(["spam.example"])
        );
        assert_eq!(body["model"], "m");
    }

    #[test]
    fn server_blocks_and_cited_text_go_back_as_they_came() {
        let use_block = json!({"type": "server_tool_use", "id": "srv1", "name": "web_search", "input": {"query": "q"}});
        let result = json!({"type": "web_search_tool_result", "tool_use_id": "srv1", "content": [{"type": "web_search_result", "url": "https://a.example/", "title": "A", "encrypted_content": "e", "page_age": null}]});
        let cited = json!({"type": "text", "text": "A says so.", "citations": [{"type": "web_search_result_location", "url": "https://a.example/", "title": "A", "encrypted_index": "i", "cited_text": "so"}]});
        let request = ModelRequest {
            model: String::new(),
            system: String::new(),
            messages: vec![
                Message::user_text("q?"),
                Message {
                    role: Role::Assistant,
                    content: vec![
                        ContentBlock::text("Searching."),
                        ContentBlock::Server {
                            block: use_block.clone(),
                        },
                        ContentBlock::Server {
                            block: result.clone(),
                        },
                        ContentBlock::text("Then: A says so."),
                        ContentBlock::Server {
                            block: cited.clone(),
                        },
                        // Another wire's kept blocks are left out.
                        ContentBlock::Server {
                            block: json!({"type": "web_search_call", "id": "ws"}),
                        },
                    ],
                },
                Message::user_text("thanks"),
            ]
            .into(),
            tools: vec![],
            max_tokens: 10,
            temperature: None,
            web_search: None,
            wire_cache: None,
        };
        let body = request_body(&request, "m");
        assert_eq!(
            body["messages"][1]["content"],
            json!([{"type": "text", "text": "Searching."}, use_block, result, {"type": "text", "text": "Then: "}, cited])
        );
    }

    #[test]
    fn cited_text_is_kept_whole() {
        let (out, err) = run(&[
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"","citations":[]}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"type":"web_search_result_location","url":"https://a.example/","title":"A","encrypted_index":"i","cited_text":"c"}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"A says"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" so."}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
        ]);
        assert!(err.is_none());
        assert_eq!(
            out,
            vec![
                StreamEvent::TextDelta {
                    text: "A says".into()
                },
                StreamEvent::TextDelta {
                    text: " so.".into()
                },
                StreamEvent::ServerBlock {
                    block: json!({"type": "text", "text": "A says so.", "citations": [{"type": "web_search_result_location", "url": "https://a.example/", "title": "A", "encrypted_index": "i", "cited_text": "c"}]})
                },
            ]
        );
    }

    #[test]
    fn request_body_maps_history() {
        let request = ModelRequest {
            model: String::new(),
            system: "sys".into(),
            messages: vec![
                Message::user_text("hi"),
                Message {
                    role: Role::Assistant,
                    content: vec![
                        ContentBlock::Reasoning {
                            text: "t".into(),
                            signature: Some("s".into()),
                        },
                        ContentBlock::Reasoning {
                            text: "unsigned".into(),
                            signature: None,
                        },
                        ContentBlock::RedactedReasoning { data: "d".into() },
                        ContentBlock::text(""),
                        ContentBlock::ToolUse {
                            id: "c1".into(),
                            name: "Read".into(),
                            input: json!({"p": 1}),
                        },
                    ],
                },
                Message {
                    role: Role::User,
                    content: vec![ContentBlock::tool_result("c1", "out", true)],
                },
            ]
            .into(),
            tools: vec![ToolSpec {
                name: "Read".into(),
                description: "d".into(),
                input_schema: json!({"type": "object"}),
            }],
            max_tokens: 100,
            temperature: Some(0.5),
            web_search: None,
            wire_cache: None,
        };
        let body = request_body(&request, "claude-x");
        assert_eq!(
            body,
            json!({
                "model": "claude-x",
                "max_tokens": 100,
                "stream": true,
                "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
                "temperature": 0.5,
                "tools": [{"name": "Read", "description": "d", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "t", "signature": "s"},
                        {"type": "redacted_thinking", "data": "d"},
                        {"type": "tool_use", "id": "c1", "name": "Read", "input": {"p": 1}},
                    ]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "out", "is_error": true, "cache_control": {"type": "ephemeral"}}]},
                ],
            })
        );
    }

    #[test]
    fn images_go_inside_their_tool_result_or_stand_alone() {
        let request = ModelRequest {
            model: String::new(),
            system: String::new(),
            messages: vec![Message {
                role: Role::User,
                content: vec![
                    ContentBlock::tool_result("c1", "Image a.png", false),
                    ContentBlock::image("image/png", "iVBO"),
                    ContentBlock::text("and mine"),
                    ContentBlock::image("image/jpeg", "/9j/"),
                ],
            }]
            .into(),
            tools: vec![],
            max_tokens: 10,
            temperature: None,
            web_search: None,
            wire_cache: None,
        };
        let body = request_body(&request, "m");
        let content = &body["messages"][0]["content"];
        assert_eq!(
            content[0],
            json!({"type": "tool_result", "tool_use_id": "c1", "content": [
                {"type": "text", "text": "Image a.png"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
            ]})
        );
        assert_eq!(content[1], json!({"type": "text", "text": "and mine"}));
        assert_eq!(
            content[2]["source"],
            json!({"type": "base64", "media_type": "image/jpeg", "data": "/9j/"})
        );
        assert_eq!(content.as_array().map(Vec::len), Some(3));
    }
}
