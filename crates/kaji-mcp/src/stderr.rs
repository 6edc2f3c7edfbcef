//! The last lines a stdio server wrote to stderr, kept in a bounded ring so
//! that a chatty server cannot grow kaji's memory, and shown when the
//! server fails.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// How many lines are kept.
pub const STDERR_TAIL_LINES: usize = 20;
/// How many bytes are kept at most (over all kept lines).
pub const STDERR_TAIL_BYTES: usize = 4096;
/// Longest single line kept; longer lines are cut with `…`.
const MAX_LINE_BYTES: usize = 1024;

/// A shared, bounded tail of a server's stderr.
#[derive(Debug, Clone, Default)]
pub struct StderrTail {
    inner: Arc<Mutex<Ring>>,
}

#[derive(Debug, Default)]
struct Ring {
    lines: VecDeque<String>,
    bytes: usize,
}

impl StderrTail {
    /// An empty tail.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one line (without its newline), dropping the oldest lines
    /// past the bounds.
    pub fn push_line(&self, line: &str) {
        let line = truncate(line.trim_end_matches(['\r', '\n']));
        let mut ring = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        ring.bytes += line.len();
        ring.lines.push_back(line);
        while ring.lines.len() > STDERR_TAIL_LINES
            || (ring.bytes > STDERR_TAIL_BYTES && ring.lines.len() > 1)
        {
            if let Some(old) = ring.lines.pop_front() {
                ring.bytes -= old.len();
            }
        }
    }

    /// The kept lines, joined with newlines.
    pub fn text(&self) -> String {
        let ring = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        ring.lines
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Reads `stream` line by line into this tail until end-of-file. Bytes
    /// that are not UTF-8 are replaced. Each line is also logged at debug
    /// level under the server's name.
    pub async fn collect(self, server: String, stream: impl AsyncRead + Unpin) {
        let mut reader = BufReader::new(stream);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf);
                    tracing::debug!(server = %server, "mcp stderr: {}", line.trim_end());
                    self.push_line(&line);
                }
            }
        }
    }
}

fn truncate(line: &str) -> String {
    if line.len() <= MAX_LINE_BYTES {
        return line.to_string();
    }
    let mut end = MAX_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_the_last_lines() {
        let tail = StderrTail::new();
        for i in 0..100 {
            tail.push_line(&format!("line {i}\n"));
        }
        let text = tail.text();
        assert_eq!(text.lines().count(), STDERR_TAIL_LINES);
        assert!(text.ends_with("line 99"), "{text}");
        assert!(text.starts_with("line 80"), "{text}");
    }

    #[test]
    fn bounds_bytes_and_long_lines() {
        let tail = StderrTail::new();
        for _ in 0..10 {
            tail.push_line(&"é".repeat(5000));
        }
        let text = tail.text();
        assert!(
            text.len() <= STDERR_TAIL_BYTES + MAX_LINE_BYTES + 8,
            "{}",
            text.len()
        );
        assert!(text.ends_with('…'));
    }

    #[tokio::test]
    async fn collects_a_stream_until_eof() {
        let tail = StderrTail::new();
        let input: &[u8] = b"first\nsecond\xff\nno newline";
        tail.clone().collect("s".into(), input).await;
        assert_eq!(tail.text(), "first\nsecond\u{fffd}\nno newline");
    }
}
