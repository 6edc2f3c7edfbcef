//! An incremental decoder of server-sent events (the `text/event-stream`
//! format both providers stream in).
//!
//! Bytes go in as they arrive from the network, split anywhere; complete
//! events come out. The decoder follows the WHATWG framing rules (lines end
//! in `\n`, `\r\n` or `\r`; `data` lines of one event are joined with `\n`;
//! an empty line dispatches the event; lines starting with `:` are comments)
//! and is strict where a model API never deviates: a line whose field is not
//! `event`, `data`, `id` or `retry`, bytes that are not UTF-8, a line
//! longer than [`MAX_LINE_BYTES`] and an event (all its `data:` lines
//! together) larger than [`MAX_EVENT_BYTES`] are errors that say at which
//! byte offset they were found. It must never allocate without bound or
//! panic on input.

use memchr::memchr2;

/// The longest line the decoder buffers before giving up (16 MiB).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The largest event (its `event:` name and all its `data:` lines joined)
/// the decoder assembles before giving up (16 MiB).
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One dispatched event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field; empty when the event had none (the spec's
    /// default type is then `message`).
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// Byte offset in the stream of the line that started the event.
    pub offset: u64,
}

/// Why bytes could not be decoded as server-sent events.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed server-sent events at byte {offset}: {message}")]
pub struct SseError {
    /// Byte offset of the offending line in the stream.
    pub offset: u64,
    /// What is wrong, with a short excerpt of the line.
    pub message: String,
    /// Which kind of error it is.
    pub kind: SseErrorKind,
}

/// The kinds of [`SseError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseErrorKind {
    /// The bytes are not server-sent events (bad field, bad UTF-8, a line
    /// over [`MAX_LINE_BYTES`]).
    Malformed,
    /// One event grew past the decoder's event limit.
    EventTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
}

