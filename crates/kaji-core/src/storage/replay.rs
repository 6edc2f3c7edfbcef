//! Replaying a loaded session file into the state a resumed session starts
//! from ([`RestoredSession`]): the history, the mode, the directory, the
//! todo, the approvals, the task list, checkpoints, usage and prompts.
//!
//! The history it gives back is always valid for the model APIs: a tool
//! call left without a result (a crash mid-tool) is answered with an error
//! result saying it was interrupted. This module never does I/O and never
//! drops a recorded message.

use std::path::PathBuf;

use kaji_protocol::{ContentBlock, Message, Role, TextOrigin, Usage};
use kaji_tools::todo::TodoItem;

use super::record::{LoadedSession, SessionRecord, UnixMillis};

/// The text of the result given to a tool call that never returned.
pub const INTERRUPTED_RESULT: &str = "interrupted — it may have run partly; check before running it again \
     (kaji stopped before the tool call returned; its result is unknown)";

/// The state of a session as its file left it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RestoredSession {
    /// The conversation, ready for the next request.
    pub history: Vec<Message>,
    /// The last permission mode recorded (`None`: never changed).
    pub permission_mode: Option<String>,
    /// The model last chosen (`None`: the settings' model).
    pub model: Option<String>,
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
    /// The history's last message (the answer to the last assistant
    /// message's tool calls) was built here, from pending results and
    /// made-up ones, and is not in the file as a message yet: whoever
    /// continues the session records it before anything else.
    pub answer_built: bool,
}

/// Replays `loaded`'s records in order (see the module doc).
pub fn replay(loaded: &LoadedSession) -> RestoredSession {
    let mut st = RestoredSession {
        cwd: loaded.header.cwd.clone(),
        last_written: loaded.header.created,
        ..RestoredSession::default()
    };
    let mut pending = Pending::default();
    for record in &loaded.records {
        apply(&mut st, &mut pending, record);
    }
    mark_unmarked_prompts(&mut st.history, &st.prompts);
    let pending = pending.results;
    let before = st.history.len();
    let synthesised = answer_open_tool_uses(&mut st.history, pending);
    st.answer_built = st.history.len() > before;
    st.last_round_interrupted = synthesised || st.task_open;
    if let Some(modified) = loaded.modified {
        st.last_written = st.last_written.max(modified);
    }
    st
}

/// What replay carries between records.
#[derive(Default)]
struct Pending {
    /// Tool results of the latest assistant message not yet repeated in a
    /// recorded user message: (tool_use_id, block).
    results: Vec<(String, ContentBlock)>,
    /// The history's last message is a `partial_reply`, to be replaced by
    /// the next one or by the whole reply.
    partial: bool,
}

