//! Renders a scripted [`Turn`] as the OpenAI Responses API streams it:
//! `response.created`, one `response.output_item.added` … `.done` run per
//! part (reasoning items carry `encrypted_content`), and
//! `response.completed` (or `response.incomplete`) with usage.
//!
//! Pure functions from a turn to frames; this module must never touch the
//! network or the server's state.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::request_scan::Item;
use crate::script::{Part, Turn};
use crate::wire_parts::{
    RenderContext, WireFormat, argument_pieces, chunks, sse, tool_id, usage_of,
};

/// The encrypted content the server gives reasoning item `n` of turn `turn`.
pub(crate) fn encrypted_content(turn: usize, n: usize) -> String {
    format!("scripted-encrypted-{turn}-{n}")
}

pub(crate) fn render(turn: &Turn, ctx: &RenderContext<'_>) -> Vec<Bytes> {
    let ev = |data: Value| sse(data["type"].as_str(), &data);
    let response_id = format!("resp_scripted_{}", ctx.turn_index);
    let mut frames = vec![ev(json!({"type": "response.created", "response": {
        "id": response_id, "object": "response", "status": "in_progress", "model": ctx.model, "output": [],
    }}))];
    let mut tools = 0;
    for (n, part) in turn.parts.iter().enumerate() {
        let added = |item: Value| {
            ev(json!({"type": "response.output_item.added", "output_index": n, "item": item}))
        };
        let done = |item: Value| {
            ev(json!({"type": "response.output_item.done", "output_index": n, "item": item}))
        };
        match part {
            Part::Hold => frames.push(Bytes::new()),
            Part::Text { text } | Part::CitedText { text } => {
                let annotations = if matches!(part, Part::CitedText { .. }) {
                    json!([{"type": "url_citation", "start_index": 0, "end_index": text.len(),
                        "url": "https://example.com/", "title": "Example"}])
                } else {
                    json!([])
                };
                let id = format!("msg_scripted_{}_{n}", ctx.turn_index);
                frames.push(added(json!({"type": "message", "id": id, "role": "assistant", "status": "in_progress", "content": []})));
                for piece in chunks(text, turn.chunk_size) {
                    frames.push(ev(json!({"type": "response.output_text.delta", "item_id": id, "output_index": n, "content_index": 0, "delta": piece})));
                }
                frames.push(ev(json!({"type": "response.output_text.done", "item_id": id, "output_index": n, "content_index": 0, "text": text})));
                frames.push(done(
                    json!({"type": "message", "id": id, "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": annotations}]}),
                ));
            }
            Part::Reasoning { text } => {
                let id = format!("rs_scripted_{}_{n}", ctx.turn_index);
                frames.push(added(json!({"type": "reasoning", "id": id, "summary": []})));
                frames.push(ev(json!({"type": "response.reasoning_summary_part.added", "item_id": id, "output_index": n, "summary_index": 0, "part": {"type": "summary_text", "text": ""}})));
                for piece in chunks(text, turn.chunk_size) {
                    frames.push(ev(json!({"type": "response.reasoning_summary_text.delta", "item_id": id, "output_index": n, "summary_index": 0, "delta": piece})));
                }
                frames.push(done(json!({"type": "reasoning", "id": id,
                    "summary": [{"type": "summary_text", "text": text}],
                    "encrypted_content": encrypted_content(ctx.turn_index, n)})));
            }
            Part::RedactedReasoning { data } => {
                let id = format!("rs_scripted_{}_{n}", ctx.turn_index);
                frames.push(added(json!({"type": "reasoning", "id": id, "summary": []})));
                frames.push(done(
                    json!({"type": "reasoning", "id": id, "summary": [], "encrypted_content": data}),
                ));
            }
            Part::ServerToolUse { input, .. } => {
                let id = format!("ws_scripted_{}_{n}", ctx.turn_index);
                frames.push(added(
                    json!({"type": "web_search_call", "id": id, "status": "in_progress"}),
                ));
                frames.push(done(json!({"type": "web_search_call", "id": id, "status": "completed",
                    "action": {"type": "search", "query": input.get("query").cloned().unwrap_or_default(),
                        "sources": [{"type": "url", "url": "https://example.com/"}]}})));
            }
            Part::ToolCall { id, name, .. } | Part::RawToolCall { id, name, .. } => {
                let arguments = match part {
                    Part::ToolCall { input, .. } => input.to_string(),
                    Part::RawToolCall { arguments, .. } => arguments.clone(),
                    _ => String::new(),
                };
                let call_id = tool_id(WireFormat::Responses, ctx.turn_index, tools, id);
                tools += 1;
                let item_id = format!("fc_scripted_{}_{n}", ctx.turn_index);
                let item = |args: &str, status: &str| json!({"type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": args, "status": status});
                frames.push(added(item("", "in_progress")));
                for piece in argument_pieces(turn, tools - 1, &arguments) {
                    if piece.is_empty() {
                        frames.push(Bytes::new());
                        continue;
                    }
                    frames.push(ev(json!({"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": n, "delta": piece})));
                }
                // The output limit cuts off only the last item.
                let last = n + 1 == turn.parts.len();
                if last && turn.stop_reason.as_deref() == Some("max_tokens") {
                    continue;
                }
                frames.push(ev(json!({"type": "response.function_call_arguments.done", "item_id": item_id, "output_index": n, "arguments": arguments})));
                frames.push(done(item(&arguments, "completed")));
            }
        }
    }
    refusal(turn, ctx, &mut frames);
    frames.push(ev(finish(turn, ctx, &response_id)));
    frames
}

