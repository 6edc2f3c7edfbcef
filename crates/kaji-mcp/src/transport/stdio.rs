//! The stdio transport: one JSON-RPC message per line on the server's
//! stdin and stdout. A writer task owns stdin, a reader task owns stdout;
//! the connection ends when stdout closes or a write fails.
//!
//! It must never block a caller on a full pipe (messages queue for the
//! writer), never hold more than [`MAX_LINE_BYTES`] of one line, and never
//! stop reading because of one bad line (a line that is not a message, or
//! is too long, is logged and skipped, as the official SDKs do).

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::Link;
use crate::jsonrpc::{Inbox, Outbox};

/// The longest line read from a server (the limit the `rmcp` SDK had).
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Sends by queueing lines for the writer task.
struct StdioOutbox {
    lines: mpsc::UnboundedSender<String>,
}

impl Outbox for StdioOutbox {
    fn send(&self, message: Value) -> BoxFuture<'_, Result<(), String>> {
        let sent = self
            .lines
            .send(message.to_string())
            .map_err(|_| "the server's stdin is closed".to_string());
        Box::pin(std::future::ready(sent))
    }
}

/// Connects to a server over its `stdout` (read) and `stdin` (written).
pub(crate) fn connect(
    server: &str,
    stdout: impl AsyncRead + Unpin + Send + 'static,
    stdin: impl AsyncWrite + Unpin + Send + 'static,
) -> Link {
    let (inbox, notifications) = Inbox::new();
    let (lines, queue) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_lines(inbox.clone(), queue, stdin));
    let reader = tokio::spawn(read_lines(
        server.to_string(),
        inbox.clone(),
        lines.clone(),
        stdout,
    ));
    let peer = inbox.peer(Arc::new(StdioOutbox { lines }));
    Link::new(peer, inbox, notifications, vec![writer, reader])
}

/// Writes queued messages, one a line, until the connection ends (then
/// stdin is closed by dropping it).
async fn write_lines(
    inbox: Inbox,
    mut queue: mpsc::UnboundedReceiver<String>,
    mut stdin: impl AsyncWrite + Unpin,
) {
    loop {
        let line = tokio::select! {
            _ = inbox.closed().cancelled() => return,
            line = queue.recv() => line,
        };
        let Some(mut line) = line else { return };
        line.push('\n');
        let written = async {
            stdin.write_all(line.as_bytes()).await?;
            stdin.flush().await
        };
        let result = tokio::select! {
            _ = inbox.closed().cancelled() => return,
            result = written => result,
        };
        if let Err(e) = result {
            inbox.close(&format!("writing to the server's stdin failed: {e}"));
            return;
        }
    }
}

/// Reads messages, one a line, until stdout closes or the connection ends.
async fn read_lines(
    server: String,
    inbox: Inbox,
    replies: mpsc::UnboundedSender<String>,
    stdout: impl AsyncRead + Unpin,
) {
    let mut stdout = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        let read = tokio::select! {
            _ = inbox.closed().cancelled() => return,
            read = read_line(&mut stdout, &mut line, MAX_LINE_BYTES) => read,
        };
        match read {
            Ok(Line::Complete) => {
                let text = String::from_utf8_lossy(&line);
                if let Some(reply) = super::receive(&server, &inbox, &text, "stdout") {
                    let _ = replies.send(reply.to_string());
                }
            }
            Ok(Line::TooLong) => tracing::warn!(
                server = %server,
                "MCP server `{server}` wrote a line longer than {MAX_LINE_BYTES} bytes on stdout; ignored"
            ),
            Ok(Line::End) => {
                inbox.close("the server closed its stdout");
                return;
            }
            Err(e) => {
                inbox.close(&format!("reading the server's stdout failed: {e}"));
                return;
            }
        }
    }
}

/// What [`read_line`] read.
#[derive(Debug, PartialEq)]
enum Line {
    /// A whole line, in the buffer (with its newline).
    Complete,
    /// A line over the limit, dropped.
    TooLong,
    /// The end of the stream (an unfinished last line is dropped).
    End,
}

/// Reads one line into `line` (cleared first), keeping at most `limit`
/// bytes of it.
async fn read_line(
    reader: &mut (impl AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Line> {
    line.clear();
    let mut too_long = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(Line::End);
        }
        let end = buf.iter().position(|&b| b == b'\n');
        let chunk = &buf[..end.map_or(buf.len(), |i| i + 1)];
        if !too_long && line.len() + chunk.len() > limit {
            too_long = true;
            line.clear();
        }
        if !too_long {
            line.extend_from_slice(chunk);
        }
        let taken = chunk.len();
        reader.consume(taken);
        if end.is_some() {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Complete
            });
        }
    }
}

#[cfg(test)]
mod tests;
