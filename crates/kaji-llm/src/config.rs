//! What a provider is built from: which wire format, where, with which
//! credentials, and how patiently it retries.
//!
//! Plain data: this module must never read the environment or files
//! (that is [`crate::selection`]'s job).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The Anthropic API's default base URL (the provider appends `/v1/messages`).
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The OpenAI API's default base URL (the provider appends `/chat/completions`).
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// A local Ollama's OpenAI-compatible base URL.
pub const OLLAMA_DEFAULT_BASE_URL: &str = "http://127.0.0.1:11434/v1";
/// The model used with Anthropic when none is configured.
pub const ANTHROPIC_DEFAULT_MODEL: &str = "claude-sonnet-4-5";
/// The model used with OpenAI when none is configured.
pub const OPENAI_DEFAULT_MODEL: &str = "gpt-4.1";
/// The model used with the Responses API when none is configured.
pub const OPENAI_RESPONSES_DEFAULT_MODEL: &str = "gpt-5-codex";
/// Attempts per request (the first one included) unless configured.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// How long a stream may stay silent unless configured.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// First backoff delay unless configured; doubled on each retry.
pub const DEFAULT_RETRY_BASE_DELAY: Duration = Duration::from_millis(500);
/// Longest wait before a retry, also for a server's `retry-after`.
pub const DEFAULT_RETRY_MAX_DELAY: Duration = Duration::from_secs(60);
/// How long establishing a connection may take unless configured.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The reply size cap unless configured: 32 MiB of content (text,
/// reasoning and tool arguments) in one reply, far above any model's output
/// limit.
pub const DEFAULT_MAX_REPLY_BYTES: u64 = 32 * 1024 * 1024;
/// The largest server-sent event unless configured (16 MiB).
pub const DEFAULT_MAX_EVENT_BYTES: usize = crate::sse::MAX_EVENT_BYTES;

/// Which wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// The Anthropic Messages API.
    Anthropic,
    /// The OpenAI Chat Completions API and every server that copies it.
    #[serde(rename = "openai")]
    OpenAi,
    /// The OpenAI Responses API (`POST {base}/responses`), which the
    /// codex-tuned models need and which carries reasoning between rounds.
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
}

impl ProviderKind {
    /// The name used on the command line, in config files and in errors.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenAi => "openai",
            ProviderKind::OpenAiResponses => "openai-responses",
        }
    }

    /// The provider's default base URL.
    pub fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => ANTHROPIC_DEFAULT_BASE_URL,
            ProviderKind::OpenAi | ProviderKind::OpenAiResponses => OPENAI_DEFAULT_BASE_URL,
        }
    }

    /// The provider's default model.
    pub fn default_model(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => ANTHROPIC_DEFAULT_MODEL,
            ProviderKind::OpenAi => OPENAI_DEFAULT_MODEL,
            ProviderKind::OpenAiResponses => OPENAI_RESPONSES_DEFAULT_MODEL,
        }
    }

    /// Whether the provider speaks one of OpenAI's formats (and takes
    /// `OPENAI_API_KEY` / `OPENAI_BASE_URL`).
    pub fn is_openai(self) -> bool {
        matches!(self, ProviderKind::OpenAi | ProviderKind::OpenAiResponses)
    }

    /// Whether the wire format has a web search the provider runs itself,
    /// which [`ModelRequest::web_search`](crate::ModelRequest) offers
    /// (Anthropic's server-side `web_search` tool, the Responses API's
    /// hosted `web_search`). Chat Completions servers have none and ignore
    /// the field.
    pub fn has_web_search(self) -> bool {
        matches!(
            self,
            ProviderKind::Anthropic | ProviderKind::OpenAiResponses
        )
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A provider name that is not `anthropic`, `openai` or `openai-responses`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown provider {0:?}: expected `anthropic`, `openai` or `openai-responses`")]
pub struct UnknownProvider(pub String);

impl FromStr for ProviderKind {
    type Err = UnknownProvider;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "anthropic" => Ok(ProviderKind::Anthropic),
            "openai" => Ok(ProviderKind::OpenAi),
            "openai-responses" => Ok(ProviderKind::OpenAiResponses),
            _ => Err(UnknownProvider(s.to_string())),
        }
    }
}

