//! End-to-end tests of what sits around the loop: hooks, plan mode, the
//! todo reminder and background-task notices, against the scripted model
//! server.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use kaji_core::hooks::{HookEvent, HookRunner, HookSpec, HooksConfig, ToolMatcher};
use kaji_core::{PermissionMode, Task, TaskConfig, ToolExecutor, ToolProtocol};
use kaji_llm::ProviderKind;
use kaji_protocol::{AskKind, AskResponse, SayKind, TaskEvent, TaskStatus};
use kaji_test_support::Turn;
use serde_json::{Value, json};

use crate::common::{done, serve};

fn hooks(list: &[(HookEvent, &str, Option<&str>)]) -> HookRunner {
    let mut cfg = HooksConfig::new();
    for (event, command, matcher) in list {
        let mut spec = HookSpec::new(*command);
        spec.matcher = matcher.map(|m| ToolMatcher::new(m).unwrap());
        cfg.push(*event, spec);
    }
    HookRunner::new(cfg)
}

fn run_task(config: TaskConfig, frontend: Arc<RecordingFrontend>) -> Task {
    Task::new(
        config,
        ToolExecutor::new(kaji_tools::builtin_tools()),
        frontend,
    )
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test]
async fn pre_tool_use_exit_2_refuses_the_tool_with_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::tool_call("Write", json!({"file_path": "x.txt", "content": "x"})),
        done("ok"),
    ])
    .await;
    let mut config = task_config(&server, dir.path(), PermissionMode::Yolo);
    config.hooks = Some(hooks(&[(
        HookEvent::PreToolUse,
        "cat > pre.json; echo 'writes are frozen' >&2; exit 2",
        Some("Write|Edit"),
    )]));
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let outcome = run_task(config, frontend.clone()).run("write".into()).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    assert!(!dir.path().join("x.txt").exists());
    let r = &frontend.tool_results()[0];
    assert!(r.2 && r.3.contains("writes are frozen"), "{r:?}");
    let payload = read_json(&dir.path().join("pre.json"));
    assert_eq!(payload["hook_event_name"], "PreToolUse");
    assert_eq!(payload["tool_name"], "Write");
    assert_eq!(
        payload["tool_input"],
        json!({"file_path": "x.txt", "content": "x"})
    );
    // Claude Code's name for kaji's yolo.
    assert_eq!(payload["permission_mode"], "bypassPermissions");
    assert!(payload["tool_use_id"].is_string(), "{payload}");
    assert!(payload["task_id"].is_string() && payload["cwd"].is_string());
    // The matcher keeps the hook off other tools: AttemptCompletion ran.
    assert!(!frontend.tool_results()[1].2);
}

#[tokio::test]
async fn pre_and_post_tool_use_exit_0_add_context_other_codes_warn() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let server = serve([
        Turn::tool_call("Read", json!({"file_path": "a.txt"})),
        done("ok"),
    ])
    .await;
    let mut config = task_config(&server, dir.path(), PermissionMode::Default);
    config.hooks = Some(hooks(&[
        (HookEvent::PreToolUse, "echo 'pre says hi'", Some("Read")),
        (HookEvent::PreToolUse, "exit 7", Some("Read")),
        (
            HookEvent::PostToolUse,
            "cat > post.json; echo 'post says hi'",
            Some("Read"),
        ),
    ]));
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let outcome = run_task(config, frontend.clone()).run("read".into()).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    let r = &frontend.tool_results()[0];
    assert!(
        !r.2 && r.3.contains("alpha")
            && r.3.contains("pre says hi")
            && r.3.contains("post says hi"),
        "{r:?}"
    );
    assert!(frontend.events().iter().any(|e| matches!(e, TaskEvent::Say { kind: SayKind::Info, text, .. } if text.contains("hook warning"))));
    let post = read_json(&dir.path().join("post.json"));
    assert_eq!(post["hook_event_name"], "PostToolUse");
    assert!(
        post["tool_response"]["output"]
            .as_str()
            .unwrap()
            .contains("alpha")
    );
}

