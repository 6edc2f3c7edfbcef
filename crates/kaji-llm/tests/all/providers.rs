//! End-to-end tests of both providers through real HTTP against the
//! scripted model server: replies, retries and every fault.

use std::sync::Arc;

use crate::common;

use std::time::Duration;

use common::{ask, collect, config, request};
use futures::StreamExt;
use kaji_llm::{LlmError, ProviderKind, build_provider, parse_tool_arguments};
use kaji_protocol::{ContentBlock, Message, Role, StopReason, StreamEvent, ToolSpec, Usage};
use kaji_test_support::{Fault, ScriptedModelServer, Turn};
use serde_json::json;

fn path(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Anthropic => "/v1/messages",
        ProviderKind::OpenAi => "/v1/chat/completions",
        ProviderKind::OpenAiResponses => "/v1/responses",
    }
}

fn url(kind: ProviderKind, server: &ScriptedModelServer) -> String {
    format!("{}{}", server.base_url(), path(kind))
}

async fn text_reply(kind: ProviderKind) {
    let text = "Hello from the scripted model: ünïcödé text, split in small chunks.";
    let server = ScriptedModelServer::start(Turn::text(text)).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    assert_eq!(provider.name(), kind.as_str());
    let reply = collect(provider.stream(request("hi"))).await;
    assert!(reply.error.is_none(), "{:?}", reply.error);
    assert_eq!(reply.text, text);
    assert_eq!(reply.stop, Some(StopReason::EndTurn));
    assert!(reply.retries.is_empty());
    assert!(matches!(
        reply.events.last(),
        Some(StreamEvent::Stop { .. })
    ));
    assert!(
        reply
            .events
            .iter()
            .filter(|e| matches!(e, StreamEvent::TextDelta { .. }))
            .count()
            > 3
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r.path, path(kind));
    assert_eq!(r.turn, Some(0));
    assert_eq!(r.body["stream"], json!(true));
    assert_eq!(r.body["model"], json!("scripted-model"));
    assert_eq!(r.header("accept"), Some("text/event-stream"));
    match kind {
        ProviderKind::Anthropic => {
            assert_eq!(r.header("x-api-key"), Some("[redacted]"));
            assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
            assert_eq!(r.header("authorization"), None);
            assert_eq!(
                r.body["system"],
                json!([{"type": "text", "text": "You are a test.", "cache_control": {"type": "ephemeral"}}])
            );
            assert_eq!(r.body["max_tokens"], json!(1024));
            assert_eq!(
                r.body["messages"],
                json!([{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}])
            );
        }
        ProviderKind::OpenAi => {
            assert_eq!(r.header("authorization"), Some("Bearer [redacted]"));
            assert_eq!(r.header("x-api-key"), None);
            assert_eq!(r.body["stream_options"], json!({"include_usage": true}));
            assert_eq!(r.body["max_tokens"], json!(1024));
            assert_eq!(
                r.body["messages"],
                json!([{"role": "system", "content": "You are a test."}, {"role": "user", "content": "hi"}])
            );
        }
        ProviderKind::OpenAiResponses => {
            assert_eq!(r.header("authorization"), Some("Bearer [redacted]"));
            assert_eq!(r.body["store"], json!(false));
            assert_eq!(r.body["include"], json!(["reasoning.encrypted_content"]));
            assert_eq!(r.body["instructions"], json!("You are a test."));
            assert_eq!(r.body["max_output_tokens"], json!(1024));
            assert_eq!(r.body["input"], json!([{"role": "user", "content": "hi"}]));
        }
    }
}

