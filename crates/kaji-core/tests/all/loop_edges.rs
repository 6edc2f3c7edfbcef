//! Edges of the loop the seed has and kaji must keep: the outer loop's
//! nudge reaches the model, a TaskCancel hook that is not due never runs,
//! and plan mode lets the model record its plan (task list, todo) and run
//! read-only commands.

use crate::common;

use std::sync::Arc;

use common::*;
use kaji_core::config::TextReply;
use kaji_core::hooks::{HookEvent, HookRunner, HookSpec, HooksConfig};
use kaji_core::{PermissionMode, Task, TaskConfig, ToolExecutor};
use kaji_protocol::{AskKind, TaskStatus};
use kaji_test_support::Turn;
use serde_json::json;

use crate::common::{done, serve};

fn task(config: TaskConfig, frontend: Arc<RecordingFrontend>) -> Task {
    Task::new(
        config,
        ToolExecutor::new(kaji_tools::builtin_tools()),
        frontend,
    )
}

/// The text of the last user message of a recorded Anthropic request.
fn last_user_text(body: &serde_json::Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_reply_without_a_tool_is_answered_with_the_nudge() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("I think it is fine now."), done("done")]).await;
    let mut cfg = task_config(&server, dir.path(), PermissionMode::Default);
    cfg.on_text_reply = TextReply::Nudge;
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let outcome = task(cfg, frontend).run("fix it".into()).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let nudge = last_user_text(&requests[1].body);
    assert!(
        nudge.contains("You did not use a tool in your previous reply")
            && nudge.contains("AttemptCompletion")
            && nudge.contains("AskUser"),
        "{nudge}"
    );
    assert!(!last_user_text(&requests[0].body).contains("did not use a tool"));
}

#[tokio::test]
async fn a_task_cancel_hook_that_is_not_due_does_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([done("done")]).await;
    let mut cfg = task_config(&server, dir.path(), PermissionMode::Default);
    let mut hooks = HooksConfig::new();
    hooks.push(
        HookEvent::TaskCancel,
        HookSpec::new("echo ran >> cancel.txt"),
    );
    hooks.push(
        HookEvent::TaskComplete,
        HookSpec::new("echo ran >> complete.txt"),
    );
    cfg.hooks = Some(HookRunner::new(hooks));
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let t = task(cfg, frontend);
    let abort = t.abort_handle();
    let outcome = t.run("finish".into()).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    // An abort after the task has ended is not a cancellation either.
    abort.abort();
    // The TaskComplete hook proves hooks ran at the end at all.
    assert!(dir.path().join("complete.txt").exists());
    assert!(
        !dir.path().join("cancel.txt").exists(),
        "TaskCancel ran for a task that was not cancelled"
    );

    // Aborted before it started: nothing to cancel, so not due either.
    let mut cfg = task_config(&server, dir.path(), PermissionMode::Default);
    let mut hooks = HooksConfig::new();
    hooks.push(
        HookEvent::TaskCancel,
        HookSpec::new("echo ran >> cancel.txt"),
    );
    cfg.hooks = Some(HookRunner::new(hooks));
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let t = task(cfg, frontend);
    t.abort_handle().abort();
    let outcome = t.run("never".into()).await;
    assert_eq!(outcome.status, TaskStatus::Aborted);
    assert!(
        !dir.path().join("cancel.txt").exists(),
        "TaskCancel ran for a task aborted before it started"
    );
}

#[tokio::test]
async fn plan_mode_records_the_plan_and_runs_read_only_commands() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let server = serve([
        Turn::tool_call("TaskCreate", json!({"subject": "Write b", "description": "then c"})),
        Turn::tool_call("TaskUpdate", json!({"taskId": "1", "status": "in_progress"})),
        Turn::tool_call(
            "TodoWrite",
            json!({"todos": [{"content": "Write b", "status": "pending", "activeForm": "Writing b"}]}),
        ),
        Turn::tool_call("Bash", json!({"command": "ls -la && cat a.txt | grep alpha"})),
        Turn::tool_call("Bash", json!({"command": "touch c"})),
        done("planned"),
    ])
    .await;
    let mut cfg = task_config(&server, dir.path(), PermissionMode::Plan);
    let store = kaji_tasks::TaskListStore::open(&dir.path().join(".kaji-home"), "plan").unwrap();
    Arc::make_mut(&mut cfg.tool_services).task_list =
        Some(kaji_tasks::list::TaskList::Files(store.clone()));
    // Nobody approves anything: what runs, runs without asking.
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let outcome = task(cfg, frontend.clone()).run("plan it".into()).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    let r = frontend.tool_results();
    for (i, name) in ["TaskCreate", "TaskUpdate", "TodoWrite", "Bash"]
        .iter()
        .enumerate()
    {
        assert_eq!(r[i].1, *name);
        // Plan mode changes only the tasks the planner holds: starting a
        // task nobody holds waits for the plan's approval.
        let refused = *name == "TaskUpdate";
        assert_eq!(r[i].2, refused, "{name} in plan mode: {:?}", r[i]);
    }
    assert!(r[1].3.contains("plan mode"), "{:?}", r[1]);
    assert!(r[3].3.contains("alpha"), "{:?}", r[3]);
    assert!(r[4].2 && r[4].3.contains("plan mode"), "{:?}", r[4]);
    assert!(!dir.path().join("c").exists());
    let asked: Vec<AskKind> = frontend
        .ask_kinds()
        .into_iter()
        .filter(|k| *k != AskKind::CompletionResult)
        .collect();
    assert!(asked.is_empty(), "asked {asked:?}");
    let listed = store.list().unwrap();
    assert_eq!(listed.tasks.len(), 1);
    assert_eq!(
        listed.tasks[0].status,
        kaji_tasks::list::ListTaskStatus::Pending
    );
}

#[tokio::test]
async fn polling_task_output_six_times_with_the_same_answer_is_no_loop() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join(".kaji-home");
    let runtime = Arc::new(
        kaji_tasks::RuntimeTaskRegistry::new(
            &home,
            "poll",
            kaji_tasks::runtime::RuntimeConfig::default(),
        )
        .unwrap(),
    );
    // A background command that prints nothing for as long as the test runs.
    let running = runtime
        .start_local_bash("sleep 600", "wait", dir.path(), "main")
        .await
        .unwrap();
    let poll = json!({"task_id": running.id.as_str(), "block": false});
    let mut turns: Vec<Turn> = (0..6)
        .map(|_| Turn::tool_call("TaskOutput", poll.clone()))
        .collect();
    turns.push(done("waited"));
    let server = serve(turns).await;
    let mut cfg = task_config(&server, dir.path(), PermissionMode::Yolo);
    Arc::make_mut(&mut cfg.tool_services).runtime = Some(Arc::clone(&runtime));
    cfg.session_id = "poll".into();
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let outcome = task(cfg, frontend.clone()).run("wait for it".into()).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    let results = frontend.tool_results();
    assert_eq!(results.len(), 7, "{results:?}");
    // The same call with the same answer, six times: polling, not a loop.
    assert_eq!(results[1].3, results[2].3, "{results:?}");
    assert!(
        results.iter().all(|r| !r.3.contains("times in a row")),
        "{results:?}"
    );
    runtime.shutdown().await;
}
