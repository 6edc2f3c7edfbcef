//! In-process teammates end to end: a lead Session against the scripted
//! model server starts named teammates (`Agent` with `name`) that claim
//! the shared task list's tasks one after another; each teammate has its
//! own script, routed by the `teammate `NAME`` marker of its system prompt.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed expectation is a test failure"
)]

#[path = "all/common/mod.rs"]
mod common;

use std::path::Path;
use std::sync::Arc;

use common::{RecordingFrontend, provider_config};
use kaji_core::{Session, SessionBuilder, SessionOptions};
use kaji_llm::ProviderKind;
use kaji_protocol::AskResponse;
use kaji_tasks::TaskListStore;
use kaji_tasks::list::ListTaskStatus;
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

fn marker(name: &str) -> String {
    format!("You are the teammate `{name}`")
}

fn done_script() -> Script {
    Script::new([Turn::tool_call(
        "AttemptCompletion",
        json!({"result": "did it"}),
    )])
}

async fn lead(home: &Path, work: &Path, server: &ScriptedModelServer) -> Arc<Session> {
    unsafe_env();
    let options = SessionOptions {
        cwd: Some(work.to_path_buf()),
        no_checkpoints: true,
        ..SessionOptions::default()
    };
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let (session, _) = SessionBuilder::new(home, options)
        .provider(provider_config(server, ProviderKind::Anthropic))
        .build(frontend)
        .await
        .expect("session");
    session
}

/// Idle teammates look again quickly (the default is 500 ms).
fn unsafe_env() {
    // SAFETY: set once, before any thread reads it, to the same value in
    // every test of this binary.
    unsafe { std::env::set_var("KAJI_TEAMMATE_POLL_MS", "10") };
}

fn teammate(name: &str) -> Turn {
    Turn::tool_call(
        "Agent",
        json!({"description": format!("teammate {name}"), "prompt": "Work the list.", "subagent_type": "general-purpose", "name": name}),
    )
}

/// Waits until every runtime task of the session has ended.
async fn wait_for_teammates(session: &Session) {
    for task in session.runtime().list() {
        session
            .runtime()
            .wait_finished(task.id.as_str())
            .await
            .expect("wait");
    }
}

/// The index of the first request of any teammate that works task `id`.
fn first_request_for(server: &ScriptedModelServer, id: u64) -> Option<usize> {
    let needle = format!("You have claimed task #{id}:");
    server
        .requests()
        .iter()
        .position(|r| r.body.to_string().contains(&needle))
}

#[tokio::test]
async fn three_teammates_finish_eight_tasks_with_dependencies_exactly_once() {
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    // 2,3 ← 1; 4 ← 2,3; 5 ← 4; 7 ← 6; 8 ← 5,7.
    let deps: &[(u64, &[u64])] = &[
        (2, &[1]),
        (3, &[1]),
        (4, &[2, 3]),
        (5, &[4]),
        (7, &[6]),
        (8, &[5, 7]),
    ];
    let mut plan = Turn::text("Planning.");
    for n in 1..=8 {
        plan = plan.and_tool_call(
            "TaskCreate",
            json!({"subject": format!("step {n}"), "description": format!("do step {n}")}),
        );
    }
    for (id, blockers) in deps {
        let ids: Vec<String> = blockers.iter().map(u64::to_string).collect();
        plan = plan.and_tool_call(
            "TaskUpdate",
            json!({"taskId": id.to_string(), "addBlockedBy": ids}),
        );
    }
    let main = Script::new([
        plan,
        teammate("alice")
            .and_tool_call("Agent", json!({"description": "teammate bob", "prompt": "Work the list.", "subagent_type": "general-purpose", "name": "bob"}))
            .and_tool_call("Agent", json!({"description": "teammate carol", "prompt": "Work the list.", "subagent_type": "general-purpose", "name": "carol"})),
        Turn::tool_call("AttemptCompletion", json!({"result": "team started"})),
    ])
    .with_agent(marker("alice"), done_script())
    .with_agent(marker("bob"), done_script())
    .with_agent(marker("carol"), done_script());
    let server = ScriptedModelServer::start(main).await;
    let session = lead(home.path(), work.path(), &server).await;
    let outcome = session
        .submit("build it with a team".into())
        .await
        .expect("submit");
    assert_eq!(outcome.result.as_deref(), Some("team started"));
    wait_for_teammates(&session).await;

    let store = TaskListStore::open(home.path(), session.task_list_id()).expect("store");
    let tasks = store.list().expect("list").tasks;
    assert_eq!(tasks.len(), 8);
    for t in &tasks {
        assert_eq!(
            t.status,
            ListTaskStatus::Completed,
            "#{} {:?}",
            t.id,
            t.status
        );
        let owner = t.owner.as_deref().unwrap_or_default();
        assert!(
            ["alice", "bob", "carol"].contains(&owner),
            "#{}: {owner}",
            t.id
        );
    }
    // Each task was worked exactly once, and never before its blockers.
    let requests = server.requests();
    for id in 1..=8u64 {
        let needle = format!("You have claimed task #{id}:");
        let n = requests
            .iter()
            .filter(|r| r.body.to_string().contains(&needle))
            .count();
        assert_eq!(n, 1, "task #{id} was worked {n} times");
    }
    for (id, blockers) in deps {
        for b in *blockers {
            assert!(
                first_request_for(&server, *b) < first_request_for(&server, *id),
                "#{id} was worked before its blocker #{b}"
            );
        }
    }
    // Every completion reached the lead's mailbox, and each teammate's end.
    let notices = store.take_messages("main").expect("mailbox");
    let texts: Vec<&str> = notices.iter().map(|m| m.text.as_str()).collect();
    for id in 1..=8 {
        let line = format!("Task #{id} (step {id}) was completed by");
        assert_eq!(
            texts.iter().filter(|t| t.starts_with(&line)).count(),
            1,
            "#{id}: {texts:#?}"
        );
    }
    for name in ["alice", "bob", "carol"] {
        let end = format!("Teammate {name} ended: no work is left");
        assert!(
            texts.iter().any(|t| t.starts_with(&end)),
            "{name}: {texts:#?}"
        );
    }
    session.shutdown().await;
}

