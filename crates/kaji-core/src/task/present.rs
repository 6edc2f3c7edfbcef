//! The inner loop: walks the reply's blocks as they complete, emitting text
//! while it streams and running each tool as soon as its block is whole.
//! It reads the assembler under the lock, never across an await.

use kaji_protocol::{AskKind, AskPayload, SayKind, SayPayload, TaskEvent};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Task;
use super::round::strip_thinking_leftovers;
use crate::executor::ToolRun;
use crate::parser::{BlockContent, ToolCall};
use crate::storage::record::SessionRecord;
use crate::web_search::ServerView;

impl Task {
    /// The inner loop: walks the reply's blocks as they complete.
    pub(super) async fn present(
        &self,
        mut version: watch::Receiver<u64>,
        stream_cancel: &CancellationToken,
    ) -> Presented {
        let mut walk = Walk::default();
        loop {
            if self.cancel.is_cancelled() {
                return walk.out;
            }
            match self.next_step(&walk) {
                Step::Done => return walk.out,
                Step::Wait => {
                    tokio::select! {
                        r = version.changed() => {
                            if r.is_err() {
                                // The reader is gone; its end is recorded.
                                let done = self.lock().stream_end.is_some();
                                if !done {
                                    return walk.out;
                                }
                            }
                        }
                        _ = self.cancel.cancelled() => return walk.out,
                    }
                }
                Step::Partial { reasoning, delta } => {
                    self.emit_partial(&mut walk, reasoning, delta);
                    if !self.wait_for_more(&mut version).await {
                        return walk.out;
                    }
                }
                Step::CallPartial {
                    id,
                    name,
                    text,
                    input,
                } => {
                    self.stream_call_arguments(&mut walk, (&id, &name), text, &input);
                    if !self.wait_for_more(&mut version).await {
                        return walk.out;
                    }
                }
                Step::Complete(kind, text) => self.emit_complete(&mut walk, kind, text),
                Step::Server(block) => self.present_server(&mut walk, &block),
                Step::Tool(call) => {
                    // Under a cost limit a tool (a sub-agent, which makes
                    // requests of its own) runs once this request is
                    // charged: when its stream has ended.
                    if self.config.budget.limits_cost() && !self.stream_ended(&mut version).await {
                        return walk.out;
                    }
                    if !self.present_tool(&mut walk, call, stream_cancel).await {
                        return walk.out;
                    }
                }
            }
        }
    }

    /// What the presenter does next, from the assembler's blocks (read
    /// under the lock).
    fn next_step(&self, walk: &Walk) -> Step {
        let st = self.lock();
        let done = st.stream_end.is_some();
        let assembler = st.assembler.as_ref();
        let Some(b) = assembler.and_then(|a| a.blocks().get(walk.next)) else {
            return if done { Step::Done } else { Step::Wait };
        };
        let sent = walk.streaming.map(|(_, n)| n).unwrap_or(0);
        match (&b.content, b.partial) {
            (BlockContent::Text(t) | BlockContent::Reasoning(t), true) => Step::Partial {
                reasoning: matches!(b.content, BlockContent::Reasoning(_)),
                delta: t[sent..].to_string(),
            },
            (BlockContent::Text(t), false) => Step::Complete(SayKind::Text, t.clone()),
            (BlockContent::Reasoning(t), false) => Step::Complete(SayKind::Reasoning, t.clone()),
            (BlockContent::ToolUse(call), true) => {
                match assembler.and_then(|a| a.streaming_arguments(walk.next)) {
                    Some(text) if !walk.out.interrupted && !walk.completed => Step::CallPartial {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        text: text.to_string(),
                        input: assembler
                            .and_then(|a| a.streaming_input(walk.next))
                            .unwrap_or_default(),
                    },
                    _ if done => Step::Done,
                    _ => Step::Wait,
                }
            }
            (BlockContent::ToolUse(call), false) => Step::Tool(call.clone()),
            (BlockContent::Server(block), _) => Step::Server(block.clone()),
        }
    }

