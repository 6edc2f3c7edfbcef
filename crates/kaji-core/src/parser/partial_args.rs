//! Renders a tool call's arguments while they stream, so a front end can
//! show a long Write or Edit growing (the partial `ask` of a tool call).
//!
//! The rendering is one line per argument, `name: value`, with string
//! values decoded (a JSON `\n` becomes a line break) and other values as
//! the model wrote them. It only ever grows: text once rendered is never
//! changed, so front ends can append what is new. It is for people only:
//! it must never be parsed or used to run anything (the call runs on its
//! complete arguments, parsed once), and it never fails, whatever the
//! fragments hold.
//!
//! Beside the rendering it keeps the arguments that are complete so far
//! (a string whose closing quote came, a number whose `,` came), for the
//! tool's title while the call streams; an argument still arriving is
//! never in it.

use serde_json::{Map, Value};

/// The rendering of one call's arguments so far.
#[derive(Debug, Default)]
pub(crate) struct ArgsView {
    text: String,
    json: JsonFields,
    /// xml: the parameter the last text belonged to.
    xml_param: Option<String>,
    /// xml: where the last parameter's value starts in `text`.
    xml_start: usize,
    /// xml: the parameters complete so far.
    xml_fields: Map<String, Value>,
}

impl ArgsView {
    /// The rendering so far.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Native calls: the next fragment of the JSON arguments.
    pub(crate) fn feed_json(&mut self, fragment: &str) {
        for c in fragment.chars() {
            self.json.step(c, &mut self.text);
        }
    }

    /// xml calls: more text of parameter `param`. A parameter is complete
    /// once the next one starts.
    pub(crate) fn feed_xml(&mut self, param: &str, text: &str) {
        if self.xml_param.as_deref() != Some(param) {
            if let Some(done) = self.xml_param.take() {
                let value = self.text[self.xml_start..].to_string();
                self.xml_fields.insert(done, Value::String(value));
            }
            start_field(&mut self.text, param);
            self.xml_start = self.text.len();
            self.xml_param = Some(param.to_string());
        }
        self.text.push_str(text);
    }

    /// The arguments complete so far, as a JSON object (strings decoded);
    /// an argument still arriving is left out.
    pub(crate) fn complete_fields(&self) -> Value {
        let mut fields = self.json.fields.clone();
        fields.extend(self.xml_fields.clone());
        Value::Object(fields)
    }
}

fn start_field(out: &mut String, name: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(name);
    out.push_str(": ");
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the opening `{`.
    #[default]
    Start,
    /// The top level is not an object: shown as written.
    Raw,
    /// Inside the object, before a key.
    BeforeKey,
    Key,
    AfterKey,
    BeforeValue,
    /// Inside a string value.
    Str,
    /// Inside any other value (number, literal, array, object).
    Other,
    /// After the closing `}`.
    Done,
}

#[derive(Debug, Default)]
struct JsonFields {
    state: State,
    key: String,
    /// A `\` was read (in a key or a string value).
    escape: bool,
    /// Hex digits of a `\u` escape being read.
    hex: Option<String>,
    /// A high surrogate waiting for its low half.
    high: Option<u16>,
    /// `Other`: nesting depth and string state.
    depth: u32,
    in_string: bool,
    /// Where the current value starts in the rendering.
    value_start: usize,
    /// The arguments complete so far.
    fields: Map<String, Value>,
}

impl JsonFields {
    fn step(&mut self, c: char, out: &mut String) {
        match self.state {
            State::Start => match c {
                '{' => self.state = State::BeforeKey,
                c if c.is_whitespace() => {}
                c => {
                    self.state = State::Raw;
                    out.push(c);
                }
            },
            State::Raw => out.push(c),
            State::BeforeKey => match c {
                '"' => {
                    self.key.clear();
                    self.state = State::Key;
                }
                '}' => self.state = State::Done,
                _ => {}
            },
            State::Key => {
                if self.escape {
                    self.escape = false;
                    self.key.push(c);
                } else if c == '\\' {
                    self.escape = true;
                } else if c == '"' {
                    self.state = State::AfterKey;
                } else {
                    self.key.push(c);
                }
            }
            State::AfterKey => {
                if c == ':' {
                    start_field(out, &self.key);
                    self.value_start = out.len();
                    self.state = State::BeforeValue;
                }
            }
            State::BeforeValue => match c {
                '"' => self.state = State::Str,
                c if c.is_whitespace() => {}
                c => {
                    self.state = State::Other;
                    self.depth = 0;
                    self.in_string = false;
                    self.other(c, out);
                }
            },
            State::Str => self.string_char(c, out),
            State::Other => self.other(c, out),
            State::Done => {}
        }
    }

    fn string_char(&mut self, c: char, out: &mut String) {
        if let Some(hex) = &mut self.hex {
            hex.push(c);
            if hex.len() == 4 {
                let unit = u16::from_str_radix(hex, 16).unwrap_or(0xFFFD);
                self.hex = None;
                self.code_unit(unit, out);
            }
            return;
        }
        if self.escape {
            self.escape = false;
            if c == 'u' {
                self.hex = Some(String::new());
                return;
            }
            self.flush_high(out);
            out.push(match c {
                'n' => '\n',
                't' => '\t',
                'r' => '\r',
                'b' => '\u{8}',
                'f' => '\u{c}',
                other => other,
            });
            return;
        }
        match c {
            '\\' => self.escape = true,
            '"' => {
                self.flush_high(out);
                self.state = State::BeforeKey;
                let value = out.get(self.value_start..).unwrap_or_default();
                self.fields
                    .insert(self.key.clone(), Value::String(value.to_string()));
            }
            c => {
                self.flush_high(out);
                out.push(c);
            }
        }
    }

