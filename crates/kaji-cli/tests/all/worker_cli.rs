//! `kaji worker` through the real binary: three headless teammates on one
//! task list, one killed with SIGKILL in the middle of its task; every task
//! is completed exactly once, the killed one's task released (noted in its
//! metadata) and finished by another.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use kaji_tasks::TaskListStore;
use kaji_tasks::list::{NewTask, TaskStatus};
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;
use tokio::process::Command;

fn worker(home: &Path, work: &Path, server: &ScriptedModelServer, name: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kaji"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("KAJI_HOME", home.join("kaji-home"))
        .env("KAJI_WORKER_POLL_MS", "20")
        .env("ANTHROPIC_API_KEY", "test-key")
        .args(["worker", "--task-list", "team", "--name", name])
        .args(["--provider", "anthropic", "--base-url"])
        .arg(server.anthropic_base_url())
        .args([
            "--model",
            "scripted",
            "--no-checkpoints",
            "--no-session-persistence",
            "-C",
        ])
        .arg(work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

#[tokio::test]
async fn three_workers_one_killed_complete_every_task_exactly_once() {
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let store = TaskListStore::open(&home.path().join("kaji-home"), "team").expect("store");
    let mut ids = Vec::new();
    for i in 0..6 {
        let mut task = NewTask::new(format!("task {i}"));
        // The last two wait for the first.
        if i >= 4 {
            task.blocked_by = vec![ids[0]];
        }
        ids.push(store.create(task).expect("create").id);
    }
    // Every task's one request holds until the test releases it.
    let server = ScriptedModelServer::start(Script::new([Turn::text("working on it")
        .and_hold()
        .and_tool_call("AttemptCompletion", json!({"result": "done"}))]))
    .await;
    let mut children: Vec<_> = ["w0", "w1", "w2"]
        .iter()
        .map(|name| {
            worker(home.path(), work.path(), &server, name)
                .spawn()
                .expect("spawn")
        })
        .collect();

    // All three are in the middle of a task.
    server.wait_for_holds(3).await;
    let snapshot = store.list().expect("list");
    let victim_task = snapshot
        .tasks
        .iter()
        .find(|t| t.owner.as_deref() == Some("w0") && t.status == TaskStatus::InProgress)
        .expect("w0 works on a task")
        .id;
    let mut victim = children.remove(0);
    victim.start_kill().expect("SIGKILL");
    let victim_out = victim.wait_with_output().await.expect("wait");
    assert!(!victim_out.status.success());
    for _ in 0..20 {
        server.release();
    }

    let mut completed: BTreeMap<u64, usize> = BTreeMap::new();
    for line in String::from_utf8_lossy(&victim_out.stdout).lines() {
        if let Some(id) = line.strip_prefix("completed #") {
            *completed.entry(id.parse().expect("id")).or_default() += 1;
        }
    }
    for child in children {
        let out = child.wait_with_output().await.expect("wait");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in stdout.lines() {
            if let Some(id) = line.strip_prefix("completed #") {
                *completed.entry(id.parse().expect("id")).or_default() += 1;
            }
        }
    }
    let expected: BTreeMap<u64, usize> = ids.iter().map(|id| (*id, 1)).collect();
    assert_eq!(completed, expected, "every task completed exactly once");
    for id in &ids {
        assert_eq!(store.get(*id).expect("get").status, TaskStatus::Completed);
    }
    let released = store.get(victim_task).expect("get");
    assert_eq!(released.metadata["released"]["owner"], "w0");
    assert_ne!(released.owner.as_deref(), Some("w0"));
}
