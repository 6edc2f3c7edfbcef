//! The HTTP side shared by both providers: send the request, retry what may
//! be retried, decode the event stream and hand each event to a wire-format
//! specific [`ReplyDecoder`].
//!
//! Retry rules (issue 2, point 4; #32): connection errors, timeouts, HTTP
//! 408/409/429/5xx, and error events the decoder marks retryable (Anthropic
//! `overloaded_error`) are retried, but only while nothing of the reply has
//! been yielded. A connection refused by this machine and a host name that
//! does not resolve are not: asking again cannot fix them
//! ([`ConnectCause`]); each retry is announced with [`StreamEvent::Retrying`]. A
//! failure after content has been yielded ends the stream with an error.
//! This module must never retry after content, and never hold a connection
//! once the stream is dropped (everything lives inside the stream itself).
//!
//! Bounds: the idle timeout counts content, not keep-alives (pings, SSE
//! comments, empty events), so a server that only pings still times out;
//! each event is capped as a whole ([`RetryPolicy::max_event_bytes`]); the
//! reply's content is capped ([`RetryPolicy::max_reply_bytes`]). A request
//! the server rejects as too long for the context window is a
//! [`LlmError::ContextOverflow`], never retried.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use kaji_protocol::StreamEvent;
use reqwest::header::{CONTENT_TYPE, HeaderMap};

use crate::error::{ConnectCause, is_context_overflow_text};
use crate::sse::{SseDecoder, SseError, SseErrorKind, SseEvent, excerpt};
use crate::{LlmError, ModelStream};
use kaji_protocol::error_chain;

/// Limit on how much of an error body is read.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// How a wire format turns events into [`StreamEvent`]s.
pub(crate) trait ReplyDecoder: Send + 'static {
    /// Maps one event, pushing what it yields onto `out`. Returns `true`
    /// when the event ends the reply.
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, EventError>;

    /// The body ended without a terminal event: push whatever completes the
    /// reply, or say why it is incomplete.
    fn on_eof(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), String>;

    /// Whether `event` only keeps the connection alive (it does not reset
    /// the idle timeout).
    fn is_keepalive(&self, _event: &SseEvent) -> bool {
        false
    }
}

/// Why a decoder rejected an event.
#[derive(Debug)]
pub(crate) enum EventError {
    /// The data is not the JSON the format prescribes.
    InvalidJson(String),
    /// The server reported an error in the stream.
    Server {
        /// How it was reported.
        what: String,
        /// The server's message.
        message: String,
        /// Whether the request may be retried (before content only).
        retryable: bool,
    },
}

/// Retry and timeout settings of one provider.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RetryPolicy {
    pub max_attempts: u32,
    pub idle_timeout: Duration,
    pub base_delay: Duration,
    pub max_delay: Duration,
    pub max_reply_bytes: u64,
    pub max_event_bytes: usize,
}

impl RetryPolicy {
    /// The wait before attempt `failed + 1`, after attempt `failed` failed.
    fn delay(&self, failed: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max_delay);
        }
        let exp = failed.saturating_sub(1).min(20);
        let full = self
            .base_delay
            .saturating_mul(1u32 << exp)
            .min(self.max_delay);
        let nanos = full.as_nanos() as u64;
        if nanos < 2 {
            return full;
        }
        Duration::from_nanos(fastrand::u64(nanos / 2..=nanos))
    }
}

/// One prepared request.
pub(crate) struct HttpCall {
    pub provider: &'static str,
    /// Where the key came from, named when the server rejects it (401,
    /// 403): `ANTHROPIC_API_KEY`, …
    pub key_source: &'static str,
    pub client: reqwest::Client,
    pub url: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub policy: RetryPolicy,
}

struct Failure {
    error: LlmError,
    retryable: bool,
    retry_after: Option<Duration>,
}

impl Failure {
    fn fatal(error: LlmError) -> Self {
        Self {
            error,
            retryable: false,
            retry_after: None,
        }
    }

    fn retryable(error: LlmError) -> Self {
        Self {
            error,
            retryable: true,
            retry_after: None,
        }
    }
}

