use super::*;
use kaji_protocol::ToolSpec;

fn run(datas: &[Value]) -> (Vec<StreamEvent>, Result<bool, EventError>) {
    let mut decoder = ResponsesDecoder::default();
    let mut out = Vec::new();
    let mut last = Ok(false);
    for data in datas {
        let ev = SseEvent {
            event: data["type"].as_str().unwrap_or("").to_string(),
            data: data.to_string(),
            offset: 0,
        };
        last = decoder.on_event(&ev, &mut out);
        if !matches!(last, Ok(false)) {
            break;
        }
    }
    (out, last)
}

#[test]
fn maps_reasoning_text_calls_and_usage() {
    let (out, last) = run(&[
        json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0, "summary_index": 0, "delta": "think"}),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0, "summary_index": 1, "delta": "more"}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "think"}, {"type": "summary_text", "text": "more"}], "encrypted_content": "ENC"}}),
        json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "content_index": 0, "delta": "Hello"}),
        json!({"type": "response.output_item.added", "output_index": 2, "item": {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "Read", "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 2, "delta": "{\"x\":"}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 2, "delta": "1}"}),
        json!({"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 2, "arguments": "{\"x\":1}"}),
        json!({"type": "response.output_item.done", "output_index": 2, "item": {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "Read", "arguments": "{\"x\":1}"}}),
        json!({"type": "response.completed", "response": {"status": "completed", "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 3}}}),
    ]);
    assert!(matches!(last, Ok(true)));
    let item = json!({"id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}, {"type": "summary_text", "text": "more"}], "encrypted_content": "ENC"});
    assert_eq!(
        out,
        vec![
            StreamEvent::ReasoningDelta {
                text: "think".into()
            },
            StreamEvent::ReasoningDelta {
                text: "\n\n".into()
            },
            StreamEvent::ReasoningDelta {
                text: "more".into()
            },
            StreamEvent::ReasoningSignature {
                signature: format!("{REASONING_PREFIX}{item}")
            },
            StreamEvent::TextDelta {
                text: "Hello".into()
            },
            StreamEvent::ToolCallStart {
                id: "call_a".into(),
                name: "Read".into()
            },
            StreamEvent::ToolCallDelta {
                id: "call_a".into(),
                arguments: "{\"x\":".into()
            },
            StreamEvent::ToolCallDelta {
                id: "call_a".into(),
                arguments: "1}".into()
            },
            StreamEvent::ToolCallEnd {
                id: "call_a".into()
            },
            StreamEvent::Usage(Usage {
                input_tokens: 6,
                output_tokens: 3,
                cache_read_input_tokens: 4,
                cache_creation_input_tokens: 0
            }),
            StreamEvent::Stop {
                reason: StopReason::ToolUse
            },
        ]
    );
}

#[test]
fn reasoning_without_summary_is_redacted_and_calls_without_deltas_still_come() {
    let (out, _) = run(&[
        json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "E2"}}),
        json!({"type": "response.output_item.done", "output_index": 1, "item": {"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "Glob", "arguments": "{}"}}),
        json!({"type": "response.completed", "response": {"status": "completed"}}),
    ]);
    assert_eq!(
        out,
        vec![
            StreamEvent::RedactedReasoning {
                data: format!(
                    "{REASONING_PREFIX}{}",
                    json!({"id": "rs_2", "summary": [], "encrypted_content": "E2"})
                )
            },
            StreamEvent::ToolCallStart {
                id: "call_b".into(),
                name: "Glob".into()
            },
            StreamEvent::ToolCallDelta {
                id: "call_b".into(),
                arguments: "{}".into()
            },
            StreamEvent::ToolCallEnd {
                id: "call_b".into()
            },
            StreamEvent::Stop {
                reason: StopReason::ToolUse
            },
        ]
    );
}

#[test]
fn incomplete_leaves_a_cut_call_open_and_refusals_explain() {
    let (out, _) = run(&[
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "function_call", "id": "fc_1", "call_id": "c", "name": "Write", "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "{\"content\":\"hel"}),
        json!({"type": "response.incomplete", "response": {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}}),
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
        json!({"type": "response.refusal.delta", "item_id": "m", "delta": "I can't "}),
        json!({"type": "response.refusal.delta", "item_id": "m", "delta": "help."}),
        json!({"type": "response.completed", "response": {"status": "completed"}}),
    ]);
    assert_eq!(
        out.last(),
        Some(&StreamEvent::Stop {
            reason: StopReason::Refusal {
                category: None,
                explanation: Some("I can't help.".into())
            }
        })
    );
}

#[test]
fn failures_errors_and_eof() {
    let (_, last) = run(&[
        json!({"type": "response.failed", "response": {"status": "failed", "error": {"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}}}),
    ]);
    match last {
        Err(EventError::Server {
            message, retryable, ..
        }) => {
            assert!(
                crate::error::is_context_overflow_text(&message),
                "{message}"
            );
            assert!(!retryable);
        }
        other => panic!("{other:?}"),
    }
    let (_, last) =
        run(&[json!({"type": "error", "code": "server_error", "message": "boom", "param": null})]);
    assert!(
        matches!(last, Err(EventError::Server { ref message, retryable: true, .. }) if message == "server_error: boom")
    );
    let mut decoder = ResponsesDecoder::default();
    assert!(decoder.on_eof(&mut Vec::new()).is_err());
    let (_, last) = run(&[]);
    assert!(matches!(last, Ok(false)));
}

#[test]
fn request_body_maps_history_and_replays_reasoning() {
    let item = format!(
        r#"{REASONING_PREFIX}{{"id":"rs_1","summary":[{{"type":"summary_text","text":"t"}}],"encrypted_content":"ENC"}}"#
    );
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
                        signature: Some(item),
                    },
                    ContentBlock::Reasoning {
                        text: "anthropic".into(),
                        signature: Some("sig".into()),
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
    let mut body = request_body(&request, "gpt-5-codex");
    apply_reasoning(&mut body, Reasoning::High);
    assert_eq!(
        body,
        json!({
            "model": "gpt-5-codex",
            "stream": true,
            "store": false,
            "include": ["reasoning.encrypted_content"],
            "max_output_tokens": 9,
            "instructions": "sys",
            "reasoning": {"effort": "high", "summary": "auto"},
            "tools": [{"type": "function", "name": "Read", "description": "d", "parameters": {"type": "object"}, "strict": false}],
            "input": [
                {"role": "user", "content": "hi"},
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "t"}], "encrypted_content": "ENC"},
                {"role": "assistant", "content": "ok"},
                {"type": "function_call", "call_id": "c1", "name": "Read", "arguments": "{\"p\":1}"},
                {"type": "function_call_output", "call_id": "c1", "output": "Error: boom"},
                {"role": "user", "content": "next"},
            ],
        })
    );
    let mut off = request_body(&request, "m");
    apply_reasoning(&mut off, Reasoning::Off);
    assert!(off.get("reasoning").is_none());
}

#[test]
fn a_request_offering_web_search_carries_the_hosted_tool_and_asks_for_sources() {
    let search_call = json!({"type": "web_search_call", "id": "ws_1", "status": "completed",
        "action": {"type": "search", "query": "q", "sources": [{"type": "url", "url": "https://a.example/"}]}});
    let request = ModelRequest {
        model: "m".into(),
        system: String::new(),
        messages: std::sync::Arc::new(vec![
            Message::user_text("search"),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::Server {
                        block: search_call.clone(),
                    },
                    ContentBlock::text("A says so."),
                    ContentBlock::Server {
                        block: json!({"type": "url_citation", "url": "https://a.example/"}),
                    },
                    ContentBlock::Server {
                        block: json!({"type": "server_tool_use", "id": "srv"}),
                    },
                ],
            },
        ]),
        tools: vec![ToolSpec {
            name: "Read".into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
        }],
        max_tokens: 9,
        temperature: None,
        web_search: Some(crate::ProviderWebSearch {
            allowed_domains: vec!["docs.rs".into()],
            blocked_domains: Vec::new(),
            max_uses: 5,
        }),
        wire_cache: None,
    };
    let body = request_body(&request, "x");
    assert_eq!(
        body["tools"][1],
        json!({"type": "web_search", "filters": {"allowed_domains": ["docs.rs"]}})
    );
    assert_eq!(
        body["include"],
        json!([
            "reasoning.encrypted_content",
            "web_search_call.action.sources"
        ])
    );
    // The search goes back as it came, less its id; the other wire's
    // blocks and the citations are left out.
    let mut replayed = search_call;
    replayed.as_object_mut().unwrap().shift_remove("id");
    assert_eq!(
        body["input"],
        json!([
            {"role": "user", "content": "search"},
            replayed,
            {"role": "assistant", "content": "A says so."},
        ])
    );
}

#[test]
fn citations_of_a_message_are_server_blocks() {
    let item = json!({"type": "message", "content": [{"type": "output_text", "text": "t",
        "annotations": [{"type": "url_citation", "url": "https://a.example/", "title": "A"},
                        {"type": "file_citation", "file_id": "f"}]}]});
    let mut out = Vec::new();
    citations(&item, &mut out);
    assert_eq!(
        out,
        vec![StreamEvent::ServerBlock {
            block: json!({"type": "url_citation", "url": "https://a.example/", "title": "A"})
        }]
    );
}
