//! Many processes on one task list at once: the stress test (no lost
//! update, no reused id, no double claim, symmetric edges, valid files) and
//! the crash test (writers killed with SIGKILL at arbitrary moments).
//! Both drive the `task-list-worker` binary of this crate, and both run
//! against both backends: the file store and a list in the throwaway
//! PostgreSQL of kaji-test-support (`KAJI_TASK_LIST_URL` tells the workers).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use kaji_tasks::list::{ListTaskPatch, ListTaskStatus, NewListTask, TaskListStore};
use list_support::{Backend, Fixture};
use serde_json::Value;

use crate::list_support;

const WORKER: &str = env!("CARGO_BIN_EXE_task-list-worker");
fn spawn(fx: &Fixture, args: &[String]) -> Child {
    let mut cmd = Command::new(WORKER);
    cmd.arg(args[0].as_str())
        .arg(fx.home.path())
        .arg(&fx.list)
        .args(&args[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    fx.env(&mut cmd);
    cmd.spawn().expect("spawn task-list-worker")
}

/// Checks what must hold for every list at rest and returns it.
fn check_list_invariants(fx: &Fixture) -> kaji_tasks::list::ListSnapshot {
    let snapshot = fx.open().list().expect("list");
    assert!(
        snapshot.errors.is_empty(),
        "unreadable files: {:?}",
        snapshot.errors
    );
    if fx.backend == Backend::Files {
        check_files(fx.home.path(), &fx.list);
    }
    check_edges(&snapshot);
    snapshot
}

/// The file store's own invariants: no journal left, every file whole.
fn check_files(home: &Path, list: &str) {
    let store = TaskListStore::open(home, list).expect("open list");
    assert!(
        !store.dir().join(".journal.json").exists(),
        "journal left behind"
    );
    // Every task file is valid JSON holding its own id.
    for entry in std::fs::read_dir(store.dir()).expect("read dir").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(id) = name
            .strip_suffix(".json")
            .and_then(|n| n.parse::<u64>().ok())
        {
            let bytes = std::fs::read(entry.path()).expect("read task file");
            let value: Value =
                serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(value["id"], id, "{name}");
        }
    }
}

/// Ids below the mark, both sides of every edge present.
fn check_edges(snapshot: &kaji_tasks::list::ListSnapshot) {
    let ids: BTreeSet<u64> = snapshot.tasks.iter().map(|t| t.id).collect();
    for task in &snapshot.tasks {
        assert!(
            task.id <= snapshot.highwatermark,
            "#{} above the highwatermark",
            task.id
        );
        for b in &task.blocks {
            assert!(ids.contains(b), "#{} blocks missing #{b}", task.id);
            let other = snapshot.get(*b).expect("present");
            assert!(
                other.blocked_by.contains(&task.id),
                "#{} blocks #{b} one-sidedly",
                task.id
            );
        }
        for b in &task.blocked_by {
            assert!(ids.contains(b), "#{} blocked by missing #{b}", task.id);
            let other = snapshot.get(*b).expect("present");
            assert!(
                other.blocks.contains(&task.id),
                "#{} blocked by #{b} one-sidedly",
                task.id
            );
        }
    }
}

#[test]
fn eight_processes_of_random_operations_lose_nothing() {
    stress(Backend::Files);
}

#[test]
fn eight_processes_of_random_operations_lose_nothing_on_postgres() {
    stress(Backend::Pg);
}

fn stress(backend: Backend) {
    const WORKERS: u64 = 8;
    const OPS: u64 = 200;
    // On tmpfs when there is one: this test is about locking and atomic
    // replacement, which fsync does not change (the crash test below and
    // the other tests write to the real disk).
    let fx = Fixture::new(backend, "stress", true);
    let seed = kaji_test_support::seeds::seeds("stress", &[0x5eed], Some("TASK_LIST_SEED"))[0];
    let children: Vec<Child> = (0..WORKERS)
        .map(|w| {
            let args = [
                "stress".to_string(),
                w.to_string(),
                OPS.to_string(),
                (seed + w).to_string(),
            ];
            spawn(&fx, &args)
        })
        .collect();
    let summaries: Vec<Value> = children
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().expect("wait for worker");
            assert!(
                out.status.success(),
                "a worker failed (see its stderr above)"
            );
            serde_json::from_slice(&out.stdout).expect("worker summary")
        })
        .collect();

    let snapshot = check_list_invariants(&fx);
    let ids = |v: &Value| -> Vec<u64> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .collect()
    };

    // No id handed out twice; every created task is there or was deleted by
    // its creator; every task present was created by someone.
    let mut creator: BTreeMap<u64, u64> = BTreeMap::new();
    for s in &summaries {
        let w = s["worker"].as_u64().expect("worker");
        for id in ids(&s["created"]) {
            assert!(creator.insert(id, w).is_none(), "id #{id} handed out twice");
            assert!(id <= snapshot.highwatermark);
        }
    }
    for s in &summaries {
        let deleted: BTreeSet<u64> = ids(&s["deleted"]).into_iter().collect();
        for id in ids(&s["created"]) {
            assert!(
                snapshot.get(id).is_some() != deleted.contains(&id),
                "#{id}: present = {}, deleted by its creator = {}",
                snapshot.get(id).is_some(),
                deleted.contains(&id)
            );
        }
    }
    for task in &snapshot.tasks {
        assert!(
            creator.contains_key(&task.id),
            "#{} was never created",
            task.id
        );
    }

    // Each process's last writes survived, including writes of different
    // fields of the same task from different processes.
    let mut holder: BTreeMap<u64, String> = BTreeMap::new();
    for s in &summaries {
        let owner = format!("w{}", s["worker"]);
        for (id, subject) in s["subjects"].as_object().expect("subjects") {
            let id: u64 = id.parse().expect("id");
            if let Some(task) = snapshot.get(id) {
                assert_eq!(
                    task.subject,
                    subject.as_str().expect("str"),
                    "#{id} subject lost"
                );
            }
        }
        for (id, step) in s["meta"].as_object().expect("meta") {
            let id: u64 = id.parse().expect("id");
            if let Some(task) = snapshot.get(id) {
                assert_eq!(
                    task.metadata.get(&owner),
                    Some(step),
                    "#{id}: metadata of {owner} lost"
                );
            }
        }
        let completed: BTreeSet<u64> = ids(&s["completed"]).into_iter().collect();
        for id in ids(&s["held"]) {
            let Some(task) = snapshot.get(id) else {
                continue;
            };
            if let Some(other) = holder.insert(id, owner.clone()) {
                panic!("#{id} is held by both {other} and {owner}");
            }
            assert_eq!(task.owner.as_deref(), Some(owner.as_str()), "#{id} owner");
            let status = if completed.contains(&id) {
                ListTaskStatus::Completed
            } else {
                ListTaskStatus::InProgress
            };
            assert_eq!(task.status, status, "#{id} status");
        }
    }
    for task in &snapshot.tasks {
        if task.owner.is_some() {
            assert_eq!(
                task.owner.as_ref(),
                holder.get(&task.id),
                "#{} has an owner nobody claimed",
                task.id
            );
        }
    }
    let total_created: usize = summaries.iter().map(|s| ids(&s["created"]).len()).sum();
    assert!(
        total_created > 100,
        "the workers created only {total_created} tasks"
    );
    assert!(!holder.is_empty(), "no claim succeeded");
}