/// Runs `call` and decodes its reply with decoders made by `new_decoder`
/// (one per attempt).
pub(crate) fn stream_reply<D, F>(call: HttpCall, new_decoder: F) -> ModelStream
where
    D: ReplyDecoder,
    F: Fn() -> D + Send + 'static,
{
    Box::pin(async_stream::stream! {
        let HttpCall { provider, key_source, client, url, headers, body, policy } = call;
        let max_attempts = policy.max_attempts.max(1);
        let idle = policy.idle_timeout;
        let mut attempt: u32 = 1;
        let mut yielded = false;
        loop {
            let failure: Failure = 'attempt: {
                let send = client.post(&url).headers(headers.clone()).body(body.clone()).send();
                let response = match tokio::time::timeout(idle, send).await {
                    Err(_) => break 'attempt Failure::retryable(LlmError::IdleTimeout {
                        provider,
                        url: url.clone(),
                        idle,
                        phase: "while waiting for the response headers".into(),
                    }),
                    Ok(Err(e)) => {
                        let cause = connect_cause(&e, &url);
                        let error = LlmError::Connect { provider, url: url.clone(), message: root_cause(&e), cause };
                        break 'attempt Failure { error, retryable: cause.retry_may_help(), retry_after: None };
                    }
                    Ok(Ok(response)) => response,
                };
                let status = response.status();
                let content_type = response
                    .headers()
                    .get(CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_ascii_lowercase();
                if !status.is_success() {
                    let retry_after = retry_after(response.headers());
                    let code = status.as_u16();
                    let retryable = matches!(code, 408 | 409 | 429 | 500..=599);
                    let (message, overflow) = match read_error_body(response, idle).await {
                        Ok(body) => (body_message(&body, &content_type), is_context_overflow_text(&body)),
                        Err(e) => (format!("(the error body could not be read: {e})"), false),
                    };
                    if overflow {
                        break 'attempt Failure::fatal(LlmError::ContextOverflow { provider, url: url.clone(), status: code, message });
                    }
                    let message = if matches!(code, 401 | 403) {
                        format!("{message} (the key came from {key_source}; check it)")
                    } else {
                        message
                    };
                    break 'attempt Failure {
                        error: LlmError::Http { provider, url: url.clone(), status: code, message },
                        retryable,
                        retry_after,
                    };
                }
                if !content_type.starts_with("text/event-stream") {
                    let body = match read_error_body(response, idle).await {
                        Ok(body) => body,
                        Err(e) => format!("(the body could not be read: {e})"),
                    };
                    let what = if looks_like_html(&body, &content_type) {
                        "answered 200 with an HTML page instead of an event stream".to_string()
                    } else if content_type.is_empty() {
                        "answered 200 without a content type instead of an event stream".to_string()
                    } else {
                        format!("answered 200 with `{content_type}` instead of an event stream")
                    };
                    if is_context_overflow_text(&body) {
                        // LM Studio answers an overflow with 200 and an error body.
                        break 'attempt Failure::fatal(LlmError::ContextOverflow {
                            provider,
                            url: url.clone(),
                            status: status.as_u16(),
                            message: body_message(&body, &content_type),
                        });
                    }
                    break 'attempt Failure::fatal(LlmError::ServerError {
                        provider,
                        url: url.clone(),
                        what,
                        message: body_message(&body, &content_type),
                    });
                }

                let mut body_stream = response.bytes_stream();
                let mut sse = SseDecoder::with_max_event_bytes(policy.max_event_bytes);
                let mut decoder = new_decoder();
                let mut events: Vec<SseEvent> = Vec::new();
                let mut out: Vec<StreamEvent> = Vec::new();
                let mut content_bytes: u64 = 0;
                let mut deadline = tokio::time::Instant::now() + idle;
                loop {
                    let chunk = match tokio::time::timeout_at(deadline, body_stream.next()).await {
                        Err(_) => break 'attempt Failure::retryable(LlmError::IdleTimeout {
                            provider,
                            url: url.clone(),
                            idle,
                            phase: format!("without content, after {} bytes of the reply", sse.offset()),
                        }),
                        Ok(Some(Err(e))) => break 'attempt Failure::retryable(LlmError::StreamBroken {
                            provider,
                            url: url.clone(),
                            bytes: sse.offset(),
                            message: error_chain(&e),
                        }),
                        Ok(None) => {
                            match decoder.on_eof(&mut out) {
                                Ok(()) => {
                                    for event in out.drain(..) {
                                        yield Ok(event);
                                    }
                                    return;
                                }
                                Err(message) => break 'attempt Failure::retryable(LlmError::StreamBroken {
                                    provider,
                                    url: url.clone(),
                                    bytes: sse.offset(),
                                    message,
                                }),
                            }
                        }
                        Ok(Some(Ok(chunk))) => chunk,
                    };
                    if let Err(e) = sse.decode(&chunk, &mut events) {
                        break 'attempt Failure::fatal(sse_error(provider, &url, e));
                    }
                    for event in events.drain(..) {
                        if !decoder.is_keepalive(&event) {
                            deadline = tokio::time::Instant::now() + idle;
                        }
                        let result = decoder.on_event(&event, &mut out);
                        for item in out.drain(..) {
                            content_bytes = content_bytes.saturating_add(content_len(&item));
                            if content_bytes > policy.max_reply_bytes {
                                break 'attempt Failure::fatal(LlmError::ReplyTooLarge {
                                    provider,
                                    url: url.clone(),
                                    limit: policy.max_reply_bytes,
                                });
                            }
                            yielded = true;
                            yield Ok(item);
                        }
                        match result {
                            Ok(false) => {}
                            Ok(true) => return,
                            Err(EventError::InvalidJson(message)) => {
                                break 'attempt Failure::fatal(LlmError::InvalidJson {
                                    provider,
                                    url: url.clone(),
                                    event: if event.event.is_empty() { "message".into() } else { event.event.clone() },
                                    offset: event.offset,
                                    message,
                                    excerpt: excerpt(event.data.as_bytes()),
                                });
                            }
                            Err(EventError::Server { what, message, retryable }) => {
                                if is_context_overflow_text(&message) {
                                    break 'attempt Failure::fatal(LlmError::ContextOverflow { provider, url: url.clone(), status: 200, message });
                                }
                                let error = LlmError::ServerError { provider, url: url.clone(), what, message };
                                break 'attempt Failure { error, retryable, retry_after: None };
                            }
                        }
                    }
                }
            };

            if failure.retryable && !yielded && attempt < max_attempts {
                let delay = policy.delay(attempt, failure.retry_after);
                attempt += 1;
                yield Ok(StreamEvent::Retrying {
                    attempt,
                    max_attempts,
                    delay_ms: delay.as_millis() as u64,
                    reason: failure.error.to_string(),
                });
                tokio::time::sleep(delay).await;
                continue;
            }
            let error = if failure.retryable && !yielded && attempt > 1 {
                LlmError::RetriesExhausted {
                    provider,
                    url: url.clone(),
                    attempts: attempt,
                    last: Box::new(failure.error),
                }
            } else {
                failure.error
            };
            yield Err(error);
            return;
        }
    })
}

