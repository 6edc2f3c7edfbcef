//! The incremental scanner of reply text: finds `<thinking>` (and
//! `<think>`, as DeepSeek-R1 and Qwen3 write it) sections and,
//! with the xml tool protocol, tool calls written as
//! `<ToolName><param>value</param>…</ToolName>`.
//!
//! The seed's design re-parses the whole reply on every chunk, which is
//! quadratic in the reply's length. This scanner keeps its position and a
//! small pending buffer (at most the length of the longest tag it looks
//! for, plus white space after a closing parameter tag), so the work per
//! chunk is proportional to the chunk. Decisions are only taken once enough
//! text has arrived to take them, so the blocks are the same whatever the
//! chunking.
//!
//! Parameter values are raw text and may contain anything, including other
//! tool names and closing tags of any name. A value of `p` ends at `</p>`
//! only when what follows (after white space) is the opening tag of a
//! parameter of the same tool or the tool's closing tag; otherwise the
//! `</p>` was part of the value.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// How an xml parameter's raw text becomes a JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// The raw text is the string value.
    String,
    /// The raw text is JSON (numbers, booleans, arrays, objects).
    Json,
}

/// The tools the xml protocol recognises, with their parameters.
#[derive(Debug, Clone, Default)]
pub struct XmlToolGrammar {
    tools: HashMap<String, HashMap<String, ParamKind>>,
}

impl XmlToolGrammar {
    /// Builds the grammar from tool specs: each top-level property of the
    /// input schema is a parameter; `"type": "string"` ones are raw text.
    pub fn from_specs(specs: &[kaji_protocol::ToolSpec]) -> Self {
        let mut tools = HashMap::new();
        for spec in specs {
            let mut params = HashMap::new();
            if let Some(props) = spec
                .input_schema
                .get("properties")
                .and_then(Value::as_object)
            {
                for (name, schema) in props {
                    let kind = if schema.get("type").and_then(Value::as_str) == Some("string") {
                        ParamKind::String
                    } else {
                        ParamKind::Json
                    };
                    params.insert(name.clone(), kind);
                }
            }
            tools.insert(spec.name.clone(), params);
        }
        Self { tools }
    }

    /// Adds a tool by hand.
    pub fn add_tool(&mut self, name: &str, params: &[(&str, ParamKind)]) {
        self.tools.insert(
            name.to_string(),
            params.iter().map(|(p, k)| (p.to_string(), *k)).collect(),
        );
    }

    fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// What the scanner reports to its sink.
pub(crate) trait ScanSink {
    /// Reply text outside any tag.
    fn text(&mut self, text: &str);
    /// Text inside `<thinking>`.
    fn thinking(&mut self, text: &str);
    /// `</thinking>` (or the end of the stream inside one).
    fn thinking_end(&mut self);
    /// `<Tool>` was recognised.
    fn tool_start(&mut self, name: &str);
    /// More text of parameter `param` of the open tool (as scanned, for
    /// showing the call while it streams).
    fn tool_param(&mut self, _param: &str, _text: &str) {}
    /// The tool call ended: `input` is the parsed arguments or why they are
    /// not usable; `complete` is false when the reply ended inside it.
    fn tool_end(&mut self, name: &str, input: Result<Value, String>, complete: bool);
}

#[derive(Debug, Clone)]
enum Mode {
    Text,
    /// Inside `<thinking>` or `<think>`; the field is the closing tag.
    Thinking(&'static str),
    /// Inside `<Tool>`, between parameters.
    ToolBetween,
    /// Inside `<param>` of the current tool.
    ToolParam {
        param: String,
    },
    /// `</param>` seen; deciding whether it really closes the value.
    ParamClose {
        param: String,
        lookahead: String,
    },
}

#[derive(Debug)]
struct OpenTool {
    name: String,
    params: Vec<(String, String)>,
    value: String,
    junk: String,
}

/// The incremental scanner. Feed it text with [`TextScanner::feed`], and
/// call [`TextScanner::finish`] once at the end of the reply.
#[derive(Debug)]
pub(crate) struct TextScanner {
    grammar: XmlToolGrammar,
    mode: Mode,
    /// A possible tag being matched, starting with `<`.
    pending: String,
    tool: Option<OpenTool>,
    max_tag_len: usize,
}

/// The reasoning tags, opening and closing: `<thinking>` (kaji's prompt)
/// and `<think>` (DeepSeek-R1, Qwen3 and other open models).
const THINK_TAGS: [(&str, &str); 2] = [("<thinking>", "</thinking>"), ("<think>", "</think>")];
const THINK_CLOSE: &str = "</thinking>";

impl TextScanner {
    pub(crate) fn new(grammar: XmlToolGrammar) -> Self {
        let max_tool = grammar.tools.keys().map(|k| k.len()).max().unwrap_or(0);
        let max_param = grammar
            .tools
            .values()
            .flat_map(|p| p.keys().map(|k| k.len()))
            .max()
            .unwrap_or(0);
        let max_tag_len = THINK_CLOSE.len().max(max_tool.max(max_param) + 3);
        Self {
            grammar,
            mode: Mode::Text,
            pending: String::new(),
            tool: None,
            max_tag_len,
        }
    }

