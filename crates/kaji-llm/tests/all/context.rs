//! Issue 13, provider side: context overflows are typed and never retried,
//! Anthropic requests carry prompt-cache breakpoints where they should, and
//! cache tokens come back from both providers' usage. Real HTTP against the
//! scripted model server.

use std::sync::Arc;

use crate::common;

use common::{collect, config, request};
use kaji_llm::{LlmError, ProviderKind, build_provider};
use kaji_protocol::{ContentBlock, Message, Role, ToolSpec, Usage};
use kaji_test_support::{Fault, Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};

async fn oversized_request_is_a_context_overflow(kind: ProviderKind) {
    let script = Script::new([Turn::text("fits")]).with_max_request_bytes(2000);
    let server = ScriptedModelServer::start(script).await;
    let mut cfg = config(kind, &server);
    cfg.max_attempts = 3;
    let provider = build_provider(&cfg).unwrap();
    let small = collect(provider.stream(request("short"))).await;
    assert_eq!(small.text, "fits", "{:?}", small.error);
    let reply = collect(provider.stream(request(&"long ".repeat(1000)))).await;
    let error = reply.error.expect("an error");
    assert!(error.is_context_overflow(), "{error:?}");
    match &error {
        LlmError::ContextOverflow {
            status, message, ..
        } => {
            assert_eq!(*status, 400);
            match kind {
                ProviderKind::Anthropic => {
                    assert!(message.contains("prompt is too long"), "{message}")
                }
                ProviderKind::OpenAi | ProviderKind::OpenAiResponses => {
                    assert!(message.contains("maximum context length"), "{message}")
                }
            }
        }
        other => panic!("{other:?}"),
    }
    assert!(reply.retries.is_empty());
    assert_eq!(server.requests().len(), 2, "never retried");
}

#[tokio::test]
async fn every_servers_wording_is_recognised() {
    for server_name in [
        "openai",
        "anthropic",
        "vllm",
        "llama.cpp",
        "ollama",
        "lmstudio",
    ] {
        let server =
            ScriptedModelServer::start(Turn::text("x").with_fault(Fault::ContextLengthExceeded {
                server: Some(server_name.into()),
            }))
            .await;
        let provider = build_provider(&config(ProviderKind::OpenAi, &server)).unwrap();
        let reply = collect(provider.stream(request("x"))).await;
        assert!(
            matches!(reply.error, Some(LlmError::ContextOverflow { .. })),
            "{server_name}: {:?}",
            reply.error
        );
    }
}

#[tokio::test]
async fn an_overflow_with_a_retryable_status_or_200_is_not_retried() {
    let lmstudio = r#"{"error":"Trying to keep the first 9000 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough."}"#;
    for code in [500, 200] {
        let server = ScriptedModelServer::start(
            Turn::text("x").with_fault(Fault::status_with_body(code, lmstudio)),
        )
        .await;
        let mut cfg = config(ProviderKind::OpenAi, &server);
        cfg.max_attempts = 3;
        let provider = build_provider(&cfg).unwrap();
        let reply = collect(provider.stream(request("x"))).await;
        match reply.error {
            Some(LlmError::ContextOverflow { status, .. }) => assert_eq!(status, code),
            other => panic!("HTTP {code}: {other:?}"),
        }
        assert_eq!(server.requests().len(), 1, "HTTP {code}");
    }
}

fn tools() -> Vec<ToolSpec> {
    ["Read", "Write", "Bash"]
        .iter()
        .map(|name| ToolSpec {
            name: name.to_string(),
            description: format!("The {name} tool."),
            input_schema: json!({"type": "object"}),
        })
        .collect()
}

/// Every block or tool in `body` that carries a breakpoint, as a path.
fn breakpoints(body: &Value) -> Vec<String> {
    let mut found = Vec::new();
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        if tool.get("cache_control").is_some() {
            found.push(format!("tools[{i}]"));
        }
    }
    for (i, block) in body["system"].as_array().into_iter().flatten().enumerate() {
        if block.get("cache_control").is_some() {
            found.push(format!("system[{i}]"));
        }
    }
    for (m, message) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (b, block) in message["content"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if block.get("cache_control").is_some() {
                assert_eq!(block["cache_control"], json!({"type": "ephemeral"}));
                found.push(format!("messages[{m}][{b}]"));
            }
        }
    }
    found
}

#[tokio::test]
async fn anthropic_requests_carry_cache_breakpoints() {
    let server = ScriptedModelServer::start([
        Turn::tool_call("Read", json!({"file_path": "a"})),
        Turn::text("done"),
    ])
    .await;
    let provider = build_provider(&config(ProviderKind::Anthropic, &server)).unwrap();
    let mut req = request("read a");
    req.tools = tools();
    let first = collect(provider.stream(req.clone())).await;
    assert!(first.error.is_none(), "{:?}", first.error);
    Arc::make_mut(&mut req.messages).push(Message {
        role: Role::Assistant,
        content: vec![
            ContentBlock::text("Reading."),
            ContentBlock::ToolUse {
                id: "toolu_scripted_0_0".into(),
                name: "Read".into(),
                input: json!({"file_path": "a"}),
            },
            ContentBlock::Reasoning {
                text: "after".into(),
                signature: Some("sig".into()),
            },
        ],
    });
    Arc::make_mut(&mut req.messages).push(Message {
        role: Role::User,
        content: vec![
            ContentBlock::tool_result("toolu_scripted_0_0", "contents", false),
            ContentBlock::text("and then?"),
        ],
    });
    let second = collect(provider.stream(req)).await;
    assert!(second.error.is_none(), "{:?}", second.error);

    let requests = server.requests();
    assert_eq!(
        breakpoints(&requests[0].body),
        vec!["tools[2]", "system[0]", "messages[0][0]"]
    );
    // The end of the conversation, and the end of the user message before
    // it: the previous round's breakpoint, read from the cache.
    assert_eq!(
        breakpoints(&requests[1].body),
        vec!["tools[2]", "system[0]", "messages[0][0]", "messages[2][1]"]
    );
    for r in &requests {
        assert!(breakpoints(&r.body).len() <= 4);
    }
    // The prefix is byte-identical from round to round.
    assert_eq!(requests[0].body["system"], requests[1].body["system"]);
    assert_eq!(requests[0].body["tools"], requests[1].body["tools"]);
    assert_eq!(
        requests[1].body["system"][0]["text"],
        json!("You are a test.")
    );
}