/// The typed error of an SSE decoding failure.
pub(crate) fn sse_error(provider: &'static str, url: &str, e: SseError) -> LlmError {
    match e.kind {
        SseErrorKind::EventTooLarge { limit } => LlmError::EventTooLarge {
            provider,
            url: url.to_string(),
            offset: e.offset,
            limit,
        },
        SseErrorKind::Malformed => LlmError::MalformedSse {
            provider,
            url: url.to_string(),
            offset: e.offset,
            message: e.message,
        },
    }
}

/// The bytes of content an event carries, counted against the reply cap.
fn content_len(event: &StreamEvent) -> u64 {
    let n = match event {
        StreamEvent::TextDelta { text } | StreamEvent::ReasoningDelta { text } => text.len(),
        StreamEvent::ReasoningSignature { signature } => signature.len(),
        StreamEvent::RedactedReasoning { data } => data.len(),
        StreamEvent::ToolCallStart { id, name } => id.len() + name.len(),
        StreamEvent::ToolCallDelta { arguments, .. } => arguments.len(),
        _ => 0,
    };
    n as u64
}

/// The server's `retry-after-ms` or `retry-after` (seconds) header.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    if let Some(secs) = get("retry-after").and_then(|v| v.parse::<f64>().ok())
        && secs.is_finite()
        && secs >= 0.0
    {
        return Some(Duration::from_secs_f64(secs.min(86_400.0)));
    }
    None
}

