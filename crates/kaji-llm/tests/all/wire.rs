//! Issue 16, "the wire, checked" and "tools start before the reply ends":
//! fixtures of the kind in Anthropic's SDK (refusal, max_tokens mid call,
//! out-of-order blocks, unknown block types, extra fields) and tool calls
//! that close while the stream is still held open, for both providers,
//! through real HTTP against the scripted model server.

use crate::common;

use std::time::Duration;

use common::{collect, config, request};
use futures::StreamExt;
use kaji_llm::{ModelStream, ProviderKind, build_provider, parse_tool_arguments};
use kaji_protocol::{StopReason, StreamEvent};
use kaji_test_support::{ScriptedModelServer, Turn};
use serde_json::json;

/// A guard against a hang: a test that would wait for ever fails instead.
const HANG_GUARD: Duration = Duration::from_secs(30);

/// Reads events until `want` arrives; panics if the stream ends or errs
/// first, or if it never comes (the server holds the stream open).
async fn read_until(stream: &mut ModelStream, want: &StreamEvent) -> Vec<StreamEvent> {
    let mut seen = Vec::new();
    let read = async {
        while let Some(item) = stream.next().await {
            let event = item.unwrap_or_else(|e| panic!("error before {want:?}: {e}"));
            seen.push(event.clone());
            if &event == want {
                return;
            }
        }
        panic!("the stream ended before {want:?}: {seen:?}");
    };
    if tokio::time::timeout(HANG_GUARD, read).await.is_err() {
        panic!("{want:?} did not arrive while the stream was held open");
    }
    seen
}

fn ids(kind: ProviderKind) -> (&'static str, &'static str) {
    match kind {
        ProviderKind::Anthropic => ("toolu_scripted_0_0", "toolu_scripted_0_1"),
        ProviderKind::OpenAi | ProviderKind::OpenAiResponses => {
            ("call_scripted_0_0", "call_scripted_0_1")
        }
    }
}

async fn two_calls_then_a_stall(kind: ProviderKind) {
    let turn = Turn::text("Two things.")
        .and_tool_call("Read", json!({"file_path": "a.rs"}))
        .and_tool_call("Bash", json!({"command": "ls"}))
        .and_hold()
        .and_text(" More text after the hold.");
    let server = ScriptedModelServer::start(turn).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let mut stream = provider.stream(request("x"));
    let (first, second) = ids(kind);
    read_until(&mut stream, &StreamEvent::ToolCallEnd { id: first.into() }).await;
    read_until(&mut stream, &StreamEvent::ToolCallEnd { id: second.into() }).await;
    assert_eq!(server.holds_reached(), 1, "the stream is held");
    server.release();
    let rest = collect(stream).await;
    assert!(rest.error.is_none(), "{:?}", rest.error);
    assert_eq!(rest.text, " More text after the hold.");
    assert_eq!(rest.stop, Some(StopReason::ToolUse));
}

async fn one_complete_call_then_a_stall(kind: ProviderKind) {
    let turn =
        Turn::tool_call("Write", json!({"file_path": "a.txt", "content": "{[\"}"})).and_hold();
    let server = ScriptedModelServer::start(turn).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let mut stream = provider.stream(request("x"));
    let (first, _) = ids(kind);
    let seen = read_until(&mut stream, &StreamEvent::ToolCallEnd { id: first.into() }).await;
    let args: String = seen
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallDelta { arguments, .. } => Some(arguments.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        parse_tool_arguments("Write", first, &args).unwrap(),
        json!({"file_path": "a.txt", "content": "{[\"}"})
    );
    server.release();
    let rest = collect(stream).await;
    assert!(rest.error.is_none(), "{:?}", rest.error);
    assert_eq!(rest.stop, Some(StopReason::ToolUse));
}

async fn refusal_is_a_stop_reason_with_its_explanation(kind: ProviderKind) {
    let mut turn = Turn::refusal("This request is against the usage policy.");
    turn.parts = Turn::text("I").parts;
    turn.refusal_category = Some("cyber".into());
    let server = ScriptedModelServer::start(turn).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let reply = collect(provider.stream(request("x"))).await;
    assert!(reply.error.is_none(), "{:?}", reply.error);
    let category = match kind {
        ProviderKind::Anthropic => Some("cyber".to_string()),
        ProviderKind::OpenAi | ProviderKind::OpenAiResponses => None,
    };
    assert_eq!(
        reply.stop,
        Some(StopReason::Refusal {
            category,
            explanation: Some("This request is against the usage policy.".into()),
        })
    );
    assert!(reply.retries.is_empty());
    assert_eq!(server.requests().len(), 1);

    // Without an explanation: Anthropic's bare refusal, OpenAI's content_filter.
    let server = ScriptedModelServer::start(Turn::text("I").with_stop_reason("refusal")).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let reply = collect(provider.stream(request("x"))).await;
    assert_eq!(reply.stop, Some(StopReason::refusal()));
}

