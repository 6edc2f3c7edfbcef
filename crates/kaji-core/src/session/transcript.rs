//! A saved conversation as the events a front end renders, so that a
//! resumed session (the terminal UI) and `kaji sessions show` show history
//! exactly as they show a live Task. Pure: history in, events out.

use std::collections::HashMap;

use kaji_protocol::{ContentBlock, Message, Role, SayKind, SayPayload, TaskEvent, TextOrigin};

/// The events that show `history`: the user's texts as `user_feedback`,
/// model text and reasoning, each tool call (`say tool`, `tool_use`) and
/// its result with its summary. What kaji itself added to a user message
/// (hook context, notices, nudges) is left out ([`Transcript::message`]).
pub fn history_events(history: &[Message]) -> Vec<TaskEvent> {
    let mut transcript = Transcript::new(origins_recorded(history));
    for message in history {
        transcript.message(message);
    }
    transcript.into_events()
}

/// Whether `messages` were written by a kaji that marks the user's texts
/// ([`TextOrigin`]): some user text block is marked. Older session files
/// mark none (a resume marks their prompts from the `task_started`
/// records, [`crate::storage::replay::replay`]).
pub fn origins_recorded<'a>(messages: impl IntoIterator<Item = &'a Message>) -> bool {
    messages
        .into_iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| &m.content)
        .any(|b| matches!(b, ContentBlock::Text { origin, .. } if !origin.is_unmarked()))
}

/// A saved conversation turned into the events a front end renders,
/// message by message (`kaji sessions show` adds its own notes between
/// them). Tool calls are presented by the built-in tools
/// ([`crate::executor::recorded_view`], [`crate::executor::recorded_summary`]),
/// as the executor presents live ones.
#[derive(Debug, Default)]
pub struct Transcript {
    events: Vec<TaskEvent>,
    /// Each call seen so far: its tool's name and input, for its result.
    calls: HashMap<String, (String, serde_json::Value)>,
    next_id: u64,
    /// The user's texts are known by their [`TextOrigin`] (else by the
    /// rule older files need, [`is_notice`]).
    origins: bool,
}

impl Transcript {
    /// An empty transcript; `origins`: the messages mark the user's texts
    /// ([`origins_recorded`]).
    pub fn new(origins: bool) -> Self {
        Self {
            origins,
            ..Self::default()
        }
    }

    /// Adds the events of one message.
    pub fn message(&mut self, message: &Message) {
        for block in &message.content {
            match (message.role, block) {
                (Role::User, ContentBlock::Text { text, origin }) => self.user_text(text, *origin),
                (Role::Assistant, ContentBlock::Text { text, .. }) if !text.trim().is_empty() => {
                    self.note(SayKind::Text, text);
                }
                (Role::Assistant, ContentBlock::Reasoning { text, .. }) => {
                    self.note(SayKind::Reasoning, text);
                }
                (Role::Assistant, ContentBlock::ToolUse { id, name, input }) => {
                    self.call(id, name, input);
                }
                (Role::Assistant, ContentBlock::Server { block }) => self.server(block),
                (
                    Role::User,
                    ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    },
                ) => self.result(tool_use_id, content, *is_error),
                _ => {}
            }
        }
    }

    /// Adds a say of its own (`kaji sessions show`'s notes).
    pub fn note(&mut self, kind: SayKind, text: &str) {
        let id = self.next();
        self.events.push(say(id, kind, text, None));
    }

    /// The events so far.
    pub fn into_events(self) -> Vec<TaskEvent> {
        self.events
    }

    fn next(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A text of a user message: shown when the user sent it; a compacted
    /// conversation shows its summary.
    fn user_text(&mut self, text: &str, origin: TextOrigin) {
        if origin.is_unmarked() && text.starts_with(SUMMARY_MARK) {
            self.note(
                SayKind::ContextCompacted,
                "earlier conversation compacted; its summary",
            );
            self.note(SayKind::Info, text.trim_start_matches(SUMMARY_MARK).trim());
            return;
        }
        let shown = match origin {
            TextOrigin::Prompt | TextOrigin::Shell => Some(text),
            TextOrigin::Reply => Some(reply_of(text).unwrap_or(text)),
            TextOrigin::Unmarked if !self.origins && !is_notice(text) => Some(text),
            TextOrigin::Unmarked => None,
        };
        if let Some(text) = shown {
            self.note(SayKind::UserFeedback, text);
        }
    }

    fn call(&mut self, id: &str, name: &str, input: &serde_json::Value) {
        self.calls
            .insert(id.to_string(), (name.to_string(), input.clone()));
        let view = crate::executor::recorded_view(name, input);
        let payload = SayPayload::Tool {
            id: id.to_string(),
            tool: name.to_string(),
            input: input.clone(),
            view: view.clone(),
        };
        let text = crate::executor::describe_call(name, input);
        let say_id = self.next();
        self.events
            .push(say(say_id, SayKind::Tool, &text, Some(payload)));
        self.events.push(TaskEvent::ToolUse {
            id: id.to_string(),
            name: name.to_string(),
            input: input.clone(),
            view,
            preview: None,
        });
    }

    fn result(&mut self, id: &str, output: &str, is_error: bool) {
        let (name, input) = self
            .calls
            .get(id)
            .map_or(("", &serde_json::Value::Null), |(n, i)| (n.as_str(), i));
        let summary = crate::executor::recorded_summary(name, input, output, is_error);
        self.events.push(TaskEvent::ToolResult {
            id: id.to_string(),
            name: name.to_string(),
            is_error,
            output: output.to_string(),
            summary: Some(summary),
        });
    }

    /// A search the provider ran, shown as a `WebSearch` call and its
    /// result.
    fn server(&mut self, block: &serde_json::Value) {
        use crate::web_search::ServerView;
        let name = kaji_tools::web_search::WEB_SEARCH;
        for view in crate::web_search::server_view(block) {
            match view {
                ServerView::Call { id, input } => self.call(&id, name, &input),
                ServerView::Result {
                    id,
                    is_error,
                    output,
                } => {
                    self.calls
                        .entry(id.clone())
                        .or_insert_with(|| (name.to_string(), serde_json::Value::Null));
                    self.result(&id, &output, is_error);
                }
            }
        }
    }
}

