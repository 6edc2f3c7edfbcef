//! The connection's lines, stdin to stdout, before the JSON-RPC peer
//! ([`super::rpc`]) reads them: bad input to an editor session is that
//! line's error, never the connection's. A line that is not UTF-8 is
//! answered `-32700` here; a message nested deeper than the JSON parser
//! goes is answered `-32600` with its `id`; blank lines are skipped;
//! everything else goes to the peer as it came. Lines out, the peer's and
//! these answers, go through one writer, so they never interleave, and
//! nothing else in `kaji acp` writes to stdout.
//!
//! It never looks into what it passes on and never answers a line the
//! peer can answer.

use futures::StreamExt;
use futures::channel::mpsc;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::task::JoinHandle;

/// The deepest nesting passed on (serde_json stops at 128 levels).
pub const MAX_DEPTH: usize = 100;

/// The connection's lines, and the tasks that move them.
pub struct Wire {
    /// Lines out (JSON-RPC messages without their newline).
    pub outgoing: mpsc::UnboundedSender<String>,
    /// Lines in, checked.
    pub incoming: mpsc::UnboundedReceiver<std::io::Result<String>>,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl Wire {
    /// Starts reading stdin and writing stdout.
    pub fn stdio() -> Self {
        let (out_tx, out_rx) = mpsc::unbounded::<String>();
        let (in_tx, in_rx) = mpsc::unbounded();
        let writer = tokio::spawn(write_lines(out_rx));
        let reader = tokio::spawn(read_lines(in_tx, out_tx.clone()));
        Self {
            outgoing: out_tx,
            incoming: in_rx,
            reader,
            writer,
        }
    }

    /// The checked lines in, and what is left to wait for once they are
    /// served (the way out stays with whoever holds [`Wire::outgoing`]).
    pub fn split(self) -> (mpsc::UnboundedReceiver<std::io::Result<String>>, Finish) {
        (
            self.incoming,
            Finish {
                reader: self.reader,
                writer: self.writer,
            },
        )
    }
}

/// Ends the reader and lets the writer send what is queued.
pub struct Finish {
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl Finish {
    /// Stops reading; returns once every queued line is written.
    pub async fn done(self) {
        self.reader.abort();
        let _ = self.reader.await;
        let _ = self.writer.await;
    }
}

async fn write_lines(mut rx: mpsc::UnboundedReceiver<String>) {
    let mut stdout = tokio::io::stdout();
    while let Some(line) = rx.next().await {
        let written = async {
            stdout.write_all(line.as_bytes()).await?;
            stdout.write_all(b"\n").await?;
            stdout.flush().await
        };
        if let Err(e) = written.await {
            eprintln!("kaji acp: cannot write to stdout: {e}");
            return;
        }
    }
}

async fn read_lines(
    tx: mpsc::UnboundedSender<std::io::Result<String>>,
    out: mpsc::UnboundedSender<String>,
) {
    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut buf = Vec::new();
    let mut number = 0u64;
    loop {
        buf.clear();
        match stdin.read_until(b'\n', &mut buf).await {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) => {
                let _ = tx.unbounded_send(Err(e));
                return;
            }
        }
        number += 1;
        match check(&buf, number) {
            Checked::Pass(line) => {
                if tx.unbounded_send(Ok(line)).is_err() {
                    return;
                }
            }
            Checked::Skip => {}
            Checked::Answer(answer) => {
                if out.unbounded_send(answer.to_string()).is_err() {
                    return;
                }
            }
        }
    }
}

/// What to do with one line.
#[derive(Debug, PartialEq)]
enum Checked {
    /// Give it to the peer.
    Pass(String),
    /// Blank: nothing.
    Skip,
    /// Answer it here.
    Answer(Value),
}

fn check(raw: &[u8], number: u64) -> Checked {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    let line = match std::str::from_utf8(raw) {
        Ok(line) => line,
        Err(e) => {
            return Checked::Answer(error(
                Value::Null,
                -32700,
                format!(
                    "Parse error: line {number} is not valid UTF-8 (at byte {})",
                    e.valid_up_to()
                ),
            ));
        }
    };
    if line.trim().is_empty() {
        return Checked::Skip;
    }
    if depth(line.as_bytes()) > MAX_DEPTH {
        return Checked::Answer(error(
            top_level_id(line.as_bytes()).unwrap_or(Value::Null),
            -32600,
            format!("Invalid request: line {number} nests deeper than {MAX_DEPTH} levels"),
        ));
    }
    Checked::Pass(line.to_string())
}

fn error(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The deepest nesting of arrays and objects in `bytes` (strings skipped).
fn depth(bytes: &[u8]) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// The `id` member of the top-level object, when it is a number or a
/// string (read without parsing the rest).
fn top_level_id(bytes: &[u8]) -> Option<Value> {
    let (mut depth, mut i) = (0usize, 0usize);
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let end = string_end(bytes, i)?;
                if depth == 1 && &bytes[i..=end] == b"\"id\"" {
                    let rest = &bytes[end + 1..];
                    let colon = rest.iter().position(|b| !b.is_ascii_whitespace())?;
                    if rest[colon] != b':' {
                        i = end + 1;
                        continue;
                    }
                    return scalar(&rest[colon + 1..]);
                }
                i = end + 1;
                continue;
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index of the quote closing the string opening at `start`.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut escaped = false;
    for (k, &b) in bytes.iter().enumerate().skip(start + 1) {
        match (escaped, b) {
            (true, _) => escaped = false,
            (false, b'\\') => escaped = true,
            (false, b'"') => return Some(k),
            _ => {}
        }
    }
    None
}

/// A JSON number or string at the start of `bytes`.
fn scalar(bytes: &[u8]) -> Option<Value> {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace())?;
    let bytes = &bytes[start..];
    let end = if bytes.first() == Some(&b'"') {
        string_end(bytes, 0)? + 1
    } else {
        bytes
            .iter()
            .position(|b| matches!(b, b',' | b'}' | b' ' | b'\t' | b'\r' | b'\n'))
            .unwrap_or(bytes.len())
    };
    let value: Value = serde_json::from_slice(&bytes[..end]).ok()?;
    (value.is_number() || value.is_string()).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_utf8_is_answered_with_a_parse_error() {
        let Checked::Answer(a) = check(b"{\"id\":1,\xff}\n", 3) else {
            panic!("not answered");
        };
        assert_eq!(a["error"]["code"], -32700);
        assert_eq!(a["id"], Value::Null);
        assert!(a["error"]["message"].as_str().unwrap().contains("line 3"));
    }

    #[test]
    fn deep_nesting_is_answered_with_its_id() {
        let deep = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":{}{}, \"id\": \"a]\\\"b\"}}",
            "[".repeat(500),
            "]".repeat(500)
        );
        let Checked::Answer(a) = check(deep.as_bytes(), 1) else {
            panic!("not answered");
        };
        assert_eq!(a["id"], "a]\"b");
        assert_eq!(a["error"]["code"], -32600);
        let shallow = r#"{"jsonrpc":"2.0","id":7,"method":"x","params":{"a":[[1]]}}"#;
        assert_eq!(check(shallow.as_bytes(), 1), Checked::Pass(shallow.into()));
        assert_eq!(check(b"  \r\n", 1), Checked::Skip);
    }

    #[test]
    fn the_id_is_read_at_the_top_level_only() {
        let line = br#"{"params":{"id":5},"id":9}"#;
        assert_eq!(top_level_id(line), Some(json!(9)));
        assert_eq!(top_level_id(br#"{"id":null}"#), None);
        assert_eq!(depth(br#"{"a":"[[[[","b":[{}]}"#), 3);
    }
}
