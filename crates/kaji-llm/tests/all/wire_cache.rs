//! A request made with a conversation's [`WireCache`] is the same bytes as
//! the whole body serialised at once, round after round of a growing,
//! sometimes rewritten history (random conversations, fixed seeds), on
//! the Anthropic, OpenAI Chat and Responses wires.

use std::sync::Arc;

use fastrand::Rng;
use kaji_llm::{ModelRequest, Reasoning, WireCache, anthropic, openai, responses};
use kaji_protocol::{ContentBlock, Message, Role, ToolSpec};
use serde_json::json;

fn block(rng: &mut Rng, role: Role, n: usize) -> ContentBlock {
    let text = [
        "",
        "plain",
        "quote \" and \\ and \u{0} and ü",
        "line\nbreak",
    ];
    let text = text[rng.usize(0..text.len())].to_string();
    match (role, rng.usize(0..7)) {
        (_, 0) => ContentBlock::image("image/png", "iVBORw0KGgo="),
        (Role::User, 1 | 2) => ContentBlock::tool_result(format!("t{n}"), text, rng.f64() < 0.3),
        (Role::Assistant, 1 | 2) => ContentBlock::ToolUse {
            id: format!("t{n}"),
            name: "Read".into(),
            input: json!({"file_path": text}),
        },
        (Role::Assistant, 3) => ContentBlock::Reasoning {
            text: text.clone(),
            signature: match rng.usize(0..3) {
                0 => None,
                1 => Some("sig".to_string()),
                // A Responses reasoning item (replayed on that wire only).
                _ => Some(responses_item(n, &text)),
            },
        },
        (Role::Assistant, 4) => ContentBlock::RedactedReasoning {
            data: responses_item(n, ""),
        },
        (Role::Assistant, 5) => ContentBlock::Server {
            block: if rng.bool() {
                json!({"type": "server_tool_use", "id": format!("s{n}"), "name": "web_search", "input": {}})
            } else {
                json!({"type": "web_search_call", "id": format!("ws{n}"), "status": "completed",
                       "action": {"type": "search", "query": text}})
            },
        },
        _ => ContentBlock::text(text),
    }
}

/// A reasoning block's data as the Responses wire keeps it.
fn responses_item(n: usize, summary: &str) -> String {
    let item = json!({"id": format!("rs{n}"), "summary": [{"type": "summary_text", "text": summary}],
                      "encrypted_content": "c2VjcmV0"});
    format!("{}{item}", responses::REASONING_PREFIX)
}

fn message(rng: &mut Rng, role: Role, n: usize) -> Message {
    let blocks = rng.usize(0..4);
    Message {
        role,
        content: (0..blocks).map(|i| block(rng, role, n * 10 + i)).collect(),
    }
}

fn request(history: &[Message], cache: &Arc<WireCache>, thinking: bool) -> ModelRequest {
    ModelRequest {
        model: String::new(),
        system: if thinking {
            String::new()
        } else {
            "Be brief.".into()
        },
        messages: Arc::new(history.to_vec()),
        tools: vec![ToolSpec {
            name: "Read".into(),
            description: "Reads".into(),
            input_schema: json!({"type": "object"}),
        }],
        max_tokens: 1024,
        temperature: Some(0.5),
        web_search: None,
        wire_cache: Some(Arc::clone(cache)),
    }
}

/// The bytes sent for `history`, by each wire, checked against the whole
/// body serialised at once.
fn check(history: &[Message], caches: &[Arc<WireCache>; 3], seed: u64, round: usize) {
    let reasoning = if round.is_multiple_of(3) {
        Reasoning::Medium
    } else {
        Reasoning::Off
    };
    let req = request(history, &caches[0], round.is_multiple_of(5));
    let mut whole = anthropic::request_body(&req, "m");
    anthropic::apply_reasoning(&mut whole, reasoning);
    assert_eq!(
        anthropic::request_text(&req, "m", reasoning),
        whole.to_string(),
        "anthropic, seed {seed}, round {round}"
    );
    let req = request(history, &caches[1], round.is_multiple_of(5));
    let mut whole = openai::request_body(&req, "m", "max_tokens");
    if let Some(effort) = reasoning.effort() {
        whole["reasoning_effort"] = json!(effort);
    }
    assert_eq!(
        openai::request_text(&req, "m", "max_tokens", reasoning),
        whole.to_string(),
        "openai, seed {seed}, round {round}"
    );
    let req = request(history, &caches[2], round.is_multiple_of(5));
    let mut whole = responses::request_body(&req, "m");
    responses::apply_reasoning(&mut whole, reasoning);
    assert_eq!(
        responses::request_text(&req, "m", reasoning),
        whole.to_string(),
        "openai-responses, seed {seed}, round {round}"
    );
}

#[test]
fn cached_requests_are_the_bytes_of_the_whole_body() {
    for seed in kaji_test_support::seeds::seeds("wire cache", &[1, 2, 3, 0x37c], None) {
        let mut rng = Rng::with_seed(seed);
        let caches = [
            Arc::new(WireCache::new()),
            Arc::new(WireCache::new()),
            Arc::new(WireCache::new()),
        ];
        let mut history: Vec<Message> = Vec::new();
        for round in 0..60 {
            match rng.usize(0..10) {
                // The last user message grows (more content for the same
                // request, as a continued conversation does).
                0 if history.last().is_some_and(|m| m.role == Role::User) => {
                    let n = history.len();
                    let extra = block(&mut rng, Role::User, n * 10 + 9);
                    if let Some(last) = history.last_mut() {
                        last.content.push(extra);
                    }
                    caches.iter().for_each(|c| c.keep_first(n - 1));
                }
                // The history is replaced (compaction).
                1 if history.len() > 4 => {
                    history.drain(..history.len() / 2);
                    caches.iter().for_each(|c| c.clear());
                }
                _ => {
                    let role = match history.last().map(|m| m.role) {
                        Some(Role::User) => Role::Assistant,
                        _ => Role::User,
                    };
                    let n = history.len();
                    history.push(message(&mut rng, role, n));
                }
            }
            check(&history, &caches, seed, round);
        }
        assert!(!caches[1].is_empty(), "the cache was used");
        assert!(!caches[2].is_empty(), "the Responses cache was used");
    }
}

/// A cache that was not told of a change still sends the new bytes when
/// the change is a different number of blocks.
#[test]
fn an_unannounced_growth_is_seen() {
    let cache = Arc::new(WireCache::new());
    let mut history = vec![
        Message::user_text("one"),
        Message::assistant_text("two"),
        Message::user_text("three"),
        Message::assistant_text("four"),
        Message::user_text("five"),
    ];
    let caches = [
        Arc::clone(&cache),
        Arc::new(WireCache::new()),
        Arc::new(WireCache::new()),
    ];
    check(&history, &caches, 0, 1);
    history[0].content.push(ContentBlock::text("more"));
    check(&history, &caches, 0, 2);
}