#[tokio::test]
async fn user_prompt_submit_exit_2_refuses_the_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("never")]).await;
    let mut config = task_config(&server, dir.path(), PermissionMode::Yolo);
    config.hooks = Some(hooks(&[(
        HookEvent::UserPromptSubmit,
        "cat > prompt.json; echo 'no secrets in prompts' >&2; exit 2",
        None,
    )]));
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let outcome = run_task(config, frontend)
        .run("my password is hunter2".into())
        .await;
    assert_eq!(outcome.status, TaskStatus::Failed);
    assert!(outcome.result.unwrap().contains("no secrets in prompts"));
    assert!(server.requests().is_empty(), "no request was made");
    assert_eq!(
        read_json(&dir.path().join("prompt.json"))["prompt"],
        "my password is hunter2"
    );
}

#[tokio::test]
async fn task_start_exit_2_stops_before_the_first_request_exit_0_adds_context() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("never")]).await;
    let mut cfg = task_config(&server, dir.path(), PermissionMode::Yolo);
    cfg.hooks = Some(hooks(&[(
        HookEvent::TaskStart,
        "echo 'not today' >&2; exit 2",
        None,
    )]));
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let outcome = run_task(cfg, frontend).run("go".into()).await;
    assert_eq!(outcome.status, TaskStatus::Failed);
    assert!(outcome.result.unwrap().contains("not today"));
    assert!(server.requests().is_empty());

    let server = serve([done("ok")]).await;
    let mut cfg = task_config(&server, dir.path(), PermissionMode::Yolo);
    cfg.hooks = Some(hooks(&[
        (
            HookEvent::TaskStart,
            "echo 'branch: main, 3 failing tests'",
            None,
        ),
        (HookEvent::TaskComplete, "cat > complete.json", None),
    ]));
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let outcome = run_task(cfg, frontend).run("go".into()).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    assert!(
        server.requests()[0]
            .body
            .to_string()
            .contains("branch: main, 3 failing tests")
    );
    assert_eq!(
        read_json(&dir.path().join("complete.json"))["hook_event_name"],
        "TaskComplete"
    );
}

#[tokio::test]
async fn task_cancel_runs_after_the_running_command_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("started.fifo");
    kaji_test_support::fixtures::mkfifo(&fifo);
    let server = serve([Turn::tool_call(
        "Bash",
        json!({"command": "echo $$ > sleeper.pid; echo go > started.fifo; exec sleep 1000"}),
    )])
    .await;
    let mut cfg = task_config(&server, dir.path(), PermissionMode::Yolo);
    cfg.hooks = Some(hooks(&[(
        HookEvent::TaskCancel,
        "s=$(cut -d' ' -f3 /proc/$(cat sleeper.pid)/stat 2>/dev/null); if [ -z \"$s\" ] || [ \"$s\" = Z ]; then echo dead; else echo alive; fi > cancel.txt",
        None,
    )]));
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let task = run_task(cfg, frontend);
    let abort = task.abort_handle();
    let run = tokio::spawn(task.run("hang".into()));
    let f = fifo.clone();
    tokio::task::spawn_blocking(move || std::fs::read_to_string(f).unwrap())
        .await
        .unwrap();
    abort.abort();
    let outcome = run.await.unwrap();
    assert_eq!(outcome.status, TaskStatus::Aborted);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("cancel.txt"))
            .unwrap()
            .trim(),
        "dead"
    );
    // The history stays resumable: the Bash call has its result.
    let last = outcome.history.last().unwrap();
    assert!(
        last.content
            .iter()
            .any(|b| matches!(b, kaji_protocol::ContentBlock::ToolResult { .. })),
        "{last:?}"
    );
}

