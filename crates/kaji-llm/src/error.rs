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
    #[error("{provider}: POST {url} failed with HTTP {status}: {message}")]
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
    #[error("{provider}: could not connect to {url}: {message}")]
    Connect {
        /// Provider name.
        provider: &'static str,
        /// The request URL.
        url: String,
        /// The underlying error, with its causes.
        message: String,
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

    /// Every allowed attempt failed with a retryable error.
    #[error("{provider}: gave up on {url} after {attempts} attempts; last error: {last}")]
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

impl LlmError {
    /// The HTTP status, for [`LlmError::Http`] (also inside
    /// [`LlmError::RetriesExhausted`]).
    pub fn status(&self) -> Option<u16> {
        match self {
            LlmError::Http { status, .. } => Some(*status),
            LlmError::RetriesExhausted { last, .. } => last.status(),
            _ => None,
        }
    }
}
