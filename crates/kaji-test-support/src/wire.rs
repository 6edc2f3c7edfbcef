//! Renders a scripted [`Turn`] as the exact bytes a real server would
//! stream: Anthropic Messages events, OpenAI chat completion chunks or
//! OpenAI Responses API events, each a complete server-sent event.
//!
//! Pure functions from a turn to frames; this module must never touch the
//! network or the server's state.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::script::{Part, Turn};
pub use crate::wire_parts::WireFormat;
use crate::wire_parts::{RenderContext, argument_pieces, chunks, sse, tool_id, usage_of};

/// The reply's frames (one server-sent event each). An empty frame marks a
/// [`Part::Hold`]: the server waits there for a release.
pub(crate) fn render(format: WireFormat, turn: &Turn, ctx: &RenderContext<'_>) -> Vec<Bytes> {
    let frames = match format {
        WireFormat::Anthropic => render_anthropic(turn, ctx),
        WireFormat::OpenAi => render_openai(turn, ctx),
        WireFormat::Responses => crate::wire_responses::render(turn, ctx),
    };
    if turn.extra_fields {
        frames.into_iter().map(with_extra_fields).collect()
    } else {
        frames
    }
}

/// The index of the first frame that carries content.
pub(crate) fn first_content_frame(format: WireFormat, frames: &[Bytes]) -> usize {
    let found = match format {
        WireFormat::Anthropic => frames.iter().position(|f| {
            f.starts_with(b"event: content_block_delta")
                || (f.starts_with(b"event: content_block_start")
                    && !contains(f, br#""type":"text""#)
                    && !contains(f, br#""type":"thinking""#))
        }),
        WireFormat::OpenAi => (frames.len() > 2).then_some(1),
        WireFormat::Responses => frames
            .iter()
            .position(|f| f.starts_with(b"event: response.") && contains(f, b".delta\n")),
    };
    found.unwrap_or(0)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The HTTP 400 body a real server sends for a request of `tokens` tokens
/// to a model with a context window of `limit` tokens. `server` is
/// `anthropic`, `openai`, `vllm`, `llama.cpp`, `ollama` or `lmstudio`.
pub(crate) fn context_length_error(server: &str, tokens: usize, limit: usize) -> Value {
    match server {
        "anthropic" => json!({"type": "error", "error": {
            "type": "invalid_request_error",
            "message": format!("prompt is too long: {tokens} tokens > {limit} maximum"),
        }}),
        "vllm" => json!({
            "object": "error",
            "message": format!("This model's maximum context length is {limit} tokens. However, you requested {} tokens ({tokens} in the messages, 1024 in the completion). Please reduce the length of the messages or completion.", tokens + 1024),
            "type": "BadRequestError", "param": null, "code": 400,
        }),
        "llama.cpp" => json!({"error": {
            "code": 400,
            "message": format!("request ({tokens} tokens) exceeds the available context size ({limit} tokens), try increasing it"),
            "type": "exceed_context_size_error", "n_prompt_tokens": tokens, "n_ctx": limit,
        }}),
        "ollama" => json!({"error": {
            "message": "the input length exceeds the context length",
            "type": "api_error", "param": null, "code": null,
        }}),
        "lmstudio" => json!({
            "error": format!("Trying to keep the first {tokens} tokens when context the overflows. However, the model is loaded with context length of only {limit} tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input"),
        }),
        _ => json!({"error": {
            "message": format!("This model's maximum context length is {limit} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."),
            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded",
        }}),
    }
}

/// Adds fields no API defines to an event's JSON.
fn with_extra_fields(frame: Bytes) -> Bytes {
    let Ok(text) = std::str::from_utf8(&frame) else {
        return frame;
    };
    let Some(pos) = text.find("data: ") else {
        return frame;
    };
    let (head, rest) = text.split_at(pos + 6);
    let Ok(mut value) = serde_json::from_str::<Value>(rest.trim_end()) else {
        return frame;
    };
    fn add(value: &mut Value) {
        if let Some(object) = value.as_object_mut() {
            object.insert(
                "kaji_unknown_field".into(),
                json!({"nested": [1, "two", null], "flag": true}),
            );
        }
    }
    add(&mut value);
    for key in [
        "message",
        "content_block",
        "delta",
        "usage",
        "item",
        "response",
    ] {
        if let Some(inner) = value.get_mut(key) {
            add(inner);
        }
    }
    if let Some(choices) = value.get_mut("choices").and_then(Value::as_array_mut) {
        for choice in choices {
            add(choice);
            if let Some(delta) = choice.get_mut("delta") {
                add(delta);
            }
        }
    }
    Bytes::from(format!("{head}{value}\n\n"))
}

fn render_anthropic(turn: &Turn, ctx: &RenderContext<'_>) -> Vec<Bytes> {
    let usage = usage_of(turn, ctx);
    let mut frames = Vec::new();
    let ev = |name: &str, data: Value| sse(Some(name), &data);
    let mut start_usage = json!({"input_tokens": usage.input_tokens, "output_tokens": 1});
    if usage.cache_read_input_tokens > 0 {
        start_usage["cache_read_input_tokens"] = json!(usage.cache_read_input_tokens);
    }
    if usage.cache_creation_input_tokens > 0 {
        start_usage["cache_creation_input_tokens"] = json!(usage.cache_creation_input_tokens);
    }
    if turn.omit_usage {
        start_usage = json!({});
    }
    frames.push(ev(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": format!("msg_scripted_{}", ctx.turn_index), "type": "message", "role": "assistant",
            "model": ctx.model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": start_usage,
        }}),
    ));
    frames.push(ev("ping", json!({"type": "ping"})));
    let total_blocks: usize = turn
        .parts
        .iter()
        .map(|p| match p {
            Part::Hold => 0,
            Part::ServerToolUse { .. } => 2,
            _ => 1,
        })
        .sum();
    let mut next_block = 0;
    let mut block_index = || {
        let b = next_block;
        next_block += 1;
        if turn.out_of_order {
            total_blocks - b
        } else {
            b
        }
    };
    let mut tools = 0;
    for part in &turn.parts {
        if matches!(part, Part::Hold) {
            frames.push(Bytes::new());
            continue;
        }
        let index = block_index();
        let delta = |delta: Value| {
            ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            )
        };
        let start = |block: Value| {
            ev(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": block}),
            )
        };
        match part {
            Part::Hold => {}
            Part::Text { text } => {
                frames.push(start(json!({"type": "text", "text": ""})));
                for piece in chunks(text, turn.chunk_size) {
                    frames.push(delta(json!({"type": "text_delta", "text": piece})));
                }
            }
            Part::CitedText { text } => {
                frames.push(start(json!({"type": "text", "text": "", "citations": []})));
                frames.push(delta(json!({"type": "citations_delta", "citation": {
                    "type": "web_search_result_location", "url": "https://example.com/", "title": "Example",
                    "encrypted_index": "aW5kZXg=", "cited_text": text,
                }})));
                for piece in chunks(text, turn.chunk_size) {
                    frames.push(delta(json!({"type": "text_delta", "text": piece})));
                }
            }
            Part::Reasoning { text } => {
                frames.push(start(
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                ));
                for piece in chunks(text, turn.chunk_size) {
                    frames.push(delta(json!({"type": "thinking_delta", "thinking": piece})));
                }
                let signature = format!("scripted-signature-{}-{index}", ctx.turn_index);
                frames.push(delta(
                    json!({"type": "signature_delta", "signature": signature}),
                ));
            }
            Part::RedactedReasoning { data } => {
                frames.push(start(json!({"type": "redacted_thinking", "data": data})));
            }
            Part::ServerToolUse { name, input } => {
                let id = format!("srvtoolu_scripted_{}_{index}", ctx.turn_index);
                frames.push(start(
                    json!({"type": "server_tool_use", "id": id, "name": name, "input": {}}),
                ));
                for piece in chunks(&input.to_string(), turn.chunk_size) {
                    frames.push(delta(
                        json!({"type": "input_json_delta", "partial_json": piece}),
                    ));
                }
                frames.push(ev(
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": index}),
                ));
                let result_index = block_index();
                frames.push(ev(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": result_index, "content_block": {
                        "type": "web_search_tool_result", "tool_use_id": id,
                        "content": [{"type": "web_search_result", "url": "https://example.com/", "title": "Example", "encrypted_content": "c2NyaXB0ZWQ=", "page_age": null}],
                    }}),
                ));
                frames.push(ev(
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": result_index}),
                ));
                continue;
            }
            Part::ToolCall { id, name, .. } | Part::RawToolCall { id, name, .. } => {
                let arguments = match part {
                    Part::ToolCall { input, .. } => input.to_string(),
                    Part::RawToolCall { arguments, .. } => arguments.clone(),
                    _ => String::new(),
                };
                let id = tool_id(WireFormat::Anthropic, ctx.turn_index, tools, id);
                tools += 1;
                frames.push(start(
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                ));
                for piece in argument_pieces(turn, tools - 1, &arguments) {
                    if piece.is_empty() {
                        frames.push(Bytes::new());
                        continue;
                    }
                    frames.push(delta(
                        json!({"type": "input_json_delta", "partial_json": piece}),
                    ));
                }
            }
        }
        frames.push(ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    let stop = turn.stop_reason.clone().unwrap_or_else(|| {
        if turn.calls_tools() {
            "tool_use".into()
        } else {
            "end_turn".into()
        }
    });
    let mut delta =
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}});
    if stop == "refusal" {
        delta["delta"]["stop_details"] = json!({
            "type": "refusal",
            "category": turn.refusal_category,
            "explanation": turn.refusal_explanation,
        });
    }
    if !turn.omit_usage {
        delta["usage"] = json!({"output_tokens": usage.output_tokens});
    }
    frames.push(ev("message_delta", delta));
    frames.push(ev("message_stop", json!({"type": "message_stop"})));
    frames
}

