//! The `reasoning` setting on the wire of each provider, and reasoning
//! that comes back (Anthropic thinking signatures, Responses reasoning
//! items with encrypted content) sent back unchanged in the next round.

use std::sync::Arc;

use crate::common;

use common::{collect, config, request};
use kaji_llm::{ProviderKind, Reasoning, build_provider};
use kaji_protocol::{ContentBlock, Message, Role, StreamEvent};
use kaji_test_support::{ScriptedModelServer, Turn};
use serde_json::json;

#[tokio::test]
async fn the_knob_is_sent_as_each_api_wants_it() {
    for kind in [
        ProviderKind::Anthropic,
        ProviderKind::OpenAi,
        ProviderKind::OpenAiResponses,
    ] {
        let server = ScriptedModelServer::start([Turn::text("a"), Turn::text("b")]).await;
        let mut cfg = config(kind, &server);
        cfg.reasoning = Reasoning::High;
        let mut req = request("x");
        req.temperature = Some(0.5);
        let reply = collect(build_provider(&cfg).unwrap().stream(req)).await;
        assert!(reply.error.is_none(), "{kind}: {:?}", reply.error);
        cfg.reasoning = Reasoning::Off;
        collect(build_provider(&cfg).unwrap().stream(request("x"))).await;
        let requests = server.requests();
        let (on, off) = (&requests[0], &requests[1]);
        match kind {
            ProviderKind::Anthropic => {
                assert_eq!(
                    on.body["thinking"],
                    json!({"type": "enabled", "budget_tokens": 32000})
                );
                assert!(on.body["max_tokens"].as_u64().unwrap() > 32000);
                assert!(
                    on.body.get("temperature").is_none(),
                    "thinking allows no temperature"
                );
                assert_eq!(
                    on.header("anthropic-beta"),
                    Some("interleaved-thinking-2025-05-14")
                );
                assert!(off.body.get("thinking").is_none());
                assert_eq!(off.header("anthropic-beta"), None);
            }
            ProviderKind::OpenAi => {
                assert_eq!(on.body["reasoning_effort"], json!("high"));
                assert!(off.body.get("reasoning_effort").is_none());
            }
            ProviderKind::OpenAiResponses => {
                assert_eq!(
                    on.body["reasoning"],
                    json!({"effort": "high", "summary": "auto"})
                );
                assert!(off.body.get("reasoning").is_none());
            }
        }
    }
}

#[test]
fn levels_parse_and_map() {
    assert_eq!("Medium".parse::<Reasoning>().unwrap(), Reasoning::Medium);
    let err = "max".parse::<Reasoning>().unwrap_err().to_string();
    assert!(err.contains("\"max\"") && err.contains("`off`"), "{err}");
    assert_eq!(Reasoning::Off.budget_tokens(), None);
    assert_eq!(Reasoning::Low.effort(), Some("low"));
    assert!(Reasoning::Low.budget_tokens().unwrap() >= 1024);
}

/// The assistant message a reply stream makes, as the task's parser builds
/// it: reasoning text with the signature that follows it, redacted data,
/// text and tool calls in order.
fn assistant_message(events: &[StreamEvent]) -> Message {
    let mut content: Vec<ContentBlock> = Vec::new();
    for event in events {
        match event {
            StreamEvent::ReasoningDelta { text } => match content.last_mut() {
                Some(ContentBlock::Reasoning { text: t, .. }) => t.push_str(text),
                _ => content.push(ContentBlock::Reasoning {
                    text: text.clone(),
                    signature: None,
                }),
            },
            StreamEvent::ReasoningSignature { signature } => {
                if let Some(ContentBlock::Reasoning { signature: s, .. }) = content.last_mut() {
                    *s = Some(signature.clone());
                }
            }
            StreamEvent::RedactedReasoning { data } => {
                content.push(ContentBlock::RedactedReasoning { data: data.clone() })
            }
            StreamEvent::TextDelta { text } => match content.last_mut() {
                Some(ContentBlock::Text { text: t, .. }) => t.push_str(text),
                _ => content.push(ContentBlock::text(text.clone())),
            },
            StreamEvent::ToolCallStart { id, name } => content.push(ContentBlock::ToolUse {
                id: id.clone(),
                name: name.clone(),
                input: json!({}),
            }),
            _ => {}
        }
    }
    Message {
        role: Role::Assistant,
        content,
    }
}

