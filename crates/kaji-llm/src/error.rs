//! The one error type of model requests.
//!
//! Every variant names the provider and the URL (or, for tool arguments, the
//! tool and call id) so that a message shown to a user says what failed and
//! where without any further context.

use std::time::Duration;

/// Why a model request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LlmError {
    /// The server answered with an HTTP error status.
    #[error("{provider}: POST {url} failed with HTTP {status}: {message}{}", http_advice(*status))]
    Http {
        /// Provider name (`anthropic`, `openai`).
        provider: &'static str,
        /// The request URL.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The server's own error message (or an excerpt of its body).
        message: String,
    },

    /// No connection could be made, or the request could not be sent.
    #[error("{provider}: cannot connect to {url} ({message}): {}", cause.advice())]
    Connect {
        /// Provider name.
        provider: &'static str,
        /// The request URL.
        url: String,
        /// The underlying error, with its causes.
        message: String,
        /// Why, as far as it decides whether asking again can help.
        cause: ConnectCause,
    },

    /// The server sent nothing for longer than the idle timeout.
    #[error("{provider}: {url} sent nothing for {}s {phase} (idle timeout)", idle.as_secs_f64())]
    IdleTimeout {
        /// Provider name.
        provider: &'static str,
        /// The request URL.
        url: String,
        /// The configured idle timeout.
        idle: Duration,
        /// Where it happened, e.g. `while waiting for the response headers`
        /// or `after 812 bytes of the reply`.
        phase: String,
    },

    /// The connection broke, or the stream ended before the reply was
    /// complete. Once content has been yielded this is never retried: the
    /// caller decides whether to retry the turn.
    #[error("{provider}: the reply stream from {url} broke after {bytes} bytes: {message}")]
    StreamBroken {
        /// Provider name.
        provider: &'static str,
        /// The request URL.
        url: String,
        /// Bytes of the reply body received before the break.
        bytes: u64,
        /// What happened.
        message: String,
    },

    /// The reply body is not valid server-sent events.
    #[error(
        "{provider}: the reply from {url} is not valid server-sent events at byte {offset}: {message}"
    )]
    MalformedSse {
        /// Provider name.
        provider: &'static str,
        /// The request URL.
        url: String,
        /// Byte offset in the reply body.
        offset: u64,
        /// What is wrong.
        message: String,
    },

    /// An event's data is not the JSON the wire format prescribes.
    #[error(
        "{provider}: invalid JSON in the `{event}` event at byte {offset} of the reply from {url}: {message}; data: {excerpt}"
    )]
    InvalidJson {
        /// Provider name.
        provider: &'static str,
        /// The request URL.
        url: String,
        /// The SSE event type (`message` when it had none).
        event: String,
        /// Byte offset of the event in the reply body.
        offset: u64,
        /// The parser's message.
        message: String,
        /// The start of the offending data.
        excerpt: String,
    },

    /// The server reported an error in a successful response: an SSE
    /// `error` event, a 200 response with an error body, or an HTML page
    /// where an event stream was expected.
    #[error("{provider}: {url} {what}: {message}")]
    ServerError {
        /// Provider name.
        provider: &'static str,
        /// The request URL.
        url: String,
        /// How it was reported, e.g. `sent an error event (overloaded_error)`
        /// or `answered 200 with an HTML page instead of an event stream`.
        what: String,
        /// The server's message.
        message: String,
    },

    /// One server-sent event grew past the event size limit (all its
    /// `data:` lines together). Never retried.
    #[error(
        "{provider}: the reply from {url} has an event larger than {limit} bytes at byte {offset}; the stream was stopped"
    )]
    EventTooLarge {
        /// Provider name.
        provider: &'static str,
        /// The request URL.
        url: String,
        /// Byte offset of the event in the reply body.
        offset: u64,
        /// The limit, in bytes.
        limit: usize,
    },

    /// The reply's content (text, reasoning, tool arguments) grew past the
    /// reply size cap ([`crate::ProviderConfig::max_reply_bytes`],
    /// `KAJI_MAX_REPLY_BYTES`). Never retried.
    #[error(
        "{provider}: the reply from {url} passed the reply size cap of {limit} bytes of content; the stream was stopped (raise it with KAJI_MAX_REPLY_BYTES)"
    )]
    ReplyTooLarge {
        /// Provider name.
        provider: &'static str,
        /// The request URL.
        url: String,
        /// The cap, in bytes of content.
        limit: u64,
    },

    /// The request does not fit the model's context window: Anthropic's
    /// `prompt is too long`, OpenAI's `context_length_exceeded`, and the
    /// messages of Ollama, vLLM, llama.cpp and LM Studio. Never retried as
    /// it is: the caller must make the request smaller.
    #[error(
        "{provider}: the request to {url} is too long for the model's context window: {message}"
    )]
    ContextOverflow {
        /// Provider name.
        provider: &'static str,
        /// The request URL.
        url: String,
        /// The HTTP status it came with (200 for an error in a stream).
        status: u16,
        /// The server's own message.
        message: String,
    },

    /// Every allowed attempt failed with a retryable error.
    #[error("{last} (gave up after {attempts} attempts)")]
    RetriesExhausted {
        /// Provider name.
        provider: &'static str,
        /// The request URL.
        url: String,
        /// Attempts made.
        attempts: u32,
        /// The last attempt's error.
        last: Box<LlmError>,
    },

    /// A tool call's arguments are not a JSON object.
    #[error(
        "the arguments of tool call {call_id} ({tool}) are not a JSON object: {message}; arguments: {excerpt}"
    )]
    InvalidToolArguments {
        /// Tool name.
        tool: String,
        /// Call id.
        call_id: String,
        /// What is wrong.
        message: String,
        /// The start of the raw arguments.
        excerpt: String,
    },

    /// The provider configuration is unusable (e.g. a base URL that is not
    /// an http(s) URL).
    #[error("invalid {provider} provider configuration: {message}")]
    InvalidConfig {
        /// Provider name.
        provider: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// What to do about an HTTP error that asking again cannot fix (401 and
/// 403 name the key's source in their message instead).
fn http_advice(status: u16) -> &'static str {
    match status {
        404 => " (no such endpoint there: check --base-url)",
        400 | 422 => " (the server refused this request: check --model and the message)",
        _ => "",
    }
}