#[tokio::test]
async fn a_teammate_stopped_mid_task_has_it_released_and_another_finishes_it() {
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let main = Script::new([
        Turn::tool_call("TaskCreate", json!({"subject": "the one task", "description": "x"}))
            .and_tool_call("Agent", json!({"description": "teammate alice", "prompt": "Work the list.", "subagent_type": "general-purpose", "name": "alice"})),
        Turn::tool_call("AttemptCompletion", json!({"result": "alice started"})),
        teammate("bob"),
        Turn::tool_call("AttemptCompletion", json!({"result": "bob started"})),
    ])
    .with_agent(marker("alice"), Script::new([Turn::text("working").and_hold()]))
    .with_agent(marker("bob"), done_script());
    let server = ScriptedModelServer::start(main).await;
    let session = lead(home.path(), work.path(), &server).await;
    session.submit("start alice".into()).await.expect("submit");
    server.wait_for_holds(1).await;
    let store = TaskListStore::open(home.path(), session.task_list_id()).expect("store");
    assert_eq!(store.get(1).expect("get").owner.as_deref(), Some("alice"));
    let alice = session
        .runtime()
        .list()
        .into_iter()
        .find(|t| t.agent.as_deref() == Some("alice"))
        .expect("alice runs");
    assert_eq!(alice.task_type.as_str(), "in_process_teammate");
    session
        .runtime()
        .stop(alice.id.as_str())
        .await
        .expect("stop");
    session
        .runtime()
        .wait_finished(alice.id.as_str())
        .await
        .expect("wait");
    let released = store.get(1).expect("get");
    assert_eq!(released.owner, None, "alice's task is released");
    assert_eq!(released.status, ListTaskStatus::Pending);

    session.submit("start bob".into()).await.expect("submit");
    wait_for_teammates(&session).await;
    let task = store.get(1).expect("get");
    assert_eq!(task.status, ListTaskStatus::Completed);
    assert_eq!(task.owner.as_deref(), Some("bob"));
    // The lead heard of alice's stop at its next request.
    let told = server
        .requests()
        .iter()
        .any(|r| r.agent.is_none() && r.body.to_string().contains("Teammate alice was stopped"));
    assert!(told, "the lead was never told that alice stopped");
    server.release();
    session.shutdown().await;
}

/// A front end that panics on the first event of the agent `crashy`, in
/// whatever task emits it (the teammate's own).
struct CrashOn(&'static str);

#[async_trait::async_trait]
impl kaji_core::TaskFrontend for CrashOn {
    fn emit(&self, event: kaji_protocol::SessionEvent) {
        if event.agent == self.0 {
            panic!("the front end broke on {}'s event", self.0);
        }
    }

    async fn answer(&self, _ask: &kaji_core::AskRequest) -> AskResponse {
        AskResponse::Approve
    }
}

#[tokio::test]
async fn a_teammate_that_panics_has_its_tasks_released_and_the_lead_told() {
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    unsafe_env();
    let main = Script::new([
        Turn::tool_call("TaskCreate", json!({"subject": "the one task", "description": "x"}))
            .and_tool_call("Agent", json!({"description": "teammate crashy", "prompt": "Work the list.", "subagent_type": "general-purpose", "name": "crashy"})),
        Turn::tool_call("AttemptCompletion", json!({"result": "started"})),
    ])
    .with_agent(marker("crashy"), done_script());
    let server = ScriptedModelServer::start(main).await;
    let options = SessionOptions {
        cwd: Some(work.path().to_path_buf()),
        no_checkpoints: true,
        ..SessionOptions::default()
    };
    let (session, _) = SessionBuilder::new(home.path(), options)
        .provider(provider_config(&server, ProviderKind::Anthropic))
        .build(Arc::new(CrashOn("crashy")))
        .await
        .expect("session");
    session.submit("start crashy".into()).await.expect("submit");
    wait_for_teammates(&session).await;
    let crashy = session
        .runtime()
        .list()
        .into_iter()
        .find(|t| t.agent.as_deref() == Some("crashy"))
        .expect("crashy");
    assert_eq!(crashy.status.as_str(), "failed");
    let store = TaskListStore::open(home.path(), session.task_list_id()).expect("store");
    let task = store.get(1).expect("get");
    assert_eq!(task.owner, None, "the crashed teammate's task is released");
    assert_eq!(task.status, ListTaskStatus::Pending);
    let note = serde_json::to_string(&task.metadata).expect("json");
    assert!(note.contains("crashed"), "{note}");
    let texts: Vec<String> = store
        .take_messages("main")
        .expect("mailbox")
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("Teammate crashy ended: the teammate crashed")),
        "{texts:#?}"
    );
    session.shutdown().await;
}

