//! Rewinding a conversation: back to just before one of the user's
//! messages (Claude Code's Esc Esc), and which checkpoint holds the files
//! as they were then.
//!
//! A user message here is a prompt the user sent: a text block marked
//! [`kaji_protocol::TextOrigin::Prompt`] ([`super::transcript::user_texts`]),
//! numbered from 0; nothing kaji added to the conversation is one. A rewind keeps
//! everything before it (tool results of the same message included, so
//! every tool call keeps its result), records the new history as a
//! `history_replaced` record with reason `rewind` (a resume sees the
//! rewound conversation), and never touches the files: restoring them is
//! the front end's choice, from [`UserPrompt::checkpoint`]. Tokens already
//! spent stay counted.

use std::sync::{Arc, Mutex};

use kaji_protocol::Message;

use super::transcript::user_texts;
use super::{Session, SessionError};
use crate::storage::record::SessionRecord;

/// Where a prompt's task-start checkpoint id arrives.
pub(crate) type CheckpointSlot = Arc<Mutex<Option<String>>>;

/// One user message the conversation can be rewound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserPrompt {
    /// Its number among the user messages, from 0.
    pub index: usize,
    /// What the user wrote.
    pub text: String,
    /// The checkpoint of the files as they were when it was sent (the
    /// task-start checkpoint of its prompt), when this process ran it
    /// with checkpoints on.
    pub checkpoint: Option<String>,
}

/// The history before user message `index`, or `None` if there is no
/// such message.
pub fn history_before(history: &[Message], index: usize) -> Option<Vec<Message>> {
    let (message, block, _) = *user_texts(history).get(index)?;
    let mut kept = history[..message].to_vec();
    let mut last = history[message].clone();
    last.content.truncate(block);
    if !last.content.is_empty() {
        kept.push(last);
    }
    Some(kept)
}

impl Session {
    /// The user messages of the conversation, oldest first, with the
    /// checkpoint of each one's start where known.
    pub fn user_prompts(&self) -> Vec<UserPrompt> {
        let history = self.history();
        let slots = self.start_checkpoints();
        user_texts(&history)
            .into_iter()
            .enumerate()
            .map(|(index, (_, _, text))| UserPrompt {
                index,
                // A `!command` or an answer as the user typed it.
                text: match super::shell::shell_command_of(text) {
                    Some(command) => format!("!{command}"),
                    None => super::transcript::reply_of(text)
                        .unwrap_or(text)
                        .to_string(),
                },
                checkpoint: slots
                    .iter()
                    .find(|(i, _)| *i == index)
                    .and_then(|(_, slot)| slot.lock().unwrap_or_else(|e| e.into_inner()).clone()),
            })
            .collect()
    }

    /// Rolls the conversation back to just before user message `index`
    /// and returns that message (for the front end to offer it for
    /// editing). Refused while a prompt runs.
    pub fn rewind(&self, index: usize) -> Result<UserPrompt, SessionError> {
        if self.is_busy() {
            return Err(SessionError::Busy);
        }
        let prompt = self
            .user_prompts()
            .into_iter()
            .nth(index)
            .ok_or_else(|| SessionError::NoUserMessage(index))?;
        let history = {
            let mut st = self.lock();
            let kept = history_before(&st.history, index)
                .ok_or_else(|| SessionError::NoUserMessage(index))?;
            st.history = kept.clone();
            kept
        };
        self.start_slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(i, _)| *i < index);
        self.recorder.record_synced(SessionRecord::HistoryReplaced {
            history,
            reason: "rewind".into(),
            tokens_before: None,
            tokens_after: None,
        });
        Ok(prompt)
    }

    fn start_checkpoints(&self) -> Vec<(usize, CheckpointSlot)> {
        self.start_slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A slot for the task-start checkpoint of the prompt about to run,
    /// which will be user message `index`.
    pub(crate) fn new_start_slot(&self, index: usize) -> CheckpointSlot {
        let slot = CheckpointSlot::default();
        let mut slots = self.start_slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.retain(|(i, _)| *i != index);
        slots.push((index, Arc::clone(&slot)));
        slot
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kaji_protocol::{ContentBlock, Role};

    fn user(content: Vec<ContentBlock>) -> Message {
        Message {
            role: Role::User,
            content,
        }
    }

    /// Everything kaji puts into user messages, beside what the user sent
    /// (prompts, an answer, a `!command`): only those are the user's,
    /// whatever the words of the rest.
    #[test]
    fn only_the_prompts_the_user_sent_are_user_messages() {
        let summary = crate::compaction::compacted_history(
            "they asked for the tests",
            &crate::compaction::CompactionContext::default(),
        );
        let mut history = summary;
        history.push(Message::assistant_text("ok"));
        history.push(user(vec![
            ContentBlock::text("[TASK RESUMPTION] This task was interrupted."),
            ContentBlock::text("[SessionStart hook]\nbranch main"),
            // Starts with a bracket, as kaji's notices do.
            ContentBlock::prompt("[x] tick the box\n\n<file path=\"a.txt\">\nalpha\n</file>"),
            ContentBlock::text("[UserPromptSubmit hook]\nbe brief"),
        ]));
        history.push(Message::assistant_text(crate::task::INTERRUPTED_BY_ABORT));
        history.push(user(vec![
            ContentBlock::text("You did not use a tool in your previous reply."),
            // An answer to kaji's question, and the same words unmarked.
            super::super::transcript::reply_block("why?"),
            ContentBlock::text("The user says:\nwhy?"),
            ContentBlock::text("The user accepted the result."),
            ContentBlock::text("Message from teammate bob: done"),
            ContentBlock::prompt("now run them"),
            ContentBlock::Text {
                text: super::super::shell::shell_message("ls", "a.txt"),
                origin: kaji_protocol::TextOrigin::Shell,
            },
            // The same words, not sent by the user.
            ContentBlock::text(super::super::shell::shell_message("ls", "a.txt")),
        ]));
        let texts: Vec<&str> = user_texts(&history).iter().map(|t| t.2).collect();
        assert_eq!(
            texts,
            [
                "[x] tick the box\n\n<file path=\"a.txt\">\nalpha\n</file>",
                "The user says:\nwhy?",
                "now run them",
                "I ran this shell command myself:\n$ ls\n<output>\na.txt\n</output>"
            ]
        );
        // Rewinding to the answer keeps what came before it, kaji's
        // notice of its message included.
        let kept = history_before(&history, 1).unwrap();
        assert_eq!(kept.len(), history.len());
        assert_eq!(kept.last().unwrap().content.len(), 1);
        assert_eq!(history_before(&history, 4), None);
        assert_eq!(super::super::transcript::reply_of(texts[1]), Some("why?"));
        assert_eq!(super::super::shell::shell_command_of(texts[3]), Some("ls"));
    }
}