/// A refusal with an explanation streams it as `response.refusal.delta`.
fn refusal(turn: &Turn, ctx: &RenderContext<'_>, frames: &mut Vec<Bytes>) {
    if let (Some("refusal"), Some(explanation)) =
        (turn.stop_reason.as_deref(), &turn.refusal_explanation)
    {
        let id = format!("msg_scripted_{}_refusal", ctx.turn_index);
        for piece in chunks(explanation, turn.chunk_size) {
            let data = json!({"type": "response.refusal.delta", "item_id": id, "output_index": turn.parts.len(), "content_index": 0, "delta": piece});
            frames.push(sse(Some("response.refusal.delta"), &data));
        }
    }
}

/// `response.completed`, or `response.incomplete` for a turn cut off by the
/// output limit or filtered.
fn finish(turn: &Turn, ctx: &RenderContext<'_>, response_id: &str) -> Value {
    let usage = usage_of(turn, ctx);
    let incomplete = match turn.stop_reason.as_deref() {
        Some("max_tokens") => Some("max_output_tokens"),
        Some("refusal") if turn.refusal_explanation.is_none() => Some("content_filter"),
        _ => None,
    };
    let mut response = json!({
        "id": response_id, "object": "response", "model": ctx.model,
        "status": if incomplete.is_some() { "incomplete" } else { "completed" },
        "incomplete_details": incomplete.map(|reason| json!({"reason": reason})),
    });
    if !turn.omit_usage {
        // As OpenAI counts: the input includes its cached part.
        let input = usage.input_tokens + usage.cache_read_input_tokens;
        response["usage"] = json!({
            "input_tokens": input,
            "input_tokens_details": {"cached_tokens": usage.cache_read_input_tokens},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input + usage.output_tokens,
        });
    }
    let kind = if incomplete.is_some() {
        "response.incomplete"
    } else {
        "response.completed"
    };
    json!({"type": kind, "response": response})
}

/// Which turn a Responses request asks for: the number of runs of output
/// items (assistant messages, reasoning items, function calls, web
/// searches) in `input`.
pub(crate) fn assistant_turns(input: &[Item]) -> usize {
    let mut turns = 0;
    let mut in_run = false;
    for item in input {
        if item.output && !in_run {
            turns += 1;
        }
        in_run = item.output;
    }
    turns
}
