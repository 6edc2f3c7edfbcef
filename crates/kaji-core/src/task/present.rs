//! The inner loop: walks the reply's blocks as they complete, emitting text
//! while it streams and running each tool as soon as its block is whole.
//! It reads the assembler under the lock, never across an await.

use kaji_protocol::{AskKind, AskPayload, SayKind, TaskEvent};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Task;
use super::round::strip_thinking_leftovers;
use crate::executor::ToolRun;
use crate::parser::{BlockContent, ToolCall};
use crate::session::record::SessionRecord;

impl Task {
    /// The inner loop: walks the reply's blocks as they complete.
    pub(super) async fn present(
        &self,
        mut version: watch::Receiver<u64>,
        stream_cancel: &CancellationToken,
    ) -> Presented {
        let mut out = Presented::default();
        let mut next = 0usize;
        // The partial message being streamed: (message id, bytes sent).
        let mut streaming: Option<(u64, usize)> = None;
        let mut completed = false;
        loop {
            if self.cancel.is_cancelled() {
                return out;
            }
            let step = {
                let st = self.lock();
                let done = st.stream_end.is_some();
                let assembler = st.assembler.as_ref();
                match assembler.and_then(|a| a.blocks().get(next)) {
                    None => {
                        if done {
                            Step::Done
                        } else {
                            Step::Wait
                        }
                    }
                    Some(b) => match (&b.content, b.partial) {
                        (BlockContent::Text(t) | BlockContent::Reasoning(t), true) => {
                            let sent = streaming.map(|(_, n)| n).unwrap_or(0);
                            let reasoning = matches!(b.content, BlockContent::Reasoning(_));
                            Step::Partial {
                                reasoning,
                                delta: t[sent..].to_string(),
                            }
                        }
                        (BlockContent::Text(t), false) => Step::Complete(SayKind::Text, t.clone()),
                        (BlockContent::Reasoning(t), false) => {
                            Step::Complete(SayKind::Reasoning, t.clone())
                        }
                        (BlockContent::ToolUse(call), true) => {
                            match assembler.and_then(|a| a.streaming_arguments(next)) {
                                Some(text) if !out.interrupted && !completed => {
                                    let sent = streaming.map(|(_, n)| n).unwrap_or(0);
                                    Step::CallPartial {
                                        name: call.name.clone(),
                                        delta: text.get(sent..).unwrap_or_default().to_string(),
                                    }
                                }
                                _ if done => Step::Done,
                                _ => Step::Wait,
                            }
                        }
                        (BlockContent::ToolUse(call), false) => Step::Tool(call.clone()),
                    },
                }
            };
            match step {
                Step::Done => return out,
                Step::Wait => {
                    tokio::select! {
                        r = version.changed() => {
                            if r.is_err() {
                                // The reader is gone; its end is recorded.
                                let done = self.lock().stream_end.is_some();
                                if !done {
                                    return out;
                                }
                            }
                        }
                        _ = self.cancel.cancelled() => return out,
                    }
                }
                Step::Partial { reasoning, delta } => {
                    if !delta.is_empty() && !out.interrupted && !completed {
                        let kind = if reasoning {
                            SayKind::Reasoning
                        } else {
                            SayKind::Text
                        };
                        match &mut streaming {
                            None => {
                                let id = self.emitter.next();
                                self.emitter.emit(TaskEvent::Say {
                                    id,
                                    kind,
                                    text: delta.clone(),
                                    partial: true,
                                    payload: None,
                                });
                                streaming = Some((id, delta.len()));
                            }
                            Some((id, sent)) => {
                                self.emitter.emit(TaskEvent::Delta {
                                    id: *id,
                                    text: delta.clone(),
                                });
                                *sent += delta.len();
                            }
                        }
                    } else if let Some((_, sent)) = &mut streaming {
                        *sent += delta.len();
                    }
                    tokio::select! {
                        _ = version.changed() => {}
                        _ = self.cancel.cancelled() => return out,
                    }
                }
                Step::CallPartial { name, delta } => {
                    self.stream_call_arguments(&mut streaming, &name, delta);
                    tokio::select! {
                        _ = version.changed() => {}
                        _ = self.cancel.cancelled() => return out,
                    }
                }
                Step::Complete(kind, text) => {
                    next += 1;
                    let id = streaming.take().map(|(id, _)| id);
                    if out.interrupted || completed {
                        continue;
                    }
                    let text = if kind == SayKind::Text {
                        strip_thinking_leftovers(&text)
                    } else {
                        text
                    };
                    if text.trim().is_empty() && id.is_none() {
                        continue;
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
                Step::Tool(call) => {
                    next += 1;
                    // The partial ask of the call's arguments, if any: the
                    // call's announcement replaces it.
                    let announce = streaming.take().map(|(id, _)| id);
                    let run = if out.interrupted {
                        skipped(
                            &call,
                            "the user rejected an earlier tool call in this reply",
                        )
                    } else if completed {
                        skipped(
                            &call,
                            "the task was completed by an earlier AttemptCompletion call",
                        )
                    } else {
                        self.write_ahead(&call, &out.runs);
                        self.run_tool(&call, announce).await
                    };
                    self.config
                        .recorder
                        .record_synced(SessionRecord::ToolResult {
                            block: self.result_block(
                                &call.id,
                                &call.name,
                                run.content(),
                                run.is_error(),
                            ),
                            tool_use_id: call.id.clone(),
                        });
                    if self.cancel.is_cancelled() {
                        out.runs.push((call, run));
                        return out;
                    }
                    if run.is_rejected() {
                        out.interrupted = true;
                        stream_cancel.cancel();
                    }
                    if run.completion().is_some() {
                        completed = true;
                    }
                    out.runs.push((call, run));
                }
            }
        }
    }

    /// Streams a tool call's arguments as they arrive: a partial `ask`
    /// (kind `tool`) first, then [`TaskEvent::Delta`]s with the new text of
    /// the rendering. The call's `tool` say, with the same id, ends it.
    pub(super) fn stream_call_arguments(
        &self,
        streaming: &mut Option<(u64, usize)>,
        name: &str,
        delta: String,
    ) {
        match streaming {
            None => {
                let id = self.emitter.next();
                *streaming = Some((id, delta.len()));
                self.emitter.emit(TaskEvent::Ask {
                    id,
                    kind: AskKind::Tool,
                    text: delta,
                    partial: true,
                    payload: Some(AskPayload::ToolApproval {
                        tool: name.to_string(),
                        input: Value::Object(Default::default()),
                        preview: None,
                        always: Vec::new(),
                    }),
                });
            }
            Some((id, sent)) if !delta.is_empty() => {
                *sent += delta.len();
                self.emitter.emit(TaskEvent::Delta {
                    id: *id,
                    text: delta,
                });
            }
            Some(_) => {}
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Presented {
    pub(super) runs: Vec<(ToolCall, ToolRun)>,
    pub(super) interrupted: bool,
}

pub(super) enum Step {
    Done,
    Wait,
    Partial {
        reasoning: bool,
        delta: String,
    },
    /// A tool call still streaming: the new text of its arguments.
    CallPartial {
        name: String,
        delta: String,
    },
    Complete(SayKind, String),
    Tool(ToolCall),
}

pub(super) fn skipped(call: &ToolCall, why: &str) -> ToolRun {
    ToolRun::failed(format!("{} was not run: {why}.", call.name), false)
}