fn apply(st: &mut RestoredSession, pending: &mut Pending, record: &SessionRecord) {
    match record {
        SessionRecord::Header(_) => {}
        SessionRecord::TaskStarted { prompt, at, .. } => {
            st.prompts.push(prompt.clone());
            st.task_open = true;
            st.last_written = st.last_written.max(*at);
        }
        SessionRecord::Message { message } => {
            if std::mem::take(&mut pending.partial) && message.role == Role::Assistant {
                // The whole reply replaces its partial one; the results
                // recorded as its tools returned still answer it.
                st.history.pop();
            } else {
                pending.results.clear();
            }
            st.history.push(message.clone());
        }
        SessionRecord::PartialReply { message } => {
            if std::mem::replace(&mut pending.partial, true) {
                st.history.pop();
            }
            st.history.push(message.clone());
        }
        SessionRecord::ToolResult { block, tool_use_id } => {
            pending.results.push((tool_use_id.clone(), block.clone()));
        }
        SessionRecord::HistoryReplaced { history, .. } => {
            pending.results.clear();
            pending.partial = false;
            st.history = history.clone();
        }
        SessionRecord::Mode { mode } => st.permission_mode = Some(mode.clone()),
        SessionRecord::Model { model } => st.model = Some(model.clone()),
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

/// Session files written before prompts were marked hold them unmarked:
/// a user text block whose text is one a `task_started` record holds is
/// that prompt ([`TextOrigin::Prompt`]). (A fork's copied history in such
/// a file has no `task_started` records of its own: its prompts stay
/// unmarked.)
fn mark_unmarked_prompts(history: &mut [Message], prompts: &[String]) {
    for message in history.iter_mut().filter(|m| m.role == Role::User) {
        for block in &mut message.content {
            if let ContentBlock::Text { text, origin } = block
                && origin.is_unmarked()
                && prompts.iter().any(|p| p == text)
            {
                *origin = TextOrigin::Prompt;
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::record::{SESSION_FORMAT_VERSION, SessionHeader, SessionKind};
    use kaji_tools::todo::TodoStatus;
    use serde_json::json;

    fn loaded(records: Vec<SessionRecord>) -> LoadedSession {
        LoadedSession {
            path: PathBuf::from("/s/x.jsonl"),
            header: SessionHeader {
                format: SESSION_FORMAT_VERSION,
                session_id: "x".into(),
                kind: SessionKind::Main,
                parent: None,
                cwd: PathBuf::from("/project"),
                created: 1000,
                kaji_version: "0.1.0".into(),
            },
            records,
            warnings: Vec::new(),
            modified: None,
        }
    }

    fn msg(message: Message) -> SessionRecord {
        SessionRecord::Message { message }
    }

    fn calls(ids: &[&str]) -> Message {
        Message {
            role: Role::Assistant,
            content: ids
                .iter()
                .map(|id| ContentBlock::ToolUse {
                    id: id.to_string(),
                    name: "Bash".into(),
                    input: json!({"command": "ls"}),
                })
                .collect(),
        }
    }

    fn result(id: &str, text: &str) -> SessionRecord {
        SessionRecord::ToolResult {
            block: ContentBlock::tool_result(id, text, false),
            tool_use_id: id.into(),
        }
    }

    fn started(prompt: &str, at: UnixMillis) -> SessionRecord {
        SessionRecord::TaskStarted {
            task_id: "t".into(),
            prompt: prompt.into(),
            at,
        }
    }

    fn ended(status: &str, at: UnixMillis) -> SessionRecord {
        SessionRecord::TaskEnded {
            task_id: "t".into(),
            status: status.into(),
            at,
        }
    }

    #[test]
    fn messages_append_and_a_finished_task_is_not_interrupted() {
        let r = replay(&loaded(vec![
            started("hi", 2000),
            msg(Message::user_text("hi")),
            msg(Message::assistant_text("hello")),
            ended("completed", 3000),
        ]));
        // The prompt of a file written before prompts were marked is
        // known by its task_started record.
        let prompt = Message {
            role: Role::User,
            content: vec![ContentBlock::prompt("hi")],
        };
        assert_eq!(r.history, vec![prompt, Message::assistant_text("hello")]);
        assert_eq!(r.prompts, vec!["hi".to_string()]);
        assert_eq!(r.last_status.as_deref(), Some("completed"));
        assert_eq!(r.last_written, 3000);
        assert!(!r.task_open);
        assert!(!r.last_round_interrupted);
    }

    #[test]
    fn a_task_without_an_end_is_interrupted() {
        let r = replay(&loaded(vec![
            started("hi", 2000),
            msg(Message::user_text("hi")),
            msg(Message::assistant_text("hello")),
        ]));
        assert!(r.task_open);
        assert!(r.last_round_interrupted);
        assert_eq!(r.history.len(), 2);
    }

    #[test]
    fn history_replaced_replaces_the_history() {
        let r = replay(&loaded(vec![
            msg(Message::user_text("a")),
            msg(Message::assistant_text("b")),
            SessionRecord::HistoryReplaced {
                history: vec![Message::user_text("summary")],
                reason: "compaction".into(),
                tokens_before: None,
                tokens_after: None,
            },
            msg(Message::assistant_text("c")),
        ]));
        assert_eq!(
            r.history,
            vec![Message::user_text("summary"), Message::assistant_text("c")]
        );
    }

    #[test]
    fn a_recorded_user_message_supersedes_pending_results() {
        let answer = Message {
            role: Role::User,
            content: vec![ContentBlock::tool_result(
                "1",
                "from the user message",
                false,
            )],
        };
        let r = replay(&loaded(vec![
            msg(Message::user_text("go")),
            msg(calls(&["1"])),
            result("1", "pending"),
            msg(answer.clone()),
            msg(Message::assistant_text("done")),
        ]));
        assert_eq!(r.history.len(), 4);
        assert_eq!(r.history[2], answer);
        assert!(!r.last_round_interrupted);
    }

    #[test]
    fn pending_results_answer_the_last_assistant_message_in_call_order() {
        let r = replay(&loaded(vec![
            msg(Message::user_text("go")),
            msg(calls(&["a", "b"])),
            result("b", "B"),
            result("a", "A"),
        ]));
        let last = r.history.last().unwrap();
        assert_eq!(last.role, Role::User);
        assert_eq!(
            last.content,
            vec![
                ContentBlock::tool_result("a", "A", false),
                ContentBlock::tool_result("b", "B", false)
            ]
        );
        assert!(!r.last_round_interrupted, "nothing was made up");
    }

    #[test]
    fn a_call_without_a_result_gets_an_interrupted_error() {
        let r = replay(&loaded(vec![
            started("go", 1),
            msg(Message::user_text("go")),
            msg(calls(&["a", "b"])),
            result("a", "A"),
            ended("aborted", 2),
        ]));
        let last = r.history.last().unwrap();
        assert_eq!(
            last.content,
            vec![
                ContentBlock::tool_result("a", "A", false),
                ContentBlock::tool_result("b", INTERRUPTED_RESULT, true)
            ]
        );
        assert!(r.last_round_interrupted);
    }

    #[test]
    fn results_of_calls_not_in_the_last_assistant_message_are_dropped() {
        let r = replay(&loaded(vec![
            msg(Message::user_text("go")),
            msg(Message::assistant_text("no tools")),
            result("zzz", "stray"),
        ]));
        assert_eq!(r.history.len(), 2);
        let r = replay(&loaded(vec![
            msg(Message::user_text("go")),
            msg(calls(&["a"])),
            result("zzz", "stray"),
            result("a", "A"),
        ]));
        assert_eq!(
            r.history.last().unwrap().content,
            vec![ContentBlock::tool_result("a", "A", false)]
        );
    }

    #[test]
    fn state_records_are_restored() {
        let todo = TodoItem {
            content: "Run tests".into(),
            status: TodoStatus::InProgress,
            active_form: "Running tests".into(),
        };
        let usage = |i, o| SessionRecord::Usage {
            turn: 1,
            usage: Usage {
                input_tokens: i,
                output_tokens: o,
                ..Usage::default()
            },
            cost_usd: Some(0.5),
        };
        let r = replay(&loaded(vec![
            SessionRecord::Mode {
                mode: "plan".into(),
            },
            SessionRecord::Mode {
                mode: "yolo".into(),
            },
            SessionRecord::Model {
                model: "big".into(),
            },
            SessionRecord::Model {
                model: "small".into(),
            },
            SessionRecord::Cwd {
                cwd: "/project/wt".into(),
            },
            SessionRecord::Approval {
                rule: "Bash(ls:*)".into(),
            },
            SessionRecord::Approval {
                rule: "Edit(src/**)".into(),
            },
            SessionRecord::Approval {
                rule: "Bash(ls:*)".into(),
            },
            SessionRecord::Todo {
                items: vec![todo.clone()],
            },
            SessionRecord::TaskList { id: "list".into() },
            SessionRecord::Checkpoint {
                id: "c1".into(),
                label: "one".into(),
            },
            SessionRecord::Checkpoint {
                id: "c2".into(),
                label: "two".into(),
            },
            usage(10, 2),
            usage(5, 1),
            SessionRecord::Usage {
                turn: 3,
                usage: Usage::default(),
                cost_usd: None,
            },
        ]));
        assert_eq!(r.permission_mode.as_deref(), Some("yolo"));
        assert_eq!(r.model.as_deref(), Some("small"));
        assert_eq!(r.cwd, PathBuf::from("/project/wt"));
        assert_eq!(r.approvals, vec!["Bash(ls:*)", "Edit(src/**)"]);
        assert_eq!(r.todo, vec![todo]);
        assert_eq!(r.task_list_id.as_deref(), Some("list"));
        assert_eq!(r.checkpoints, vec!["c1", "c2"]);
        assert_eq!(r.usage.input_tokens, 15);
        assert_eq!(r.usage.output_tokens, 3);
        assert_eq!(r.turns, 3);
        assert_eq!(r.cost_usd, 1.0);
    }

    #[test]
    fn the_cwd_defaults_to_the_header_and_last_written_to_the_mtime() {
        let mut l = loaded(vec![]);
        l.modified = Some(99_999);
        let r = replay(&l);
        assert_eq!(r.cwd, PathBuf::from("/project"));
        assert_eq!(r.last_written, 99_999);
        assert!(r.history.is_empty());
        assert!(!r.last_round_interrupted);
    }
}
