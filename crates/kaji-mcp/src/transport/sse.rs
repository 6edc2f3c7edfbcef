//! A small decoder of server-sent events (`text/event-stream`) for the
//! streamable HTTP transport: bytes in as they arrive, split anywhere; the
//! `data` of each complete event out (its `data:` lines joined with `\n`).
//! `event`, `id`, `retry`, unknown fields and `:` comments are skipped.
//!
//! It must never allocate without bound (a line or event over
//! [`MAX_EVENT_BYTES`] is an error) and never panic on input; bytes that
//! are not UTF-8 are an error.

/// The largest event (or line) accepted.
pub(crate) const MAX_EVENT_BYTES: usize = 32 * 1024 * 1024;

/// Decodes one event stream.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    line: Vec<u8>,
    data: Option<String>,
    offset: u64,
}

impl SseDecoder {
    /// Takes the next bytes; returns the data of the events they complete.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<String>, String> {
        let mut events = Vec::new();
        for &byte in chunk {
            self.offset += 1;
            if byte != b'\n' {
                self.line.push(byte);
                if self.line.len() > MAX_EVENT_BYTES {
                    return Err(self.error(&format!("a line longer than {MAX_EVENT_BYTES} bytes")));
                }
                continue;
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            let line = std::mem::take(&mut self.line);
            self.take_line(&line, &mut events)?;
        }
        Ok(events)
    }

    /// The end of the stream: the data of an event left without its blank
    /// line (kept rather than lost).
    pub fn finish(&mut self) -> Result<Option<String>, String> {
        let mut events = Vec::new();
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.take_line(&line, &mut events)?;
        }
        Ok(events.pop().or_else(|| self.data.take()))
    }

    fn take_line(&mut self, line: &[u8], events: &mut Vec<String>) -> Result<(), String> {
        if line.is_empty() {
            events.extend(self.data.take());
            return Ok(());
        }
        let line = std::str::from_utf8(line).map_err(|_| self.error("bytes that are not UTF-8"))?;
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        if field != "data" {
            return Ok(());
        }
        let value = value.strip_prefix(' ').unwrap_or(value);
        let data = self.data.get_or_insert_with(String::new);
        if data.len() + value.len() > MAX_EVENT_BYTES {
            return Err(self.error(&format!("an event larger than {MAX_EVENT_BYTES} bytes")));
        }
        if !data.is_empty() || !value.is_empty() {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(value);
        }
        Ok(())
    }

    fn error(&self, what: &str) -> String {
        format!("malformed event stream: {what} near byte {}", self.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_anywhere_are_joined() {
        let stream =
            b": comment\r\nevent: message\r\nid: 7\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\ndata: x\n\n";
        for cut in 0..stream.len() {
            let mut decoder = SseDecoder::default();
            let mut events = decoder.push(&stream[..cut]).unwrap();
            events.extend(decoder.push(&stream[cut..]).unwrap());
            assert_eq!(events, ["{\"a\":\n1}", "x"], "cut at {cut}");
        }
    }

    #[test]
    fn a_last_event_without_blank_line_is_kept() {
        let mut decoder = SseDecoder::default();
        assert!(decoder.push(b"data: last").unwrap().is_empty());
        assert_eq!(decoder.finish().unwrap().as_deref(), Some("last"));
    }

    #[test]
    fn bytes_that_are_not_utf8_are_an_error() {
        let mut decoder = SseDecoder::default();
        let err = decoder.push(b"data: \xff\xfe\n\n").unwrap_err();
        assert!(err.contains("not UTF-8"), "{err}");
    }
}
