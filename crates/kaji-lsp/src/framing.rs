//! The base protocol's framing: `Content-Length: N\r\n\r\n` then N bytes of
//! JSON, in both directions.
//!
//! Reading must never trust the peer: a header line or a body larger than
//! the caps, a missing length or bytes that are not JSON are errors (the
//! connection is then given up), never a panic or an unbounded allocation.

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

/// The largest message body read (64 MiB).
pub const MAX_BODY: usize = 64 << 20;
/// The longest header line read.
const MAX_HEADER_LINE: u64 = 4096;

/// Why a message could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// Reading the pipe failed.
    #[error("reading the server's output failed: {0}")]
    Io(#[from] std::io::Error),
    /// The server wrote something that is not a framed message.
    #[error("the server wrote garbage: {0}")]
    Garbage(String),
}

/// Reads one message; `None` at a clean end of the stream.
pub async fn read_message<R: AsyncBufRead + Unpin>(r: &mut R) -> Result<Option<Value>, FrameError> {
    let mut length: Option<usize> = None;
    let mut first = true;
    loop {
        let mut line = Vec::new();
        let n = (&mut *r)
            .take(MAX_HEADER_LINE)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 {
            return if first {
                Ok(None)
            } else {
                Err(FrameError::Garbage(
                    "the stream ended inside a header".into(),
                ))
            };
        }
        first = false;
        if line.last() != Some(&b'\n') {
            return Err(FrameError::Garbage("a header line is too long".into()));
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            break;
        }
        let Some((name, value)) = text.split_once(':') else {
            return Err(FrameError::Garbage(format!("not a header: {}", clip(text))));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let n: usize = value
                .trim()
                .parse()
                .map_err(|_| FrameError::Garbage(format!("bad Content-Length: {}", clip(value))))?;
            length = Some(n);
        }
    }
    let length =
        length.ok_or_else(|| FrameError::Garbage("a message without Content-Length".into()))?;
    if length > MAX_BODY {
        return Err(FrameError::Garbage(format!("a message of {length} bytes")));
    }
    let mut body = vec![0; length];
    r.read_exact(&mut body).await?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| FrameError::Garbage(format!("a body that is not JSON: {e}")))
}

/// One message, framed.
pub fn frame(message: &Value) -> Vec<u8> {
    let body = message.to_string();
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

fn clip(s: &str) -> String {
    s.chars().take(60).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(bytes: &[u8]) -> Result<Option<Value>, FrameError> {
        let mut r = tokio::io::BufReader::new(bytes);
        read_message(&mut r).await
    }

    #[tokio::test]
    async fn round_trip_and_errors() {
        let msg = serde_json::json!({"jsonrpc": "2.0", "method": "x", "params": {"é": 1}});
        assert_eq!(read(&frame(&msg)).await.unwrap(), Some(msg));
        assert!(read(b"").await.unwrap().is_none());
        assert!(matches!(
            read(b"hello world\n\n").await,
            Err(FrameError::Garbage(_))
        ));
        assert!(matches!(
            read(b"Content-Length: 3\r\n\r\nabc").await,
            Err(FrameError::Garbage(_))
        ));
        assert!(matches!(
            read(b"Content-Type: x\r\n\r\n{}").await,
            Err(FrameError::Garbage(_))
        ));
        let huge = format!("Content-Length: {}\r\n\r\n", MAX_BODY + 1);
        assert!(matches!(
            read(huge.as_bytes()).await,
            Err(FrameError::Garbage(_))
        ));
        let long = vec![b'a'; 10_000];
        assert!(matches!(read(&long).await, Err(FrameError::Garbage(_))));
    }
}