async fn several_tool_calls(kind: ProviderKind) {
    let turn = Turn::text("Let me look.")
        .and_tool_call("Read", json!({"file_path": "src/main.rs", "limit": 20}))
        .and_tool_call_with_id("call-two", "Glob", json!({"pattern": "**/*.rs"}))
        .and_tool_call("Bash", json!({"command": "echo \"quoted\" && ls"}));
    let server = ScriptedModelServer::start(turn).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let mut req = request("look around");
    req.tools = vec![ToolSpec {
        name: "Read".into(),
        description: "Reads a file".into(),
        input_schema: json!({"type": "object", "properties": {"file_path": {"type": "string"}}}),
    }];
    let reply = collect(provider.stream(req)).await;
    assert!(reply.error.is_none(), "{:?}", reply.error);
    assert_eq!(reply.text, "Let me look.");
    assert_eq!(reply.stop, Some(StopReason::ToolUse));
    let calls: Vec<_> = reply
        .tool_calls
        .iter()
        .map(|(id, name, args, ended)| {
            assert!(ended, "{id} never ended");
            (
                id.clone(),
                name.clone(),
                parse_tool_arguments(name, id, args).unwrap(),
            )
        })
        .collect();
    let prefix = match kind {
        ProviderKind::Anthropic => "toolu_scripted_0_",
        ProviderKind::OpenAi | ProviderKind::OpenAiResponses => "call_scripted_0_",
    };
    assert_eq!(
        calls,
        vec![
            (
                format!("{prefix}0"),
                "Read".to_string(),
                json!({"file_path": "src/main.rs", "limit": 20})
            ),
            (
                "call-two".to_string(),
                "Glob".to_string(),
                json!({"pattern": "**/*.rs"})
            ),
            (
                format!("{prefix}2"),
                "Bash".to_string(),
                json!({"command": "echo \"quoted\" && ls"})
            ),
        ]
    );
    let body = &server.requests()[0].body;
    match kind {
        ProviderKind::Anthropic => assert_eq!(body["tools"][0]["name"], json!("Read")),
        ProviderKind::OpenAi => {
            assert_eq!(body["tools"][0]["type"], json!("function"));
            assert_eq!(
                body["tools"][0]["function"]["parameters"]["type"],
                json!("object")
            );
        }
        ProviderKind::OpenAiResponses => {
            assert_eq!(body["tools"][0]["type"], json!("function"));
            assert_eq!(body["tools"][0]["name"], json!("Read"));
            assert_eq!(body["tools"][0]["parameters"]["type"], json!("object"));
        }
    }
}

async fn reasoning(kind: ProviderKind) {
    let turn = Turn::reasoning("First I think about it.")
        .and_redacted_reasoning("opaque-data")
        .and_text("The answer is 42.");
    let server = ScriptedModelServer::start(turn).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let reply = collect(provider.stream(request("think"))).await;
    assert!(reply.error.is_none(), "{:?}", reply.error);
    assert_eq!(reply.reasoning, "First I think about it.");
    assert_eq!(reply.text, "The answer is 42.");
    match kind {
        ProviderKind::Anthropic => {
            assert_eq!(reply.signatures, vec!["scripted-signature-0-0".to_string()]);
            assert_eq!(reply.redacted, vec!["opaque-data".to_string()]);
        }
        ProviderKind::OpenAi => {
            assert!(reply.signatures.is_empty());
            assert!(reply.redacted.is_empty());
        }
        ProviderKind::OpenAiResponses => {
            // Each reasoning item comes back as data to replay: the one
            // with a summary as a signature, the other as redacted data.
            assert_eq!(reply.signatures.len(), 1);
            assert!(
                reply.signatures[0].starts_with(kaji_llm::responses::REASONING_PREFIX)
                    && reply.signatures[0].contains("scripted-encrypted-0-0"),
                "{:?}",
                reply.signatures
            );
            assert_eq!(reply.redacted.len(), 1);
            assert!(reply.redacted[0].contains("opaque-data"));
        }
    }
}

async fn usage(kind: ProviderKind) {
    let usage = Usage {
        input_tokens: 1234,
        output_tokens: 56,
        cache_read_input_tokens: 7,
        cache_creation_input_tokens: 0,
    };
    let server = ScriptedModelServer::start([
        Turn::text("a").with_usage(usage),
        Turn::text("b").without_usage(),
    ])
    .await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let reply = collect(provider.stream(request("x"))).await;
    assert_eq!(reply.usage, Some(usage));
    // The usage comes before Stop, which is last.
    let usage_pos = reply
        .events
        .iter()
        .rposition(|e| matches!(e, StreamEvent::Usage(_)))
        .unwrap();
    assert_eq!(usage_pos, reply.events.len() - 2);

    // A server that sends no usage at all still gives a complete reply.
    let mut req = request("x");
    Arc::make_mut(&mut req.messages).push(Message::assistant_text("a"));
    Arc::make_mut(&mut req.messages).push(Message::user_text("again"));
    let reply = collect(provider.stream(req)).await;
    assert!(reply.error.is_none(), "{:?}", reply.error);
    assert_eq!(reply.text, "b");
    assert_eq!(reply.stop, Some(StopReason::EndTurn));
    if kind == ProviderKind::OpenAi {
        assert_eq!(reply.usage, None);
    }
}

