//! Reply settlement: what a finished reply leaves in the history, the
//! session file and the mistake count, and the round's outcome. It runs
//! after the stream and the presenter are done; it never awaits.

use kaji_protocol::{ContentBlock, Message, Role, StopReason, Usage};

use super::present::Presented;
use super::round::{MAX_TOKENS_NOTE, cap_broken_text, estimate_usage, strip_thinking_leftovers};
use super::state::RoundOutcome;
use super::{INTERRUPTED_BY_ABORT, INTERRUPTED_BY_FEEDBACK, Task};
use crate::parser::ToolProtocol;
use crate::session::record::SessionRecord;

impl Task {
    /// Settles the reply once its stream and presentation are over: usage
    /// counted, the reply recorded in the history and the session file,
    /// mistakes counted, and what the round came to.
    pub(super) fn settle(&self, presented: Presented, request_bytes: usize) -> RoundOutcome {
        let (assembler, end, had_content) = {
            let mut st = self.lock();
            let a = st.assembler.take();
            let reported = a.as_ref().map(|a| a.usage()).unwrap_or_default();
            // A server that reports no usage gets an estimate; a reply kaji
            // cut short after a rejection may just not have reached its
            // usage yet, and gets none. An aborted reply gets an estimate:
            // its request was paid for, and the task reports it (#32).
            let cut_by_us = presented.interrupted;
            let (usage, estimated) = match a.as_ref() {
                Some(a) if reported == Usage::default() && st.stream_had_content && !cut_by_us => {
                    let broken = matches!(st.stream_end, Some(Err(_)));
                    (estimate_usage(request_bytes, a, broken), true)
                }
                _ => (reported, false),
            };
            st.usage.add(&usage);
            let turn = st.turns;
            let had_content = st.stream_had_content;
            drop(st);
            if usage != Usage::default() {
                self.report_usage(turn, usage, estimated);
            }
            let mut st = self.lock();
            (a, st.stream_end.take(), had_content)
        };
        let Some(assembler) = assembler else {
            return RoundOutcome::ApiFailed("internal error: the reply was lost".into());
        };
        let aborted = self.cancel.is_cancelled();
        if let Some(Err(err)) = &end
            && !had_content
            && !aborted
        {
            // Nothing arrived: the request failed as a whole. Forget this
            // round's user message; the outer loop retries it.
            let mut st = self.lock();
            st.unpush_user_content();
            st.turns -= 1;
            if err.overflow {
                return RoundOutcome::Overflow(err.message.clone());
            }
            if !err.retryable {
                return RoundOutcome::ApiFailedFinal(err.message.clone());
            }
            return RoundOutcome::ApiFailed(err.message.clone());
        }

        let mut assistant = assembler.history_content();
        let stop = assembler.stop_reason().cloned();
        let runs = &presented.runs;
        let mut results: Vec<ContentBlock> = Vec::new();
        // Native: keep only tool uses that got a result; every one of them
        // is answered, in order.
        if self.config.tool_protocol == ToolProtocol::Native {
            assistant.retain(|b| match b {
                ContentBlock::ToolUse { id, .. } => runs.iter().any(|(c, _)| &c.id == id),
                _ => true,
            });
        }
        for (call, run) in runs {
            results.push(self.result_block(&call.id, &call.name, run.content(), run.is_error()));
            results.extend(run.images().iter().cloned());
        }
        if presented.interrupted {
            assistant.push(ContentBlock::text(INTERRUPTED_BY_FEEDBACK));
        } else if aborted {
            assistant.push(ContentBlock::text(INTERRUPTED_BY_ABORT));
        }
        let broken = match &end {
            Some(Err(e)) if !aborted && !presented.interrupted => Some(e.message.clone()),
            _ => None,
        };
        if let Some(e) = &broken {
            // A reply that broke off (past the reply cap, say) must not
            // come back as an ever larger request: its text is kept in
            // part.
            cap_broken_text(&mut assistant);
            assistant.push(ContentBlock::text(format!("[Response interrupted: {e}]")));
        }
        let is_empty = !assistant.iter().any(|b| match b {
            ContentBlock::Text { text } => !text.trim().is_empty(),
            ContentBlock::ToolUse { .. } => true,
            _ => false,
        }) && runs.is_empty();

        if let Some(StopReason::Refusal { explanation, .. }) = &stop
            && !aborted
            && runs.is_empty()
        {
            // A refusal is final: the same request would be refused again.
            if is_empty {
                let mut st = self.lock();
                st.unpush_user_content();
            }
            let why = explanation
                .clone()
                .unwrap_or_else(|| "the provider gave no explanation".to_string());
            return RoundOutcome::Refused(why);
        }
        if is_empty && !aborted {
            let mut st = self.lock();
            st.unpush_user_content();
            st.turns -= 1;
            if let Some(e) = broken {
                return RoundOutcome::ApiFailed(e);
            }
            return RoundOutcome::Empty;
        }
        let reply_text = strip_thinking_leftovers(
            &assistant
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        );
        {
            let mut st = self.lock();
            let reply = Message {
                role: Role::Assistant,
                content: assistant,
            };
            // The round's user content and the reply that answered it go to
            // the session file together (a request that failed as a whole
            // left no trace), unless the user content went ahead of a tool.
            if let Some(content) = st.round_user.take() {
                self.config.recorder.record(SessionRecord::Message {
                    message: Message {
                        role: Role::User,
                        content,
                    },
                });
            }
            self.config.recorder.record(SessionRecord::Message {
                message: reply.clone(),
            });
            st.history.push(reply);
            let made_mistake = runs.iter().any(|(_, r)| r.is_mistake());
            if made_mistake {
                st.consecutive_mistakes +=
                    runs.iter().filter(|(_, r)| r.is_mistake()).count() as u32;
            } else if runs.iter().any(|(_, r)| !r.is_error()) {
                st.consecutive_mistakes = 0;
            }
            // A reply cut off by a broken stream is answered with "go on",
            // which a stream that keeps breaking would repeat forever: each
            // one counts toward the mistake limit.
            if broken.is_some() {
                st.consecutive_mistakes += 1;
            }
            if std::mem::take(&mut st.force_mistake_limit) {
                st.consecutive_mistakes = st.consecutive_mistakes.max(self.config.max_mistakes);
            }
        }
        if aborted {
            if !results.is_empty() {
                let message = Message {
                    role: Role::User,
                    content: results,
                };
                self.lock().history.push(message.clone());
                self.config
                    .recorder
                    .record(SessionRecord::Message { message });
            }
            self.config.recorder.sync();
            return RoundOutcome::Aborted;
        }
        // Each result was made durable as its tool returned (see
        // `write_ahead`); the reply is, before the next request.
        self.config.recorder.sync();
        if let Some((call, run)) = runs.iter().find(|(_, r)| r.completion().is_some()) {
            // Results of calls made beside AttemptCompletion go back with
            // its own result, so every call stays answered.
            let other_results = runs
                .iter()
                .filter(|(c, _)| c.id != call.id)
                .map(|(c, r)| self.result_block(&c.id, &c.name, r.content(), r.is_error()))
                .collect();
            return RoundOutcome::Completed {
                result: run.completion().unwrap_or_default().to_string(),
                tool_use_id: call.id.clone(),
                other_results,
            };
        }
        if let Some(e) = broken {
            if results.is_empty() {
                results.push(ContentBlock::text(format!(
                    "Your previous reply was cut off ({e}). Continue where you stopped."
                )));
            }
            return RoundOutcome::Continue(results);
        }
        if stop == Some(StopReason::MaxTokens) {
            // A call the output limit cut off was not run (its result says
            // so); tell the model why and how to go on.
            results.push(ContentBlock::text(MAX_TOKENS_NOTE));
            return RoundOutcome::Continue(results);
        }
        if runs.is_empty() {
            return RoundOutcome::NoToolUsed(reply_text.trim().to_string());
        }
        RoundOutcome::Continue(results)
    }
}
