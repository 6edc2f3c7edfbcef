//! Helpers shared by the provider tests: configurations pointing at a
//! scripted model server, and a reassembled view of a reply stream.

#![allow(dead_code)]

use std::time::Duration;

use futures::StreamExt;
use kaji_llm::{LlmError, ModelRequest, ModelStream, ProviderConfig, ProviderKind, build_provider};
use kaji_protocol::{Message, StopReason, StreamEvent, Usage};
use kaji_test_support::ScriptedModelServer;

/// A configuration for `kind` against `server`, with tiny retry delays.
pub fn config(kind: ProviderKind, server: &ScriptedModelServer) -> ProviderConfig {
    let base = match kind {
        ProviderKind::Anthropic => server.anthropic_base_url(),
        ProviderKind::OpenAi => server.openai_base_url(),
        ProviderKind::OpenAiResponses => server.responses_base_url(),
    };
    let mut cfg = ProviderConfig::new(kind, "scripted-model", base);
    cfg.api_key = Some("sk-test-secret".into());
    cfg.retry_base_delay = Duration::from_millis(1);
    cfg.retry_max_delay = Duration::from_millis(20);
    cfg.idle_timeout = Duration::from_secs(20);
    cfg
}

/// A request with one user message.
pub fn request(text: &str) -> ModelRequest {
    ModelRequest {
        model: String::new(),
        system: "You are a test.".into(),
        messages: vec![Message::user_text(text)].into(),
        tools: Vec::new(),
        max_tokens: 1024,
        temperature: None,
        web_search: None,
        wire_cache: None,
    }
}

/// A reply stream, reassembled.
#[derive(Debug, Default)]
pub struct Reply {
    pub events: Vec<StreamEvent>,
    pub text: String,
    pub reasoning: String,
    pub signatures: Vec<String>,
    pub redacted: Vec<String>,
    /// Blocks of tools the provider ran (`StreamEvent::ServerBlock`).
    pub server_blocks: Vec<serde_json::Value>,
    /// (id, name, raw arguments, ended)
    pub tool_calls: Vec<(String, String, String, bool)>,
    pub usage: Option<Usage>,
    pub stop: Option<StopReason>,
    pub retries: Vec<(u32, u32, u64, String)>,
    pub error: Option<LlmError>,
}

/// Drains a stream (until its first error) into a [`Reply`].
pub async fn collect(mut stream: ModelStream) -> Reply {
    let mut reply = Reply::default();
    while let Some(item) = stream.next().await {
        let event = match item {
            Ok(event) => event,
            Err(e) => {
                reply.error = Some(e);
                break;
            }
        };
        assert!(reply.stop.is_none(), "event after Stop: {event:?}");
        match &event {
            StreamEvent::Retrying {
                attempt,
                max_attempts,
                delay_ms,
                reason,
            } => {
                assert!(
                    reply
                        .events
                        .iter()
                        .all(|e| matches!(e, StreamEvent::Retrying { .. })),
                    "Retrying after content"
                );
                reply
                    .retries
                    .push((*attempt, *max_attempts, *delay_ms, reason.clone()));
            }
            StreamEvent::TextDelta { text } => reply.text.push_str(text),
            StreamEvent::ReasoningDelta { text } => reply.reasoning.push_str(text),
            StreamEvent::ReasoningSignature { signature } => {
                reply.signatures.push(signature.clone())
            }
            StreamEvent::RedactedReasoning { data } => reply.redacted.push(data.clone()),
            StreamEvent::ServerBlock { block } => reply.server_blocks.push(block.clone()),
            StreamEvent::ToolCallStart { id, name } => {
                assert!(
                    reply.tool_calls.iter().all(|c| &c.0 != id),
                    "duplicate start of {id}"
                );
                reply
                    .tool_calls
                    .push((id.clone(), name.clone(), String::new(), false));
            }
            StreamEvent::ToolCallDelta { id, arguments } => {
                let call = reply
                    .tool_calls
                    .iter_mut()
                    .find(|c| &c.0 == id)
                    .expect("delta before start");
                assert!(!call.3, "delta after end of {id}");
                call.2.push_str(arguments);
            }
            StreamEvent::ToolCallEnd { id } => {
                let call = reply
                    .tool_calls
                    .iter_mut()
                    .find(|c| &c.0 == id)
                    .expect("end before start");
                assert!(!call.3, "second end of {id}");
                call.3 = true;
            }
            StreamEvent::Usage(usage) => reply.usage = Some(*usage),
            StreamEvent::Stop { reason } => reply.stop = Some(reason.clone()),
        }
        reply.events.push(event);
    }
    reply
}

/// Runs `body` for all three wire formats (the name is historical).
#[macro_export]
macro_rules! both_providers {
    ($($name:ident => $check:ident;)*) => {
        mod anthropic {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$check(kaji_llm::ProviderKind::Anthropic).await;
                }
            )*
        }
        mod openai {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$check(kaji_llm::ProviderKind::OpenAi).await;
                }
            )*
        }
        mod openai_responses {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$check(kaji_llm::ProviderKind::OpenAiResponses).await;
                }
            )*
        }
    };
}

/// The reply of a provider of `kind` built against `server` to a request
/// of one user message `text`.
pub async fn ask(kind: ProviderKind, server: &ScriptedModelServer, text: &str) -> Reply {
    collect(
        build_provider(&config(kind, server))
            .unwrap()
            .stream(request(text)),
    )
    .await
}
