//! `kaji worker` on a task list in PostgreSQL, through the real binary and
//! a throwaway server from kaji-test-support: two "machines" (groups of
//! workers with separate `KAJI_HOME`s) finish a list with dependencies
//! exactly once while one worker is killed mid-task and its task finished
//! by another after its lease lapsed; and a worker whose lease lapsed
//! (stopped with SIGSTOP, as a partitioned laptop) cannot complete the
//! task it lost, and says so.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use kaji_tasks::list::pg::{PgTaskList, PgUrl};
use kaji_tasks::list::{ListTaskStatus, NewListTask};
use kaji_test_support::ScriptedModelServer;
use kaji_test_support::pg::{PG_PASSWORD, PgServer};
use tokio::process::Child;

use crate::common;

use crate::common::serve_held_tasks;

static NEXT: AtomicU64 = AtomicU64::new(0);

fn unique(name: &str) -> String {
    format!(
        "{name}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

fn server_url(list: &str) -> String {
    match PgServer::shared() {
        Ok(s) => s.url(list),
        Err(e) => panic!("the PostgreSQL fixture did not start: {e}"),
    }
}

/// A worker on "machine" `home` (its own `KAJI_HOME`).
fn worker(home: &Path, work: &Path, model: &ScriptedModelServer, list: &str, name: &str) -> Child {
    let mut cmd = common::worker(home, model, list, name);
    cmd.env("KAJI_WORKER_POLL_MS", "20")
        .env("KAJI_LEASE_MS", "1500")
        .env("KAJI_TASK_LIST_URL", server_url(list))
        .args(["--no-checkpoints", "--no-session-persistence", "-C"])
        .arg(work);
    cmd.spawn().expect("spawn kaji worker")
}

async fn list_named(name: &str) -> PgTaskList {
    let url = PgUrl::parse(&server_url(name)).expect("url");
    PgTaskList::open(&url, name).await.expect("open the list")
}

fn count_completed(stdout: &str, into: &mut BTreeMap<u64, usize>) {
    for line in stdout.lines() {
        if let Some(id) = line.strip_prefix("completed #") {
            *into.entry(id.parse().expect("id")).or_default() += 1;
        }
    }
}

fn signal(child: &Child, sig: i32) {
    let pid = child.id().expect("running") as i32;
    // SAFETY: a signal to our own child.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill({pid}, {sig})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_machines_finish_a_list_once_though_one_worker_is_killed() {
    let name = unique("machines");
    let list = list_named(&name).await;
    let mut ids = Vec::new();
    for i in 0..6 {
        let mut task = NewListTask::new(format!("task {i}"));
        if i >= 4 {
            task.blocked_by = vec![ids[0]];
        }
        ids.push(list.create(task).await.expect("create").id);
    }
    let model = serve_held_tasks().await;
    let (a, b, work) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let mut children = vec![
        worker(a.path(), work.path(), &model, &name, "a0"),
        worker(a.path(), work.path(), &model, &name, "a1"),
        worker(b.path(), work.path(), &model, &name, "b0"),
        worker(b.path(), work.path(), &model, &name, "b1"),
    ];
    model.wait_for_holds(4).await;
    let snapshot = list.list().await.expect("list");
    let victim_task = snapshot
        .tasks
        .iter()
        .find(|t| t.owner.as_deref() == Some("a0"))
        .expect("a0 works on a task")
        .id;
    let mut victim = children.remove(0);
    victim.start_kill().expect("SIGKILL");
    let victim_out = victim.wait_with_output().await.expect("wait");
    assert!(!victim_out.status.success());
    for _ in 0..20 {
        model.release();
    }
    let mut completed = BTreeMap::new();
    count_completed(&String::from_utf8_lossy(&victim_out.stdout), &mut completed);
    for child in children {
        let out = child.wait_with_output().await.expect("wait");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
        assert!(!stderr.contains(PG_PASSWORD), "{stderr}");
        count_completed(&stdout, &mut completed);
    }
    let expected: BTreeMap<u64, usize> = ids.iter().map(|id| (*id, 1)).collect();
    assert_eq!(completed, expected, "every task completed exactly once");
    for id in &ids {
        assert_eq!(
            list.get(*id).await.expect("get").status,
            ListTaskStatus::Completed
        );
    }
    let released = list.get(victim_task).await.expect("get");
    assert_eq!(released.metadata["releasedFrom"], "a0");
    assert_ne!(released.owner.as_deref(), Some("a0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_lease_lapsed_cannot_complete_the_task_it_lost() {
    let name = unique("fenced");
    let list = list_named(&name).await;
    let task = list
        .create(NewListTask::new("the one task"))
        .await
        .expect("create");
    let model = serve_held_tasks().await;
    let (a, b, work) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let old = worker(a.path(), work.path(), &model, &name, "w1");
    model.wait_for_holds(1).await;
    assert_eq!(
        list.get(task.id).await.expect("get").owner.as_deref(),
        Some("w1")
    );
    // w1 stops (a laptop closed mid-task): no heartbeat, its lease lapses
    // and w2, on another machine, takes the task over.
    signal(&old, libc::SIGSTOP);
    let new = worker(b.path(), work.path(), &model, &name, "w2");
    model.wait_for_holds(2).await;
    model.release();
    model.release();
    let out = new.wait_with_output().await.expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("completed #{}", task.id)),
        "{stdout}"
    );
    // w1 wakes up, finishes its session and tries to complete the task.
    signal(&old, libc::SIGCONT);
    let out = old.wait_with_output().await.expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(!stdout.contains("completed #"), "{stdout}");
    assert!(
        stderr.contains("refused") && stderr.contains("\"w1\"") && stderr.contains(&name),
        "{stderr}"
    );
    assert!(
        stderr.contains("127.0.0.1:") && !stderr.contains(PG_PASSWORD),
        "{stderr}"
    );
    let done = list.get(task.id).await.expect("get");
    assert_eq!(
        (done.status, done.owner.as_deref()),
        (ListTaskStatus::Completed, Some("w2"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_list_url_without_a_list_is_a_usage_error_for_worker_and_exec() {
    let home = tempfile::tempdir().expect("tempdir");
    let url = "postgres://kaji:hunter2@127.0.0.1:1/db";
    let common = [
        "--provider",
        "anthropic",
        "--base-url",
        "http://127.0.0.1:1",
        "--model",
        "scripted",
        "--no-checkpoints",
        "--task-list",
        url,
    ];
    for (command, tail) in [("worker", vec!["--name", "w1"]), ("exec", vec!["hello"])] {
        let args: Vec<&str> = [command].into_iter().chain(common).chain(tail).collect();
        let out = common::kaji(home.path())
            .env("ANTHROPIC_API_KEY", common::TEST_KEY)
            .current_dir(home.path())
            .args(&args)
            .output()
            .await
            .expect("run kaji");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("?list=NAME"), "{args:?}: {stderr}");
        assert!(!stderr.contains("hunter2"), "{args:?}: {stderr}");
        // Never taken for a file list name.
        assert!(!home.path().join("kaji-home/tasks").exists(), "{args:?}");
    }
}