    /// A search the provider ran within the reply: shown as a `WebSearch`
    /// call and its result (the blocks themselves are in the history).
    fn present_server(&self, walk: &mut Walk, block: &Value) {
        walk.next += 1;
        if walk.out.interrupted || walk.completed {
            return;
        }
        let name = kaji_tools::web_search::WEB_SEARCH;
        for view in crate::web_search::server_view(block) {
            match view {
                ServerView::Call { id, input } => {
                    let ctx = self.tool_context();
                    let (view, _) = self.executor.presentation(name, &input, &ctx).unzip();
                    self.emitter.say(
                        SayKind::Tool,
                        crate::executor::describe_call(name, &input),
                        Some(SayPayload::Tool {
                            id: id.clone(),
                            tool: name.to_string(),
                            input: input.clone(),
                            view: view.clone(),
                        }),
                    );
                    self.emitter.emit(TaskEvent::ToolUse {
                        id,
                        name: name.to_string(),
                        input,
                        view,
                        preview: None,
                    });
                }
                ServerView::Result {
                    id,
                    is_error,
                    output,
                } => self.emitter.emit(TaskEvent::ToolResult {
                    summary: Some(self.executor.result_summary(
                        name,
                        &Value::Null,
                        &output,
                        is_error,
                    )),
                    id,
                    name: name.to_string(),
                    is_error,
                    output,
                }),
            }
        }
    }

    /// Waits until the stream reader recorded the stream's end; false when
    /// the task was aborted meanwhile.
    async fn stream_ended(&self, version: &mut watch::Receiver<u64>) -> bool {
        while self.lock().stream_end.is_none() {
            tokio::select! {
                r = version.changed() => {
                    // The reader is gone: its end is recorded.
                    if r.is_err() {
                        return true;
                    }
                }
                _ = self.cancel.cancelled() => return false,
            }
        }
        true
    }

    /// Waits for the stream to move on; false when aborted meanwhile.
    async fn wait_for_more(&self, version: &mut watch::Receiver<u64>) -> bool {
        tokio::select! {
            _ = version.changed() => true,
            _ = self.cancel.cancelled() => false,
        }
    }

    /// Text or reasoning still streaming: its new part, as a partial say
    /// and then deltas of it (nothing is shown once a call was rejected
    /// or the task completed).
    fn emit_partial(&self, walk: &mut Walk, reasoning: bool, delta: String) {
        if delta.is_empty() || walk.out.interrupted || walk.completed {
            if let Some((_, sent)) = &mut walk.streaming {
                *sent += delta.len();
            }
            return;
        }
        let kind = if reasoning {
            SayKind::Reasoning
        } else {
            SayKind::Text
        };
        match &mut walk.streaming {
            None => {
                let id = self.emitter.next();
                self.emitter.emit(TaskEvent::Say {
                    id,
                    kind,
                    text: delta.clone(),
                    partial: true,
                    payload: None,
                });
                walk.streaming = Some((id, delta.len()));
            }
            Some((id, sent)) => {
                self.emitter.emit(TaskEvent::Delta {
                    id: *id,
                    text: delta.clone(),
                });
                *sent += delta.len();
            }
        }
    }

    /// A text or reasoning block that is whole: its final say (the
    /// partial one's id, when it streamed).
    fn emit_complete(&self, walk: &mut Walk, kind: SayKind, text: String) {
        walk.next += 1;
        let id = walk.streaming.take().map(|(id, _)| id);
        if walk.out.interrupted || walk.completed {
            return;
        }
        let text = if kind == SayKind::Text {
            strip_thinking_leftovers(&text)
        } else {
            text
        };
        if text.trim().is_empty() && id.is_none() {
            return;
        }
        let id = id.unwrap_or_else(|| self.emitter.next());
        self.emitter.emit(TaskEvent::Say {
            id,
            kind,
            text,
            partial: false,
            payload: None,
        });
    }