#[tokio::test]
async fn a_teammate_with_worktree_isolation_edits_in_its_own_worktree() {
    use kaji_test_support::fixtures::git;
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    git(work.path(), &["init", "-q"]);
    std::fs::write(work.path().join("README.md"), "hi\n").expect("write");
    git(work.path(), &["add", "."]);
    git(
        work.path(),
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
    );
    let main = Script::new([
        Turn::tool_call("TaskCreate", json!({"subject": "write made.txt", "description": "x"}))
            .and_tool_call("Agent", json!({"description": "teammate alice", "prompt": "Work the list.", "subagent_type": "general-purpose", "name": "alice", "isolation": "worktree"})),
        Turn::tool_call("AttemptCompletion", json!({"result": "started"})),
    ])
    .with_agent(
        marker("alice"),
        Script::new([
            Turn::tool_call("Write", json!({"file_path": "made.txt", "content": "by alice\n"})),
            Turn::tool_call("AttemptCompletion", json!({"result": "wrote it"})),
        ]),
    );
    let server = ScriptedModelServer::start(main).await;
    let session = lead(home.path(), work.path(), &server).await;
    session.submit("start alice".into()).await.expect("submit");
    wait_for_teammates(&session).await;
    let in_worktree = work.path().join(".kaji/worktrees/alice/made.txt");
    assert_eq!(
        std::fs::read_to_string(&in_worktree).expect("written in the worktree"),
        "by alice\n"
    );
    assert!(
        !work.path().join("made.txt").exists(),
        "the teammate wrote into the lead's checkout"
    );
    let branches = git(work.path(), &["branch", "--list", "kaji/alice"]);
    assert!(branches.contains("kaji/alice"), "{branches}");
    session.shutdown().await;
}

/// The run's budget is the teammates' too: once it is spent a teammate
/// ends, its task released with why, instead of claiming the task again
/// and again (each time ending before its first request).
#[tokio::test]
async fn a_teammate_ends_once_the_runs_budget_is_spent() {
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let glob = || Turn::tool_call("Glob", json!({"pattern": "*"}));
    let main = Script::new([
        Turn::tool_call("TaskCreate", json!({"subject": "the one task", "description": "x"}))
            .and_tool_call("Agent", json!({"description": "teammate alice", "prompt": "Work the list.", "subagent_type": "general-purpose", "name": "alice"})),
        Turn::tool_call("AttemptCompletion", json!({"result": "alice started"})),
    ])
    .with_agent(marker("alice"), Script::new((0..10).map(|_| glob())));
    let server = ScriptedModelServer::start(main).await;
    unsafe_env();
    let options = SessionOptions {
        cwd: Some(work.path().to_path_buf()),
        no_checkpoints: true,
        max_requests: Some(3),
        ..SessionOptions::default()
    };
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let (session, _) = SessionBuilder::new(home.path(), options)
        .provider(provider_config(&server, ProviderKind::Anthropic))
        .build(frontend)
        .await
        .expect("session");
    session.submit("start alice".into()).await.expect("submit");
    // A guard, not a measure: before the fix the teammate never ended.
    tokio::time::timeout(
        std::time::Duration::from_secs(120),
        wait_for_teammates(&session),
    )
    .await
    .expect("the teammate ends once the budget is spent");
    assert_eq!(server.requests().len(), 3);
    let store = TaskListStore::open(home.path(), session.task_list_id()).expect("store");
    let task = store.get(1).expect("get");
    assert_eq!(task.owner, None, "the task is released");
    let texts: Vec<String> = store
        .take_messages("main")
        .expect("mailbox")
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert!(
        texts.iter().any(|t| t
            .starts_with("Teammate alice ended: The request limit of the run (3, --max-requests)")),
        "{texts:#?}"
    );
    session.shutdown().await;
}