    /// Scans one chunk of reply text.
    pub(crate) fn feed(&mut self, chunk: &str, sink: &mut dyn ScanSink) {
        let mut rest = chunk;
        while !rest.is_empty() {
            rest = self.step(rest, sink);
        }
    }

    /// One step: consumes a prefix of `input`, returns the rest.
    fn step<'a>(&mut self, input: &'a str, sink: &mut dyn ScanSink) -> &'a str {
        if let Mode::ParamClose { .. } = self.mode {
            let c = first_char(input);
            self.param_close_char(c, sink);
            return &input[c.len_utf8()..];
        }
        if !self.pending.is_empty() {
            let c = first_char(input);
            self.pending.push(c);
            self.match_pending(sink);
            return &input[c.len_utf8()..];
        }
        match memchr::memchr(b'<', input.as_bytes()) {
            Some(i) => {
                self.content(&input[..i], sink);
                self.pending.push('<');
                &input[i + 1..]
            }
            None => {
                self.content(input, sink);
                ""
            }
        }
    }

    /// Plain content in the current mode.
    fn content(&mut self, s: &str, sink: &mut dyn ScanSink) {
        if s.is_empty() {
            return;
        }
        match &self.mode {
            Mode::Text => sink.text(s),
            Mode::Thinking(_) => sink.thinking(s),
            Mode::ToolBetween => {
                if let Some(tool) = &mut self.tool {
                    tool.junk.push_str(s);
                }
            }
            Mode::ToolParam { param } => {
                if let Some(tool) = &mut self.tool {
                    tool.value.push_str(s);
                    sink.tool_param(param, s);
                }
            }
            Mode::ParamClose { .. } => unreachable!("handled char by char"),
        }
    }

    /// Decides what the pending `<…` is, once it can.
    fn match_pending(&mut self, sink: &mut dyn ScanSink) {
        let Some(decision) = self.classify_pending() else {
            if self.pending.len() > self.max_tag_len {
                self.no_match(sink);
            }
            return;
        };
        self.take_match(decision, sink);
    }

    /// What the pending `<…` is in the current mode; `None` while it may
    /// still become a tag.
    fn classify_pending(&self) -> Option<Match> {
        let pending = self.pending.as_str();
        match &self.mode {
            Mode::Text => {
                if let Some((_, close)) = THINK_TAGS.iter().find(|(open, _)| pending == *open) {
                    Some(Match::ThinkOpen(close))
                } else if let Some(name) = self.tool_open_name(pending) {
                    Some(Match::ToolOpen(name))
                } else if THINK_TAGS.iter().any(|(open, _)| open.starts_with(pending))
                    || self.could_open_tool(pending)
                {
                    None
                } else {
                    Some(Match::Literal)
                }
            }
            Mode::Thinking(close) => {
                if pending == *close {
                    Some(Match::ThinkClose)
                } else if close.starts_with(pending) {
                    None
                } else {
                    Some(Match::Literal)
                }
            }
            Mode::ToolBetween => match self.between_tag(pending) {
                TagMatch::Param(p) => Some(Match::ParamOpen(p)),
                TagMatch::ToolClose => Some(Match::ToolClose),
                TagMatch::Prefix => None,
                TagMatch::No => Some(Match::Literal),
            },
            Mode::ToolParam { param } => {
                let close_len = param.len() + 3;
                if pending.len() == close_len && is_close_tag(pending, param) {
                    Some(Match::ParamClose)
                } else if pending.len() < close_len && is_close_tag_prefix(pending, param) {
                    None
                } else {
                    Some(Match::Literal)
                }
            }
            Mode::ParamClose { .. } => unreachable!("handled char by char"),
        }
    }

