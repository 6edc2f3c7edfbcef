//! What the three wire renderers share: the [`WireFormat`], what a
//! renderer knows of the request ([`RenderContext`]), the turn's usage,
//! text and argument pieces, one server-sent event and generated tool-call
//! ids. Below `wire.rs` (Anthropic, OpenAI chat, the dispatch) and
//! `wire_responses.rs`; pure functions that must never touch the network
//! or the server's state.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::script::{Part, Turn};

/// The three wire formats the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WireFormat {
    /// `POST /v1/messages`.
    Anthropic,
    /// `POST /v1/chat/completions`.
    #[serde(rename = "openai")]
    OpenAi,
    /// `POST /v1/responses` (the OpenAI Responses API).
    #[serde(rename = "openai-responses")]
    Responses,
}

/// What the renderer needs to know about the request and the turn.
pub(crate) struct RenderContext<'a> {
    pub turn_index: usize,
    pub model: &'a str,
    pub request_bytes: usize,
    pub include_usage: bool,
    /// OpenAI: every tool call gets `index: 0`.
    pub index_zero: bool,
}

pub(crate) fn usage_of(turn: &Turn, ctx: &RenderContext<'_>) -> kaji_protocol::Usage {
    turn.usage.unwrap_or_else(|| {
        let out: usize = turn
            .parts
            .iter()
            .map(|p| match p {
                Part::Text { text } | Part::Reasoning { text } | Part::CitedText { text } => {
                    text.len()
                }
                Part::RedactedReasoning { data } => data.len(),
                Part::ToolCall { name, input, .. } => name.len() + input.to_string().len(),
                Part::RawToolCall {
                    name, arguments, ..
                } => name.len() + arguments.len(),
                Part::ServerToolUse { name, input } => name.len() + input.to_string().len(),
                Part::Hold => 0,
            })
            .sum();
        kaji_protocol::Usage {
            input_tokens: (ctx.request_bytes / 4).max(1) as u64,
            output_tokens: (out / 4).max(1) as u64,
            cache_read_input_tokens: 0,
            cache_creation_input_tokens: 0,
        }
    })
}

/// Splits `text` into pieces of about `size` bytes on char boundaries.
pub(crate) fn chunks(text: &str, size: usize) -> Vec<&str> {
    let size = size.max(1);
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = size.min(rest.len());
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        out.push(&rest[..end]);
        rest = &rest[end..];
    }
    out
}

/// The pieces tool call number `call` (from 0) of `turn` streams its
/// arguments in; an empty piece marks the hold of
/// [`Turn::hold_in_arguments`].
pub(crate) fn argument_pieces<'a>(turn: &Turn, call: usize, arguments: &'a str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut sent = 0;
    let mut held = false;
    for piece in chunks(arguments, turn.chunk_size) {
        out.push(piece);
        sent += piece.len();
        if call == 0 && !held && turn.hold_in_arguments.is_some_and(|n| sent >= n) {
            out.push("");
            held = true;
        }
    }
    out
}

pub(crate) fn sse(event: Option<&str>, data: &Value) -> Bytes {
    match event {
        Some(name) => Bytes::from(format!("event: {name}\ndata: {data}\n\n")),
        None => Bytes::from(format!("data: {data}\n\n")),
    }
}

/// The generated id of the `n`-th tool call of turn `turn`.
pub(crate) fn tool_id(format: WireFormat, turn: usize, n: usize, given: &Option<String>) -> String {
    match (given, format) {
        (Some(id), _) => id.clone(),
        (None, WireFormat::Anthropic) => format!("toolu_scripted_{turn}_{n}"),
        (None, WireFormat::OpenAi | WireFormat::Responses) => {
            format!("call_scripted_{turn}_{n}")
        }
    }
}