    /// A tool call that is whole: run (or skipped after a rejection or a
    /// completion), its result made durable. False when the task was
    /// aborted meanwhile.
    async fn present_tool(
        &self,
        walk: &mut Walk,
        call: ToolCall,
        stream_cancel: &CancellationToken,
    ) -> bool {
        walk.next += 1;
        // The partial ask of the call's arguments, if any: the call's
        // announcement replaces it.
        let announce = walk.streaming.take().map(|(id, _)| id);
        walk.streaming_title = None;
        let run = if walk.out.interrupted {
            let why = if self.executor.hook_stop_pending() {
                "a hook stopped the task (\"continue\": false)"
            } else {
                "the user rejected an earlier tool call in this reply"
            };
            skipped(&call, why)
        } else if walk.completed {
            skipped(
                &call,
                "the task was completed by an earlier AttemptCompletion call",
            )
        } else {
            self.write_ahead(&call, &walk.out.runs);
            self.run_tool(&call, announce).await
        };
        self.config
            .recorder
            .record_synced(SessionRecord::ToolResult {
                block: self.result_block(&call.id, &call.name, run.content(), run.is_error()),
                tool_use_id: call.id.clone(),
            });
        if self.cancel.is_cancelled() {
            walk.out.runs.push((call, run));
            return false;
        }
        // A hook's `"continue": false` skips the rest of the reply, as a
        // rejection does.
        if run.is_rejected() || self.executor.hook_stop_pending() {
            walk.out.interrupted = true;
            stream_cancel.cancel();
        }
        if run.completion().is_some() {
            walk.completed = true;
        }
        walk.out.runs.push((call, run));
        true
    }

    /// Streams a tool call's arguments as they arrive: a partial `ask`
    /// (kind `tool`, payload `tool_arguments` with the tool's title for the
    /// arguments complete so far), then [`TaskEvent::Delta`]s with the new
    /// text of the rendering. When the title changes (the path has come),
    /// the partial ask is sent again, same id, with the whole text so far.
    /// The call's `tool` say, with the same id, ends it. `call`: the
    /// call's id and its tool's name.
    fn stream_call_arguments(
        &self,
        walk: &mut Walk,
        (call_id, name): (&str, &str),
        text: String,
        input: &Value,
    ) {
        let title = self.executor.title_of(name, input);
        let id = match walk.streaming {
            Some((id, sent)) if walk.streaming_title.as_deref() == Some(title.as_str()) => {
                let delta = text.get(sent..).unwrap_or_default();
                if !delta.is_empty() {
                    self.emitter.emit(TaskEvent::Delta {
                        id,
                        text: delta.to_string(),
                    });
                }
                id
            }
            streaming => {
                // The first partial ask, or the same one under a new title.
                let id = streaming.map_or_else(|| self.emitter.next(), |(id, _)| id);
                self.emitter.emit(TaskEvent::Ask {
                    id,
                    kind: AskKind::Tool,
                    text: text.clone(),
                    partial: true,
                    payload: Some(AskPayload::ToolArguments {
                        tool: name.to_string(),
                        title: title.clone(),
                        tool_use_id: call_id.to_string(),
                    }),
                });
                walk.streaming_title = Some(title);
                id
            }
        };
        walk.streaming = Some((id, text.len()));
    }
}

/// Where the presenter is in the reply.
#[derive(Debug, Default)]
struct Walk {
    /// What it has run so far.
    out: Presented,
    /// The next block to present.
    next: usize,
    /// The partial message being streamed: (message id, bytes sent).
    streaming: Option<(u64, usize)>,
    /// The title a streaming tool call's partial ask shows.
    streaming_title: Option<String>,
    /// AttemptCompletion ran: later calls are skipped.
    completed: bool,
}

/// What the presenter ran, and whether the user rejected a call.
#[derive(Debug, Default)]
pub(super) struct Presented {
    pub(super) runs: Vec<(ToolCall, ToolRun)>,
    pub(super) interrupted: bool,
}

/// The presenter's next move.
pub(super) enum Step {
    /// The reply is over.
    Done,
    /// Nothing new yet.
    Wait,
    /// Text or reasoning still streaming: its new part.
    Partial { reasoning: bool, delta: String },
    /// A tool call still streaming: its id and tool, the rendering of its
    /// arguments so far, and those complete so far.
    CallPartial {
        id: String,
        name: String,
        text: String,
        input: Value,
    },
    /// A text or reasoning block that is whole.
    Complete(SayKind, String),
    /// A tool call that is whole.
    Tool(ToolCall),
    /// A block of a tool the provider ran.
    Server(Value),
}

pub(super) fn skipped(call: &ToolCall, why: &str) -> ToolRun {
    ToolRun::failed(format!("{} was not run: {why}.", call.name), false)
}
