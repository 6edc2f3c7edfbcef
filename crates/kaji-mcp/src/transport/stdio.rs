//! The stdio transport: one JSON-RPC message per line on the server's
//! stdin and stdout. A writer task owns stdin, a reader task owns stdout;
//! the connection ends when stdout closes or a write fails.
//!
//! It must never block a caller on a full pipe (messages queue for the
//! writer) and never stop reading because of one bad line (a line that is
//! not a message is logged and skipped, as the official SDKs do).

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::Link;
use crate::jsonrpc::{Inbox, Outbox};

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
        line.clear();
        let read = tokio::select! {
            _ = inbox.closed().cancelled() => return,
            read = stdout.read_until(b'\n', &mut line) => read,
        };
        match read {
            Ok(0) => {
                inbox.close("the server closed its stdout");
                return;
            }
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                if let Some(reply) = super::receive(&server, &inbox, &text, "stdout") {
                    let _ = replies.send(reply.to_string());
                }
            }
            Err(e) => {
                inbox.close(&format!("reading the server's stdout failed: {e}"));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