/// What the user sent in `history`, in order: `(message index, block
/// index, text)` of each text block marked [`TextOrigin::Prompt`],
/// [`TextOrigin::Shell`] or [`TextOrigin::Reply`]. Whatever kaji added to a user message (hook
/// context, nudges, notices, summaries, replies to its questions) is
/// unmarked and never one of them, whatever its words.
pub fn user_texts(history: &[Message]) -> Vec<(usize, usize, &str)> {
    let mut out = Vec::new();
    for (m, message) in history.iter().enumerate() {
        if message.role != Role::User {
            continue;
        }
        for (b, block) in message.content.iter().enumerate() {
            if let ContentBlock::Text {
                text,
                origin: TextOrigin::Prompt | TextOrigin::Shell | TextOrigin::Reply,
            } = block
            {
                out.push((m, b, text.as_str()));
            }
        }
    }
    out
}

/// How the model is told what the user answered to kaji's question.
const REPLY_PREFIX: &str = "The user says:\n";

/// The block that tells the model what the user answered
/// ([`TextOrigin::Reply`]).
pub(crate) fn reply_block(answer: &str) -> ContentBlock {
    ContentBlock::Text {
        text: format!("{REPLY_PREFIX}{answer}"),
        origin: TextOrigin::Reply,
    }
}

/// What the user typed, from a [`reply_block`]'s text.
pub(crate) fn reply_of(text: &str) -> Option<&str> {
    text.strip_prefix(REPLY_PREFIX)
}

/// How a compacted history's summary message starts
/// ([`crate::compaction::compacted_history`]).
const SUMMARY_MARK: &str = "[CONVERSATION SUMMARY]";

/// Texts kaji itself put into a user message (results in the xml
/// protocol, hook context, reminders, notices), as known in a session file
/// that does not mark the user's texts: bracketed texts and kaji's answers
/// to a completion. A user's prompt that starts with `[` is then taken for
/// one; files that mark origins never ask this.
fn is_notice(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with('[')
        || t.starts_with("The user accepted the result.")
        || t.starts_with("The user has feedback on the result:")
}

fn say(id: u64, kind: SayKind, text: &str, payload: Option<SayPayload>) -> TaskEvent {
    TaskEvent::Say {
        id,
        kind,
        text: text.to_string(),
        partial: false,
        payload,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(content: Vec<ContentBlock>) -> Message {
        Message {
            role: Role::User,
            content,
        }
    }

    /// The texts shown as the user's.
    fn typed(history: &[Message]) -> Vec<String> {
        history_events(history)
            .into_iter()
            .filter_map(|e| match e {
                TaskEvent::Say {
                    kind: SayKind::UserFeedback,
                    text,
                    ..
                } => Some(text),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn marked_texts_are_the_users_whatever_their_words() {
        let history = [
            user(vec![
                ContentBlock::text("[SessionStart hook]\nbranch main"),
                ContentBlock::text("Hook context without brackets"),
                ContentBlock::prompt("[x] tick the box"),
            ]),
            Message::assistant_text("Ticked."),
            user(vec![reply_block("go on")]),
        ];
        assert_eq!(typed(&history), ["[x] tick the box", "go on"]);
    }

    #[test]
    fn a_file_without_origins_keeps_the_bracket_rule() {
        let history = [
            user(vec![
                ContentBlock::text("[kaji: the session was resumed]"),
                ContentBlock::text("Fix the bug"),
            ]),
            Message::assistant_text("Done."),
            user(vec![ContentBlock::text("The user accepted the result.")]),
        ];
        assert!(!origins_recorded(&history));
        assert_eq!(typed(&history), ["Fix the bug"]);
    }

    #[test]
    fn results_carry_their_tools_summary() {
        let history = [
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::ToolUse {
                        id: "r".into(),
                        name: "Read".into(),
                        input: json!({"file_path": "a.txt"}),
                    },
                    ContentBlock::ToolUse {
                        id: "m".into(),
                        name: "mcp__x__y".into(),
                        input: json!({}),
                    },
                ],
            },
            user(vec![
                ContentBlock::tool_result("r", "     1\talpha\n     2\tbeta\n", false),
                ContentBlock::tool_result("m", "first\nsecond", false),
            ]),
        ];
        let summaries: Vec<Option<String>> = history_events(&history)
            .into_iter()
            .filter_map(|e| match e {
                TaskEvent::ToolResult { summary, .. } => Some(summary),
                _ => None,
            })
            .collect();
        assert_eq!(
            summaries,
            [
                Some("Read 2 lines".to_string()),
                Some("first (+1 lines)".to_string())
            ]
        );
    }
}