#[test]
fn writers_killed_at_random_moments_leave_a_valid_list() {
    killed_writers(Backend::Files);
}

#[test]
fn writers_killed_at_random_moments_leave_a_valid_list_on_postgres() {
    killed_writers(Backend::Pg);
}

fn killed_writers(backend: Backend) {
    const WRITERS: u64 = 4;
    const ROUNDS: u64 = 8;
    let fx = Fixture::new(backend, "crash", false);
    let scratch_dir = tempfile::tempdir().expect("temp dir");
    // A fixed sequence of kill points: inside operation 1..=12 of a writer
    // (each announces an operation as it starts it).
    let mut kill_after = (1..).map(|i: u64| 1 + (i * 7919 + 13) % 12);
    for round in 0..ROUNDS {
        let mut children: Vec<(Child, u64)> = (0..WRITERS)
            .map(|w| {
                // A fresh owner name per process: a killed writer's claims
                // stay with the writer that died.
                let worker = round * WRITERS + w;
                let args = [
                    "crash".to_string(),
                    worker.to_string(),
                    (round * 100 + w).to_string(),
                ];
                (spawn(&fx, &args), kill_after.next().unwrap_or(1))
            })
            .collect();
        for (child, lines) in &mut children {
            let stdout = child.stdout.take().expect("stdout");
            let mut reader = BufReader::new(stdout);
            for _ in 0..*lines {
                let mut line = String::new();
                let n = reader.read_line(&mut line).expect("read worker line");
                assert!(n > 0, "a writer stopped by itself (see its stderr above)");
            }
            // The writer is inside the operation it announced last. Do a
            // varying amount of fsynced disk work first, so that the kill
            // lands at varying points of that operation (whose own steps
            // are fsyncs on the same disk).
            let spread = kill_after.next().unwrap_or(0) % 4;
            for _ in 0..spread {
                let scratch = scratch_dir.path().join("scratch");
                let mut file = std::fs::File::create(&scratch).expect("scratch file");
                file.write_all(b"spread the kill").expect("write scratch");
                file.sync_all().expect("fsync scratch");
            }
            child.kill().expect("SIGKILL the writer");
            child.wait().expect("reap the writer");
        }
        check_list_invariants(&fx);
    }

    // No lock outlived its killed holder: every kind of operation still works.
    let store = fx.open();
    let hwm = store.highwatermark().expect("hwm");
    let a = store
        .create(NewListTask::new("after the crash"))
        .expect("create");
    assert!(a.id > hwm, "ids continue past the highwatermark");
    store.claim(a.id, "survivor").expect("claim");
    for task in store.list().expect("list").tasks {
        let patch = ListTaskPatch {
            subject: Some(format!("touched {}", task.id)),
            ..ListTaskPatch::default()
        };
        store.update(task.id, patch).expect("update every task");
    }
    for w in 0..ROUNDS * WRITERS {
        store.release(&format!("w{w}")).expect("release");
    }
    store.reset().expect("reset");
    check_list_invariants(&fx);
}
