//! kaji's task events as ACP `session/update` notifications: message and
//! thought chunks, tool calls (kind, locations, diffs), tool call updates,
//! the todo as a plan.
//!
//! One [`Converter`] per ACP session keeps what streaming needs (how much of
//! each message was already sent, which tool calls were announced). It
//! only converts: it never sends, reads files or blocks.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::schema::{
    ContentBlock, ContentChunk, Diff, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    SessionUpdate, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use kaji_protocol::{
    SayKind, SayPayload, StateUpdate, TaskEvent, TaskStatus, TodoItem, TodoStatus, ToolView,
};
use serde_json::Value;

/// Which stream a streamed kaji message goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    User,
    Agent,
    Thought,
}

/// Turns one session's events into ACP updates.
#[derive(Debug)]
pub struct Converter {
    /// Where relative tool paths are resolved.
    cwd: PathBuf,
    /// Streamed messages: their stream and the bytes already sent.
    sent: HashMap<u64, (Stream, usize)>,
    /// Tool calls already announced with `tool_call`, by id: the tool's
    /// view of each (for a permission request about it, which names the
    /// call by its id, and for its result's title).
    announced: HashMap<String, Option<ToolView>>,
    /// Agent text was sent already: the next message starts a new
    /// paragraph rather than run on from the last one.
    agent_spoke: bool,
}

impl Converter {
    /// A converter for a session working in `cwd`.
    pub fn new(cwd: PathBuf) -> Self {
        Self {
            cwd,
            sent: HashMap::new(),
            announced: HashMap::new(),
            agent_spoke: false,
        }
    }

    /// The view of the announced tool call `id` (the model's `tool_use`
    /// id an approval names); `None` if it was not announced.
    pub fn pending_call(&self, id: &str) -> Option<Option<ToolView>> {
        self.announced.get(id).cloned()
    }

    /// Where relative tool paths are resolved.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The updates one event makes (often none).
    pub fn convert(&mut self, event: &TaskEvent) -> Vec<SessionUpdate> {
        match event {
            TaskEvent::Say {
                id,
                kind,
                text,
                payload,
                ..
            } => self.say(*id, *kind, text, payload.as_ref()),
            TaskEvent::Delta { id, text } => match self.sent.get_mut(id) {
                Some((stream, n)) => {
                    *n += text.len();
                    vec![chunk(*stream, text)]
                }
                None => Vec::new(),
            },
            TaskEvent::ToolUse {
                id,
                name,
                input,
                view,
                ..
            } => {
                // Pending until it runs: a call that needs permission is
                // marked in progress once it is given (the front end's
                // answer), one that does not ends with its result.
                self.announce(id, name, input, view.as_ref())
            }
            TaskEvent::ToolResult {
                id,
                name,
                is_error,
                output,
                summary,
            } => {
                let title = match self.announced.get(id) {
                    Some(Some(view)) => view.title.as_str(),
                    _ => name.as_str(),
                };
                let summary = summary
                    .clone()
                    .unwrap_or_else(|| kaji_tools::first_line_summary(output));
                vec![tool_result(
                    id,
                    &format!("{title} · {summary}"),
                    *is_error,
                    output,
                )]
            }
            TaskEvent::Finished { status, result, .. } => match (status, result) {
                (TaskStatus::Completed, _) | (_, None) => Vec::new(),
                (status, Some(why)) => vec![chunk(
                    Stream::Agent,
                    &format!("\n\nkaji stopped ({}): {why}", status.as_str()),
                )],
            },
            TaskEvent::Ask { .. } | TaskEvent::Usage(_) => Vec::new(),
        }
    }

