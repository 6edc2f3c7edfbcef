//! Issue 12, "bounded, stoppable, lossless", provider side: every stream
//! ends within its bounds, through real HTTP against the scripted model
//! server's faults, for both providers.

use std::sync::Arc;

use crate::common;

use std::time::Duration;

use common::{collect, config, request};
use kaji_llm::{LlmError, ProviderKind, build_provider, parse_tool_arguments};
use kaji_protocol::{Message, StopReason};
use kaji_test_support::{Fault, Script, ScriptedModelServer, Turn};
use serde_json::json;

/// A guard against a hang: a test that would wait for ever fails instead.
const HANG_GUARD: Duration = Duration::from_secs(60);

async fn guarded<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(HANG_GUARD, f).await {
        Ok(v) => v,
        Err(_) => panic!("{what} did not end"),
    }
}

async fn event_of_many_data_lines_is_capped(kind: ProviderKind) {
    // 2,000 lines of 100 bytes: every line is small, the event is not.
    let server = ScriptedModelServer::start(Turn::text("never reached").with_fault(
        Fault::ManyDataLines {
            lines: 2000,
            line_bytes: 100,
        },
    ))
    .await;
    let mut cfg = config(kind, &server);
    cfg.max_event_bytes = 64 * 1024;
    let provider = build_provider(&cfg).unwrap();
    let reply = guarded("the stream", collect(provider.stream(request("x")))).await;
    match reply.error {
        Some(LlmError::EventTooLarge { limit, offset, .. }) => {
            assert_eq!(limit, 64 * 1024);
            assert!(offset > 0);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        server.requests().len(),
        1,
        "an oversized event is not retried"
    );
}

async fn event_of_many_data_lines_under_the_cap_is_fine(kind: ProviderKind) {
    let server =
        ScriptedModelServer::start(Turn::text("still here").with_fault(Fault::ManyDataLines {
            lines: 100,
            line_bytes: 100,
        }))
        .await;
    let mut cfg = config(kind, &server);
    cfg.max_event_bytes = 64 * 1024;
    let provider = build_provider(&cfg).unwrap();
    let reply = collect(provider.stream(request("x"))).await;
    assert!(reply.error.is_none(), "{:?}", reply.error);
    assert_eq!(reply.text, "still here");
}

async fn endless_reply_hits_the_reply_cap(kind: ProviderKind) {
    let server = ScriptedModelServer::start(Turn::text("x").with_fault(Fault::Endless)).await;
    let mut cfg = config(kind, &server);
    cfg.max_reply_bytes = 256 * 1024;
    let provider = build_provider(&cfg).unwrap();
    let reply = guarded("the endless stream", collect(provider.stream(request("x")))).await;
    match &reply.error {
        Some(LlmError::ReplyTooLarge { limit, .. }) => assert_eq!(*limit, 256 * 1024),
        other => panic!("{other:?}"),
    }
    let message = reply.error.unwrap().to_string();
    assert!(message.contains("KAJI_MAX_REPLY_BYTES"), "{message}");
    assert!(reply.text.len() as u64 <= 256 * 1024);
    assert!(reply.text.len() > 200 * 1024, "{}", reply.text.len());
    // The connection was dropped, not left streaming.
    guarded("the abort", server.wait_for_aborted_streams(1)).await;
}

async fn pings_only_time_out(kind: ProviderKind) {
    let server =
        ScriptedModelServer::start(Turn::text("x").with_fault(Fault::PingsOnly { interval_ms: 5 }))
            .await;
    let mut cfg = config(kind, &server);
    cfg.idle_timeout = Duration::from_millis(300);
    cfg.max_attempts = 1;
    let provider = build_provider(&cfg).unwrap();
    let reply = guarded("a stream of pings", collect(provider.stream(request("x")))).await;
    match reply.error {
        Some(LlmError::IdleTimeout { phase, .. }) => {
            assert!(phase.contains("without content"), "{phase}")
        }
        other => panic!("{other:?}"),
    }
}

async fn a_stream_that_always_breaks(kind: ProviderKind) {
    let script = Script::new([Turn::text("The first words of a long answer.")])
        .with_fault_on_every_request(Fault::BreakAfterFirstContent);
    let server = ScriptedModelServer::start(script).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let mut req = request("x");
    for round in 0..3 {
        let reply = collect(provider.stream(req.clone())).await;
        assert!(!reply.text.is_empty(), "round {round}: no content at all");
        assert!(reply.text.len() < 20, "round {round}: {:?}", reply.text);
        assert!(
            matches!(reply.error, Some(LlmError::StreamBroken { .. })),
            "round {round}: {:?}",
            reply.error
        );
        // A continuation asks for a later turn: it breaks again.
        Arc::make_mut(&mut req.messages).push(Message::assistant_text(reply.text));
        Arc::make_mut(&mut req.messages).push(Message::user_text("continue"));
    }
    assert_eq!(server.requests().len(), 3);
}

async fn tool_calls_all_at_index_zero_stay_apart(kind: ProviderKind) {
    let turn = Turn::new()
        .and_tool_call_with_id("call_a", "Read", json!({"file_path": "a.rs"}))
        .and_tool_call_with_id("call_b", "Read", json!({"file_path": "b.rs"}))
        .and_tool_call_with_id("call_c", "Glob", json!({"pattern": "*"}))
        .with_fault(Fault::ToolCallsIndexZero);
    let server = ScriptedModelServer::start(turn).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let reply = collect(provider.stream(request("x"))).await;
    assert!(reply.error.is_none(), "{:?}", reply.error);
    let calls: Vec<_> = reply
        .tool_calls
        .iter()
        .map(|(id, name, args, ended)| {
            assert!(ended, "{id} never ended");
            (
                id.as_str(),
                name.as_str(),
                parse_tool_arguments(name, id, args).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            ("call_a", "Read", json!({"file_path": "a.rs"})),
            ("call_b", "Read", json!({"file_path": "b.rs"})),
            ("call_c", "Glob", json!({"pattern": "*"})),
        ]
    );
    assert_eq!(reply.stop, Some(StopReason::ToolUse));
}

both_providers! {
    event_of_many_data_lines_is_capped => event_of_many_data_lines_is_capped;
    event_of_many_data_lines_under_the_cap_is_fine => event_of_many_data_lines_under_the_cap_is_fine;
    endless_reply_hits_the_reply_cap => endless_reply_hits_the_reply_cap;
    pings_only_time_out => pings_only_time_out;
    a_stream_that_always_breaks => a_stream_that_always_breaks;
    tool_calls_all_at_index_zero_stay_apart => tool_calls_all_at_index_zero_stay_apart;
}