async fn history_is_sent_back(kind: ProviderKind) {
    let server =
        ScriptedModelServer::start([Turn::tool_call("Read", json!({})), Turn::text("done")]).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let mut req = request("read it");
    Arc::make_mut(&mut req.messages).push(Message {
        role: Role::Assistant,
        content: vec![
            ContentBlock::Reasoning {
                text: "plan".into(),
                signature: Some("sig-1".into()),
            },
            ContentBlock::text("Reading."),
            ContentBlock::ToolUse {
                id: "toolu_1".into(),
                name: "Read".into(),
                input: json!({"file_path": "a.txt"}),
            },
        ],
    });
    Arc::make_mut(&mut req.messages).push(Message {
        role: Role::User,
        content: vec![ContentBlock::tool_result("toolu_1", "file contents", false)],
    });
    let reply = collect(provider.stream(req)).await;
    assert_eq!(reply.text, "done", "{:?}", reply.error);
    let r = &server.requests()[0];
    assert_eq!(r.turn, Some(1));
    let messages = r.messages();
    match kind {
        ProviderKind::Anthropic => {
            assert_eq!(
                messages[1],
                json!({"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "plan", "signature": "sig-1"},
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a.txt"}},
                ]})
            );
            assert_eq!(
                messages[2],
                json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "file contents", "cache_control": {"type": "ephemeral"}}]})
            );
        }
        ProviderKind::OpenAi => {
            assert_eq!(
                messages[2],
                json!({"role": "assistant", "content": "Reading.", "tool_calls": [
                    {"id": "toolu_1", "type": "function", "function": {"name": "Read", "arguments": "{\"file_path\":\"a.txt\"}"}}
                ]})
            );
            assert_eq!(
                messages[3],
                json!({"role": "tool", "tool_call_id": "toolu_1", "content": "file contents"})
            );
        }
        ProviderKind::OpenAiResponses => {
            // The Anthropic signature is not replayed here.
            assert_eq!(
                &messages[1..],
                &[
                    json!({"role": "assistant", "content": "Reading."}),
                    json!({"type": "function_call", "call_id": "toolu_1", "name": "Read", "arguments": "{\"file_path\":\"a.txt\"}"}),
                    json!({"type": "function_call_output", "call_id": "toolu_1", "output": "file contents"}),
                ]
            );
        }
    }
}

async fn retries_then_succeeds(kind: ProviderKind) {
    let turn =
        Turn::text("after retries").with_faults([Fault::rate_limited_ms(3), Fault::status(500)]);
    let server = ScriptedModelServer::start(turn).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let reply = collect(provider.stream(request("x"))).await;
    assert!(reply.error.is_none(), "{:?}", reply.error);
    assert_eq!(reply.text, "after retries");
    assert_eq!(reply.retries.len(), 2);
    let (attempt, max, delay, reason) = &reply.retries[0];
    assert_eq!(
        (*attempt, *max, *delay),
        (2, 3, 3),
        "retry-after-ms is honoured"
    );
    assert!(
        reason.contains("429") && reason.contains("scripted fault: HTTP 429"),
        "{reason}"
    );
    assert_eq!(reply.retries[1].0, 3);
    assert!(reply.retries[1].3.contains("500"));

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        requests.iter().map(|r| r.attempt).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    for r in &requests {
        assert_eq!(
            r.body, requests[0].body,
            "every attempt sends the same body"
        );
        assert_eq!(r.path, path(kind));
        let key = match kind {
            ProviderKind::Anthropic => r.header("x-api-key"),
            ProviderKind::OpenAi | ProviderKind::OpenAiResponses => r.header("authorization"),
        };
        assert!(key.is_some(), "every attempt is authenticated");
    }
}