    fn say(
        &mut self,
        id: u64,
        kind: SayKind,
        text: &str,
        payload: Option<&SayPayload>,
    ) -> Vec<SessionUpdate> {
        match payload {
            Some(SayPayload::Tool {
                id,
                tool,
                input,
                view,
            }) => return self.announce(id, tool, input, view.as_ref()),
            Some(SayPayload::Update(StateUpdate::Todo { items })) => return vec![plan(items)],
            _ => {}
        }
        let stream = match kind {
            SayKind::Text => Stream::Agent,
            SayKind::Reasoning => Stream::Thought,
            SayKind::UserFeedback => Stream::User,
            SayKind::CompletionResult | SayKind::Error => {
                return if self.sent.insert(id, (Stream::Agent, text.len())).is_none() {
                    vec![chunk(Stream::Agent, &format!("\n\n{text}"))]
                } else {
                    Vec::new()
                };
            }
            _ => return Vec::new(),
        };
        let first = !self.sent.contains_key(&id);
        let (_, n) = self.sent.entry(id).or_insert((stream, 0));
        // A repeat of the whole text so far: send only what is new.
        let new = text.get(*n..).unwrap_or("");
        if new.is_empty() {
            return Vec::new();
        }
        *n = text.len();
        if stream != Stream::Agent {
            return vec![chunk(stream, new)];
        }
        let separate = first && std::mem::replace(&mut self.agent_spoke, true);
        if separate {
            vec![chunk(stream, &format!("\n\n{new}"))]
        } else {
            vec![chunk(stream, new)]
        }
    }

    /// The `tool_call` for a call, the first time it is seen.
    fn announce(
        &mut self,
        id: &str,
        tool: &str,
        input: &Value,
        view: Option<&ToolView>,
    ) -> Vec<SessionUpdate> {
        if self.announced.contains_key(id) {
            return Vec::new();
        }
        self.announced.insert(id.to_string(), view.cloned());
        vec![SessionUpdate::ToolCall(tool_call(
            &self.cwd, id, tool, input, view,
        ))]
    }
}

fn chunk(stream: Stream, text: &str) -> SessionUpdate {
    let c = ContentChunk {
        content: ContentBlock::text(text),
    };
    match stream {
        Stream::User => SessionUpdate::UserMessageChunk(c),
        Stream::Agent => SessionUpdate::AgentMessageChunk(c),
        Stream::Thought => SessionUpdate::AgentThoughtChunk(c),
    }
}

/// The ACP kind of a kind of call.
pub fn tool_kind(kind: kaji_protocol::ToolKind) -> ToolKind {
    use kaji_protocol::ToolKind as K;
    match kind {
        K::Read => ToolKind::Read,
        K::Edit => ToolKind::Edit,
        K::Execute => ToolKind::Execute,
        K::Search => ToolKind::Search,
        K::Fetch => ToolKind::Fetch,
        K::Think => ToolKind::Think,
        K::SwitchMode => ToolKind::SwitchMode,
        K::Other => ToolKind::Other,
    }
}

/// A call as ACP shows it, from the tool's own view of it (a tool kaji
/// does not have shows as its name): a title, its kind, the files it
/// touches and the change it makes as a diff, paths resolved against
/// `cwd`.
pub fn tool_call(
    cwd: &Path,
    id: &str,
    tool: &str,
    input: &Value,
    view: Option<&ToolView>,
) -> ToolCall {
    let view = view.cloned().unwrap_or_else(|| ToolView {
        title: tool.to_string(),
        ..ToolView::default()
    });
    let diff = view.change.map(|c| Diff {
        path: cwd.join(&c.path),
        old_text: c.old_text,
        new_text: c.new_text,
    });
    ToolCall {
        tool_call_id: id.to_string(),
        title: view.title,
        kind: tool_kind(view.kind),
        status: ToolCallStatus::Pending,
        content: diff.map(ToolCallContent::Diff).into_iter().collect(),
        locations: view
            .locations
            .iter()
            .map(|p| ToolCallLocation { path: cwd.join(p) })
            .collect(),
        raw_input: Some(input.clone()),
        raw_output: None,
    }
}