/// Why a connection could not be made, as far as it decides what the
/// user should do and whether asking again can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectCause {
    /// A server on this machine (`localhost`, a loopback address) refused
    /// the connection: nothing listens there, and nothing will until the
    /// user starts it. Never retried.
    RefusedLocally,
    /// The host name does not resolve. Never retried.
    UnknownHost,
    /// Anything else (a remote host refusing or unreachable, TLS, a reset
    /// before the response): it may pass, so it is retried.
    Other,
}

impl ConnectCause {
    /// What the user should do about it, in a few words.
    pub fn advice(self) -> &'static str {
        match self {
            Self::RefusedLocally | Self::Other => "is the server running? check --base-url",
            Self::UnknownHost => "the host name does not resolve; check --base-url",
        }
    }

    /// Whether asking again may succeed.
    pub fn retry_may_help(self) -> bool {
        matches!(self, Self::Other)
    }
}

impl LlmError {
    /// The HTTP status, for [`LlmError::Http`] (also inside
    /// [`LlmError::RetriesExhausted`]).
    pub fn status(&self) -> Option<u16> {
        match self {
            LlmError::Http { status, .. } | LlmError::ContextOverflow { status, .. } => {
                Some(*status)
            }
            LlmError::RetriesExhausted { last, .. } => last.status(),
            _ => None,
        }
    }

    /// Whether asking the same request again may succeed: a connection
    /// or stream that broke, a timeout, an overloaded or failing server.
    /// A rejected key, a bad request or a reply kaji cannot read fail the
    /// same way every time.
    pub fn retry_may_help(&self) -> bool {
        match self {
            LlmError::Http { status, .. } => matches!(status, 408 | 409 | 429 | 500..=599),
            LlmError::Connect { cause, .. } => cause.retry_may_help(),
            LlmError::IdleTimeout { .. }
            | LlmError::StreamBroken { .. }
            | LlmError::ServerError { .. } => true,
            LlmError::RetriesExhausted { last, .. } => last.retry_may_help(),
            _ => false,
        }
    }

    /// Whether this is a context overflow (also inside
    /// [`LlmError::RetriesExhausted`]).
    pub fn is_context_overflow(&self) -> bool {
        match self {
            LlmError::ContextOverflow { .. } => true,
            LlmError::RetriesExhausted { last, .. } => last.is_context_overflow(),
            _ => false,
        }
    }
}

/// Whether an error body or message says that the request is longer than
/// the model's context window, in the words of the servers kaji talks to:
///
/// - Anthropic: `prompt is too long: 208310 tokens > 200000 maximum`
/// - OpenAI: code `context_length_exceeded`; `This model's maximum context
///   length is 128000 tokens…` (vLLM uses the same sentence)
/// - vLLM: `The prompt (total length 25938) is too long to fit into the
///   model (context length 4096)`, `… is longer than the maximum model length`
/// - llama.cpp: type `exceed_context_size_error`, `the request exceeds the
///   available context size`
/// - Ollama: `the input length exceeds the context length`
/// - LM Studio: `Trying to keep the first 10136 tokens when context the
///   overflows. However, the model is loaded with context length of only
///   7866 tokens…`, `Reached context length of 4096 tokens…`
pub fn is_context_overflow_text(text: &str) -> bool {
    const PATTERNS: &[&str] = &[
        "prompt is too long",
        "context_length_exceeded",
        "maximum context length",
        "too long to fit into the model",
        "longer than the maximum model length",
        "exceed_context_size_error",
        "exceeds the available context size",
        "exceeds the context length",
        "input length exceeds context length",
        "when context the overflows",
        "context length of only",
        "reached context length of",
    ];
    let lower = text.to_ascii_lowercase();
    PATTERNS.iter().any(|p| lower.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_overflow_wordings() {
        for text in [
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#,
            r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
            r#"{"object":"error","message":"This model's maximum context length is 16384 tokens. However, you requested 122946 tokens (112946 in the messages, 10000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
            "The prompt (total length 25938) is too long to fit into the model (context length 4096).",
            r#"{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens)","type":"exceed_context_size_error","n_prompt_tokens":4476,"n_ctx":4096}}"#,
            r#"{"error":{"message":"the input length exceeds the context length","type":"api_error"}}"#,
            r#"{"error":"Trying to keep the first 10136 tokens when context the overflows. However, the model is loaded with context length of only 7866 tokens, which is not enough."}"#,
        ] {
            assert!(is_context_overflow_text(text), "{text}");
        }
        for text in [
            r#"{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}"#,
            "max_tokens: 99999 > 64000, which is the maximum allowed number of output tokens",
            "invalid x-api-key",
        ] {
            assert!(!is_context_overflow_text(text), "{text}");
        }
    }
}