fn render_openai(turn: &Turn, ctx: &RenderContext<'_>) -> Vec<Bytes> {
    let usage = usage_of(turn, ctx);
    let id = format!("chatcmpl-scripted-{}", ctx.turn_index);
    let chunk = |delta: Value, finish: Value| {
        sse(
            None,
            &json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": ctx.model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut frames = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let total_tools = turn
        .parts
        .iter()
        .filter(|p| matches!(p, Part::ToolCall { .. } | Part::RawToolCall { .. }))
        .count();
    let mut tools = 0;
    for part in &turn.parts {
        match part {
            Part::Hold => frames.push(Bytes::new()),
            Part::ServerToolUse { name, .. } => frames.push(chunk(
                json!({"annotations": [{"type": "url_citation", "url_citation": {
                    "url": "https://example.com/", "title": name, "start_index": 0, "end_index": 0,
                }}]}),
                Value::Null,
            )),
            Part::Text { text } | Part::CitedText { text } => {
                for piece in chunks(text, turn.chunk_size) {
                    frames.push(chunk(json!({"content": piece}), Value::Null));
                }
            }
            Part::Reasoning { text } => {
                for piece in chunks(text, turn.chunk_size) {
                    let field = turn
                        .reasoning_field
                        .as_deref()
                        .unwrap_or("reasoning_content");
                    frames.push(chunk(json!({ field: piece }), Value::Null));
                }
            }
            Part::RedactedReasoning { .. } => {}
            Part::ToolCall { id, name, .. } | Part::RawToolCall { id, name, .. } => {
                let arguments = match part {
                    Part::ToolCall { input, .. } => input.to_string(),
                    Part::RawToolCall { arguments, .. } => arguments.clone(),
                    _ => String::new(),
                };
                let index = if ctx.index_zero {
                    0
                } else if turn.out_of_order {
                    total_tools - tools
                } else {
                    tools
                };
                let id = tool_id(WireFormat::OpenAi, ctx.turn_index, tools, id);
                tools += 1;
                frames.push(chunk(
                    json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
                    Value::Null,
                ));
                for piece in argument_pieces(turn, tools - 1, &arguments) {
                    if piece.is_empty() {
                        frames.push(Bytes::new());
                        continue;
                    }
                    frames.push(chunk(
                        json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                        Value::Null,
                    ));
                }
            }
        }
    }
    if let (Some("refusal"), Some(explanation)) =
        (turn.stop_reason.as_deref(), &turn.refusal_explanation)
    {
        for piece in chunks(explanation, turn.chunk_size) {
            frames.push(chunk(json!({"refusal": piece}), Value::Null));
        }
    }
    let finish = match turn.stop_reason.as_deref() {
        Some("tool_use") => "tool_calls",
        Some("max_tokens") => "length",
        Some("refusal") if turn.refusal_explanation.is_some() => "stop",
        Some("refusal") => "content_filter",
        Some("end_turn") | Some("stop_sequence") => "stop",
        Some(other) => other,
        None if turn.calls_tools() => "tool_calls",
        None => "stop",
    };
    frames.push(chunk(json!({}), json!(finish)));
    if ctx.include_usage && !turn.omit_usage {
        let mut u = json!({
            // As OpenAI counts: the prompt includes its cached part.
            "prompt_tokens": usage.input_tokens + usage.cache_read_input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.cache_read_input_tokens + usage.output_tokens,
        });
        if usage.cache_read_input_tokens > 0 {
            u["prompt_tokens_details"] = json!({"cached_tokens": usage.cache_read_input_tokens});
        }
        frames.push(sse(
            None,
            &json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": ctx.model, "choices": [], "usage": u}),
        ));
    }
    frames.push(Bytes::from_static(b"data: [DONE]\n\n"));
    frames
}

/// The body of an error reply in the format's own shape.
pub(crate) fn error_body(format: WireFormat, kind: &str, message: &str) -> Value {
    match format {
        WireFormat::Anthropic => {
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        WireFormat::OpenAi | WireFormat::Responses => {
            json!({"error": {"message": message, "type": kind, "code": null}})
        }
    }
}

/// The error type a real server uses for an HTTP status.
pub(crate) fn error_kind(format: WireFormat, code: u16) -> &'static str {
    match (format, code) {
        (WireFormat::Anthropic, 400) => "invalid_request_error",
        (WireFormat::Anthropic, 401) => "authentication_error",
        (WireFormat::Anthropic, 403) => "permission_error",
        (WireFormat::Anthropic, 404) => "not_found_error",
        (WireFormat::Anthropic, 413) => "request_too_large",
        (WireFormat::Anthropic, 429) => "rate_limit_error",
        (WireFormat::Anthropic, 529) => "overloaded_error",
        (WireFormat::Anthropic, _) => "api_error",
        (_, 400) => "invalid_request_error",
        (_, 401) => "authentication_error",
        (_, 403) => "permission_error",
        (_, 404) => "not_found_error",
        (_, 429) => "rate_limit_exceeded",
        (_, _) => "server_error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_respect_char_boundaries() {
        assert_eq!(
            chunks("héllo wörld", 2),
            vec!["hé", "ll", "o ", "wö", "rl", "d"]
        );
        assert_eq!(chunks("", 4), Vec::<&str>::new());
        assert_eq!(chunks("abc", 0), vec!["a", "b", "c"]);
    }
}