/// The units the Anthropic cache prefix is made of, in order: each tool,
/// each system block, each message's blocks (with the role).
fn cache_units(body: &Value) -> Vec<(String, bool)> {
    let mut units = Vec::new();
    let mut push = |v: &Value, prefix: &str| {
        let mut v = v.clone();
        let marked = v
            .as_object_mut()
            .and_then(|o| o.remove("cache_control"))
            .is_some();
        units.push((format!("{prefix}{v}"), marked));
    };
    for tool in body["tools"].as_array().into_iter().flatten() {
        push(tool, "tool:");
    }
    for block in body["system"].as_array().into_iter().flatten() {
        push(block, "system:");
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        for block in message["content"].as_array().into_iter().flatten() {
            push(block, &format!("{}:", message["role"]));
        }
    }
    units
}

#[tokio::test]
async fn each_round_reads_the_previous_rounds_prefix_from_the_cache() {
    let rounds = 6;
    let turns: Vec<Turn> = (0..rounds)
        .map(|i| Turn::tool_call("Read", json!({"file_path": format!("f{i}")})))
        .collect();
    let server = ScriptedModelServer::start(turns).await;
    let provider = build_provider(&config(ProviderKind::Anthropic, &server)).unwrap();
    let mut req = request("read every file");
    req.tools = tools();
    for i in 0..rounds {
        let reply = collect(provider.stream(req.clone())).await;
        assert!(reply.error.is_none(), "{:?}", reply.error);
        let id = reply.tool_calls[0].0.clone();
        Arc::make_mut(&mut req.messages).push(Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::text(format!("Reading f{i}.")),
                ContentBlock::ToolUse {
                    id: id.clone(),
                    name: "Read".into(),
                    input: json!({"file_path": format!("f{i}")}),
                },
            ],
        });
        Arc::make_mut(&mut req.messages).push(Message {
            role: Role::User,
            content: vec![ContentBlock::tool_result(
                id,
                format!("contents of f{i}"),
                false,
            )],
        });
    }
    let requests = server.requests();
    for pair in requests.windows(2) {
        let (before, after) = (cache_units(&pair[0].body), cache_units(&pair[1].body));
        // The previous request's last breakpoint (the end of its
        // conversation) is a byte-identical prefix of this request, and
        // this request has a breakpoint at exactly that unit: a cache hit.
        let last = before.iter().rposition(|(_, marked)| *marked).unwrap();
        assert_eq!(last, before.len() - 1);
        // (Where the other breakpoints sit is not part of the cached bytes.)
        let text = |units: &[(String, bool)]| units.iter().map(|u| u.0.clone()).collect::<Vec<_>>();
        assert_eq!(text(&before[..=last]), text(&after[..=last]));
        assert!(
            after[last].1,
            "no breakpoint where the previous round ended"
        );
    }
}

async fn system_and_tools_are_byte_stable(kind: ProviderKind) {
    let server = ScriptedModelServer::start([Turn::text("a"), Turn::text("b")]).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let mut req = request("one");
    req.tools = tools();
    collect(provider.stream(req.clone())).await;
    Arc::make_mut(&mut req.messages).push(Message::assistant_text("a"));
    Arc::make_mut(&mut req.messages).push(Message::user_text("two"));
    collect(provider.stream(req)).await;
    let requests = server.requests();
    let prefix = |body: &Value| match kind {
        ProviderKind::Anthropic => (body["system"].to_string(), body["tools"].to_string()),
        ProviderKind::OpenAi => (body["messages"][0].to_string(), body["tools"].to_string()),
        ProviderKind::OpenAiResponses => {
            (body["instructions"].to_string(), body["tools"].to_string())
        }
    };
    assert_eq!(prefix(&requests[0].body), prefix(&requests[1].body));
}

async fn cache_tokens_are_reported(kind: ProviderKind) {
    let usage = Usage {
        input_tokens: 120,
        output_tokens: 30,
        cache_read_input_tokens: 4000,
        cache_creation_input_tokens: match kind {
            ProviderKind::Anthropic => 900,
            ProviderKind::OpenAi | ProviderKind::OpenAiResponses => 0,
        },
    };
    let server = ScriptedModelServer::start(Turn::text("x").with_usage(usage)).await;
    let provider = build_provider(&config(kind, &server)).unwrap();
    let reply = collect(provider.stream(request("x"))).await;
    // OpenAI's prompt_tokens include the cached tokens (the server sends
    // 4120); kaji's input_tokens never do.
    assert_eq!(reply.usage, Some(usage));
}

both_providers! {
    oversized_request_is_a_context_overflow => oversized_request_is_a_context_overflow;
    system_and_tools_are_byte_stable => system_and_tools_are_byte_stable;
    cache_tokens_are_reported => cache_tokens_are_reported;
}
