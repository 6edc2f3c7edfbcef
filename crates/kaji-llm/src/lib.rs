//! Model providers: turn a [`ModelRequest`] into a stream of
//! [`StreamEvent`]s over a provider's real wire format.
//!
//! Three wire formats cover what users run: the Anthropic Messages API, the
//! OpenAI Chat Completions API (with every server that copies it: Ollama,
//! vLLM, llama.cpp, LM Studio, OpenRouter) and the OpenAI Responses API. Retries of failed requests
//! happen inside the stream, reported as [`StreamEvent::Retrying`] before
//! any content. This crate must never print, read the task's state or
//! decide what to do with a reply: it only speaks HTTP.

pub mod anthropic;
pub mod config;
pub mod error;
mod json_scan;
pub mod openai;
pub mod pricing;
pub mod responses;
pub mod selection;
pub mod sse;
pub mod tls;
mod transport;
pub mod wire_cache;

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use kaji_protocol::{Message, StreamEvent, ToolSpec};

pub use anthropic::AnthropicProvider;
pub use config::{ProviderConfig, ProviderKind, Reasoning, UnknownProvider, UnknownReasoning};
pub use error::LlmError;
pub use openai::OpenAiProvider;
pub use pricing::{ModelInfo, ModelOverride, ModelOverrides, Prices, cost_usd, model_info};
pub use responses::ResponsesProvider;
pub use wire_cache::WireCache;

/// One request to a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// Model name as the provider knows it.
    pub model: String,
    /// The system prompt.
    pub system: String,
    /// The conversation so far; the last message is the user's. Shared
    /// with the Task's history (a request costs no copy of it).
    pub messages: Arc<Vec<Message>>,
    /// Tools offered with native tool calling; empty for none.
    pub tools: Vec<ToolSpec>,
    /// Output token limit.
    pub max_tokens: u32,
    /// Sampling temperature, when set.
    pub temperature: Option<f32>,
    /// The provider's own web search, offered beside `tools` (a tool the
    /// server runs is part of the request, not of the provider); its
    /// searches come back as [`StreamEvent::ServerBlock`]s. Ignored by a
    /// wire without one ([`ProviderKind::has_web_search`]).
    pub web_search: Option<ProviderWebSearch>,
    /// The conversation's messages as already serialised, kept by the
    /// history's owner across its requests: a request then serialises
    /// only what is new (the same bytes). `None`: all of it, every time.
    pub wire_cache: Option<Arc<WireCache>>,
}

/// A reply stream. Dropping it drops the connection at once.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, LlmError>> + Send>>;

/// A model provider.
pub trait ModelProvider: Send + Sync {
    /// The provider's name (`anthropic`, `openai`, `openai-responses`).
    fn name(&self) -> &str;

    /// Starts a request and returns its reply stream. Connection, retries
    /// and decoding all happen as the stream is polled.
    fn stream(&self, request: ModelRequest) -> ModelStream;
}

/// The provider web search a request offers ([`ModelRequest::web_search`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderWebSearch {
    /// Only results from these domains.
    pub allowed_domains: Vec<String>,
    /// Never results from these domains (the caller filters too: a
    /// provider may take only one of the two lists).
    pub blocked_domains: Vec<String>,
    /// At most this many searches in the request.
    pub max_uses: u32,
}

/// Builds the provider `cfg` describes. Fails only on an unusable
/// configuration (a base URL that is not http(s), a key that cannot be sent
/// in a header); nothing is sent before the first request.
pub fn build_provider(cfg: &ProviderConfig) -> Result<Arc<dyn ModelProvider>, LlmError> {
    let provider: &'static str = cfg.kind.as_str();
    let base = cfg.base_url.trim();
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(LlmError::InvalidConfig {
            provider,
            message: format!(
                "base URL {:?} must start with http:// or https://",
                cfg.base_url
            ),
        });
    }
    if reqwest::Url::parse(base).is_err() {
        return Err(LlmError::InvalidConfig {
            provider,
            message: format!("base URL {:?} is not a valid URL", cfg.base_url),
        });
    }
    let client = tls::client_builder()
        .connect_timeout(cfg.connect_timeout)
        .user_agent(concat!("kaji/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| LlmError::InvalidConfig {
            provider,
            message: format!("the HTTP client could not be built: {e}"),
        })?;
    let policy = transport::RetryPolicy {
        max_attempts: cfg.max_attempts.max(1),
        idle_timeout: cfg.idle_timeout,
        base_delay: cfg.retry_base_delay,
        max_delay: cfg.retry_max_delay,
        max_reply_bytes: cfg.max_reply_bytes.max(1),
        max_event_bytes: cfg.max_event_bytes.max(1),
    };
    let cfg = ProviderConfig {
        base_url: base.to_string(),
        ..cfg.clone()
    };
    Ok(match cfg.kind {
        ProviderKind::Anthropic => Arc::new(AnthropicProvider::new(&cfg, client, policy)?),
        ProviderKind::OpenAi => Arc::new(OpenAiProvider::new(&cfg, client, policy)?),
        ProviderKind::OpenAiResponses => Arc::new(ResponsesProvider::new(&cfg, client, policy)?),
    })
}

