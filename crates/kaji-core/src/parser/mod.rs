//! Turns a model's reply stream into presentable blocks as it arrives.
//!
//! One [`ReplyAssembler`] per model request. It takes the provider's
//! [`StreamEvent`]s in order and keeps two views of the reply:
//!
//! - the **blocks** the presenter walks: text, reasoning and tool calls,
//!   each partial until it is complete, appended and never reordered;
//! - the **history content**: the reply as it must go back to the provider
//!   in later requests (raw text including any `<thinking>` tags, signed
//!   reasoning, native tool calls).
//!
//! With the native tool protocol a tool block is complete when its call
//! ends in the stream; with the xml protocol, when its closing tag is
//! scanned (see [`scanner`]). The assembler never blocks and never does
//! I/O; its work per event is proportional to the event's size.

mod partial_args;
mod scanner;

use std::collections::HashMap;

use kaji_protocol::{ContentBlock, StopReason, StreamEvent, Usage};
use serde_json::Value;

use partial_args::ArgsView;
pub use scanner::{ParamKind, XmlToolGrammar};
use scanner::{ScanSink, TextScanner};

/// How the model calls tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolProtocol {
    /// The provider's own tool calling.
    #[default]
    Native,
    /// Calls written as XML in the reply text.
    Xml,
}

impl std::str::FromStr for ToolProtocol {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "native" => Ok(Self::Native),
            "xml" => Ok(Self::Xml),
            other => Err(format!(
                "unknown tool protocol {other:?}: expected native or xml"
            )),
        }
    }
}

/// A tool call parsed from the reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// Call id: the provider's for native calls, `xml_<n>` for xml ones.
    pub id: String,
    /// Tool name as the model wrote it.
    pub name: String,
    /// The arguments, or why they cannot be used.
    pub input: Result<Value, String>,
}

/// What a block holds.
#[derive(Debug, Clone, PartialEq)]
pub enum BlockContent {
    /// Reply text.
    Text(String),
    /// Reasoning, from the provider or from `<thinking>` tags.
    Reasoning(String),
    /// A tool call.
    ToolUse(ToolCall),
    /// A block of a tool the provider ran itself (its web search), as the
    /// wire gave it; always complete.
    Server(Value),
}

/// One presentable block of a reply.
#[derive(Debug, Clone, PartialEq)]
pub struct AssistantBlock {
    /// What it holds.
    pub content: BlockContent,
    /// More of it may still arrive.
    pub partial: bool,
}

/// Builds blocks and history content from a reply stream.
#[derive(Debug)]
pub struct ReplyAssembler {
    protocol: ToolProtocol,
    scanner: TextScanner,
    state: AssemblyState,
}

#[derive(Debug, Default)]
struct AssemblyState {
    blocks: Vec<AssistantBlock>,
    history: Vec<ContentBlock>,
    /// Native calls in flight: id → (block index, history index, raw args).
    native_calls: HashMap<String, (usize, usize, String)>,
    xml_calls: u32,
    xml_call_prefix: String,
    usage: Usage,
    stop_reason: Option<StopReason>,
    /// Whether the provider's own reasoning block is the last block.
    provider_reasoning_open: bool,
    /// The arguments of tool calls still streaming, rendered for people:
    /// block index → rendering.
    streaming_args: HashMap<usize, ArgsView>,
}

impl ReplyAssembler {
    /// An assembler for one reply. `grammar` lists the tools the xml
    /// protocol recognises (ignored for native); `call_prefix` makes xml
    /// call ids unique across turns.
    pub fn new(protocol: ToolProtocol, grammar: XmlToolGrammar, call_prefix: &str) -> Self {
        let grammar = match protocol {
            ToolProtocol::Native => XmlToolGrammar::default(),
            ToolProtocol::Xml => grammar,
        };
        Self {
            protocol,
            scanner: TextScanner::new(grammar),
            state: AssemblyState {
                xml_call_prefix: call_prefix.to_string(),
                ..AssemblyState::default()
            },
        }
    }