/// The end of a call: its status, a title that adds the result's summary
/// to the call's (`Read: a.rs · Read 120 lines`), and the output.
fn tool_result(id: &str, title: &str, is_error: bool, output: &str) -> SessionUpdate {
    let status = if is_error {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    SessionUpdate::ToolCallUpdate(ToolCallUpdate {
        tool_call_id: id.to_string(),
        fields: ToolCallUpdateFields {
            status: Some(status),
            title: Some(title.to_string()),
            content: Some(vec![ToolCallContent::text(output)]),
            raw_output: Some(Value::String(output.to_string())),
            ..ToolCallUpdateFields::default()
        },
    })
}

fn plan(items: &[TodoItem]) -> SessionUpdate {
    let entries = items
        .iter()
        .map(|i| {
            let status = match i.status {
                TodoStatus::Pending => PlanEntryStatus::Pending,
                TodoStatus::InProgress => PlanEntryStatus::InProgress,
                TodoStatus::Completed => PlanEntryStatus::Completed,
            };
            PlanEntry {
                content: i.content.clone(),
                priority: PlanEntryPriority::Medium,
                status,
            }
        })
        .collect();
    SessionUpdate::Plan(Plan { entries })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn to_json(updates: &[SessionUpdate]) -> Vec<Value> {
        updates
            .iter()
            .map(|u| serde_json::to_value(u).unwrap())
            .collect()
    }

    fn say(id: u64, kind: SayKind, text: &str, partial: bool) -> TaskEvent {
        TaskEvent::Say {
            id,
            kind,
            text: text.into(),
            partial,
            payload: None,
        }
    }

    #[test]
    fn streamed_text_is_sent_once() {
        let mut c = Converter::new("/w".into());
        let mut text = String::new();
        for e in [
            say(1, SayKind::Text, "Hel", true),
            TaskEvent::Delta {
                id: 1,
                text: "lo".into(),
            },
            say(1, SayKind::Text, "Hello", false),
            say(2, SayKind::Reasoning, "hmm", false),
        ] {
            for u in to_json(&c.convert(&e)) {
                if u["sessionUpdate"] == "agent_message_chunk" {
                    text.push_str(u["content"]["text"].as_str().unwrap());
                } else {
                    assert_eq!(u["sessionUpdate"], "agent_thought_chunk");
                    assert_eq!(u["content"]["text"], "hmm");
                }
            }
        }
        assert_eq!(text, "Hello");
    }

    #[test]
    fn an_edit_is_a_diff_with_its_location() {
        let mut c = Converter::new("/w".into());
        let input = json!({"file_path": "a.txt", "old_string": "x", "new_string": "y"});
        let e = TaskEvent::Say {
            id: 3,
            kind: SayKind::Tool,
            text: String::new(),
            partial: false,
            payload: Some(SayPayload::Tool {
                id: "t1".into(),
                tool: "Edit".into(),
                input: input.clone(),
                view: kaji_core::executor::recorded_view("Edit", &input),
            }),
        };
        let out = to_json(&c.convert(&e));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0]["sessionUpdate"], "tool_call");
        assert_eq!(out[0]["kind"], "edit");
        assert_eq!(out[0]["locations"][0]["path"], "/w/a.txt");
        assert_eq!(out[0]["content"][0]["type"], "diff");
        assert_eq!(out[0]["content"][0]["oldText"], "x");
        assert_eq!(out[0]["content"][0]["newText"], "y");
        assert_eq!(
            c.pending_call("t1").flatten().map(|v| v.title).as_deref(),
            Some("Edit: a.txt")
        );
        // The ToolUse of an announced call adds nothing: it is in progress
        // only once permission is given (the front end's answer).
        let out = to_json(&c.convert(&TaskEvent::ToolUse {
            id: "t1".into(),
            name: "Edit".into(),
            input,
            view: None,
            preview: None,
        }));
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn the_todo_is_a_plan() {
        let mut c = Converter::new("/w".into());
        let e = TaskEvent::Say {
            id: 4,
            kind: SayKind::Todo,
            text: String::new(),
            partial: false,
            payload: Some(SayPayload::Update(StateUpdate::Todo {
                items: vec![TodoItem {
                    content: "Run the tests".into(),
                    status: TodoStatus::InProgress,
                    active_form: "Running the tests".into(),
                }],
            })),
        };
        let out = to_json(&c.convert(&e));
        assert_eq!(out[0]["sessionUpdate"], "plan");
        assert_eq!(out[0]["entries"][0]["content"], "Run the tests");
        assert_eq!(out[0]["entries"][0]["status"], "in_progress");
    }
}