/// Reads at most [`MAX_ERROR_BODY`] bytes of a body, each read bounded by
/// the idle timeout.
async fn read_error_body(
    mut response: reqwest::Response,
    idle: Duration,
) -> Result<String, String> {
    let mut body = Vec::new();
    loop {
        match tokio::time::timeout(idle, response.chunk()).await {
            Err(_) => return Err(format!("nothing received for {}s", idle.as_secs_f64())),
            Ok(Err(e)) => return Err(error_chain(&e)),
            Ok(Ok(None)) => break,
            Ok(Ok(Some(chunk))) => {
                let room = MAX_ERROR_BODY - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if body.len() >= MAX_ERROR_BODY {
                    break;
                }
            }
        }
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

fn looks_like_html(body: &str, content_type: &str) -> bool {
    if content_type.starts_with("text/html") {
        return true;
    }
    let start = body
        .trim_start()
        .get(..15)
        .unwrap_or("")
        .to_ascii_lowercase();
    start.starts_with("<!doctype html") || start.starts_with("<html")
}

/// The human part of an error body: the `error.message` of a JSON error
/// (both providers' shape, and Ollama's `{"error": "..."}`), the title of an
/// HTML page, or an excerpt of the text.
pub(crate) fn body_message(body: &str, content_type: &str) -> String {
    let trimmed = body.trim();
    if trimmed.is_empty() {
        return "(empty body)".to_string();
    }
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(trimmed)
        && let Some(message) = json_error_message(&value)
    {
        return message;
    }
    if looks_like_html(trimmed, content_type) {
        let lower = trimmed.to_ascii_lowercase();
        if let (Some(start), Some(end)) = (lower.find("<title>"), lower.find("</title>"))
            && start + 7 <= end
        {
            return format!("HTML page titled {:?}", trimmed[start + 7..end].trim());
        }
        return format!("HTML page: {}", excerpt(trimmed.as_bytes()));
    }
    excerpt(trimmed.as_bytes())
}

/// The message of a JSON error object, in any of the shapes servers use.
pub(crate) fn json_error_message(value: &serde_json::Value) -> Option<String> {
    let error = value.get("error")?;
    if let Some(text) = error.as_str() {
        return Some(text.to_string());
    }
    let message = error
        .get("message")
        .and_then(|m| m.as_str())
        .unwrap_or("(no message)");
    match error.get("type").and_then(|t| t.as_str()) {
        Some(kind) => Some(format!("{kind}: {message}")),
        None => Some(message.to_string()),
    }
}

/// An error with all its causes, e.g. `error sending request: connection refused`.
/// Why `error` made no connection to `url`: refused by this machine,
/// a host name that does not resolve, or something that may pass.
fn connect_cause(error: &(dyn std::error::Error + 'static), url: &str) -> ConnectCause {
    let mut source = Some(error);
    let mut refused = false;
    let mut unknown_host = false;
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            refused |= io.kind() == std::io::ErrorKind::ConnectionRefused;
        }
        // hyper-util's resolver error; the OS error under it has no kind
        // of its own.
        unknown_host |= e.to_string().starts_with("dns error");
        source = e.source();
    }
    if unknown_host {
        ConnectCause::UnknownHost
    } else if refused && is_local(url) {
        ConnectCause::RefusedLocally
    } else {
        ConnectCause::Other
    }
}

/// Whether `url`'s host is this machine (`localhost`, a loopback address).
fn is_local(url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(url) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback() || ip.is_unspecified(),
        Err(_) => {
            let host = host.to_ascii_lowercase();
            host == "localhost" || host.ends_with(".localhost")
        }
    }
}

/// The innermost cause of an error (`Connection refused (os error 111)`),
/// without the outer layers that repeat the URL.
fn root_cause(error: &dyn std::error::Error) -> String {
    let mut last = error;
    while let Some(cause) = last.source() {
        last = cause;
    }
    last.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_urls() {
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434",
            "http://LOCALHOST/v1",
            "http://[::1]:80",
            "http://0.0.0.0:1234",
            "http://api.localhost",
        ] {
            assert!(is_local(url), "{url}");
        }
        for url in [
            "https://api.anthropic.com",
            "http://10.0.0.2:80",
            "not a url",
        ] {
            assert!(!is_local(url), "{url}");
        }
    }

    #[test]
    fn retry_after_headers() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(150)));
        headers.insert("retry-after-ms", "soon".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let policy = RetryPolicy {
            max_attempts: 5,
            idle_timeout: Duration::from_secs(1),
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(300),
            max_reply_bytes: 1,
            max_event_bytes: 1,
        };
        for _ in 0..50 {
            let d1 = policy.delay(1, None);
            assert!(
                d1 >= Duration::from_millis(50) && d1 <= Duration::from_millis(100),
                "{d1:?}"
            );
            let d2 = policy.delay(2, None);
            assert!(
                d2 >= Duration::from_millis(100) && d2 <= Duration::from_millis(200),
                "{d2:?}"
            );
            let d5 = policy.delay(5, None);
            assert!(d5 <= Duration::from_millis(300), "{d5:?}");
        }
        assert_eq!(
            policy.delay(1, Some(Duration::from_secs(9))),
            Duration::from_millis(300)
        );
        assert_eq!(
            policy.delay(1, Some(Duration::from_millis(7))),
            Duration::from_millis(7)
        );
    }

    #[test]
    fn error_bodies() {
        assert_eq!(
            body_message(
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#,
                "application/json"
            ),
            "invalid_request_error: bad"
        );
        assert_eq!(
            body_message(r#"{"error":"model not found"}"#, ""),
            "model not found"
        );
        assert_eq!(
            body_message(
                "<html><head><title>502 Bad Gateway</title></head></html>",
                "text/html"
            ),
            "HTML page titled \"502 Bad Gateway\""
        );
        assert_eq!(body_message("  ", ""), "(empty body)");
        assert_eq!(body_message("plain", "text/plain"), "\"plain\"");
    }
}