/// Incremental server-sent-events decoder. See the module docs.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of an unterminated line carried over from earlier chunks.
    partial: Vec<u8>,
    /// Offset of the first byte of `partial` (or of the next line).
    line_offset: u64,
    /// The previous chunk ended in `\r`: a leading `\n` belongs to it.
    skip_lf: bool,
    /// Nothing decoded yet: a leading UTF-8 byte order mark is dropped.
    at_start: bool,
    /// The event being assembled.
    event: String,
    data: String,
    has_data: bool,
    event_offset: Option<u64>,
    /// The event size limit; 0 means [`MAX_EVENT_BYTES`].
    max_event_bytes: usize,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self {
            at_start: true,
            ..Self::default()
        }
    }

    /// A decoder whose events may be at most `limit` bytes (at least 1).
    pub fn with_max_event_bytes(limit: usize) -> Self {
        Self {
            max_event_bytes: limit.max(1),
            ..Self::new()
        }
    }

    fn event_limit(&self) -> usize {
        if self.max_event_bytes == 0 {
            MAX_EVENT_BYTES
        } else {
            self.max_event_bytes
        }
    }

    /// Total bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.line_offset + self.partial.len() as u64
    }

    /// Whether an event has started but not been dispatched, or a line is
    /// unterminated: at the end of the stream that means it was cut short.
    pub fn has_pending(&self) -> bool {
        !self.partial.is_empty() || self.event_offset.is_some()
    }

    /// Feeds the next chunk of the stream and pushes every event it
    /// completes onto `out`.
    pub fn decode(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if self.skip_lf && !chunk.is_empty() {
            self.skip_lf = false;
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
                self.line_offset += 1;
            }
        }
        if self.at_start {
            // A byte-order mark may only open the stream, and may itself be
            // split across chunks.
            let mut head = std::mem::take(&mut self.partial);
            head.extend_from_slice(chunk);
            if head.len() < BOM.len() && BOM.starts_with(&head) {
                self.partial = head;
                return Ok(());
            }
            self.at_start = false;
            let rest = match head.strip_prefix(BOM) {
                Some(rest) => {
                    self.line_offset += BOM.len() as u64;
                    rest
                }
                None => &head[..],
            };
            return self.decode_lines(rest, out);
        }
        self.decode_lines(chunk, out)
    }

    fn decode_lines(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        while let Some(pos) = memchr2(b'\n', b'\r', chunk) {
            let terminator_len = if chunk[pos] == b'\r' {
                match chunk.get(pos + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    None => {
                        self.skip_lf = true;
                        1
                    }
                }
            } else {
                1
            };
            let mut carried = 0;
            if self.partial.is_empty() {
                self.process_line(&chunk[..pos], out)?;
            } else {
                carried = self.partial.len();
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(&chunk[..pos]);
                let result = self.process_line(&line, out);
                line.clear();
                self.partial = line;
                result?;
            }
            self.line_offset += (carried + pos + terminator_len) as u64;
            chunk = &chunk[pos + terminator_len..];
        }
        if !chunk.is_empty() {
            if self.partial.len() + chunk.len() > MAX_LINE_BYTES {
                return Err(SseError {
                    offset: self.line_offset,
                    message: format!("a line is longer than {MAX_LINE_BYTES} bytes"),
                    kind: SseErrorKind::Malformed,
                });
            }
            self.partial.extend_from_slice(chunk);
        }
        Ok(())
    }

    fn process_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if line.is_empty() {
            if let Some(offset) = self.event_offset.take() {
                if self.has_data {
                    out.push(SseEvent {
                        event: std::mem::take(&mut self.event),
                        data: std::mem::take(&mut self.data),
                        offset,
                    });
                } else {
                    self.event.clear();
                }
                self.has_data = false;
            }
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (name, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                let value = value.strip_prefix(b" ").unwrap_or(value);
                (&line[..colon], value)
            }
            // A line without a colon names a field with an empty value;
            // only `data` means something then, any other is ignored (the
            // SSE spec).
            None if line == b"data" => (line, &b""[..]),
            None => return Ok(()),
        };
        let value = std::str::from_utf8(value).map_err(|e| SseError {
            offset: self.line_offset + (line.len() - value.len() + e.valid_up_to()) as u64,
            message: "the line is not valid UTF-8".to_string(),
            kind: SseErrorKind::Malformed,
        })?;
        if matches!(name, b"data" | b"event")
            && self.data.len() + self.event.len() + value.len() + 1 > self.event_limit()
        {
            let limit = self.event_limit();
            return Err(SseError {
                offset: self.event_offset.unwrap_or(self.line_offset),
                message: format!(
                    "one event is larger than {limit} bytes (its `data:` lines together)"
                ),
                kind: SseErrorKind::EventTooLarge { limit },
            });
        }
        match name {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                self.event.push_str(value);
            }
            b"id" | b"retry" => {}
            _ => {
                return Err(SseError {
                    offset: self.line_offset,
                    message: format!(
                        "expected an `event:`, `data:` or `:` comment line, found {}",
                        excerpt(line)
                    ),
                    kind: SseErrorKind::Malformed,
                });
            }
        }
        if self.event_offset.is_none() {
            self.event_offset = Some(self.line_offset);
        }
        Ok(())
    }
}

