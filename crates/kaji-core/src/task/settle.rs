//! Reply settlement: what a finished reply leaves in the history, the
//! session file and the mistake count, and the round's outcome. It runs
//! after the stream and the presenter are done; it never awaits.

use kaji_llm::LlmError;
use kaji_protocol::{ContentBlock, StopReason, Usage};

use super::present::Presented;
use super::round::{
    MAX_TOKENS_NOTE, RequestSize, cap_broken_text, estimate_usage, strip_thinking_leftovers,
};
use super::state::{RoundError, RoundOutcome};
use super::{INTERRUPTED_BY_ABORT, INTERRUPTED_BY_FEEDBACK, Task};
use crate::executor::ToolRun;
use crate::parser::{ReplyAssembler, ToolCall, ToolProtocol};

/// A reply whose stream and presentation are over, taken out of the lock.
struct Finished {
    assembler: ReplyAssembler,
    /// How the stream ended (`None`: it never recorded an end).
    end: Option<Result<(), LlmError>>,
    /// Whether any content event arrived.
    had_content: bool,
}

/// The reply as the history keeps it, and the results that answer it.
pub(super) struct Settled {
    /// The assistant's blocks, notes of interruption included.
    pub(super) assistant: Vec<ContentBlock>,
    /// The tool results (and their images), in call order.
    pub(super) results: Vec<ContentBlock>,
    /// The stream broke off (not by kaji): the provider's error.
    pub(super) broken: Option<LlmError>,
    /// Neither text nor a tool call, and nothing ran.
    pub(super) is_empty: bool,
}

impl Task {
    /// Settles the reply once its stream and presentation are over: usage
    /// counted, the reply recorded in the history and the session file,
    /// mistakes counted, and what the round came to.
    /// `charged`: the stream reader charged the budget with the reported
    /// usage already.
    pub(super) fn settle(
        &self,
        presented: Presented,
        size: RequestSize,
        charged: bool,
    ) -> RoundOutcome {
        let Some(finished) = self.take_finished(&presented, size, charged) else {
            return RoundOutcome::ApiFailed(RoundError::ReplyLost);
        };
        let aborted = self.cancel.is_cancelled();
        if let Some(Err(err)) = &finished.end
            && !finished.had_content
            && !aborted
        {
            // Nothing arrived: the request failed as a whole. Forget this
            // round's user message; the outer loop retries it.
            let mut st = self.lock();
            st.unpush_user_content();
            st.turns -= 1;
            if err.is_context_overflow() {
                return RoundOutcome::Overflow(err.clone());
            }
            return RoundOutcome::ApiFailed(RoundError::Request(err.clone()));
        }
        let stop = finished.assembler.stop_reason().cloned();
        let settled = self.settled_reply(finished, &presented, aborted);
        if let Some(outcome) = self.unanswerable(&settled, &stop, &presented.runs, aborted) {
            return outcome;
        }
        let reply_text = reply_text(&settled.assistant);
        let Settled {
            assistant,
            results,
            broken,
            ..
        } = settled;
        self.record_reply(assistant, &presented.runs, broken.is_some());
        if aborted {
            self.record_aborted_results(results);
            return RoundOutcome::Aborted;
        }
        if let Some(reason) = self.executor.take_hook_stop() {
            // A hook's `"continue": false`: every call stays answered.
            self.record_aborted_results(results);
            return RoundOutcome::HookStopped(reason);
        }
        // Each result was made durable as its tool returned (see
        // `write_ahead`); the reply is, before the next request.
        self.config.recorder.sync();
        self.next_after(&presented.runs, results, broken, stop, reply_text)
    }

    /// Takes the finished reply out of the lock and counts its usage: a
    /// server that reports none gets an estimate; a reply kaji cut short
    /// after a rejection may just not have reached its usage yet, and gets
    /// none. An aborted reply gets an estimate: its request was paid for,
    /// and the task reports it (#32).
    fn take_finished(
        &self,
        presented: &Presented,
        size: RequestSize,
        charged: bool,
    ) -> Option<Finished> {
        let mut st = self.lock();
        let a = st.assembler.take();
        let reported = a.as_ref().map(|a| a.usage()).unwrap_or_default();
        let cut_by_us = presented.interrupted;
        // An aborted request was paid for even if its first words had not
        // reached kaji yet.
        let sent = st.stream_had_content || self.cancel.is_cancelled();
        let (usage, estimated) = match a.as_ref() {
            Some(a) if reported == Usage::default() && sent && !cut_by_us => {
                let broken = matches!(st.stream_end, Some(Err(_)));
                (estimate_usage(size.bytes(), a, broken), true)
            }
            _ => (reported, false),
        };
        st.usage.add(&usage);
        let turn = st.turns;
        let had_content = st.stream_had_content;
        drop(st);
        if usage != Usage::default() {
            // The reader charged the reported usage; an estimate is
            // charged here.
            self.report_usage(turn, usage, estimated, charged && !estimated);
        }
        let end = self.lock().stream_end.take();
        Some(Finished {
            assembler: a?,
            end,
            had_content,
        })
    }

