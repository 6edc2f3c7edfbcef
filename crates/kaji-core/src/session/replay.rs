//! Replaying a loaded session file into the state a resumed session starts
//! from ([`RestoredSession`]): the history, the mode, the directory, the
//! todo, the approvals, the task list, checkpoints, usage and prompts.
//!
//! The history it gives back is always valid for the model APIs: a tool
//! call left without a result (a crash mid-tool) is answered with an error
//! result saying it was interrupted. This module never does I/O and never
//! drops a recorded message.

use std::path::PathBuf;

use kaji_protocol::{ContentBlock, Message, Role, Usage};
use kaji_tools::todo::TodoItem;

use super::record::{SessionRecord, UnixMillis};
use super::store::LoadedSession;

/// The text of the result given to a tool call that never returned.
pub const INTERRUPTED_RESULT: &str =
    "The tool call was interrupted before it returned (kaji stopped); its result is unknown.";

/// The state of a session as its file left it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RestoredSession {
    /// The conversation, ready for the next request.
    pub history: Vec<Message>,
    /// The last permission mode recorded (`None`: never changed).
    pub permission_mode: Option<String>,
    /// The working directory: the header's, or the last change.
    pub cwd: PathBuf,
    /// The todo checklist as last recorded.
    pub todo: Vec<TodoItem>,
    /// Approval rules granted, first grant order, no duplicates.
    pub approvals: Vec<String>,
    /// The task list's id, when one was recorded.
    pub task_list_id: Option<String>,
    /// Checkpoint ids, oldest first.
    pub checkpoints: Vec<String>,
    /// Tokens of every recorded request.
    pub usage: Usage,
    /// Model requests recorded.
    pub turns: u32,
    /// Cost of the requests whose price was known, in USD.
    pub cost_usd: f64,
    /// The prompts, in order.
    pub prompts: Vec<String>,
    /// When the last record was written (the file's modification time, or
    /// the latest time a record carries).
    pub last_written: UnixMillis,
    /// The last prompt's end status, when one ended.
    pub last_status: Option<String>,
    /// The last prompt started and never ended.
    pub task_open: bool,
    /// The last round was cut off: a tool result had to be made up, or
    /// the last prompt never ended.
    pub last_round_interrupted: bool,
}

/// Replays `loaded`'s records in order (see the module doc).
pub fn replay(loaded: &LoadedSession) -> RestoredSession {
    let mut st = RestoredSession {
        cwd: loaded.header.cwd.clone(),
        last_written: loaded.header.created,
        ..RestoredSession::default()
    };
    // Tool results of the latest assistant message not yet repeated in a
    // recorded user message: (tool_use_id, block).
    let mut pending: Vec<(String, ContentBlock)> = Vec::new();
    for record in &loaded.records {
        apply(&mut st, &mut pending, record);
    }
    let synthesised = answer_open_tool_uses(&mut st.history, pending);
    st.last_round_interrupted = synthesised || st.task_open;
    if let Some(modified) = loaded.modified {
        st.last_written = st.last_written.max(modified);
    }
    st
}

fn apply(
    st: &mut RestoredSession,
    pending: &mut Vec<(String, ContentBlock)>,
    record: &SessionRecord,
) {
    match record {
        SessionRecord::Header(_) => {}
        SessionRecord::TaskStarted { prompt, at, .. } => {
            st.prompts.push(prompt.clone());
            st.task_open = true;
            st.last_written = st.last_written.max(*at);
        }
        SessionRecord::Message { message } => {
            pending.clear();
            st.history.push(message.clone());
        }
        SessionRecord::ToolResult { block, tool_use_id } => {
            pending.push((tool_use_id.clone(), block.clone()));
        }
        SessionRecord::HistoryReplaced { history, .. } => {
            pending.clear();
            st.history = history.clone();
        }
        SessionRecord::Mode { mode } => st.permission_mode = Some(mode.clone()),
        SessionRecord::Cwd { cwd } => st.cwd = cwd.clone(),
        SessionRecord::Approval { rule } => {
            if !st.approvals.contains(rule) {
                st.approvals.push(rule.clone());
            }
        }
        SessionRecord::Todo { items } => st.todo = items.clone(),
        SessionRecord::TaskList { id } => st.task_list_id = Some(id.clone()),
        SessionRecord::Checkpoint { id, .. } => st.checkpoints.push(id.clone()),
        SessionRecord::Usage {
            usage, cost_usd, ..
        } => {
            st.usage.add(usage);
            st.turns += 1;
            st.cost_usd += cost_usd.unwrap_or(0.0);
        }
        SessionRecord::TaskEnded { status, at, .. } => {
            st.task_open = false;
            st.last_status = Some(status.clone());
            st.last_written = st.last_written.max(*at);
        }
    }
}

/// When the history ends with an assistant message that calls tools, adds
/// the user message answering it: the pending result of each call in call
/// order, an interrupted-error result for a call without one. Pending
/// results of other calls are dropped. Returns whether a result had to be
/// made up.
fn answer_open_tool_uses(history: &mut Vec<Message>, pending: Vec<(String, ContentBlock)>) -> bool {
    let Some(last) = history.last().filter(|m| m.role == Role::Assistant) else {
        return false;
    };
    let calls: Vec<String> = last.tool_uses().map(|(id, _, _)| id.to_string()).collect();
    if calls.is_empty() {
        return false;
    }
    let mut synthesised = false;
    let content = calls
        .iter()
        .map(|call| {
            // The last result recorded for a call wins.
            match pending.iter().rev().find(|(id, _)| id == call) {
                Some((_, block)) => block.clone(),
                None => {
                    synthesised = true;
                    ContentBlock::tool_result(call.clone(), INTERRUPTED_RESULT, true)
                }
            }
        })
        .collect();
    history.push(Message {
        role: Role::User,
        content,
    });
    synthesised
}