/// Round 1 thinks and calls a tool; round 2 must carry the reasoning back
/// exactly as the API gave it.
async fn round_trip(kind: ProviderKind) -> serde_json::Value {
    let first = Turn::reasoning("Let me think.")
        .and_redacted_reasoning("opaque-blob")
        .and_tool_call("Read", json!({}));
    let server = ScriptedModelServer::start([first, Turn::text("done")]).await;
    let mut cfg = config(kind, &server);
    cfg.reasoning = Reasoning::Medium;
    let provider = build_provider(&cfg).unwrap();
    let mut req = request("go");
    let reply = collect(provider.stream(req.clone())).await;
    assert!(reply.error.is_none(), "{kind}: {:?}", reply.error);
    let message = assistant_message(&reply.events);
    let call_id = reply.tool_calls[0].0.clone();
    Arc::make_mut(&mut req.messages).push(message);
    Arc::make_mut(&mut req.messages).push(Message {
        role: Role::User,
        content: vec![ContentBlock::tool_result(call_id, "ok", false)],
    });
    // As a resumed session would: the history goes through JSON first.
    let saved = serde_json::to_string(&*req.messages).unwrap();
    req.messages = Arc::new(serde_json::from_str(&saved).unwrap());
    let reply = collect(provider.stream(req)).await;
    assert_eq!(reply.text, "done", "{kind}: {:?}", reply.error);
    server.requests()[1].body.clone()
}

#[tokio::test]
async fn anthropic_thinking_goes_back_with_its_signature() {
    let body = round_trip(ProviderKind::Anthropic).await;
    let blocks = &body["messages"][1]["content"];
    assert_eq!(
        blocks[0],
        json!({"type": "thinking", "thinking": "Let me think.", "signature": "scripted-signature-0-0"})
    );
    assert_eq!(
        blocks[1],
        json!({"type": "redacted_thinking", "data": "opaque-blob"})
    );
}

#[tokio::test]
async fn responses_reasoning_items_go_back_with_their_encrypted_content() {
    let body = round_trip(ProviderKind::OpenAiResponses).await;
    let input = body["input"].as_array().unwrap();
    assert_eq!(
        input[1],
        json!({"type": "reasoning", "id": "rs_scripted_0_0",
               "summary": [{"type": "summary_text", "text": "Let me think."}],
               "encrypted_content": "scripted-encrypted-0-0"})
    );
    assert_eq!(
        input[2],
        json!({"type": "reasoning", "id": "rs_scripted_0_1", "summary": [], "encrypted_content": "opaque-blob"})
    );
    assert_eq!(input[3]["type"], json!("function_call"));
    assert_eq!(input[4]["type"], json!("function_call_output"));
}

#[tokio::test]
async fn responses_items_are_not_sent_to_anthropic() {
    let body = round_trip(ProviderKind::OpenAiResponses).await;
    let item = &body["input"][1];
    let signature = format!(
        "{}{}",
        kaji_llm::responses::REASONING_PREFIX,
        json!({"id": item["id"], "summary": item["summary"], "encrypted_content": item["encrypted_content"]})
    );
    let mut req = request("x");
    Arc::make_mut(&mut req.messages).push(Message {
        role: Role::Assistant,
        content: vec![
            ContentBlock::Reasoning {
                text: "t".into(),
                signature: Some(signature),
            },
            ContentBlock::text("hi"),
        ],
    });
    Arc::make_mut(&mut req.messages).push(Message::user_text("again"));
    let sent = kaji_llm::anthropic::request_body(&req, "m");
    assert_eq!(
        sent["messages"][1]["content"],
        json!([{"type": "text", "text": "hi"}])
    );
}