    /// Takes one stream event.
    pub fn push(&mut self, event: &StreamEvent) {
        let st = &mut self.state;
        match event {
            StreamEvent::TextDelta { text } => {
                if st.provider_reasoning_open {
                    st.close_last();
                    st.provider_reasoning_open = false;
                }
                st.history_text(text);
                self.scanner.feed(text, st);
            }
            StreamEvent::ReasoningDelta { text } => self.reasoning_delta(text),
            StreamEvent::ReasoningSignature { signature } => {
                if let Some(ContentBlock::Reasoning { signature: s, .. }) = st
                    .history
                    .iter_mut()
                    .rev()
                    .find(|b| matches!(b, ContentBlock::Reasoning { .. }))
                {
                    *s = Some(signature.clone());
                }
            }
            StreamEvent::RedactedReasoning { data } => {
                st.history
                    .push(ContentBlock::RedactedReasoning { data: data.clone() });
            }
            StreamEvent::ToolCallStart { id, name } => self.tool_call_start(id, name),
            StreamEvent::ToolCallDelta { id, arguments } => {
                if let Some((block, _, raw)) = st.native_calls.get_mut(id) {
                    raw.push_str(arguments);
                    if let Some(view) = st.streaming_args.get_mut(block) {
                        view.feed_json(arguments);
                    }
                }
            }
            StreamEvent::ToolCallEnd { id } => st.end_native_call(id),
            StreamEvent::Usage(u) => st.usage = merge_usage(st.usage, *u),
            StreamEvent::Stop { reason } => st.stop_reason = Some(reason.clone()),
            StreamEvent::ServerBlock { block } => {
                if block.get("type").and_then(Value::as_str) != Some("text") {
                    self.scanner.finish(st);
                    st.close_last();
                    st.provider_reasoning_open = false;
                    st.blocks.push(AssistantBlock {
                        content: BlockContent::Server(block.clone()),
                        partial: false,
                    });
                }
                st.server_block(block);
            }
            StreamEvent::Retrying { .. } => {}
        }
    }

    /// A piece of the provider's reasoning: opens a reasoning block (ending
    /// the text before it) unless one is open, and adds to it.
    fn reasoning_delta(&mut self, text: &str) {
        let st = &mut self.state;
        if !st.provider_reasoning_open {
            self.scanner.finish(st);
            st.close_last();
            st.blocks.push(AssistantBlock {
                content: BlockContent::Reasoning(String::new()),
                partial: true,
            });
            st.history.push(ContentBlock::Reasoning {
                text: String::new(),
                signature: None,
            });
            st.provider_reasoning_open = true;
        }
        if let Some(AssistantBlock {
            content: BlockContent::Reasoning(r),
            ..
        }) = st.blocks.last_mut()
        {
            r.push_str(text);
        }
        if let Some(ContentBlock::Reasoning { text: r, .. }) = st.history.last_mut() {
            r.push_str(text);
        }
    }

    /// A native tool call starts: the block before it ends, and the call
    /// is a partial block whose arguments stream in.
    fn tool_call_start(&mut self, id: &str, name: &str) {
        let st = &mut self.state;
        self.scanner.finish(st);
        st.close_last();
        st.provider_reasoning_open = false;
        st.blocks.push(AssistantBlock {
            content: BlockContent::ToolUse(ToolCall {
                id: id.to_string(),
                name: name.to_string(),
                input: Ok(Value::Object(Default::default())),
            }),
            partial: true,
        });
        st.history.push(ContentBlock::ToolUse {
            id: id.to_string(),
            name: name.to_string(),
            input: Value::Object(Default::default()),
        });
        st.native_calls.insert(
            id.to_string(),
            (st.blocks.len() - 1, st.history.len() - 1, String::new()),
        );
        st.streaming_args
            .insert(st.blocks.len() - 1, ArgsView::default());
    }

    /// Ends the reply: every partial block is completed. Native calls whose
    /// end never arrived, and xml calls cut off inside a parameter, are
    /// completed with an error instead of arguments, so they are reported
    /// and never run.
    pub fn finish(&mut self) {
        let st = &mut self.state;
        self.scanner.finish(st);
        let open: Vec<String> = st.native_calls.keys().cloned().collect();
        for id in open {
            if let Some((block, _, _)) = st.native_calls.remove(&id)
                && let Some(AssistantBlock {
                    content: BlockContent::ToolUse(call),
                    partial,
                }) = st.blocks.get_mut(block)
            {
                call.input = Err(format!(
                    "the reply ended before the arguments of {} (call {id}) were complete; the call was not run",
                    call.name
                ));
                *partial = false;
            }
        }
        for b in &mut st.blocks {
            b.partial = false;
        }
        st.streaming_args.clear();
    }

    /// The blocks so far.
    pub fn blocks(&self) -> &[AssistantBlock] {
        &self.state.blocks
    }

    /// The arguments of the tool call at `block` so far, rendered for
    /// people (one `name: value` line per argument, strings decoded), while
    /// the call is still streaming; `None` once it is complete. The
    /// rendering only grows, so a front end can append what is new.
    pub fn streaming_arguments(&self, block: usize) -> Option<&str> {
        self.state.streaming_args.get(&block).map(ArgsView::text)
    }

    /// The arguments of the tool call at `block` that are complete so far
    /// (a JSON object), while the call is still streaming: for its title,
    /// never to run it.
    pub fn streaming_input(&self, block: usize) -> Option<serde_json::Value> {
        self.state
            .streaming_args
            .get(&block)
            .map(ArgsView::complete_fields)
    }

    /// The reply as it goes into the history. With the xml protocol tool
    /// calls stay in the text.
    pub fn history_content(&self) -> Vec<ContentBlock> {
        self.state.history.clone()
    }

    /// Usage reported so far.
    pub fn usage(&self) -> Usage {
        self.state.usage
    }

    /// The stop reason, once reported.
    pub fn stop_reason(&self) -> Option<&StopReason> {
        self.state.stop_reason.as_ref()
    }