async fn retries_exhausted(kind: ProviderKind) {
    let turn = Turn::text("never").with_faults([
        Fault::status(500),
        Fault::status(503),
        Fault::status(502),
    ]);
    let server = ScriptedModelServer::start(turn).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let reply = collect(provider.stream(request("x"))).await;
    assert_eq!(reply.retries.len(), 2);
    assert!(reply.text.is_empty());
    let error = reply.error.expect("an error");
    assert!(
        matches!(error, LlmError::RetriesExhausted { attempts: 3, .. }),
        "{error:?}"
    );
    assert_eq!(error.status(), Some(502));
    let message = error.to_string();
    assert!(
        message.contains(kind.as_str())
            && message.contains(&url(kind, &server))
            && message.contains("502"),
        "{message}"
    );
    assert_eq!(server.requests().len(), 3);
}

async fn max_attempts_is_configurable(kind: ProviderKind) {
    let turn = Turn::text("fine").with_faults([
        Fault::status(429),
        Fault::status(429),
        Fault::status(429),
        Fault::status(429),
    ]);
    let server = ScriptedModelServer::start(turn).await;
    let mut cfg = config(kind, &server);
    cfg.max_attempts = 5;
    let reply = collect(build_provider(&cfg).unwrap().stream(request("x"))).await;
    assert_eq!(reply.text, "fine", "{:?}", reply.error);
    assert_eq!(
        reply.retries.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(),
        vec![(2, 5), (3, 5), (4, 5), (5, 5)]
    );
    assert_eq!(server.requests().len(), 5);

    let server = ScriptedModelServer::start(Turn::text("x").with_fault(Fault::status(500))).await;
    let mut cfg = config(kind, &server);
    cfg.max_attempts = 1;
    let reply = collect(build_provider(&cfg).unwrap().stream(request("x"))).await;
    assert!(
        matches!(reply.error, Some(LlmError::Http { status: 500, .. })),
        "{:?}",
        reply.error
    );
    assert!(reply.retries.is_empty());
    assert_eq!(server.requests().len(), 1);
}

async fn retry_after_is_capped(kind: ProviderKind) {
    let server =
        ScriptedModelServer::start(Turn::text("ok").with_fault(Fault::rate_limited_secs(30))).await;
    let reply = ask(kind, &server, "x").await;
    assert_eq!(reply.text, "ok");
    assert_eq!(reply.retries[0].2, 20, "capped at retry_max_delay");
}

async fn retryable_statuses(kind: ProviderKind) {
    for code in [408, 409, 429, 500, 502, 503, 504, 529] {
        let server =
            ScriptedModelServer::start(Turn::text("ok").with_fault(Fault::status(code))).await;
        let reply = ask(kind, &server, "x").await;
        assert_eq!(reply.text, "ok", "HTTP {code}: {:?}", reply.error);
        assert_eq!(reply.retries.len(), 1, "HTTP {code}");
        assert_eq!(server.requests().len(), 2, "HTTP {code}");
    }
}

async fn no_retry_on_client_errors(kind: ProviderKind) {
    for code in [400, 401, 403, 404] {
        let server =
            ScriptedModelServer::start(Turn::text("never").with_fault(Fault::status(code))).await;
        let reply = ask(kind, &server, "x").await;
        assert!(reply.retries.is_empty(), "HTTP {code} retried");
        let error = reply.error.expect("an error");
        assert!(
            matches!(error, LlmError::Http { status, .. } if status == code),
            "{error:?}"
        );
        let message = error.to_string();
        for needle in [
            kind.as_str(),
            &url(kind, &server),
            &code.to_string(),
            &format!("scripted fault: HTTP {code}"),
        ] {
            assert!(message.contains(needle), "{message:?} lacks {needle:?}");
        }
        assert_eq!(server.requests().len(), 1, "HTTP {code}");
    }
}

async fn wrong_base_url_is_a_clear_404(kind: ProviderKind) {
    let server = ScriptedModelServer::start(Turn::text("x")).await;
    let mut cfg = config(kind, &server);
    cfg.base_url = match kind {
        ProviderKind::Anthropic => format!("{}/v1", server.base_url()),
        ProviderKind::OpenAi | ProviderKind::OpenAiResponses => server.base_url(),
    };
    let reply = collect(build_provider(&cfg).unwrap().stream(request("x"))).await;
    let message = reply.error.expect("an error").to_string();
    assert!(
        message.contains("404") && message.contains("no route"),
        "{message}"
    );
    assert_eq!(server.requests().len(), 1);
}

