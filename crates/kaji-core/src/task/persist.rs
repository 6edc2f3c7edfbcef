//! The points where the loop makes its work durable in the session file
//! ahead of what could lose it (the reply so far, before a tool runs).
//! Nothing here decides anything; it only records.

use kaji_protocol::{ContentBlock, Message, Role};

use super::Task;
use crate::executor::ToolRun;
use crate::parser::{ToolCall, ToolProtocol};
use crate::storage::record::SessionRecord;

impl Task {
    /// Makes the reply so far durable before `call` runs: this round's user
    /// content (the first time) and the reply's text and calls up to
    /// `call` (a `partial_reply`). A kill -9 while the tool runs leaves the
    /// call in the file, so a resume answers it as interrupted instead of
    /// asking the model again (which may run it twice).
    pub(super) fn write_ahead(&self, call: &ToolCall, earlier: &[(ToolCall, ToolRun)]) {
        if !self.config.recorder.is_enabled() {
            return;
        }
        let (user, mut content) = {
            let mut st = self.lock();
            let content = st
                .assembler
                .as_ref()
                .map(|a| a.history_content())
                .unwrap_or_default();
            (st.round_user.take(), content)
        };
        if self.config.tool_protocol == ToolProtocol::Native {
            content.retain(|b| match b {
                ContentBlock::ToolUse { id, .. } => {
                    id == &call.id || earlier.iter().any(|(c, _)| &c.id == id)
                }
                _ => true,
            });
        }
        if let Some(content) = user {
            self.config.recorder.record(SessionRecord::Message {
                message: Message {
                    role: Role::User,
                    content,
                },
            });
        }
        self.config
            .recorder
            .record_synced(SessionRecord::PartialReply {
                message: Message {
                    role: Role::Assistant,
                    content,
                },
            });
    }

    /// Records the reply in the history and the session file — with this
    /// round's user content, unless that went ahead of a tool (a request
    /// that failed as a whole left no trace) — and counts its mistakes.
    pub(super) fn record_reply(
        &self,
        assistant: Vec<ContentBlock>,
        runs: &[(ToolCall, ToolRun)],
        broken: bool,
    ) {
        {
            let mut st = self.lock();
            let reply = Message {
                role: Role::Assistant,
                content: assistant,
            };
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
            st.push_message(reply);
        }
        self.count_mistakes(runs, broken);
    }

    /// The results of an aborted round, so that every call stays answered:
    /// in the history and the session file, synced.
    pub(super) fn record_aborted_results(&self, results: Vec<ContentBlock>) {
        if !results.is_empty() {
            let message = Message {
                role: Role::User,
                content: results,
            };
            self.lock().push_message(message.clone());
            self.config
                .recorder
                .record(SessionRecord::Message { message });
        }
        self.config.recorder.sync();
    }
}
