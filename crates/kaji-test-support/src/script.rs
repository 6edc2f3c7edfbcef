//! What the scripted model server answers: a [`Script`] of [`Turn`]s, each
//! made of [`Part`]s (text, reasoning, tool calls) and optional [`Fault`]s
//! served to the first attempts of the turn.
//!
//! Everything here is plain serde data so a script can live in a JSON file
//! (`kaji-scripted-model --script FILE.json`, `kaji demo`), plus builders
//! that make scripts short to write in tests. This module must never do
//! network I/O.

use std::path::Path;

use kaji_protocol::Usage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Text bytes per streamed delta unless a turn says otherwise.
pub const DEFAULT_CHUNK_SIZE: usize = 8;

/// A whole conversation's worth of model replies. Turn `n` (0-based) answers
/// a request that already holds `n` assistant messages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Script {
    /// The replies, in order.
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// A fault served to every request, whatever its turn and attempt
    /// (instead of the turns' own faults). A request past the last turn is
    /// then answered from the last turn, so the fault never runs out: e.g.
    /// [`Fault::BreakAfterFirstContent`] makes a stream that always breaks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_request: Option<Fault>,
    /// Requests whose body is larger than this many bytes are rejected with
    /// the provider's real context-length error (HTTP 400; Anthropic
    /// `prompt is too long: N tokens > M maximum`, OpenAI
    /// `context_length_exceeded`), counting 4 bytes as a token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_bytes: Option<usize>,
    /// Requests whose last message holds a marker get a fixed turn instead
    /// of the one their history counts to (a compaction's summary request,
    /// the first request after it). The first matching route wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    /// Scripts of other agents: a request whose system prompt contains an
    /// entry's `marker` is answered from that entry's script (the first
    /// matching entry wins), with turns counted in that request alone, so
    /// each agent (a sub-agent, a teammate) gets its own conversation.
    /// Requests that match no marker get this script's turns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentScript>,
}

/// A request whose last message contains `contains` gets turn `turn`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Route {
    /// Text to look for in the last message (its JSON, as sent).
    pub contains: String,
    /// The turn (an index into the script's turns) it gets.
    pub turn: usize,
}

/// The script of the agents whose system prompt contains `marker`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentScript {
    /// Text the agent's system prompt contains.
    pub marker: String,
    /// Its replies.
    pub script: Script,
}

/// Why a script could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read script {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The JSON does not describe a script.
    #[error("invalid script {path} at line {line}, column {column}: {message}")]
    Parse {
        /// The file (or `<string>`).
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
}

impl Script {
    /// A script of these turns.
    pub fn new(turns: impl IntoIterator<Item = Turn>) -> Self {
        Self {
            turns: turns.into_iter().collect(),
            ..Self::default()
        }
    }

    /// Serves `fault` to every request (see [`Script::every_request`]).
    pub fn with_fault_on_every_request(mut self, fault: Fault) -> Self {
        self.every_request = Some(fault);
        self
    }

    /// Routes requests whose last message contains `marker` to `turn`.
    pub fn with_route(mut self, marker: impl Into<String>, turn: usize) -> Self {
        self.routes.push(Route {
            contains: marker.into(),
            turn,
        });
        self
    }

    /// Rejects requests larger than `bytes` with the provider's real
    /// context-length error (see [`Script::max_request_bytes`]).
    pub fn with_max_request_bytes(mut self, bytes: usize) -> Self {
        self.max_request_bytes = Some(bytes);
        self
    }

    /// Answers requests whose system prompt contains `marker` from
    /// `script` (see [`Script::agents`]).
    pub fn with_agent(mut self, marker: impl Into<String>, script: Script) -> Self {
        self.agents.push(AgentScript {
            marker: marker.into(),
            script,
        });
        self
    }

    /// The script that answers a request with this system prompt, and the
    /// index of its [`Script::agents`] entry (`None`: this script).
    pub fn route(&self, system: &str) -> (Option<usize>, &Script) {
        match self
            .agents
            .iter()
            .position(|a| !a.marker.is_empty() && system.contains(&a.marker))
        {
            Some(i) => (Some(i), &self.agents[i].script),
            None => (None, self),
        }
    }

    /// Parses a script from JSON text.
    pub fn from_json(text: &str) -> Result<Self, ScriptError> {
        Self::parse(text, "<string>")
    }

