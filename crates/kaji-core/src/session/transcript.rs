//! A saved conversation as the events a front end renders, so that a
//! resumed session (the terminal UI) and `kaji sessions show` show history
//! exactly as they show a live Task. Pure: history in, events out.

use std::collections::HashMap;

use kaji_protocol::{ContentBlock, Message, Role, SayKind, SayPayload, TaskEvent, TextOrigin};

/// The events that show `history`: the user's text as `user_feedback`,
/// model text and reasoning, each tool call (`say tool`, `tool_use`) and
/// its result. Notices kaji added to a user message (bracketed
/// `[...]` texts) are left out.
pub fn history_events(history: &[Message]) -> Vec<TaskEvent> {
    let mut events = Vec::new();
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut id = 0u64;
    let mut next = || {
        id += 1;
        id
    };
    for message in history {
        for block in &message.content {
            match (message.role, block) {
                // A compacted conversation shows its summary, not nothing.
                (Role::User, ContentBlock::Text { text, .. }) if text.starts_with(SUMMARY_MARK) => {
                    events.push(say(
                        next(),
                        SayKind::ContextCompacted,
                        "earlier conversation compacted; its summary",
                        None,
                    ));
                    let summary = text.trim_start_matches(SUMMARY_MARK).trim();
                    events.push(say(next(), SayKind::Info, summary, None));
                }
                (Role::User, ContentBlock::Text { text, .. }) if !is_notice(text) => {
                    events.push(say(next(), SayKind::UserFeedback, text, None));
                }
                (Role::Assistant, ContentBlock::Text { text, .. }) if !text.trim().is_empty() => {
                    events.push(say(next(), SayKind::Text, text, None));
                }
                (Role::Assistant, ContentBlock::Reasoning { text, .. }) => {
                    events.push(say(next(), SayKind::Reasoning, text, None));
                }
                (
                    Role::Assistant,
                    ContentBlock::ToolUse {
                        id: call,
                        name,
                        input,
                    },
                ) => {
                    names.insert(call, name);
                    let view = crate::executor::recorded_view(name, input);
                    let payload = SayPayload::Tool {
                        id: call.clone(),
                        tool: name.clone(),
                        input: input.clone(),
                        view: view.clone(),
                    };
                    let text = crate::executor::describe_call(name, input);
                    events.push(say(next(), SayKind::Tool, &text, Some(payload)));
                    events.push(TaskEvent::ToolUse {
                        id: call.clone(),
                        name: name.clone(),
                        input: input.clone(),
                        view,
                        preview: None,
                    });
                }
                (Role::Assistant, ContentBlock::Server { block }) => {
                    server_events(block, &mut next, &mut events);
                }
                (
                    Role::User,
                    ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    },
                ) => events.push(TaskEvent::ToolResult {
                    id: tool_use_id.clone(),
                    name: names.get(tool_use_id.as_str()).unwrap_or(&"").to_string(),
                    is_error: *is_error,
                    output: content.clone(),
                }),
                _ => {}
            }
        }
    }
    events
}

/// A search the provider ran, shown as a `WebSearch` call and its result.
fn server_events(
    block: &serde_json::Value,
    next: &mut impl FnMut() -> u64,
    events: &mut Vec<TaskEvent>,
) {
    use crate::web_search::ServerView;
    let name = kaji_tools::web_search::WEB_SEARCH;
    for view in crate::web_search::server_view(block) {
        match view {
            ServerView::Call { id, input } => {
                let view = crate::executor::recorded_view(name, &input);
                let payload = SayPayload::Tool {
                    id: id.clone(),
                    tool: name.to_string(),
                    input: input.clone(),
                    view: view.clone(),
                };
                let text = crate::executor::describe_call(name, &input);
                events.push(say(next(), SayKind::Tool, &text, Some(payload)));
                events.push(TaskEvent::ToolUse {
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
            } => events.push(TaskEvent::ToolResult {
                id,
                name: name.to_string(),
                is_error,
                output,
            }),
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

/// Texts kaji itself put into a user message: results in the xml protocol,
/// hook context, reminders, notices.
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
