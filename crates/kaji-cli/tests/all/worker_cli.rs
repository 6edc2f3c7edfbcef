//! `kaji worker` through the real binary: three headless teammates on one
//! task list, one killed with SIGKILL in the middle of its task; every task
//! is completed exactly once, the killed one's task released (noted in its
//! metadata) and finished by another.

use std::collections::BTreeMap;
use std::path::Path;

use kaji_tasks::TaskListStore;
use kaji_tasks::list::{ListTaskStatus, NewListTask};
use kaji_test_support::{ScriptedModelServer, Turn};
use serde_json::json;
use tokio::process::Command;

use crate::common;

use crate::common::{done, serve, serve_held_tasks};

fn worker(home: &Path, work: &Path, server: &ScriptedModelServer, name: &str) -> Command {
    let mut cmd = common::worker(home, server, "team", name);
    cmd.env("KAJI_WORKER_POLL_MS", "20")
        .args(["--no-checkpoints", "--no-session-persistence", "-C"])
        .arg(work);
    cmd
}

/// One task on the list `team` and the worker `w0` in the middle of it
/// (its one request held).
struct HeldTask {
    home: tempfile::TempDir,
    work: tempfile::TempDir,
    store: TaskListStore,
    /// The task's id.
    id: u64,
    server: ScriptedModelServer,
    child: tokio::process::Child,
}

/// The list `team` in `home`, holding one task; its id.
fn one_task(home: &Path) -> (TaskListStore, u64) {
    let store = TaskListStore::open(&home.join("kaji-home"), "team").expect("store");
    let id = store
        .create(NewListTask::new("the task"))
        .expect("create")
        .id;
    (store, id)
}

async fn worker_in_one_task() -> HeldTask {
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let (store, id) = one_task(home.path());
    let server = serve_held_tasks().await;
    let child = worker(home.path(), work.path(), &server, "w0")
        .spawn()
        .expect("spawn");
    server.wait_for_holds(1).await;
    HeldTask {
        home,
        work,
        store,
        id,
        server,
        child,
    }
}

#[tokio::test]
async fn three_workers_one_killed_complete_every_task_exactly_once() {
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let store = TaskListStore::open(&home.path().join("kaji-home"), "team").expect("store");
    let mut ids = Vec::new();
    for i in 0..6 {
        let mut task = NewListTask::new(format!("task {i}"));
        // The last two wait for the first.
        if i >= 4 {
            task.blocked_by = vec![ids[0]];
        }
        ids.push(store.create(task).expect("create").id);
    }
    // Every task's one request holds until the test releases it.
    let server = serve_held_tasks().await;
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
        .find(|t| t.owner.as_deref() == Some("w0") && t.status == ListTaskStatus::InProgress)
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
        assert_eq!(
            store.get(*id).expect("get").status,
            ListTaskStatus::Completed
        );
    }
    let released = store.get(victim_task).expect("get");
    assert_eq!(released.metadata["released"]["owner"], "w0");
    assert_ne!(released.owner.as_deref(), Some("w0"));
}

/// A worker stopped by SIGTERM, SIGINT or SIGHUP in the middle of its task
/// releases it with a note, gives up its lock (a new worker of the same
/// name joins at once) and exits 130.
#[tokio::test]
async fn a_worker_stopped_by_a_signal_releases_its_task_and_leaves() {
    for (sig, signame) in [
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGHUP, "SIGHUP"),
    ] {
        let HeldTask {
            home,
            work,
            store,
            id,
            server,
            child,
        } = worker_in_one_task().await;
        let pid = child.id().expect("pid") as libc::pid_t;
        // SAFETY: a signal to the child this test spawned.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
        let out = child.wait_with_output().await.expect("wait");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.code(),
            Some(130),
            "{signame}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains(&format!("released #{id}")),
            "{signame}: {stdout}"
        );
        let task = store.get(id).expect("get");
        assert_eq!(task.status, ListTaskStatus::Pending, "{signame}");
        assert_eq!(task.owner, None, "{signame}");
        assert_eq!(task.metadata["released"]["owner"], "w0", "{signame}");
        // The lock is free: a worker of the same name finishes the task.
        server.release();
        server.release();
        let again = worker(home.path(), work.path(), &server, "w0")
            .output()
            .await
            .expect("run");
        assert_eq!(again.status.code(), Some(0), "{signame}");
        assert_eq!(
            store.get(id).expect("get").status,
            ListTaskStatus::Completed
        );
    }
}

/// A worker killed with SIGKILL mid-task leaves the task held under its
/// name; a worker restarted under that name releases it at its start and
/// finishes it, instead of waiting on itself forever (the guard only turns
/// a hang into a failure).
#[tokio::test]
async fn a_worker_restarted_under_its_name_takes_back_what_it_held() {
    let HeldTask {
        home,
        work,
        store,
        id,
        server,
        mut child,
    } = worker_in_one_task().await;
    child.start_kill().expect("SIGKILL");
    let _ = child.wait().await;
    assert_eq!(
        store.get(id).expect("get").owner.as_deref(),
        Some("w0"),
        "the killed worker still holds it"
    );
    server.release();
    server.release();
    let again = worker(home.path(), work.path(), &server, "w0").output();
    let again = tokio::time::timeout(std::time::Duration::from_secs(120), again)
        .await
        .expect("the restarted worker waited on its own task")
        .expect("run");
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert_eq!(again.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains(&format!("completed #{id}")), "{stdout}");
    assert_eq!(
        store.get(id).expect("get").status,
        ListTaskStatus::Completed
    );
}

/// Nobody is notified of their own actions: a worker's completion notice
/// goes to the lead's mailbox and stays there; the worker's next task does
/// not start with it.
#[tokio::test]
async fn a_worker_is_not_told_of_its_own_completions() {
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let store = TaskListStore::open(&home.path().join("kaji-home"), "team").expect("store");
    for i in 0..2 {
        store
            .create(NewListTask::new(format!("task {i}")))
            .expect("create");
    }
    let server = serve([done("done")]).await;
    let out = worker(home.path(), work.path(), &server, "w0")
        .output()
        .await
        .expect("run");
    assert_eq!(out.status.code(), Some(0));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let second = requests[1].body.to_string();
    assert!(
        !second.contains("was completed by w0"),
        "told of its own completion: {second}"
    );
    let lead = store.take_messages("main").expect("mailbox");
    assert_eq!(lead.len(), 2, "{lead:?}");
}

/// A worker has its own budget (docs/agents.md, "Budget"): with
/// `--max-requests 2` and a model that never finishes, the task it works
/// ends after two requests, is released with a note, and the worker does
/// not take it again and again (the guard only turns a hang into a
/// failure).
#[tokio::test]
async fn a_workers_own_budget_bounds_its_task_and_releases_it() {
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let (store, id) = one_task(home.path());
    let server = serve([Turn::tool_call("Bash", json!({"command": "true"}))]).await;
    let out = worker(home.path(), work.path(), &server, "w0")
        .args(["--max-requests", "2", "--yolo"])
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), out)
        .await
        .expect("the worker kept working its task past its budget")
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(server.requests().len(), 2, "{stdout}\n{stderr}");
    let task = store.get(id).expect("get");
    assert_eq!(task.status, ListTaskStatus::Pending, "{stdout}\n{stderr}");
    assert_eq!(task.owner, None, "{stdout}\n{stderr}");
    assert!(
        serde_json::to_string(&task.metadata)
            .expect("json")
            .contains("w0"),
        "released without a note: {:?}",
        task.metadata
    );
}