    /// Reads a script from a JSON file.
    pub fn load(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    fn parse(text: &str, path: &str) -> Result<Self, ScriptError> {
        serde_json::from_str(text).map_err(|e| ScriptError::Parse {
            path: path.to_string(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })
    }
}

impl From<Vec<Turn>> for Script {
    fn from(turns: Vec<Turn>) -> Self {
        Self::new(turns)
    }
}

impl From<Turn> for Script {
    fn from(turn: Turn) -> Self {
        Self::new([turn])
    }
}

impl<const N: usize> From<[Turn; N]> for Script {
    fn from(turns: [Turn; N]) -> Self {
        Self::new(turns)
    }
}

/// One model reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Turn {
    /// What the reply contains, in order.
    pub parts: Vec<Part>,
    /// Faults served instead of (or on top of) the reply to the first
    /// attempts of this turn: attempt 1 gets `faults[0]`, attempt 2
    /// `faults[1]`, …; later attempts get the plain reply.
    pub faults: Vec<Fault>,
    /// Bytes of text (or tool arguments) per streamed delta.
    pub chunk_size: usize,
    /// Token usage to report; when unset, a deterministic estimate (request
    /// body bytes / 4 in, reply bytes / 4 out, at least 1 each).
    pub usage: Option<Usage>,
    /// Send no usage at all (a server that ignores `stream_options`).
    pub omit_usage: bool,
    /// Stop reason in Anthropic's words (`end_turn`, `tool_use`,
    /// `max_tokens`, `stop_sequence`, `refusal`); when unset, `tool_use` if
    /// the turn calls a tool, else `end_turn`. For OpenAI it is translated
    /// (`stop`, `tool_calls`, `length`, `content_filter`).
    pub stop_reason: Option<String>,
    /// With `stop_reason: "refusal"`: Anthropic sends it as
    /// `stop_details.explanation`, OpenAI as `delta.refusal` text.
    pub refusal_explanation: Option<String>,
    /// With `stop_reason: "refusal"`: Anthropic's `stop_details.category`.
    pub refusal_category: Option<String>,
    /// Anthropic: content blocks are numbered from the last down (never
    /// from 0); OpenAI: tool calls are indexed from the last down.
    pub out_of_order: bool,
    /// Every event carries fields no API defines (at the top level and in
    /// `message`, `content_block`, `delta` and `choices[]`).
    pub extra_fields: bool,
    /// OpenAI: the delta field reasoning goes in, `reasoning_content`
    /// (DeepSeek, vLLM; the default) or `reasoning` (Ollama, OpenRouter).
    pub reasoning_field: Option<String>,
    /// The stream of the turn's first tool call holds (as at a
    /// [`Part::Hold`]) once this many bytes of its arguments are sent, so a
    /// test can see what arrives while a call is still streaming.
    pub hold_in_arguments: Option<usize>,
}

impl Default for Turn {
    fn default() -> Self {
        Self {
            parts: Vec::new(),
            faults: Vec::new(),
            chunk_size: DEFAULT_CHUNK_SIZE,
            usage: None,
            omit_usage: false,
            stop_reason: None,
            refusal_explanation: None,
            refusal_category: None,
            out_of_order: false,
            extra_fields: false,
            reasoning_field: None,
            hold_in_arguments: None,
        }
    }
}

impl Turn {
    /// An empty turn (no text, no tool call) to build on.
    pub fn new() -> Self {
        Self::default()
    }

    /// A turn that replies with `text`.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new().and_text(text)
    }

    /// A turn that calls one tool, with a generated call id.
    pub fn tool_call(name: impl Into<String>, input: Value) -> Self {
        Self::new().and_tool_call(name, input)
    }

    /// A turn that only reasons.
    pub fn reasoning(text: impl Into<String>) -> Self {
        Self::new().and_reasoning(text)
    }

    /// Adds text.
    pub fn and_text(mut self, text: impl Into<String>) -> Self {
        self.parts.push(Part::Text { text: text.into() });
        self
    }

    /// Adds reasoning (Anthropic: a signed thinking block; OpenAI:
    /// `delta.reasoning_content`).
    pub fn and_reasoning(mut self, text: impl Into<String>) -> Self {
        self.parts.push(Part::Reasoning { text: text.into() });
        self
    }