#[tokio::test]
async fn exit_plan_mode_approve_saves_the_plan_and_leaves_plan_mode() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::tool_call("Write", json!({"file_path": "early.txt", "content": "no"})),
        Turn::tool_call(
            "ExitPlanMode",
            json!({"plan": "# Add a greeting\n1. Write hello.txt"}),
        ),
        Turn::tool_call(
            "Write",
            json!({"file_path": "hello.txt", "content": "hello"}),
        ),
        done("done"),
    ])
    .await;
    let cfg = task_config(&server, dir.path(), PermissionMode::Plan);
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let outcome = run_task(cfg, frontend.clone()).run("plan it".into()).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    assert!(
        !dir.path().join("early.txt").exists(),
        "plan mode refused the early write"
    );
    assert!(
        dir.path().join("hello.txt").exists(),
        "after approval the write ran"
    );
    // Plans live under $KAJI_HOME/plans/<project>/, never in the repository.
    assert!(!dir.path().join(".kaji/plans").exists());
    let projects: Vec<_> = std::fs::read_dir(dir.path().join(".kaji-home/plans"))
        .unwrap()
        .collect();
    assert_eq!(projects.len(), 1);
    let project = projects[0].as_ref().unwrap().path();
    assert_eq!(std::fs::read_dir(project).unwrap().count(), 1);
    let r = &frontend.tool_results()[1];
    assert!(
        r.3.contains("approved") && r.3.contains(".kaji-home/plans/"),
        "{r:?}"
    );
    assert!(frontend.ask_kinds().contains(&AskKind::Plan));
}

#[tokio::test]
async fn exit_plan_mode_reject_with_feedback_stays_in_plan_mode() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::tool_call("EnterPlanMode", json!({})),
        Turn::tool_call("ExitPlanMode", json!({"plan": "delete everything"})),
        Turn::tool_call("Bash", json!({"command": "touch ran"})),
        Turn::tool_call("ExitPlanMode", json!({"plan": "something else"})),
    ])
    .await;
    let cfg = task_config(&server, dir.path(), PermissionMode::AcceptEdits);
    let (frontend, _rx) = RecordingFrontend::new(deny());
    frontend.push_answer(AskResponse::Deny {
        feedback: Some("too risky".into()),
    });
    let outcome = run_task(cfg, frontend.clone()).run("plan".into()).await;
    // The second plan gets no approval and no feedback: it is the result.
    assert_eq!(outcome.status, TaskStatus::Completed);
    assert_eq!(outcome.result.as_deref(), Some("something else"));
    let r = frontend.tool_results();
    assert!(r[1].3.contains("too risky"), "{:?}", r[1]);
    assert!(
        r[2].2 && r[2].3.contains("plan mode"),
        "still in plan mode: {:?}",
        r[2]
    );
    assert!(!dir.path().join("ran").exists());
}

#[tokio::test]
async fn todo_reminder_after_turns_without_touching_the_checklist() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let server = serve([
        Turn::tool_call(
            "TodoWrite",
            json!({"todos": [{"content": "Fix the parser", "status": "in_progress", "activeForm": "Fixing the parser"}]}),
        ),
        Turn::tool_call("Read", json!({"file_path": "a.txt"})),
        Turn::tool_call("Read", json!({"file_path": "a.txt"})),
        done("done"),
    ])
    .await;
    let mut cfg = task_config(&server, dir.path(), PermissionMode::Yolo);
    let todo = kaji_tools::todo::TodoState::new();
    cfg.todo = Some(todo.clone());
    cfg.todo_reminder_turns = 1;
    let mut tools = kaji_tools::builtin_tools();
    tools.register(kaji_tools::todo::todo_tool(todo));
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let outcome = Task::new(cfg, ToolExecutor::new(tools), frontend.clone())
        .run("go".into())
        .await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    let requests = server.requests();
    assert!(
        !requests[1]
            .body
            .to_string()
            .contains("Reminder: your checklist")
    );
    assert!(
        requests[2]
            .body
            .to_string()
            .contains("Reminder: your checklist"),
        "{}",
        requests[2].body
    );
    assert!(requests[2].body.to_string().contains("Fix the parser"));
    assert!(frontend.events().iter().any(|e| matches!(
        e,
        TaskEvent::Say {
            kind: SayKind::Todo,
            ..
        }
    )));
}