/// A short, printable excerpt of raw bytes for error messages.
pub(crate) fn excerpt(bytes: &[u8]) -> String {
    const MAX: usize = 200;
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX)]);
    let mut s = format!("{text:?}");
    if bytes.len() > MAX {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(chunks: &[&[u8]]) -> Result<Vec<SseEvent>, SseError> {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.decode(chunk, &mut out)?;
        }
        Ok(out)
    }

    fn ev(event: &str, data: &str) -> (String, String) {
        (event.to_string(), data.to_string())
    }

    fn strip(events: Vec<SseEvent>) -> Vec<(String, String)> {
        events.into_iter().map(|e| (e.event, e.data)).collect()
    }

    const SAMPLE: &[u8] = b"\xEF\xBB\xBFevent: message_start\r\ndata: {\"a\":1}\r\n\r\n: ping comment\n\nevent:delta\ndata:line one\ndata: line two\n\nid: 7\rretry: 10\rdata: \xC3\xA9t\xC3\xA9\r\rdata\n\ndata: [DONE]\n\n";

    fn expected() -> Vec<(String, String)> {
        vec![
            ev("message_start", "{\"a\":1}"),
            ev("delta", "line one\nline two"),
            ev("", "été"),
            ev("", ""),
            ev("", "[DONE]"),
        ]
    }

    #[test]
    fn decodes_whole_stream() {
        assert_eq!(strip(decode_all(&[SAMPLE]).unwrap()), expected());
    }

    #[test]
    fn split_at_every_byte_offset_gives_the_same_events() {
        for split in 0..=SAMPLE.len() {
            let (a, b) = SAMPLE.split_at(split);
            let got = decode_all(&[a, b]).unwrap_or_else(|e| panic!("split at {split}: {e}"));
            assert_eq!(strip(got), expected(), "split at {split}");
        }
    }

    #[test]
    fn split_at_every_pair_of_offsets_gives_the_same_events() {
        for i in 0..=SAMPLE.len() {
            for j in i..=SAMPLE.len() {
                let got = decode_all(&[&SAMPLE[..i], &SAMPLE[i..j], &SAMPLE[j..]]).unwrap();
                assert_eq!(strip(got), expected(), "split at {i} and {j}");
            }
        }
    }

    #[test]
    fn one_byte_at_a_time() {
        let chunks: Vec<&[u8]> = SAMPLE.chunks(1).collect();
        assert_eq!(strip(decode_all(&chunks).unwrap()), expected());
    }

    #[test]
    fn event_offsets_point_at_the_first_line() {
        let events = decode_all(&[b"data: a\n\n: c\ndata: b\n\n"]).unwrap();
        assert_eq!(events[0].offset, 0);
        assert_eq!(events[1].offset, 13);
    }

    #[test]
    fn unknown_field_is_an_error_with_offset() {
        let input = b"data: ok\n\nerror: <html>oops</html>\n\n";
        for split in 0..=input.len() {
            let (a, b) = input.split_at(split);
            let err = decode_all(&[a, b]).unwrap_err();
            assert_eq!(err.offset, 10, "split at {split}");
            assert!(err.to_string().contains("<html>"), "{err}");
        }
    }

    #[test]
    fn a_line_without_a_colon_is_ignored_and_a_bare_data_line_is_empty_data() {
        let input = b"event: a\nkeepalive\ndata: x\ndata\n\n";
        for split in 0..=input.len() {
            let (a, b) = input.split_at(split);
            let events = strip(decode_all(&[a, b]).unwrap());
            assert_eq!(events, vec![ev("a", "x\n")], "split at {split}");
        }
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let err = decode_all(&[b"data: \xFF\xFE\n\n"]).unwrap_err();
        assert!(err.to_string().contains("UTF-8"), "{err}");
        assert_eq!(err.offset, 6);
    }

    #[test]
    fn pending_event_is_reported() {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        decoder.decode(b"data: {\"x\"", &mut out).unwrap();
        assert!(decoder.has_pending());
        decoder.decode(b":1}\n", &mut out).unwrap();
        assert!(decoder.has_pending());
        decoder.decode(b"\n", &mut out).unwrap();
        assert!(!decoder.has_pending());
        assert_eq!(out.len(), 1);
        assert_eq!(decoder.offset(), 15);
    }

    #[test]
    fn event_without_data_is_not_dispatched() {
        let events = decode_all(&[b"event: ping\n\ndata: x\n\n"]).unwrap();
        assert_eq!(strip(events), vec![ev("", "x")]);
    }

    #[test]
    fn an_event_of_many_data_lines_is_capped_as_a_whole() {
        let mut decoder = SseDecoder::with_max_event_bytes(1000);
        let mut out = Vec::new();
        decoder.decode(b"data: ok\n\n", &mut out).unwrap();
        let line = format!("data: {}\n", "x".repeat(99));
        let mut result = Ok(());
        for _ in 0..11 {
            result = decoder.decode(line.as_bytes(), &mut out);
            if result.is_err() {
                break;
            }
        }
        let err = result.unwrap_err();
        assert_eq!(err.kind, SseErrorKind::EventTooLarge { limit: 1000 });
        assert_eq!(err.offset, 10, "{err}");
        assert_eq!(out.len(), 1);
        // Many small events of the same total are fine.
        let mut decoder = SseDecoder::with_max_event_bytes(1000);
        for _ in 0..50 {
            decoder.decode(b"data: 0123456789\n\n", &mut out).unwrap();
        }
    }

    #[test]
    fn overlong_line_is_an_error() {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        let big = vec![b'a'; 1024 * 1024];
        let mut result = Ok(());
        for _ in 0..17 {
            result = decoder.decode(&big, &mut out);
            if result.is_err() {
                break;
            }
        }
        assert!(result.unwrap_err().message.contains("longer than"));
    }
}