    /// The reply as the history keeps it: native tool uses only when they
    /// got a result, a note when it was interrupted, its text capped when
    /// it broke off; and the results that answer it.
    fn settled_reply(&self, finished: Finished, presented: &Presented, aborted: bool) -> Settled {
        let runs = &presented.runs;
        let mut assistant = finished.assembler.history_content();
        // Native: keep only tool uses that got a result; every one of them
        // is answered, in order.
        if self.config.tool_protocol == ToolProtocol::Native {
            assistant.retain(|b| match b {
                ContentBlock::ToolUse { id, .. } => runs.iter().any(|(c, _)| &c.id == id),
                _ => true,
            });
        }
        let mut results: Vec<ContentBlock> = Vec::new();
        for (call, run) in runs {
            results.push(self.result_block(&call.id, &call.name, run.content(), run.is_error()));
            results.extend(run.images().iter().cloned());
        }
        if presented.interrupted {
            assistant.push(ContentBlock::text(INTERRUPTED_BY_FEEDBACK));
        } else if aborted {
            assistant.push(ContentBlock::text(INTERRUPTED_BY_ABORT));
        }
        let broken = match finished.end {
            Some(Err(e)) if !aborted && !presented.interrupted => Some(e),
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
            ContentBlock::Text { text, .. } => !text.trim().is_empty(),
            ContentBlock::ToolUse { .. } => true,
            _ => false,
        }) && runs.is_empty();
        Settled {
            assistant,
            results,
            broken,
            is_empty,
        }
    }

    /// A refusal, or an empty reply: the round leaves no reply in the
    /// history and the outer loop decides.
    fn unanswerable(
        &self,
        settled: &Settled,
        stop: &Option<StopReason>,
        runs: &[(ToolCall, ToolRun)],
        aborted: bool,
    ) -> Option<RoundOutcome> {
        if let Some(StopReason::Refusal { explanation, .. }) = stop
            && !aborted
            && runs.is_empty()
        {
            // A refusal is final: the same request would be refused again.
            if settled.is_empty {
                self.lock().unpush_user_content();
            }
            return Some(RoundOutcome::Refused(explanation.clone()));
        }
        if settled.is_empty && !aborted {
            let mut st = self.lock();
            st.unpush_user_content();
            st.turns -= 1;
            if let Some(e) = &settled.broken {
                return Some(RoundOutcome::ApiFailed(RoundError::Broken(e.clone())));
            }
            return Some(RoundOutcome::Empty);
        }
        None
    }

    /// What the next round sends, or how the task ends, after a reply that
    /// was recorded.
    fn next_after(
        &self,
        runs: &[(ToolCall, ToolRun)],
        mut results: Vec<ContentBlock>,
        broken: Option<LlmError>,
        stop: Option<StopReason>,
        reply_text: String,
    ) -> RoundOutcome {
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
                tool: call.name.clone(),
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

    /// Counts this reply's mistakes: calls that were mistakes add up, a
    /// call that succeeded resets the count, a broken reply counts one,
    /// and a detected loop reaches the limit.
    pub(super) fn count_mistakes(&self, runs: &[(ToolCall, ToolRun)], broken: bool) {
        let mut st = self.lock();
        let made_mistake = runs.iter().any(|(_, r)| r.is_mistake());
        if made_mistake {
            st.consecutive_mistakes += runs.iter().filter(|(_, r)| r.is_mistake()).count() as u32;
        } else if runs.iter().any(|(_, r)| !r.is_error()) {
            st.consecutive_mistakes = 0;
        }
        // A reply cut off by a broken stream is answered with "go on",
        // which a stream that keeps breaking would repeat forever: each
        // one counts toward the mistake limit.
        if broken {
            st.consecutive_mistakes += 1;
        }
        if std::mem::take(&mut st.force_mistake_limit) {
            st.consecutive_mistakes = st.consecutive_mistakes.max(self.config.max_mistakes);
        }
    }
}

/// The reply's text blocks, joined, without thinking leftovers.
fn reply_text(assistant: &[ContentBlock]) -> String {
    strip_thinking_leftovers(
        &assistant
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
    )
}