async fn max_tokens_mid_call_leaves_the_call_open(kind: ProviderKind) {
    let turn = Turn::text("Writing it.")
        .and_tool_call("Read", json!({"file_path": "a.rs"}))
        .and_raw_tool_call("cut", "Write", r#"{"file_path": "b.rs", "content": "fn ma"#)
        .with_stop_reason("max_tokens");
    let server = ScriptedModelServer::start(turn).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let reply = collect(provider.stream(request("x"))).await;
    assert!(reply.error.is_none(), "{:?}", reply.error);
    assert_eq!(reply.stop, Some(StopReason::MaxTokens));
    assert_eq!(reply.tool_calls.len(), 2);
    let (id, name, args, ended) = &reply.tool_calls[0];
    assert!(ended, "the complete call {id} ends");
    assert_eq!(name, "Read");
    assert!(parse_tool_arguments(name, id, args).is_ok());
    let (id, name, args, ended) = &reply.tool_calls[1];
    assert_eq!((id.as_str(), name.as_str()), ("cut", "Write"));
    assert!(!ended, "the cut-off call has no end: {:?}", reply.events);
    assert_eq!(args, r#"{"file_path": "b.rs", "content": "fn ma"#);

    // The fixture builder gives the same.
    let server = ScriptedModelServer::start(Turn::cut_off_in_tool_call("Write", r#"{"a": "#)).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let reply = collect(provider.stream(request("x"))).await;
    assert_eq!(reply.stop, Some(StopReason::MaxTokens));
    assert!(!reply.tool_calls[0].3);
}

async fn out_of_order_blocks(kind: ProviderKind) {
    let turn = Turn::reasoning("Hmm.")
        .and_text("First, ")
        .and_tool_call_with_id("t1", "Read", json!({"file_path": "a"}))
        .and_tool_call_with_id("t2", "Glob", json!({"pattern": "b"}))
        .and_text("then more.")
        .out_of_order();
    let server = ScriptedModelServer::start(turn).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let reply = collect(provider.stream(request("x"))).await;
    assert!(reply.error.is_none(), "{:?}", reply.error);
    assert_eq!(reply.reasoning, "Hmm.");
    assert_eq!(reply.text, "First, then more.");
    let calls: Vec<_> = reply
        .tool_calls
        .iter()
        .map(|(id, name, args, ended)| {
            assert!(ended);
            (id.as_str(), parse_tool_arguments(name, id, args).unwrap())
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            ("t1", json!({"file_path": "a"})),
            ("t2", json!({"pattern": "b"}))
        ]
    );
}

async fn unknown_blocks_are_ignored(kind: ProviderKind) {
    let turn = Turn::text("Let me search. ")
        .and_server_tool_use("web_search", json!({"query": "weather in Paris"}))
        .and_text("It is sunny.");
    let server = ScriptedModelServer::start(turn).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let reply = collect(provider.stream(request("x"))).await;
    assert!(reply.error.is_none(), "{:?}", reply.error);
    assert_eq!(reply.text, "Let me search. It is sunny.");
    assert!(reply.tool_calls.is_empty(), "{:?}", reply.tool_calls);
    assert_eq!(reply.stop, Some(StopReason::EndTurn));
    // The provider's search blocks are kept whole (Chat Completions has
    // none: its annotations are dropped).
    let kinds: Vec<&str> = reply
        .server_blocks
        .iter()
        .map(|b| b["type"].as_str().unwrap_or(""))
        .collect();
    match kind {
        ProviderKind::Anthropic => {
            assert_eq!(kinds, ["server_tool_use", "web_search_tool_result"]);
            // The input is assembled from its deltas.
            assert_eq!(
                reply.server_blocks[0]["input"],
                json!({"query": "weather in Paris"})
            );
            assert_eq!(
                reply.server_blocks[1]["content"][0]["url"],
                "https://example.com/"
            );
        }
        ProviderKind::OpenAiResponses => {
            assert_eq!(kinds, ["web_search_call"]);
            assert_eq!(
                reply.server_blocks[0]["action"]["sources"][0]["url"],
                "https://example.com/"
            );
        }
        ProviderKind::OpenAi => assert!(kinds.is_empty(), "{kinds:?}"),
    }
}

async fn extra_fields_are_ignored(kind: ProviderKind) {
    let turn = || {
        Turn::reasoning("Think.")
            .and_text("Answer.")
            .and_tool_call_with_id("t1", "Read", json!({"file_path": "a"}))
    };
    let server = ScriptedModelServer::start([turn().with_extra_fields()]).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let reply = collect(provider.stream(request("x"))).await;
    assert!(reply.error.is_none(), "{:?}", reply.error);
    let plain_server = ScriptedModelServer::start([turn()]).await;
    let plain_provider = build_provider(&config(kind, &plain_server)).unwrap();
    let plain = collect(plain_provider.stream(request("x"))).await;
    assert_eq!(reply.events, plain.events);
}

#[tokio::test]
async fn openai_reasoning_in_either_field() {
    for field in ["reasoning_content", "reasoning"] {
        let mut turn = Turn::reasoning("Let me think.").and_text("Done.");
        turn.reasoning_field = Some(field.into());
        let server = ScriptedModelServer::start(turn).await;
        let provider = build_provider(&config(ProviderKind::OpenAi, &server)).unwrap();
        let reply = collect(provider.stream(request("x"))).await;
        assert_eq!(reply.reasoning, "Let me think.", "{field}");
        assert_eq!(reply.text, "Done.", "{field}");
    }
}

both_providers! {
    two_calls_then_a_stall => two_calls_then_a_stall;
    one_complete_call_then_a_stall => one_complete_call_then_a_stall;
    refusal_is_a_stop_reason_with_its_explanation => refusal_is_a_stop_reason_with_its_explanation;
    max_tokens_mid_call_leaves_the_call_open => max_tokens_mid_call_leaves_the_call_open;
    out_of_order_blocks => out_of_order_blocks;
    unknown_blocks_are_ignored => unknown_blocks_are_ignored;
    extra_fields_are_ignored => extra_fields_are_ignored;
}
