//! Typed detail of `say` and `ask` events, so that front ends match on
//! types instead of digging into JSON by key.
//!
//! A tool's own input stays JSON (it is whatever the tool's schema says);
//! everything kaji itself puts beside a message has a type here. New
//! variants may be added; front ends must ignore the ones they do not know.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a checklist item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on now (at most one item at a time).
    InProgress,
    /// Done.
    Completed,
}

impl TodoStatus {
    /// `pending`, `in_progress` or `completed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::InProgress => "in_progress",
            Self::Completed => "completed",
        }
    }
}

/// One item of the todo checklist, as the model writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoItem {
    /// What is to be done, imperative ("Run the tests").
    pub content: String,
    /// Where it stands.
    pub status: TodoStatus,
    /// How it reads while in progress ("Running the tests").
    #[serde(rename = "activeForm")]
    pub active_form: String,
}

impl TodoItem {
    /// Whether the item is not completed yet.
    pub fn is_open(&self) -> bool {
        self.status != TodoStatus::Completed
    }
}

/// One task of the shared task list, as front ends show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskListItem {
    /// The task's id in its list.
    pub id: u64,
    /// Its one-line title.
    pub subject: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: String,
    /// Who holds it.
    pub owner: Option<String>,
    /// How it reads while in progress.
    #[serde(rename = "activeForm")]
    pub active_form: Option<String>,
    /// The ids of the unfinished tasks it waits for.
    #[serde(rename = "blockedBy")]
    pub blocked_by: Vec<u64>,
}

/// A change of session state a tool reports, for the front ends to show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StateUpdate {
    /// The task list as it stands after the change.
    TaskList {
        /// Every task.
        tasks: Vec<TaskListItem>,
    },
    /// The todo checklist as it stands after the change.
    Todo {
        /// Every item.
        items: Vec<TodoItem>,
    },
}

/// Detail of a `say`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "payload", rename_all = "snake_case")]
pub enum SayPayload {
    /// A tool is about to be used.
    Tool {
        /// The call's id.
        id: String,
        /// The tool's name.
        tool: String,
        /// Its arguments, as the model sent them.
        input: Value,
        /// How the tool presents the call (kind, title, files, change).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        view: Option<crate::ToolView>,
    },
    /// A model request started.
    ApiRequest {
        /// The Task's turn number.
        turn: u32,
        /// The model asked.
        model: String,
    },
    /// A model request is retried.
    Retry {
        /// This attempt's number.
        attempt: u32,
        /// How many attempts there are in all.
        max_attempts: u32,
        /// The wait before it.
        delay_ms: u64,
    },
    /// A checkpoint was taken.
    Checkpoint {
        /// The checkpoint's id.
        checkpoint: String,
        /// Its label.
        label: String,
    },
    /// Session state changed (task list, todo).
    Update(StateUpdate),
    /// The conversation was compacted.
    Compacted {
        /// Context tokens before (estimated).
        tokens_before: u64,
        /// Context tokens after (estimated).
        tokens_after: u64,
        /// Oldest rounds dropped because even the summary request did not
        /// fit.
        dropped_rounds: u32,
    },
    /// Background work is still running (after an abort or at exit).
    Background {
        /// One entry per runtime task.
        tasks: Vec<BackgroundTask>,
    },
}

/// A runtime task (background shell or agent), as front ends list it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackgroundTask {
    /// The runtime id.
    pub id: String,
    /// What it runs.
    pub description: String,
    /// `running`, `completed`, `failed`, `killed`, …
    pub status: String,
}

/// Detail of an `ask`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "payload", rename_all = "snake_case")]
pub enum AskPayload {
    /// Approve a tool call.
    ToolApproval {
        /// The tool's name.
        tool: String,
        /// Its arguments.
        input: Value,
        /// What will happen, in full (the whole command, a diff), when
        /// kaji can show more than the one-line text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        preview: Option<String>,
        /// The exact rules an "always allow" answer stores (one per path
        /// or command the call needs); empty when nothing narrow enough
        /// exists, and then "always" approves this call once.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        always: Vec<String>,
        /// The id of the tool call asked about (the model's `tool_use`
        /// id), so a front end never has to find the call by its name and
        /// input; `None` while the call is still streaming.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_use_id: Option<String>,
    },
    /// A tool call whose arguments are still streaming (the partial ask
    /// that shows them): never answered; the call's `tool` say replaces
    /// it.
    ToolArguments {
        /// The tool's name.
        tool: String,
        /// The tool's title for the arguments complete so far (`Edit:
        /// src/main.rs` once the path has come, the tool's name before).
        title: String,
        /// The id of the call (the model's `tool_use` id, known from the
        /// start of its block): its `tool_result` names it, so a front end
        /// closes this view by id even when the reply calls the same tool
        /// twice. Empty in events of an older kaji.
        #[serde(default)]
        tool_use_id: String,
    },
    /// The model asks a question.
    Followup {
        /// Suggested answers (may be empty).
        options: Vec<String>,
    },
}