    /// The tool protocol.
    pub fn protocol(&self) -> ToolProtocol {
        self.protocol
    }
}

impl AssemblyState {
    /// Keeps a provider's block in the history as it came. A text block
    /// citing search results comes right after the text that streamed for
    /// it (the wire that sent it puts it in place of that text).
    fn server_block(&mut self, block: &Value) {
        self.history.push(ContentBlock::Server {
            block: block.clone(),
        });
    }

    fn close_last(&mut self) {
        if let Some(last) = self.blocks.last_mut()
            && !matches!(last.content, BlockContent::ToolUse(_))
        {
            last.partial = false;
        }
    }

    fn history_text(&mut self, text: &str) {
        if let Some(ContentBlock::Text { text: t, .. }) = self.history.last_mut() {
            t.push_str(text);
        } else {
            self.history.push(ContentBlock::text(text));
        }
    }

    fn end_native_call(&mut self, id: &str) {
        let Some((block, hist, raw)) = self.native_calls.remove(id) else {
            return;
        };
        let Some(AssistantBlock {
            content: BlockContent::ToolUse(call),
            partial,
        }) = self.blocks.get_mut(block)
        else {
            return;
        };
        call.input =
            kaji_llm::parse_tool_arguments(&call.name, id, &raw).map_err(|e| e.to_string());
        *partial = false;
        self.streaming_args.remove(&block);
        if let (Ok(input), Some(ContentBlock::ToolUse { input: h, .. })) =
            (&call.input, self.history.get_mut(hist))
        {
            *h = input.clone();
        }
    }

    fn push_text_like(&mut self, reasoning: bool, s: &str) {
        if let Some(last) = self.blocks.last_mut()
            && last.partial
        {
            match (&mut last.content, reasoning) {
                (BlockContent::Text(t), false) | (BlockContent::Reasoning(t), true) => {
                    t.push_str(s);
                    return;
                }
                (BlockContent::ToolUse(_), _) => {}
                _ => last.partial = false,
            }
        }
        let content = if reasoning {
            BlockContent::Reasoning(s.to_string())
        } else {
            BlockContent::Text(s.to_string())
        };
        self.blocks.push(AssistantBlock {
            content,
            partial: true,
        });
    }
}

impl ScanSink for AssemblyState {
    fn text(&mut self, text: &str) {
        self.push_text_like(false, text);
    }

    fn thinking(&mut self, text: &str) {
        self.push_text_like(true, text);
    }

    fn thinking_end(&mut self) {
        match self.blocks.last_mut() {
            Some(
                last @ AssistantBlock {
                    content: BlockContent::Reasoning(_),
                    ..
                },
            ) => last.partial = false,
            _ => self.blocks.push(AssistantBlock {
                content: BlockContent::Reasoning(String::new()),
                partial: false,
            }),
        }
    }

    fn tool_start(&mut self, name: &str) {
        self.close_last();
        self.xml_calls += 1;
        let id = format!("{}{}", self.xml_call_prefix, self.xml_calls);
        self.blocks.push(AssistantBlock {
            content: BlockContent::ToolUse(ToolCall {
                id,
                name: name.to_string(),
                input: Ok(Value::Object(Default::default())),
            }),
            partial: true,
        });
        self.streaming_args
            .insert(self.blocks.len() - 1, ArgsView::default());
    }

    fn tool_param(&mut self, param: &str, text: &str) {
        let last = self.blocks.len().saturating_sub(1);
        if let Some(view) = self.streaming_args.get_mut(&last) {
            view.feed_xml(param, text);
        }
    }

    fn tool_end(&mut self, name: &str, input: Result<Value, String>, complete: bool) {
        if let Some(AssistantBlock {
            content: BlockContent::ToolUse(call),
            partial,
        }) = self.blocks.last_mut()
        {
            call.input = if complete {
                input
            } else {
                Err(format!(
                    "the reply ended inside <{name}> before its parameters were closed; the call was not run. Close every parameter tag and </{name}>"
                ))
            };
            *partial = false;
        }
        let last = self.blocks.len().saturating_sub(1);
        self.streaming_args.remove(&last);
    }
}

/// Later usage reports supersede earlier ones field by field (Anthropic
/// sends input tokens first and output tokens at the end).
pub(crate) fn merge_usage(old: Usage, new: Usage) -> Usage {
    Usage {
        input_tokens: if new.input_tokens > 0 {
            new.input_tokens
        } else {
            old.input_tokens
        },
        output_tokens: if new.output_tokens > 0 {
            new.output_tokens
        } else {
            old.output_tokens
        },
        cache_read_input_tokens: if new.cache_read_input_tokens > 0 {
            new.cache_read_input_tokens
        } else {
            old.cache_read_input_tokens
        },
        cache_creation_input_tokens: if new.cache_creation_input_tokens > 0 {
            new.cache_creation_input_tokens
        } else {
            old.cache_creation_input_tokens
        },
    }
}

#[cfg(test)]
mod tests;