#[tokio::test]
async fn finished_background_task_is_announced_in_the_next_request() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::tool_call(
            "Bash",
            json!({"command": "echo building; exit 3", "run_in_background": true, "description": "build"}),
        ),
        Turn::tool_call("AskUser", json!({"question": "wait for it?"})),
        done("done"),
    ])
    .await;
    let mut cfg = task_config(&server, dir.path(), PermissionMode::Yolo);
    let registry = Arc::new(
        kaji_tasks::RuntimeTaskRegistry::new(&cfg.kaji_home, "notice-session", Default::default())
            .unwrap(),
    );
    Arc::make_mut(&mut cfg.tool_services).runtime = Some(registry.clone());
    cfg.session_id = "notice-session".into();
    let (frontend, mut rx) = RecordingFrontend::new(AskResponse::Reply { text: "yes".into() });
    let gate = Arc::new(tokio::sync::Notify::new());
    *frontend.followup_gate.lock().unwrap() = Some(gate.clone());
    let run = tokio::spawn(run_task(cfg, frontend.clone()).run("build".into()));
    // Once the background task is known to have ended, let the question be
    // answered; the next request must carry the notice.
    loop {
        if let TaskEvent::ToolResult { name, .. } = rx.recv().await.unwrap()
            && name == "Bash"
        {
            break;
        }
    }
    let id = registry.list()[0].id.clone();
    registry.wait_finished(id.as_str()).await.unwrap();
    gate.notify_one();
    let outcome = run.await.unwrap();
    assert_eq!(outcome.status, TaskStatus::Completed);
    let third = server.requests()[2].body.to_string();
    assert!(
        third.contains(id.as_str()),
        "notice names the task: {third}"
    );
    assert!(third.contains('3'), "and its exit code");
    assert!(
        !server.requests()[1]
            .body
            .to_string()
            .contains("exit code 3")
    );
}

#[tokio::test]
async fn xml_protocol_with_openai_rejects_unknown_tags_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::text("<Frobnicate><x>1</x></Frobnicate>"),
        Turn::text("<AttemptCompletion><result>ok</result></AttemptCompletion>"),
    ])
    .await;
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let t = task(
        &server,
        ProviderKind::OpenAi,
        ToolProtocol::Xml,
        PermissionMode::Yolo,
        dir.path(),
        frontend.clone(),
    );
    let outcome = t.run("go".into()).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    // An unknown tag is just text: the model is nudged to use a tool.
    assert!(
        server.requests()[1]
            .body
            .to_string()
            .contains("You did not use a tool")
    );
}

#[tokio::test]
async fn initial_checkpoint_gate_delays_writes_not_reads() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let server = serve([
        // A command cannot say which files it changes, so it waits for
        // the initial checkpoint however long it takes (an Edit or Write
        // saves its file's pre-image after a while and goes ahead: see
        // kaji-cli's checkpoint_cost tests).
        Turn::tool_call("Read", json!({"file_path": "a.txt"}))
            .and_tool_call("Bash", json!({"command": "printf beta > b.txt"})),
        done("ok"),
    ])
    .await;
    let cfg = task_config(&server, dir.path(), PermissionMode::Yolo);
    let gate = kaji_core::CheckpointGate::new();
    let mut executor = ToolExecutor::new(kaji_tools::builtin_tools());
    executor.set_checkpoint_gate(gate.clone());
    let (frontend, mut rx) = RecordingFrontend::new(deny());
    let run = tokio::spawn(Task::new(cfg, executor, frontend.clone()).run("go".into()));
    // The read-only Read runs while the gate is still closed…
    loop {
        if let TaskEvent::ToolResult { name, is_error, .. } = rx.recv().await.unwrap() {
            assert_eq!(name, "Read");
            assert!(!is_error);
            break;
        }
    }
    // …the command waits at the gate and has not touched the disk…
    gate.wait_for_waiters(1).await;
    assert!(!dir.path().join("b.txt").exists());
    // …and runs once the gate opens.
    gate.open();
    let outcome = run.await.unwrap();
    assert_eq!(outcome.status, TaskStatus::Completed);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("b.txt")).unwrap(),
        "beta"
    );
}

