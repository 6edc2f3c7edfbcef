//! `TodoWrite`: validation, replacement, and the shared per-session state.

use kaji_tools::todo::{TodoState, TodoStatus, todo_tool};
use kaji_tools::{ToolContext, ToolError, builtin_tools};
use serde_json::{Value, json};

fn ctx() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ToolContext::new(dir.path());
    (dir, ctx)
}

fn item(content: &str, status: &str, active: &str) -> Value {
    json!({"content": content, "status": status, "activeForm": active})
}

async fn write(state: &TodoState, todos: Vec<Value>) -> Result<kaji_tools::ToolOutput, ToolError> {
    let (_dir, ctx) = ctx();
    todo_tool(state.clone())
        .call(json!({ "todos": todos }), &ctx)
        .await
}

fn invalid_message(result: Result<kaji_tools::ToolOutput, ToolError>) -> String {
    match result {
        Err(ToolError::InvalidInput { tool, message }) => {
            assert_eq!(tool, "TodoWrite");
            message
        }
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

#[tokio::test]
async fn each_write_replaces_the_whole_list() {
    let state = TodoState::new();
    assert_eq!(state.revision(), 0);
    let out = write(
        &state,
        vec![
            item("Read the parser", "completed", "Reading the parser"),
            item("Fix the bug", "in_progress", "Fixing the bug"),
            item("Run the tests", "pending", "Running the tests"),
        ],
    )
    .await
    .expect("written");
    assert!(
        out.content
            .contains("3 items (1 completed, 1 in progress, 1 pending)"),
        "{}",
        out.content
    );
    assert_eq!(
        out.data,
        Some(json!({"todos": [
            item("Read the parser", "completed", "Reading the parser"),
            item("Fix the bug", "in_progress", "Fixing the bug"),
            item("Run the tests", "pending", "Running the tests"),
        ]}))
    );
    assert_eq!(out.control, None);
    assert!(!out.changed_files);
    assert_eq!(state.revision(), 1);
    let open: Vec<String> = state.open_items().into_iter().map(|i| i.content).collect();
    assert_eq!(open, ["Fix the bug", "Run the tests"]);
    let reminder = state.reminder().expect("open items");
    assert!(
        reminder.contains("- [in_progress] Fix the bug"),
        "{reminder}"
    );
    assert!(reminder.contains("- [pending] Run the tests"), "{reminder}");
    assert!(!reminder.contains("Read the parser"), "{reminder}");

    write(
        &state,
        vec![item("Run the tests", "completed", "Running the tests")],
    )
    .await
    .expect("written");
    let items = state.items();
    assert_eq!(items.len(), 1, "the old list is gone");
    assert_eq!(items[0].status, TodoStatus::Completed);
    assert!(state.open_items().is_empty());
    assert_eq!(state.reminder(), None);
    assert_eq!(state.revision(), 2);

    let out = write(&state, vec![]).await.expect("cleared");
    assert_eq!(out.data, Some(json!({"todos": []})));
    assert!(state.items().is_empty());
}

#[tokio::test]
async fn two_items_in_progress_are_refused_and_keep_the_old_list() {
    let state = TodoState::new();
    write(&state, vec![item("A", "pending", "Doing A")])
        .await
        .expect("written");
    let message = invalid_message(
        write(
            &state,
            vec![
                item("A", "in_progress", "Doing A"),
                item("B", "pending", "Doing B"),
                item("C", "in_progress", "Doing C"),
            ],
        )
        .await,
    );
    assert!(
        message.contains("at most one item may be in_progress"),
        "{message}"
    );
    assert!(message.contains("[0, 2]"), "{message}");
    assert_eq!(state.items().len(), 1, "a refused write changes nothing");
    assert_eq!(state.revision(), 1);
}

#[tokio::test]
async fn empty_fields_are_refused() {
    let state = TodoState::new();
    let message = invalid_message(write(&state, vec![item("  ", "pending", "Doing")]).await);
    assert!(message.contains("todos[0].content is empty"), "{message}");
    let message = invalid_message(
        write(
            &state,
            vec![item("A", "pending", "Doing A"), item("B", "pending", "")],
        )
        .await,
    );
    assert!(
        message.contains("todos[1].activeForm is empty"),
        "{message}"
    );
    assert!(state.items().is_empty());
}

#[tokio::test]
async fn bad_status_and_missing_fields_are_refused() {
    let state = TodoState::new();
    let message = invalid_message(write(&state, vec![item("A", "done", "Doing A")]).await);
    assert!(message.contains("done"), "{message}");
    assert!(message.contains("in_progress"), "{message}");

    let message =
        invalid_message(write(&state, vec![json!({"content": "A", "status": "pending"})]).await);
    assert!(message.contains("activeForm"), "{message}");

    let (_dir, ctx) = ctx();
    let message = invalid_message(
        todo_tool(state.clone())
            .call(json!({"todo": []}), &ctx)
            .await,
    );
    assert!(message.contains("todos"), "{message}");
    assert!(state.items().is_empty());
}

#[tokio::test]
async fn the_builtin_tool_is_read_only_and_replaceable_by_an_observed_one() {
    let mut registry = builtin_tools();
    let builtin = registry.get("TodoWrite").expect("registered").clone();
    assert!(builtin.is_read_only());
    assert_eq!(builtin.spec().input_schema["required"], json!(["todos"]));

    let state = TodoState::new();
    registry.register(todo_tool(state.clone()));
    assert_eq!(
        registry
            .names()
            .iter()
            .filter(|n| **n == "TodoWrite")
            .count(),
        1
    );
    let (_dir, ctx) = ctx();
    registry
        .get("TodoWrite")
        .expect("registered")
        .call(json!({"todos": [item("A", "pending", "Doing A")]}), &ctx)
        .await
        .expect("written");
    assert_eq!(state.open_items().len(), 1, "the session sees the write");
}