async fn overloaded_is_retried(kind: ProviderKind) {
    let server = ScriptedModelServer::start(Turn::text("ok").with_fault(Fault::Overloaded)).await;
    let reply = ask(kind, &server, "x").await;
    assert_eq!(reply.text, "ok", "{:?}", reply.error);
    assert_eq!(reply.retries.len(), 1);
    assert!(
        reply.retries[0].3.to_lowercase().contains("overloaded"),
        "{}",
        reply.retries[0].3
    );
    assert_eq!(server.requests().len(), 2);
}

async fn drop_before_content_is_retried(kind: ProviderKind) {
    let server = ScriptedModelServer::start(
        Turn::text("ok").with_fault(Fault::DropMidStream { after_bytes: 20 }),
    )
    .await;
    let reply = ask(kind, &server, "x").await;
    assert_eq!(reply.text, "ok", "{:?}", reply.error);
    assert_eq!(reply.retries.len(), 1);
    assert_eq!(server.requests().len(), 2);
}

async fn drop_after_content_is_stream_broken(kind: ProviderKind) {
    let text = "x".repeat(400);
    let server = ScriptedModelServer::start(
        Turn::text(text.clone()).with_fault(Fault::DropMidStream { after_bytes: 1500 }),
    )
    .await;
    let reply = ask(kind, &server, "x").await;
    assert!(
        !reply.text.is_empty() && reply.text.len() < text.len(),
        "got {} bytes: {:?} {:?}",
        reply.text.len(),
        reply.error,
        server.requests().len()
    );
    let error = reply.error.expect("an error");
    assert!(matches!(error, LlmError::StreamBroken { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains(kind.as_str()) && message.contains(&url(kind, &server)),
        "{message}"
    );
    assert!(reply.retries.is_empty());
    assert_eq!(server.requests().len(), 1, "a broken stream is not retried");
}

async fn stall_after_content_is_idle_timeout(kind: ProviderKind) {
    let text = "y".repeat(400);
    let server =
        ScriptedModelServer::start(Turn::text(text).with_fault(Fault::Stall { after_bytes: 1500 }))
            .await;
    let mut cfg = config(kind, &server);
    cfg.idle_timeout = Duration::from_millis(300);
    let reply = collect(build_provider(&cfg).unwrap().stream(request("x"))).await;
    assert!(!reply.text.is_empty());
    let error = reply.error.expect("an error");
    assert!(matches!(error, LlmError::IdleTimeout { .. }), "{error:?}");
    assert!(error.to_string().contains("idle timeout"), "{error}");
    assert_eq!(server.requests().len(), 1);
    // The client closed the stalled connection.
    tokio::time::timeout(Duration::from_secs(30), server.wait_for_aborted_streams(1))
        .await
        .expect("connection closed");
}

async fn stall_before_content_is_retried(kind: ProviderKind) {
    let server =
        ScriptedModelServer::start(Turn::text("ok").with_fault(Fault::Stall { after_bytes: 0 }))
            .await;
    let mut cfg = config(kind, &server);
    cfg.idle_timeout = Duration::from_millis(200);
    let reply = collect(build_provider(&cfg).unwrap().stream(request("x"))).await;
    assert_eq!(reply.text, "ok", "{:?}", reply.error);
    assert_eq!(reply.retries.len(), 1);
    assert!(
        reply.retries[0].3.contains("idle timeout"),
        "{}",
        reply.retries[0].3
    );
}

async fn dropping_the_stream_closes_the_connection(kind: ProviderKind) {
    let server = ScriptedModelServer::start(
        Turn::text("z".repeat(400)).with_fault(Fault::Stall { after_bytes: 1500 }),
    )
    .await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let mut stream = provider.stream(request("x"));
    loop {
        match stream.next().await {
            Some(Ok(StreamEvent::TextDelta { .. })) => break,
            Some(Ok(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(server.aborted_streams(), 0);
    drop(stream);
    tokio::time::timeout(Duration::from_secs(30), server.wait_for_aborted_streams(1))
        .await
        .expect("the server saw the connection close");
}

async fn malformed_sse(kind: ProviderKind) {
    let server = ScriptedModelServer::start(Turn::text("x").with_fault(Fault::MalformedSse)).await;
    let reply = ask(kind, &server, "x").await;
    let error = reply.error.expect("an error");
    assert!(matches!(error, LlmError::MalformedSse { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("this line is not: a server-sent event")
            && message.contains(&url(kind, &server)),
        "{message}"
    );
    assert_eq!(server.requests().len(), 1);
}

async fn invalid_json_chunk(kind: ProviderKind) {
    let server =
        ScriptedModelServer::start(Turn::text("x").with_fault(Fault::InvalidJsonChunk)).await;
    let reply = ask(kind, &server, "x").await;
    let error = reply.error.expect("an error");
    assert!(matches!(error, LlmError::InvalidJson { .. }), "{error:?}");
    assert!(error.to_string().contains("unterminated"), "{error}");
    assert_eq!(server.requests().len(), 1);
}

async fn html_error_page(kind: ProviderKind) {
    let server = ScriptedModelServer::start(Turn::text("x").with_fault(Fault::HtmlErrorPage)).await;
    let reply = ask(kind, &server, "x").await;
    let error = reply.error.expect("an error");
    assert!(matches!(error, LlmError::ServerError { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("HTML page") && message.contains("Scripted gateway error"),
        "{message}"
    );
    assert_eq!(server.requests().len(), 1);

    // An HTML page with a 5xx status (a proxy) is retried like any 5xx.
    let page = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>";
    let turn = Turn::text("x").with_faults([
        Fault::status_with_body(502, page),
        Fault::status_with_body(502, page),
        Fault::status_with_body(502, page),
    ]);
    let server = ScriptedModelServer::start(turn).await;
    let reply = ask(kind, &server, "x").await;
    let message = reply.error.expect("an error").to_string();
    assert!(
        message.contains("502 Bad Gateway") && message.contains("after 3 attempts"),
        "{message}"
    );
}

async fn error_body_with_200(kind: ProviderKind) {
    let server =
        ScriptedModelServer::start(Turn::text("x").with_fault(Fault::ErrorBodyWith200)).await;
    let reply = ask(kind, &server, "x").await;
    let error = reply.error.expect("an error");
    assert!(matches!(error, LlmError::ServerError { .. }), "{error:?}");
    assert!(
        error.to_string().contains("an error body with status 200"),
        "{error}"
    );
    assert_eq!(server.requests().len(), 1);
}

async fn slow_chunks(kind: ProviderKind) {
    let server = ScriptedModelServer::start(
        Turn::text("slow but complete").with_fault(Fault::Slow { delay_ms: 2 }),
    )
    .await;
    let reply = ask(kind, &server, "x").await;
    assert_eq!(reply.text, "slow but complete", "{:?}", reply.error);
    assert!(reply.retries.is_empty());
}

async fn empty_reply(kind: ProviderKind) {
    let server = ScriptedModelServer::start(Turn::text("not this").with_fault(Fault::Empty)).await;
    let reply = ask(kind, &server, "x").await;
    assert!(reply.error.is_none(), "{:?}", reply.error);
    assert_eq!(reply.text, "");
    assert!(reply.tool_calls.is_empty());
    assert_eq!(reply.stop, Some(StopReason::EndTurn));
}

async fn invalid_tool_arguments(kind: ProviderKind) {
    let server = ScriptedModelServer::start(Turn::new().and_raw_tool_call(
        "bad-1",
        "Write",
        "{\"path\": \"a\", ",
    ))
    .await;
    let reply = ask(kind, &server, "x").await;
    assert!(reply.error.is_none(), "{:?}", reply.error);
    let (id, name, args, ended) = &reply.tool_calls[0];
    assert!(ended);
    let message = parse_tool_arguments(name, id, args)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("bad-1") && message.contains("Write"),
        "{message}"
    );
}

async fn xml_text_protocol_is_plain_text(kind: ProviderKind) {
    let text = "I will read it.\n<Read>\n<file_path>src/main.rs</file_path>\n</Read>";
    let server = ScriptedModelServer::start(Turn::text(text)).await;
    let reply = ask(kind, &server, "x").await;
    assert_eq!(reply.text, text);
    assert!(reply.tool_calls.is_empty());
}

async fn connection_refused(kind: ProviderKind) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let server = ScriptedModelServer::start(Turn::text("x")).await;
    let mut cfg = config(kind, &server);
    cfg.base_url = format!("http://127.0.0.1:{port}");
    let reply = collect(build_provider(&cfg).unwrap().stream(request("x"))).await;
    // Nothing listens on this machine's port: asking again cannot help.
    assert!(reply.retries.is_empty(), "{:?}", reply.retries);
    let error = reply.error.expect("an error");
    match &error {
        LlmError::Connect { cause, .. } => {
            assert_eq!(*cause, kaji_llm::error::ConnectCause::RefusedLocally)
        }
        other => panic!("{other:?}"),
    }
    assert!(!error.retry_may_help());
    assert!(
        error.to_string().contains(&format!("127.0.0.1:{port}")),
        "{error}"
    );
}

async fn script_exhausted(kind: ProviderKind) {
    let server = ScriptedModelServer::start(Turn::text("only one")).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let mut req = request("x");
    Arc::make_mut(&mut req.messages).push(Message::assistant_text("only one"));
    Arc::make_mut(&mut req.messages).push(Message::user_text("more"));
    let reply = collect(provider.stream(req)).await;
    let message = reply.error.expect("an error").to_string();
    assert!(
        message.contains("script exhausted") && message.contains("1 turn"),
        "{message}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].turn, None);
}

both_providers! {
    text_reply => text_reply;
    several_tool_calls => several_tool_calls;
    reasoning => reasoning;
    usage => usage;
    history_is_sent_back => history_is_sent_back;
    retries_then_succeeds => retries_then_succeeds;
    retries_exhausted => retries_exhausted;
    max_attempts_is_configurable => max_attempts_is_configurable;
    retry_after_is_capped => retry_after_is_capped;
    retryable_statuses => retryable_statuses;
    no_retry_on_client_errors => no_retry_on_client_errors;
    wrong_base_url_is_a_clear_404 => wrong_base_url_is_a_clear_404;
    overloaded_is_retried => overloaded_is_retried;
    drop_before_content_is_retried => drop_before_content_is_retried;
    drop_after_content_is_stream_broken => drop_after_content_is_stream_broken;
    stall_after_content_is_idle_timeout => stall_after_content_is_idle_timeout;
    stall_before_content_is_retried => stall_before_content_is_retried;
    dropping_the_stream_closes_the_connection => dropping_the_stream_closes_the_connection;
    malformed_sse => malformed_sse;
    invalid_json_chunk => invalid_json_chunk;
    html_error_page => html_error_page;
    error_body_with_200 => error_body_with_200;
    slow_chunks => slow_chunks;
    empty_reply => empty_reply;
    invalid_tool_arguments => invalid_tool_arguments;
    xml_text_protocol_is_plain_text => xml_text_protocol_is_plain_text;
    connection_refused => connection_refused;
    script_exhausted => script_exhausted;
}

#[tokio::test]
async fn anthropic_auth_token_is_a_bearer() {
    let server = ScriptedModelServer::start(Turn::text("ok")).await;
    let mut cfg = config(ProviderKind::Anthropic, &server);
    cfg.auth_token = Some("oauth-token".into());
    let reply = collect(build_provider(&cfg).unwrap().stream(request("x"))).await;
    assert_eq!(reply.text, "ok");
    let r = &server.requests()[0];
    assert_eq!(r.header("authorization"), Some("Bearer [redacted]"));
    assert_eq!(r.header("x-api-key"), None);
}

#[tokio::test]
async fn openai_without_key_sends_no_authorization() {
    let server = ScriptedModelServer::start(Turn::text("ok")).await;
    let mut cfg = config(ProviderKind::OpenAi, &server);
    cfg.api_key = None;
    let reply = collect(build_provider(&cfg).unwrap().stream(request("x"))).await;
    assert_eq!(reply.text, "ok");
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn request_model_overrides_the_configured_one() {
    let server = ScriptedModelServer::start(Turn::text("ok")).await;
    let provider = build_provider(&config(ProviderKind::OpenAi, &server)).unwrap();
    let mut req = request("x");
    req.model = "other-model".into();
    req.temperature = Some(0.2);
    collect(provider.stream(req)).await;
    let body = &server.requests()[0].body;
    assert_eq!(body["model"], json!("other-model"));
    assert_eq!(body["temperature"], json!(0.2));
}
