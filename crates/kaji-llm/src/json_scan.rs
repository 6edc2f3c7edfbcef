//! Tells, fragment by fragment, when streamed tool-call arguments form a
//! complete JSON object or array, without keeping the text: a tool can then
//! start before the rest of the reply arrives.
//!
//! It only tracks nesting, strings and escapes; it never validates the JSON
//! (the caller parses the whole text once the call is closed) and must
//! never allocate.

/// The state of one call's arguments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct JsonScan {
    depth: u32,
    in_string: bool,
    escape: bool,
    started: bool,
    /// The top-level value is not an object or array: never "complete".
    scalar: bool,
    complete: bool,
}

impl JsonScan {
    /// Feeds the next fragment.
    pub(crate) fn feed(&mut self, fragment: &str) {
        for b in fragment.bytes() {
            if self.complete {
                return;
            }
            if !self.started {
                if b.is_ascii_whitespace() {
                    continue;
                }
                self.started = true;
                if b == b'{' || b == b'[' {
                    self.depth = 1;
                } else {
                    self.scalar = true;
                }
                continue;
            }
            if self.scalar {
                continue;
            }
            if self.in_string {
                if self.escape {
                    self.escape = false;
                } else if b == b'\\' {
                    self.escape = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        self.complete = true;
                    }
                }
                _ => {}
            }
        }
    }

    /// Whether the fragments so far close the top-level object or array.
    pub(crate) fn is_complete(&self) -> bool {
        self.complete
    }

    /// Whether nothing but whitespace has been fed.
    pub(crate) fn is_empty(&self) -> bool {
        !self.started
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(parts: &[&str]) -> JsonScan {
        let mut s = JsonScan::default();
        for p in parts {
            s.feed(p);
        }
        s
    }

    #[test]
    fn completeness() {
        assert!(scan(&[" {\"a\":", "1}"]).is_complete());
        assert!(!scan(&["{\"a\":\"}\""]).is_complete());
        assert!(scan(&["{\"a\":\"}\\\"{\"", "}"]).is_complete());
        assert!(!scan(&["{\"a\":{\"b\":[1,2]}"]).is_complete());
        assert!(scan(&["{\"a\":{\"b\":[1,2]}}", "  "]).is_complete());
        assert!(!scan(&["42"]).is_complete());
        assert!(scan(&["  "]).is_empty());
        assert!(!scan(&["{\"s\":\"\\\\\"", "}"]).is_empty());
        assert!(scan(&["{\"s\":\"\\\\\"", "}"]).is_complete());
    }
}