    /// Adds redacted reasoning (Anthropic only; OpenAI leaves it out).
    pub fn and_redacted_reasoning(mut self, data: impl Into<String>) -> Self {
        self.parts
            .push(Part::RedactedReasoning { data: data.into() });
        self
    }

    /// Adds a tool call with a generated id.
    pub fn and_tool_call(mut self, name: impl Into<String>, input: Value) -> Self {
        self.parts.push(Part::ToolCall {
            id: None,
            name: name.into(),
            input,
        });
        self
    }

    /// Adds a tool call with the given id.
    pub fn and_tool_call_with_id(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        input: Value,
    ) -> Self {
        self.parts.push(Part::ToolCall {
            id: Some(id.into()),
            name: name.into(),
            input,
        });
        self
    }

    /// Adds a tool call whose arguments are sent verbatim (possibly not
    /// valid JSON).
    pub fn and_raw_tool_call(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        self.parts.push(Part::RawToolCall {
            id: Some(id.into()),
            name: name.into(),
            arguments: arguments.into(),
        });
        self
    }

    /// A turn the provider refuses: `stop_reason: "refusal"` with this
    /// explanation (see [`Turn::refusal_explanation`]).
    pub fn refusal(explanation: impl Into<String>) -> Self {
        let mut turn = Self::new().with_stop_reason("refusal");
        turn.refusal_explanation = Some(explanation.into());
        turn
    }

    /// A turn cut off by the output limit in the middle of a tool call: a
    /// call to `name` whose arguments are `partial_arguments` (incomplete
    /// JSON), then `stop_reason: "max_tokens"` (OpenAI `length`).
    pub fn cut_off_in_tool_call(
        name: impl Into<String>,
        partial_arguments: impl Into<String>,
    ) -> Self {
        let mut turn = Self::new().with_stop_reason("max_tokens");
        turn.parts.push(Part::RawToolCall {
            id: None,
            name: name.into(),
            arguments: partial_arguments.into(),
        });
        turn
    }

    /// Adds a server-side tool use the client must ignore: Anthropic
    /// `server_tool_use` and `web_search_tool_result` blocks, OpenAI an
    /// `annotations` delta.
    pub fn and_server_tool_use(mut self, name: impl Into<String>, input: Value) -> Self {
        self.parts.push(Part::ServerToolUse {
            name: name.into(),
            input,
        });
        self
    }

    /// Adds reply text that cites the last web search's result: Anthropic
    /// a text block with a `web_search_result_location` citation (a
    /// `citations_delta`), the Responses API an output text with a
    /// `url_citation` annotation, Chat Completions plain text.
    pub fn and_cited_text(mut self, text: impl Into<String>) -> Self {
        self.parts.push(Part::CitedText { text: text.into() });
        self
    }

    /// Holds the stream at this point until the test calls
    /// [`crate::ScriptedModelServer::release`].
    pub fn and_hold(mut self) -> Self {
        self.parts.push(Part::Hold);
        self
    }

    /// Holds the stream inside the first tool call's arguments, after
    /// `bytes` of them (see [`Turn::hold_in_arguments`]).
    pub fn with_hold_in_arguments(mut self, bytes: usize) -> Self {
        self.hold_in_arguments = Some(bytes);
        self
    }

    /// Numbers blocks and tool calls out of order (see [`Turn::out_of_order`]).
    pub fn out_of_order(mut self) -> Self {
        self.out_of_order = true;
        self
    }

    /// Adds unknown fields to every event (see [`Turn::extra_fields`]).
    pub fn with_extra_fields(mut self) -> Self {
        self.extra_fields = true;
        self
    }