#[tokio::test]
async fn checkpoints_at_start_and_after_each_change_restore_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let server = serve([
        Turn::tool_call("Write", json!({"file_path": "b.txt", "content": "beta"})),
        Turn::tool_call(
            "Edit",
            json!({"file_path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"}),
        ),
        Turn::tool_call("Read", json!({"file_path": "a.txt"})),
        done("ok"),
    ])
    .await;
    let mut cfg = task_config(&server, dir.path(), PermissionMode::Yolo);
    let store = kaji_core::checkpoints::CheckpointStore::open(home.path(), dir.path()).unwrap();
    cfg.checkpoints = Some(store.clone());
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let outcome = run_task(cfg, frontend).run("go".into()).await;
    assert_eq!(outcome.status, TaskStatus::Completed);
    let list = store.list().await.unwrap();
    let labels: Vec<&str> = list.iter().map(|c| c.label.as_str()).collect();
    // The first checkpoint names the prompt (#32).
    assert!(labels.contains(&"task start: go"), "{labels:?}");
    assert!(labels.contains(&"turn 1: Write"), "{labels:?}");
    assert!(labels.contains(&"turn 2: Edit"), "{labels:?}");
    assert!(
        !labels.iter().any(|l| l.contains("Read")),
        "reads take no checkpoint: {labels:?}"
    );
    let start = list
        .iter()
        .find(|c| c.label == "task start: go")
        .unwrap()
        .id
        .clone();
    store.restore(&start).await.unwrap();
    assert!(!dir.path().join("b.txt").exists());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "alpha\n"
    );
}

#[tokio::test]
async fn worktree_round_trip_moves_tools_and_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    kaji_test_support::fixtures::git(dir.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    kaji_test_support::fixtures::git(dir.path(), &["add", "."]);
    kaji_test_support::fixtures::git(dir.path(), &["commit", "-q", "-m", "init"]);
    let server = serve([
        Turn::tool_call("EnterWorktree", json!({"name": "try-1"})),
        Turn::tool_call(
            "Write",
            json!({"file_path": "a.txt", "content": "in the worktree\n"}),
        ),
        Turn::tool_call("Bash", json!({"command": "pwd"})),
        Turn::tool_call("ExitWorktree", json!({"action": "keep"})),
        Turn::tool_call("Read", json!({"file_path": "a.txt"})),
        done("ok"),
    ])
    .await;
    let mut cfg = task_config(&server, dir.path(), PermissionMode::Yolo);
    cfg.checkpoints =
        Some(kaji_core::checkpoints::CheckpointStore::open(home.path(), dir.path()).unwrap());
    cfg.kaji_home = home.path().to_path_buf();
    let (frontend, _rx) = RecordingFrontend::new(deny());
    let outcome = run_task(cfg, frontend.clone()).run("try it".into()).await;
    assert_eq!(
        outcome.status,
        TaskStatus::Completed,
        "{:#?}",
        frontend.tool_results()
    );
    let wt = dir.path().join(".kaji/worktrees/try-1");
    assert_eq!(
        std::fs::read_to_string(wt.join("a.txt")).unwrap(),
        "in the worktree\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "alpha\n"
    );
    let r = frontend.tool_results();
    assert!(
        r[2].3.contains(".kaji/worktrees/try-1"),
        "Bash ran in the worktree: {:?}",
        r[2]
    );
    assert!(r[4].3.contains("alpha"), "back in the checkout: {:?}", r[4]);
    let wt_store = kaji_core::checkpoints::CheckpointStore::open(home.path(), &wt).unwrap();
    let labels: Vec<String> = wt_store
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.label)
        .collect();
    assert!(labels.iter().any(|l| l == "turn 2: Write"), "{labels:?}");
}