    fn code_unit(&mut self, unit: u16, out: &mut String) {
        match (self.high.take(), unit) {
            (None, 0xD800..=0xDBFF) => self.high = Some(unit),
            (Some(high), 0xDC00..=0xDFFF) => {
                let code =
                    0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(unit) - 0xDC00);
                out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
            }
            (Some(_), 0xD800..=0xDBFF) => {
                out.push('\u{FFFD}');
                self.high = Some(unit);
            }
            (high, unit) => {
                if high.is_some() {
                    out.push('\u{FFFD}');
                }
                out.push(char::from_u32(u32::from(unit)).unwrap_or('\u{FFFD}'));
            }
        }
    }

    fn flush_high(&mut self, out: &mut String) {
        if self.high.take().is_some() {
            out.push('\u{FFFD}');
        }
    }

    /// A value that is not a string: shown as written, up to the `,` or
    /// `}` that ends it.
    fn other(&mut self, c: char, out: &mut String) {
        if self.in_string {
            if self.escape {
                self.escape = false;
            } else if c == '\\' {
                self.escape = true;
            } else if c == '"' {
                self.in_string = false;
            }
            out.push(c);
            return;
        }
        match c {
            '"' => self.in_string = true,
            '{' | '[' => self.depth += 1,
            '}' | ']' if self.depth == 0 => {
                self.state = State::Done;
                self.other_done(out);
                return;
            }
            '}' | ']' => self.depth -= 1,
            ',' if self.depth == 0 => {
                self.state = State::BeforeKey;
                self.other_done(out);
                return;
            }
            _ => {}
        }
        out.push(c);
    }

    /// A value that is not a string ended: kept when it is valid JSON.
    fn other_done(&mut self, out: &str) {
        let raw = out.get(self.value_start..).unwrap_or_default();
        if let Ok(value) = serde_json::from_str::<Value>(raw.trim()) {
            self.fields.insert(self.key.clone(), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render_in_pieces(json: &str, size: usize) -> String {
        let mut view = ArgsView::default();
        let chars: Vec<char> = json.chars().collect();
        for piece in chars.chunks(size) {
            view.feed_json(&piece.iter().collect::<String>());
        }
        view.text().to_string()
    }

    #[test]
    fn strings_are_decoded_one_line_per_argument() {
        let json = r#"{"file_path": "a.txt", "content": "line 1\nline \"2\"\t\u00e9\ud83d\ude00\n", "replace_all": true, "edits": [{"a": "}"}]}"#;
        let want = "file_path: a.txt\ncontent: line 1\nline \"2\"\t\u{e9}\u{1F600}\n\nreplace_all: true\nedits: [{\"a\": \"}\"}]";
        for size in [1, 2, 3, 7, 1000] {
            assert_eq!(render_in_pieces(json, size), want, "pieces of {size}");
        }
    }

    #[test]
    fn the_rendering_only_grows() {
        let json = r#"{"file_path":"a","content":"x\ny\u0041"}"#;
        let mut view = ArgsView::default();
        let mut last = String::new();
        for c in json.chars() {
            view.feed_json(&c.to_string());
            assert!(
                view.text().starts_with(&last),
                "{last:?} → {:?}",
                view.text()
            );
            last = view.text().to_string();
        }
        assert_eq!(last, "file_path: a\ncontent: x\nyA");
    }

    #[test]
    fn broken_input_never_fails() {
        assert_eq!(render_in_pieces("not json", 3), "not json");
        assert_eq!(
            render_in_pieces(r#"{"a": "\uZZZZ\ud800x"}"#, 2),
            "a: \u{FFFD}\u{FFFD}x"
        );
        assert_eq!(render_in_pieces("", 1), "");
    }

    #[test]
    fn xml_parameters_start_their_own_line() {
        let mut view = ArgsView::default();
        view.feed_xml("file_path", "a.txt");
        view.feed_xml("content", "one\n");
        view.feed_xml("content", "two");
        assert_eq!(view.text(), "file_path: a.txt\ncontent: one\ntwo");
    }

    #[test]
    fn only_complete_arguments_are_fields() {
        let json = r#"{"file_path": "a\"b.txt", "limit": 20, "content": "still com"#;
        let mut view = ArgsView::default();
        let mut seen = Vec::new();
        for c in json.chars() {
            view.feed_json(&c.to_string());
            seen.push(view.complete_fields());
        }
        // A string is a field once its closing quote came, never before.
        assert!(seen.iter().all(
            |f| f.get("file_path").is_none() || f["file_path"] == serde_json::json!("a\"b.txt")
        ));
        assert_eq!(
            view.complete_fields(),
            serde_json::json!({"file_path": "a\"b.txt", "limit": 20})
        );
        let mut xml = ArgsView::default();
        xml.feed_xml("file_path", "a.txt");
        xml.feed_xml("content", "one");
        assert_eq!(
            xml.complete_fields(),
            serde_json::json!({"file_path": "a.txt"})
        );
    }
}