    /// Adds a fault for the next attempt that has none yet.
    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.faults.push(fault);
        self
    }

    /// Adds several faults, one per attempt, in order.
    pub fn with_faults(mut self, faults: impl IntoIterator<Item = Fault>) -> Self {
        self.faults.extend(faults);
        self
    }

    /// Sets the streamed chunk size (at least 1).
    pub fn with_chunk_size(mut self, bytes: usize) -> Self {
        self.chunk_size = bytes.max(1);
        self
    }

    /// Sets the reported usage.
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Reports no usage at all.
    pub fn without_usage(mut self) -> Self {
        self.omit_usage = true;
        self
    }

    /// Sets the stop reason (Anthropic's words, see [`Turn::stop_reason`]).
    pub fn with_stop_reason(mut self, reason: impl Into<String>) -> Self {
        self.stop_reason = Some(reason.into());
        self
    }

    /// Whether the turn calls a tool.
    pub fn calls_tools(&self) -> bool {
        self.parts
            .iter()
            .any(|p| matches!(p, Part::ToolCall { .. } | Part::RawToolCall { .. }))
    }
}

/// One piece of a scripted reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    /// Reply text, streamed in chunks. Text written in the XML tool
    /// protocol (`<Read><file_path>…</file_path></Read>`) is just text.
    Text {
        /// The text.
        text: String,
    },
    /// Reasoning text.
    Reasoning {
        /// The text.
        text: String,
    },
    /// Anthropic `redacted_thinking` data.
    RedactedReasoning {
        /// Opaque data.
        data: String,
    },
    /// A tool call with JSON arguments.
    ToolCall {
        /// Call id; generated (`toolu_scripted_{turn}_{n}` /
        /// `call_scripted_{turn}_{n}`) when absent.
        #[serde(default)]
        id: Option<String>,
        /// Tool name.
        name: String,
        /// Arguments.
        #[serde(default = "empty_object")]
        input: Value,
    },
    /// A tool call whose argument text is sent as is.
    RawToolCall {
        /// Call id; generated when absent.
        #[serde(default)]
        id: Option<String>,
        /// Tool name.
        name: String,
        /// Raw argument text.
        arguments: String,
    },
    /// A tool the provider runs itself (web search), which a client must
    /// ignore: Anthropic `server_tool_use` (with `input_json_delta`s) and
    /// `web_search_tool_result` blocks; OpenAI a `delta.annotations` chunk.
    ServerToolUse {
        /// Tool name, e.g. `web_search`.
        name: String,
        /// Its input.
        #[serde(default = "empty_object")]
        input: Value,
    },
    /// Reply text citing the last web search's result (see
    /// [`Turn::and_cited_text`]).
    CitedText {
        /// The text.
        text: String,
    },
    /// The stream stops here until the test calls
    /// [`crate::ScriptedModelServer::release`]; then it goes on.
    Hold,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// A failure served to one attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Fault {
    /// An HTTP error status, with optional `retry-after` /
    /// `retry-after-ms` headers and body (default: a JSON error in the
    /// provider's format).
    Status {
        /// The status code.
        code: u16,
        /// `retry-after` header, seconds.
        #[serde(default)]
        retry_after_secs: Option<u64>,
        /// `retry-after-ms` header.
        #[serde(default)]
        retry_after_ms: Option<u64>,
        /// Raw body; a body starting with `<` is sent as `text/html`.
        #[serde(default)]
        body: Option<String>,
    },
    /// The reply is cut after this many bytes of the body and the
    /// connection is aborted.
    DropMidStream {
        /// Body bytes sent first.
        after_bytes: usize,
    },
    /// The first event, then a line that is not server-sent events.
    MalformedSse,
    /// The first event, then an event whose data is not valid JSON.
    InvalidJsonChunk,
    /// `200 OK` with an HTML page instead of an event stream.
    HtmlErrorPage,
    /// `200 OK` with a JSON error body instead of an event stream.
    #[serde(rename = "error_body_with_200")]
    ErrorBodyWith200,
    /// The normal reply, with a pause before every event.
    Slow {
        /// The pause.
        delay_ms: u64,
    },
    /// A complete reply with no text and no tool call.
    Empty,
    /// Sends this many body bytes, then keeps the connection open without
    /// sending anything until the client goes away.
    Stall {
        /// Body bytes sent first.
        after_bytes: usize,
    },
    /// Anthropic: an `overloaded_error` event after `message_start`;
    /// OpenAI: HTTP 503.
    Overloaded,
    /// The reply up to and including its first content event (text,
    /// reasoning or tool call), then the connection is aborted. With
    /// [`Script::with_fault_on_every_request`], a stream that always breaks.
    BreakAfterFirstContent,
    /// The first event, then one event spread over `lines` `data:` lines of
    /// `line_bytes` bytes each (valid JSON padded with whitespace), then the
    /// rest of the reply.
    ManyDataLines {
        /// `data:` lines in the event.
        lines: usize,
        /// Bytes per line.
        line_bytes: usize,
    },
    /// The reply starts and its text never ends: text deltas of
    /// `chunk_size` bytes, for ever, until the client goes away.
    Endless,
    /// The first event, then only keep-alives for ever: Anthropic `ping`
    /// events and SSE comments; OpenAI SSE comments. One every
    /// `interval_ms` (default 5).
    PingsOnly {
        /// Pause between keep-alives.
        #[serde(default = "default_ping_interval")]
        interval_ms: u64,
    },
    /// The normal reply, but OpenAI sends every tool call with `index: 0`
    /// (each with its own id), as some compatible servers do. Anthropic is
    /// unchanged.
    ToolCallsIndexZero,
    /// The normal reply with a line without a colon (`keep-alive`) before
    /// every event, which the SSE spec says to ignore.
    ColonlessLines,
    /// OpenAI: the normal reply, every chunk with choices followed by a
    /// chunk of choice 1 (`n` > 1) whose text is `OTHER CHOICE`. Anthropic
    /// and Responses are unchanged.
    ExtraChoices,
    /// HTTP 400 with a real server's context-length error. `server` is one
    /// of `anthropic`, `openai`, `vllm`, `llama.cpp`, `ollama`,
    /// `lmstudio`; by default the request's own provider.
    ContextLengthExceeded {
        /// Whose wording.
        #[serde(default)]
        server: Option<String>,
    },
}