/// Decodes a complete reply body (the bytes of a `text/event-stream`
/// response) in `kind`'s wire format, as the provider would while
/// streaming. For replaying recorded replies and for benchmarks; errors
/// name `<reply body>` as the URL.
pub fn decode_reply_body(kind: ProviderKind, body: &[u8]) -> Result<Vec<StreamEvent>, LlmError> {
    match kind {
        ProviderKind::Anthropic => {
            decode_body(anthropic::AnthropicDecoder::default(), "anthropic", body)
        }
        ProviderKind::OpenAi => decode_body(openai::OpenAiDecoder::default(), "openai", body),
        ProviderKind::OpenAiResponses => decode_body(
            responses::ResponsesDecoder::default(),
            "openai-responses",
            body,
        ),
    }
}

fn decode_body<D: transport::ReplyDecoder>(
    mut decoder: D,
    provider: &'static str,
    body: &[u8],
) -> Result<Vec<StreamEvent>, LlmError> {
    let url = "<reply body>".to_string();
    let mut sse = sse::SseDecoder::new();
    let mut events = Vec::new();
    let mut out = Vec::new();
    sse.decode(body, &mut events)
        .map_err(|e| transport::sse_error(provider, &url, e))?;
    for event in &events {
        match decoder.on_event(event, &mut out) {
            Ok(false) => {}
            Ok(true) => return Ok(out),
            Err(transport::EventError::InvalidJson(message)) => {
                return Err(LlmError::InvalidJson {
                    provider,
                    url,
                    event: if event.event.is_empty() {
                        "message".into()
                    } else {
                        event.event.clone()
                    },
                    offset: event.offset,
                    message,
                    excerpt: sse::excerpt(event.data.as_bytes()),
                });
            }
            Err(transport::EventError::Server { what, message, .. }) => {
                return Err(LlmError::ServerError {
                    provider,
                    url,
                    what,
                    message,
                });
            }
        }
    }
    decoder
        .on_eof(&mut out)
        .map_err(|message| LlmError::StreamBroken {
            provider,
            url,
            bytes: body.len() as u64,
            message,
        })?;
    Ok(out)
}

/// Parses the arguments of a finished tool call. An empty string (a call
/// without arguments) is `{}`; anything that is not a JSON object is an
/// [`LlmError::InvalidToolArguments`] naming the tool and call id.
pub fn parse_tool_arguments(
    tool_name: &str,
    call_id: &str,
    raw: &str,
) -> Result<serde_json::Value, LlmError> {
    let invalid = |message: String| LlmError::InvalidToolArguments {
        tool: tool_name.to_string(),
        call_id: call_id.to_string(),
        message,
        excerpt: sse::excerpt(raw.as_bytes()),
    };
    if raw.trim().is_empty() {
        return Ok(serde_json::Value::Object(Default::default()));
    }
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(value @ serde_json::Value::Object(_)) => Ok(value),
        Ok(other) => Err(invalid(format!(
            "expected an object, got {}",
            json_kind(&other)
        ))),
        Err(e) => Err(invalid(format!("invalid JSON: {e}"))),
    }
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// A temperature as sent on the wire: `0.7f32` becomes `0.7`, not
/// `0.699999988079071`.
pub(crate) fn temperature_json(t: f32) -> f64 {
    (f64::from(t) * 1e6).round() / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_arguments() {
        assert_eq!(
            parse_tool_arguments("Read", "c1", "").unwrap(),
            serde_json::json!({})
        );
        assert_eq!(
            parse_tool_arguments("Read", "c1", " {\"a\": 1} ").unwrap(),
            serde_json::json!({"a": 1})
        );
        let err = parse_tool_arguments("Read", "c1", "{\"a\": ")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("c1") && err.contains("Read") && err.contains("invalid JSON"),
            "{err}"
        );
        let err = parse_tool_arguments("Bash", "c2", "[1]")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("c2") && err.contains("Bash") && err.contains("an array"),
            "{err}"
        );
    }

    #[test]
    fn temperature_is_rounded() {
        assert_eq!(temperature_json(0.7), 0.7);
        assert_eq!(temperature_json(0.0), 0.0);
    }

    #[test]
    fn bad_base_urls_are_rejected() {
        let cfg = ProviderConfig::new(ProviderKind::OpenAi, "m", "localhost:8080");
        let err = build_provider(&cfg).err().unwrap().to_string();
        assert!(
            err.contains("localhost:8080") && err.contains("openai"),
            "{err}"
        );
    }
}