    /// Acts on what the pending `<…` turned out to be.
    fn take_match(&mut self, decision: Match, sink: &mut dyn ScanSink) {
        match decision {
            Match::Literal => self.no_match(sink),
            Match::ThinkOpen(close) => {
                self.pending.clear();
                self.mode = Mode::Thinking(close);
            }
            Match::ThinkClose => {
                self.pending.clear();
                self.mode = Mode::Text;
                sink.thinking_end();
            }
            Match::ToolOpen(name) => {
                self.pending.clear();
                sink.tool_start(&name);
                self.tool = Some(OpenTool {
                    name,
                    params: Vec::new(),
                    value: String::new(),
                    junk: String::new(),
                });
                self.mode = Mode::ToolBetween;
            }
            Match::ParamOpen(param) => {
                self.pending.clear();
                if let Some(tool) = &mut self.tool {
                    tool.value.clear();
                }
                self.mode = Mode::ToolParam { param };
            }
            Match::ToolClose => {
                self.pending.clear();
                self.close_tool(sink, true);
            }
            Match::ParamClose => {
                self.pending.clear();
                let Mode::ToolParam { param } = std::mem::replace(&mut self.mode, Mode::Text)
                else {
                    unreachable!()
                };
                self.mode = Mode::ParamClose {
                    param,
                    lookahead: String::new(),
                };
            }
        }
    }

    /// The pending text is not a tag: its `<` is content, and what follows
    /// it is scanned again.
    fn no_match(&mut self, sink: &mut dyn ScanSink) {
        let pending = std::mem::take(&mut self.pending);
        self.content("<", sink);
        self.feed(&pending[1..], sink);
    }

    fn tool_open_name(&self, pending: &str) -> Option<String> {
        let name = pending.strip_prefix('<')?.strip_suffix('>')?;
        self.grammar
            .tools
            .contains_key(name)
            .then(|| name.to_string())
    }

    fn could_open_tool(&self, pending: &str) -> bool {
        if self.grammar.is_empty() {
            return false;
        }
        let Some(partial) = pending.strip_prefix('<') else {
            return false;
        };
        self.grammar
            .tools
            .keys()
            .any(|name| name.starts_with(partial))
    }

    /// Matches a tag between parameters: `<param>` of the open tool or
    /// `</Tool>`.
    fn between_tag(&self, tag: &str) -> TagMatch {
        let Some(tool) = &self.tool else {
            return TagMatch::No;
        };
        let Some(params) = self.grammar.tools.get(&tool.name) else {
            return TagMatch::No;
        };
        if is_close_tag(tag, &tool.name) {
            return TagMatch::ToolClose;
        }
        if let Some(name) = tag.strip_prefix('<').and_then(|t| t.strip_suffix('>'))
            && params.contains_key(name)
        {
            return TagMatch::Param(name.to_string());
        }
        let prefix = is_close_tag_prefix(tag, &tool.name)
            || tag
                .strip_prefix('<')
                .is_some_and(|partial| params.keys().any(|p| p.starts_with(partial)));
        if prefix {
            TagMatch::Prefix
        } else {
            TagMatch::No
        }
    }

    /// One character after `</param>`: white space, then `<q>` or
    /// `</Tool>` confirms the close; anything else puts the text back into
    /// the value.
    fn param_close_char(&mut self, c: char, sink: &mut dyn ScanSink) {
        let Mode::ParamClose { lookahead, .. } = &mut self.mode else {
            unreachable!()
        };
        lookahead.push(c);
        let tag = lookahead.find('<').map(|i| lookahead[i..].to_string());
        let verdict = match tag {
            None if c.is_whitespace() => TagMatch::Prefix,
            None => TagMatch::No,
            Some(tag) => match self.between_tag(&tag) {
                TagMatch::Prefix if tag.len() > self.max_tag_len => TagMatch::No,
                other => other,
            },
        };
        if let TagMatch::Prefix = verdict {
            return;
        }
        let Mode::ParamClose { param, lookahead } = std::mem::replace(&mut self.mode, Mode::Text)
        else {
            unreachable!()
        };
        match verdict {
            TagMatch::Prefix => {}
            TagMatch::No => {
                if let Some(tool) = &mut self.tool {
                    tool.value.push_str("</");
                    tool.value.push_str(&param);
                    tool.value.push('>');
                    sink.tool_param(&param, &format!("</{param}>"));
                }
                self.mode = Mode::ToolParam { param };
                self.feed(&lookahead, sink);
            }
            TagMatch::Param(next) => {
                self.commit_param(param);
                self.mode = Mode::ToolParam { param: next };
            }
            TagMatch::ToolClose => {
                self.commit_param(param);
                self.close_tool(sink, true);
            }
        }
    }

    fn commit_param(&mut self, param: String) {
        if let Some(tool) = &mut self.tool {
            let value = std::mem::take(&mut tool.value);
            tool.params.push((param, value));
        }
    }