fn default_ping_interval() -> u64 {
    5
}

impl Fault {
    /// HTTP `code` with the default error body.
    pub fn status(code: u16) -> Self {
        Fault::Status {
            code,
            retry_after_secs: None,
            retry_after_ms: None,
            body: None,
        }
    }

    /// HTTP 429 with `retry-after-ms`.
    pub fn rate_limited_ms(retry_after_ms: u64) -> Self {
        Fault::Status {
            code: 429,
            retry_after_secs: None,
            retry_after_ms: Some(retry_after_ms),
            body: None,
        }
    }

    /// HTTP 429 with `retry-after` in seconds.
    pub fn rate_limited_secs(retry_after_secs: u64) -> Self {
        Fault::Status {
            code: 429,
            retry_after_secs: Some(retry_after_secs),
            retry_after_ms: None,
            body: None,
        }
    }

    /// HTTP `code` with this body.
    pub fn status_with_body(code: u16, body: impl Into<String>) -> Self {
        Fault::Status {
            code,
            retry_after_secs: None,
            retry_after_ms: None,
            body: Some(body.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_round_trip_and_defaults() {
        let script = Script::from_json(
            r#"{"turns": [
                {"parts": [{"type": "text", "text": "hi"}, {"type": "tool_call", "name": "Read", "input": {"file_path": "a"}}],
                 "faults": [{"type": "status", "code": 429, "retry_after_ms": 5}, {"type": "drop_mid_stream", "after_bytes": 10}, {"type": "error_body_with_200"}]},
                {"parts": [{"type": "raw_tool_call", "name": "Bash", "arguments": "{oops"}], "chunk_size": 3, "omit_usage": true}
            ]}"#,
        )
        .unwrap();
        let expected = Script::new([
            Turn::text("hi")
                .and_tool_call("Read", json!({"file_path": "a"}))
                .with_faults([
                    Fault::rate_limited_ms(5),
                    Fault::DropMidStream { after_bytes: 10 },
                    Fault::ErrorBodyWith200,
                ]),
            Turn {
                parts: vec![Part::RawToolCall {
                    id: None,
                    name: "Bash".into(),
                    arguments: "{oops".into(),
                }],
                chunk_size: 3,
                omit_usage: true,
                ..Turn::default()
            },
        ]);
        assert_eq!(script, expected);
        let text = serde_json::to_string(&script).unwrap();
        assert_eq!(Script::from_json(&text).unwrap(), script);
    }

    #[test]
    fn parse_errors_say_where() {
        let err =
            Script::from_json("{\"turns\": [{\"parts\": [{\"type\": \"nope\"}]}]}").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("line 1") && text.contains("nope"), "{text}");
    }
}
