//! `TodoWrite`: the model's light checklist for the current session (the
//! "Todo" layer of seed 002), and [`TodoState`], the per-session list it
//! writes.
//!
//! Each call replaces the whole list. The list lives in memory only, in a
//! [`TodoState`] shared between the tool instance (which lives as long as
//! the session's registry) and whoever else holds a clone — the core reads
//! [`TodoState::open_items`] to remind the model of unfinished items. It is
//! working memory for one conversation: it is never written to disk (the
//! durable task list is kaji-tasks' job).
//!
//! The tool counts as read-only: it changes nothing but this session state,
//! so it also runs in plan mode (planning with a checklist is the point of
//! plan mode). It must never touch files or ask the user.

use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use kaji_protocol::ToolSpec;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, parse_input};

/// The tool's name.
pub const TODO_WRITE: &str = "TodoWrite";

/// Adds `TodoWrite`, with a fresh [`TodoState`], to `registry`.
pub(crate) fn register(registry: &mut ToolRegistry) {
    registry.register(todo_tool(TodoState::new()));
}

/// A `TodoWrite` tool that writes into `state`. Register it in place of the
/// default one (same name, so it replaces it) to observe the checklist:
///
/// ```
/// let state = kaji_tools::todo::TodoState::new();
/// let mut registry = kaji_tools::builtin_tools();
/// registry.register(kaji_tools::todo::todo_tool(state.clone()));
/// assert!(state.open_items().is_empty());
/// ```
pub fn todo_tool(state: TodoState) -> Arc<dyn Tool> {
    Arc::new(TodoWriteTool { state })
}

pub use kaji_protocol::{TodoItem, TodoStatus};

/// One session's checklist. Cheap to clone; clones share the list.
#[derive(Debug, Clone, Default)]
pub struct TodoState {
    inner: Arc<Mutex<TodoInner>>,
}

#[derive(Debug, Default)]
struct TodoInner {
    items: Vec<TodoItem>,
    revision: u64,
}

impl TodoState {
    /// An empty checklist.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, TodoInner> {
        // The list is plain data: a panic elsewhere cannot leave it half
        // written, so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every item, in order.
    pub fn items(&self) -> Vec<TodoItem> {
        self.lock().items.clone()
    }

    /// The items not completed yet (pending or in progress), in order.
    pub fn open_items(&self) -> Vec<TodoItem> {
        self.lock()
            .items
            .iter()
            .filter(|i| i.is_open())
            .cloned()
            .collect()
    }

    /// How many times the list was written (0 before the first write).
    /// Compare two readings to tell whether the model touched the list.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    /// Replaces the whole list after checking it (see [`validate_todos`]).
    pub fn replace(&self, items: Vec<TodoItem>) -> Result<(), String> {
        validate_todos(&items)?;
        let mut inner = self.lock();
        inner.items = items;
        inner.revision += 1;
        Ok(())
    }

    /// A short reminder of the open items for the model, or `None` when
    /// every item is done (or there are none).
    pub fn reminder(&self) -> Option<String> {
        let open = self.open_items();
        if open.is_empty() {
            return None;
        }
        let mut text = String::from(
            "Reminder: your checklist (TodoWrite) still has open items. Keep it current: mark items \
in_progress when you start them and completed as soon as they are done, and drop items that no \
longer apply.\n",
        );
        for item in &open {
            text.push_str(&format!("- [{}] {}\n", item.status.as_str(), item.content));
        }
        Some(text)
    }
}

/// Checks a checklist: every `content` and `activeForm` non-empty (after
/// trimming) and at most one item `in_progress`. The error is written for
/// the model.
pub fn validate_todos(items: &[TodoItem]) -> Result<(), String> {
    for (index, item) in items.iter().enumerate() {
        if item.content.trim().is_empty() {
            return Err(format!(
                "todos[{index}].content is empty; say what is to be done"
            ));
        }
        if item.active_form.trim().is_empty() {
            return Err(format!(
                "todos[{index}].activeForm is empty; give the present-continuous form of \"{}\"",
                item.content.trim()
            ));
        }
    }
    let in_progress: Vec<usize> = items
        .iter()
        .enumerate()
        .filter(|(_, i)| i.status == TodoStatus::InProgress)
        .map(|(index, _)| index)
        .collect();
    if in_progress.len() > 1 {
        return Err(format!(
            "{} items are in_progress (todos{:?}); at most one item may be in_progress at a time",
            in_progress.len(),
            in_progress
        ));
    }
    Ok(())
}

struct TodoWriteTool {
    state: TodoState,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct TodoWriteInput {
    /// The whole updated checklist, in order.
    todos: Vec<TodoItemInput>,
}

// One item as the model writes it: a [`TodoItem`], with its schema (this
// comment is not a doc comment, so the items' schema has no description).
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
struct TodoItemInput {
    /// What is to be done, imperative.
    #[schemars(length(min = 1))]
    content: String,
    #[schemars(with = "String", extend("enum" = ["pending", "in_progress", "completed"]))]
    status: TodoStatus,
    /// The same, in present continuous, shown while it is in progress.
    #[serde(rename = "activeForm")]
    #[schemars(length(min = 1))]
    active_form: String,
}

#[async_trait]
impl Tool for TodoWriteTool {
    fn name(&self) -> &'static str {
        TODO_WRITE
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: TODO_WRITE.to_string(),
            description: "Writes your checklist for this session: the list you give replaces the \
previous one entirely, and the user sees it. Use it for work with several steps (three or more), \
when the user gives you a list of things to do, or when new sub-tasks turn up along the way; skip \
it for a single simple change or a question. Keep it honest and current: exactly one item \
in_progress while you work (mark it before you start it), mark an item completed as soon as it \
is really done (not when tests fail or the work is partial), add follow-up items as you find them \
and remove ones that no longer matter. Each item has content (imperative: \"Run the tests\"), \
activeForm (present continuous: \"Running the tests\") and status (pending, in_progress, \
completed). This checklist lives only in this conversation; for work that must persist or be \
shared with other agents, use the task list tools (TaskCreate and friends)."
                .to_string(),
            input_schema: crate::schema::input_schema::<TodoWriteInput>(),
        }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    async fn call(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let input: TodoWriteInput = parse_input(TODO_WRITE, input)?;
        let todos: Vec<TodoItem> = input
            .todos
            .into_iter()
            .map(|t| TodoItem {
                content: t.content.trim().to_string(),
                status: t.status,
                active_form: t.active_form.trim().to_string(),
            })
            .collect();
        self.state
            .replace(todos.clone())
            .map_err(|message| ToolError::InvalidInput {
                tool: TODO_WRITE.to_string(),
                message,
            })?;
        let count = |s: TodoStatus| todos.iter().filter(|t| t.status == s).count();
        let content = if todos.is_empty() {
            "The checklist is now empty.".to_string()
        } else {
            format!(
                "The checklist is updated: {} items ({} completed, {} in progress, {} pending). \
Go on with the work and keep the checklist current.",
                todos.len(),
                count(TodoStatus::Completed),
                count(TodoStatus::InProgress),
                count(TodoStatus::Pending),
            )
        };
        Ok(ToolOutput {
            content,
            data: Some(json!({ "todos": todos })),
            update: Some(kaji_protocol::StateUpdate::Todo { items: todos }),
            control: None,
            changed_files: false,
            images: Vec::new(),
        })
    }
}