/// Everything needed to build a provider.
#[derive(Clone, PartialEq)]
pub struct ProviderConfig {
    /// Wire format.
    pub kind: ProviderKind,
    /// Model used when a request leaves [`crate::ModelRequest::model`] empty.
    pub model: String,
    /// Base URL. Anthropic: `https://api.anthropic.com` (the provider posts
    /// to `{base_url}/v1/messages`). OpenAI: `https://api.openai.com/v1`
    /// (posts to `{base_url}/chat/completions`). A trailing `/` is ignored.
    pub base_url: String,
    /// API key: Anthropic `x-api-key`, OpenAI `Authorization: Bearer`.
    pub api_key: Option<String>,
    /// Anthropic only: sent as `Authorization: Bearer` instead of
    /// `x-api-key` (ANTHROPIC_AUTH_TOKEN); wins over `api_key`.
    pub auth_token: Option<String>,
    /// Attempts per request, the first included (at least 1).
    pub max_attempts: u32,
    /// Longest silence on a connection (waiting for headers or for the next
    /// bytes of the body) before the attempt fails with a timeout.
    pub idle_timeout: Duration,
    /// Backoff before the first retry; doubled for each later one, with
    /// jitter (the delay is drawn from `[d/2, d]`).
    pub retry_base_delay: Duration,
    /// Upper bound of any retry delay, including a server's `retry-after`.
    pub retry_max_delay: Duration,
    /// Limit on establishing a TCP/TLS connection.
    pub connect_timeout: Duration,
    /// Reply size cap: bytes of content (text, reasoning, signatures, tool
    /// arguments) one reply may carry before the stream ends with
    /// [`crate::LlmError::ReplyTooLarge`].
    pub max_reply_bytes: u64,
    /// Largest server-sent event (all its `data:` lines together) before
    /// the stream ends with [`crate::LlmError::EventTooLarge`].
    pub max_event_bytes: usize,
    /// How hard the model is asked to think, applied to every request
    /// (see [`Reasoning`] for what each provider sends).
    pub reasoning: Reasoning,
}

impl ProviderConfig {
    /// A configuration with the given kind, model and base URL and every
    /// other setting at its default.
    pub fn new(kind: ProviderKind, model: impl Into<String>, base_url: impl Into<String>) -> Self {
        Self {
            kind,
            model: model.into(),
            base_url: base_url.into(),
            api_key: None,
            auth_token: None,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            retry_base_delay: DEFAULT_RETRY_BASE_DELAY,
            retry_max_delay: DEFAULT_RETRY_MAX_DELAY,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            reasoning: Reasoning::Off,
        }
    }
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redact = |s: &Option<String>| s.as_ref().map(|_| "<redacted>");
        f.debug_struct("ProviderConfig")
            .field("kind", &self.kind)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &redact(&self.api_key))
            .field("auth_token", &redact(&self.auth_token))
            .field("max_attempts", &self.max_attempts)
            .field("idle_timeout", &self.idle_timeout)
            .field("retry_base_delay", &self.retry_base_delay)
            .field("retry_max_delay", &self.retry_max_delay)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_reply_bytes", &self.max_reply_bytes)
            .field("max_event_bytes", &self.max_event_bytes)
            .field("reasoning", &self.reasoning)
            .finish()
    }
}

/// How hard a model is asked to think: the `reasoning` setting.
///
/// Sent as: Anthropic extended thinking (`thinking: {type: "enabled",
/// budget_tokens}` with [`Reasoning::budget_tokens`], `max_tokens` raised
/// above the budget when needed, no `temperature`); OpenAI Chat Completions
/// `reasoning_effort`; Responses `reasoning: {effort, summary: "auto"}`.
/// `off` sends nothing (the model's own default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reasoning {
    /// Nothing is asked for.
    #[default]
    Off,
    /// A little thinking.
    Low,
    /// Some thinking.
    Medium,
    /// As much thinking as the model is good for.
    High,
}

/// A `reasoning` value that is not `off`, `low`, `medium` or `high`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown reasoning level {0:?}: expected `off`, `low`, `medium` or `high`")]
pub struct UnknownReasoning(pub String);

impl Reasoning {
    /// The setting's word: `off`, `low`, `medium`, `high`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reasoning::Off => "off",
            Reasoning::Low => "low",
            Reasoning::Medium => "medium",
            Reasoning::High => "high",
        }
    }

    /// OpenAI's effort word, `None` for `off`.
    pub fn effort(self) -> Option<&'static str> {
        match self {
            Reasoning::Off => None,
            other => Some(other.as_str()),
        }
    }

    /// Anthropic's thinking budget in tokens (at least the API's minimum
    /// of 1024), `None` for `off`.
    pub fn budget_tokens(self) -> Option<u32> {
        match self {
            Reasoning::Off => None,
            Reasoning::Low => Some(4_000),
            Reasoning::Medium => Some(10_000),
            Reasoning::High => Some(32_000),
        }
    }
}

impl fmt::Display for Reasoning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Reasoning {
    type Err = UnknownReasoning;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" => Ok(Reasoning::Off),
            "low" => Ok(Reasoning::Low),
            "medium" => Ok(Reasoning::Medium),
            "high" => Ok(Reasoning::High),
            _ => Err(UnknownReasoning(s.to_string())),
        }
    }
}