    fn close_tool(&mut self, sink: &mut dyn ScanSink, complete: bool) {
        self.mode = Mode::Text;
        let Some(tool) = self.tool.take() else { return };
        let input = self.build_input(&tool);
        sink.tool_end(&tool.name, input, complete);
    }

    fn build_input(&self, tool: &OpenTool) -> Result<Value, String> {
        let kinds = self.grammar.tools.get(&tool.name);
        let junk = tool.junk.trim();
        if !junk.is_empty() {
            return Err(format!(
                "unexpected text inside <{0}> outside any parameter tag: {1:?}; write each argument as <param>value</param> inside <{0}>…</{0}>",
                tool.name,
                truncate(junk, 80)
            ));
        }
        let mut map = Map::new();
        for (name, raw) in &tool.params {
            let kind = kinds
                .and_then(|k| k.get(name))
                .copied()
                .unwrap_or(ParamKind::String);
            let value = match kind {
                ParamKind::String => Value::String(string_param(name, raw)),
                ParamKind::Json => {
                    let trimmed = raw.trim();
                    match serde_json::from_str(trimmed) {
                        Ok(v) => v,
                        Err(e) => {
                            return Err(format!(
                                "parameter <{name}> of <{}> is not valid JSON ({e}): {:?}",
                                tool.name,
                                truncate(trimmed, 80)
                            ));
                        }
                    }
                }
            };
            if map.insert(name.clone(), value).is_some() {
                return Err(format!(
                    "parameter <{name}> is given twice in <{}>",
                    tool.name
                ));
            }
        }
        Ok(Value::Object(map))
    }

    /// Ends the reply: pending text is flushed, an open thinking section
    /// closed, and an open tool call ended (complete only if every
    /// parameter it has was closed).
    pub(crate) fn finish(&mut self, sink: &mut dyn ScanSink) {
        match std::mem::replace(&mut self.mode, Mode::Text) {
            Mode::ParamClose { param, .. } => {
                self.commit_param(param);
                self.pending.clear();
                self.close_tool(sink, true);
            }
            Mode::ToolBetween => {
                self.pending.clear();
                self.close_tool(sink, true);
            }
            Mode::ToolParam { param } => {
                let pending = std::mem::take(&mut self.pending);
                if let Some(tool) = &mut self.tool {
                    tool.value.push_str(&pending);
                }
                self.commit_param(param);
                self.close_tool(sink, false);
            }
            Mode::Thinking(_) => {
                let pending = std::mem::take(&mut self.pending);
                if !pending.is_empty() {
                    sink.thinking(&pending);
                }
                sink.thinking_end();
            }
            Mode::Text => {
                let pending = std::mem::take(&mut self.pending);
                if !pending.is_empty() {
                    sink.text(&pending);
                }
            }
        }
    }
}

enum Match {
    Literal,
    ThinkOpen(&'static str),
    ThinkClose,
    ToolOpen(String),
    ParamOpen(String),
    ParamClose,
    ToolClose,
}

enum TagMatch {
    Param(String),
    ToolClose,
    Prefix,
    No,
}

fn first_char(s: &str) -> char {
    s.chars().next().unwrap_or('\0')
}

fn is_close_tag(tag: &str, name: &str) -> bool {
    tag.len() == name.len() + 3
        && tag.starts_with("</")
        && tag.ends_with('>')
        && &tag[2..tag.len() - 1] == name
}

fn is_close_tag_prefix(tag: &str, name: &str) -> bool {
    match tag.len() {
        0 => true,
        1 => tag == "<",
        _ => {
            tag.starts_with("</") && {
                let rest = &tag[2..];
                name.starts_with(rest) || rest.strip_suffix('>') == Some(name)
            }
        }
    }
}

/// A string parameter's value from its raw text. A parameter that names a
/// path is trimmed (a path never starts or ends with white space the model
/// meant); `content` (what `Write` writes) loses only the newline after its
/// opening tag, so a file keeps its final newline; any other loses one
/// newline at each end.
fn string_param(name: &str, raw: &str) -> String {
    if name == "path" || name.ends_with("_path") {
        raw.trim().to_string()
    } else if name == "content" {
        raw.strip_prefix("\r\n")
            .or_else(|| raw.strip_prefix('\n'))
            .unwrap_or(raw)
            .to_string()
    } else {
        strip_one_newline(raw).to_string()
    }
}

fn strip_one_newline(s: &str) -> &str {
    let s = s
        .strip_prefix("\r\n")
        .or_else(|| s.strip_prefix('\n'))
        .unwrap_or(s);
    s.strip_suffix("\r\n")
        .or_else(|| s.strip_suffix('\n'))
        .unwrap_or(s)
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let cut: String = s.chars().take(max).collect();
        format!("{cut}…")
    }
}
