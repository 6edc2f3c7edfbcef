//! The task list against files that are not what they should be — a FIFO
//! named `7.json`, a symlink to `/dev/zero`, an oversized file, a broken
//! `.highwatermark` or lock file — and against a lock held by another
//! process: nothing blocks, nothing reads without bound, every bad file is
//! named, lock waits end with the holder's name, and `repair` puts the
//! bookkeeping back.

use crate::list_support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use kaji_tasks::list::{LockWait, NewListTask, TaskListError, TaskListStore};

use kaji_test_support::fixtures::mkfifo;

const WORKER: &str = env!("CARGO_BIN_EXE_task-list-worker");

/// Runs `f` on a thread and fails the test if it has not returned after
/// a generous bound: a regression here would otherwise hang forever.
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the operation blocked (it must not wait on a file's type)")
}

fn new(subject: &str) -> NewListTask {
    NewListTask {
        subject: subject.to_string(),
        ..NewListTask::default()
    }
}

fn store_with_two_tasks(home: &Path) -> TaskListStore {
    let store = TaskListStore::open(home, "bad").expect("open");
    store.create(new("one")).expect("create");
    store.create(new("two")).expect("create");
    store
}

#[test]
fn a_fifo_and_a_symlink_to_dev_zero_are_refused_and_named() {
    let home = list_support::fast_temp_home();
    let store = store_with_two_tasks(home.path());
    mkfifo(&store.dir().join("7.json"));
    std::os::unix::fs::symlink("/dev/zero", store.dir().join("8.json")).expect("symlink");

    let reader = store.clone();
    let snapshot = bounded(move || reader.list()).expect("list");
    let ids: Vec<u64> = snapshot.tasks.iter().map(|t| t.id).collect();
    assert_eq!(ids, vec![1, 2]);
    assert_eq!(snapshot.errors.len(), 2, "{:?}", snapshot.errors);
    let fifo = &snapshot.errors[0];
    assert_eq!(fifo.id, Some(7));
    assert!(fifo.path.ends_with("7.json"), "{fifo:?}");
    assert!(fifo.problem.contains("FIFO"), "{fifo:?}");
    let zero = &snapshot.errors[1];
    assert!(zero.problem.contains("character device"), "{zero:?}");

    let reader = store.clone();
    let err = bounded(move || reader.get(8)).expect_err("a device is no task");
    assert!(matches!(err, TaskListError::NotRegularFile { .. }), "{err}");
    assert!(err.to_string().contains("8.json"), "{err}");
    let reader = store.clone();
    let err = bounded(move || reader.claim(7, "me")).expect_err("a FIFO is no task");
    assert!(matches!(err, TaskListError::NotRegularFile { .. }), "{err}");
}

#[test]
fn files_over_the_cap_are_refused_from_their_size() {
    let home = list_support::fast_temp_home();
    let store = store_with_two_tasks(home.path()).with_max_file_bytes(4096);
    let mut big = std::fs::read(store.task_path(2)).expect("read");
    big.resize(5000, b' ');
    std::fs::write(store.task_path(2), &big).expect("write");

    let snapshot = store.list().expect("list");
    assert_eq!(snapshot.tasks.len(), 1);
    assert_eq!(snapshot.errors.len(), 1);
    assert!(
        snapshot.errors[0]
            .problem
            .contains("more than the limit of 4096"),
        "{:?}",
        snapshot.errors
    );
    let err = store.get(2).expect_err("too large");
    assert!(
        matches!(
            err,
            TaskListError::TooLarge {
                size: 5000,
                limit: 4096,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_fifo_highwatermark_and_lock_never_block_and_repair_fixes_them() {
    let home = list_support::fast_temp_home();
    let store = store_with_two_tasks(home.path());
    let hwm = store.dir().join(".highwatermark");
    std::fs::remove_file(&hwm).expect("rm");
    mkfifo(&hwm);
    std::fs::remove_file(store.dir().join(".lock")).expect("rm");
    mkfifo(&store.dir().join(".lock"));

    let reader = store.clone();
    let snapshot = bounded(move || reader.list()).expect("list");
    assert_eq!(snapshot.tasks.len(), 2);
    assert!(
        snapshot.errors[0].path.ends_with(".highwatermark"),
        "{:?}",
        snapshot.errors
    );
    let writer = store.clone();
    let err = bounded(move || writer.create(new("three"))).expect_err("the lock file is a FIFO");
    assert!(matches!(err, TaskListError::NotRegularFile { .. }), "{err}");
    assert!(err.to_string().contains(".lock"), "{err}");

    let fixer = store.clone();
    let report = bounded(move || fixer.repair()).expect("repair");
    assert!(report.is_sound(), "{report:?}");
    assert_eq!(report.removed.len(), 1, "{report:?}");
    assert!(report.removed[0].path.ends_with(".lock"));
    assert!(report.highwatermark_problem.is_some());
    assert!(report.highwatermark_rewritten);
    assert_eq!(report.highwatermark_after, 2);
    assert_eq!(store.create(new("three")).expect("create").id, 3);
}

#[test]
fn a_lock_that_is_a_directory_is_refused_and_repair_removes_it() {
    let home = list_support::fast_temp_home();
    let store = store_with_two_tasks(home.path());
    let lock = store.dir().join(".lock");
    std::fs::remove_file(&lock).expect("rm");
    std::fs::create_dir_all(lock.join("inside")).expect("mkdir");
    std::fs::create_dir(store.dir().join("1.lock")).ok();

    let writer = store.clone();
    let err = bounded(move || writer.create(new("three"))).expect_err("the lock is a directory");
    assert!(matches!(err, TaskListError::NotRegularFile { .. }), "{err}");
    assert!(err.to_string().contains("directory"), "{err}");

    let fixer = store.clone();
    let report = bounded(move || fixer.repair()).expect("repair");
    assert!(report.is_sound(), "{report:?}");
    assert!(
        report.removed.iter().any(|r| r.path.ends_with(".lock")),
        "{report:?}"
    );
    // The directory's entries are moved aside, not deleted.
    let aside = std::fs::read_dir(store.dir())
        .expect("read")
        .flatten()
        .any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".lock.not-a-lock-")
        });
    assert!(aside, "the non-empty directory was not kept aside");
    assert_eq!(store.create(new("three")).expect("create").id, 3);
}

#[test]
fn repair_never_lowers_the_mark_and_rebuilds_a_missing_one() {
    let home = list_support::fast_temp_home();
    let store = store_with_two_tasks(home.path());
    for _ in 0..3 {
        let t = store.create(new("gone")).expect("create");
        store.delete(t.id).expect("delete");
    }
    // Mark 5, files 1 and 2: repair keeps 5.
    let report = store.repair().expect("repair");
    assert_eq!(report.highwatermark_before, Some(5));
    assert_eq!(report.highwatermark_after, 5);
    assert!(!report.highwatermark_rewritten);

    // Garbage in the mark: rebuilt from the files (the old one is lost).
    std::fs::write(store.dir().join(".highwatermark"), "not a number").expect("write");
    assert!(store.create(new("refused")).is_err());
    let report = store.repair().expect("repair");
    assert_eq!(report.highwatermark_after, 2, "{report:?}");
    assert!(report.highwatermark_rewritten);

    // Missing mark, a task file beyond it: rebuilt above every file.
    std::fs::remove_file(store.dir().join(".highwatermark")).expect("rm");
    let report = store.repair().expect("repair");
    assert_eq!(report.highwatermark_before, None);
    assert_eq!(report.highwatermark_after, 2);
    assert!(report.highwatermark_rewritten);
    assert_eq!(store.create(new("next")).expect("create").id, 3);
}

#[test]
fn repair_reports_unreadable_task_files_as_unsound() {
    let home = list_support::fast_temp_home();
    let store = store_with_two_tasks(home.path());
    std::fs::write(store.task_path(9), "{").expect("write");
    let report = store.repair().expect("repair");
    assert!(!report.is_sound());
    assert_eq!(report.bad_files.len(), 1);
    assert_eq!(report.bad_files[0].id, Some(9));
    assert_eq!(
        report.highwatermark_after, 9,
        "an unreadable file's id counts too"
    );
    assert!(
        store.task_path(9).exists(),
        "repair never deletes a task file"
    );
}

/// A `task-list-worker hold` process holding the list lock.
struct Holder {
    child: Child,
}

impl Holder {
    fn start(home: &Path) -> Self {
        let mut child = Command::new(WORKER)
            .arg("hold")
            .arg(home)
            .arg("bad")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn worker");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read");
        assert_eq!(line.trim(), "held");
        Self { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_held_lock_times_out_naming_its_holder_and_the_wait_is_reported_once() {
    let home = list_support::fast_temp_home();
    let store = store_with_two_tasks(home.path());
    let holder = Holder::start(home.path());
    let notices = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&notices);
    let pid = holder.pid();
    let store = store
        .with_lock_timeout(Duration::from_millis(300))
        .with_lock_observer(Arc::new(move |wait: &LockWait| {
            assert_eq!(wait.holder.as_ref().map(|h| h.pid), Some(pid));
            assert!(
                wait.to_string()
                    .contains("waiting for the list lock held by pid")
            );
            seen.fetch_add(1, Ordering::SeqCst);
        }));

    let err = store.create(new("three")).expect_err("the lock is held");
    let TaskListError::LockTimeout {
        holder: Some(h),
        what,
        ..
    } = &err
    else {
        panic!("expected a lock timeout naming the holder, got {err}");
    };
    assert_eq!(h.pid, pid);
    assert!(h.command.contains("task-list-worker"), "{h:?}");
    assert_eq!(what, "the list lock");
    assert!(err.to_string().contains(&format!("pid {pid}")), "{err}");
    assert_eq!(notices.load(Ordering::SeqCst), 1);
    // Field updates do not need the list lock.
    assert!(
        store
            .update(
                1,
                kaji_tasks::list::ListTaskPatch {
                    subject: Some("renamed".into()),
                    ..Default::default()
                }
            )
            .is_ok()
    );
}

#[test]
fn a_lock_left_by_a_killed_holder_is_free_and_repair_clears_its_record() {
    let home = list_support::fast_temp_home();
    let store = store_with_two_tasks(home.path());
    let mut holder = Holder::start(home.path());
    let pid = holder.pid();
    holder.child.kill().expect("kill");
    holder.child.wait().expect("wait");

    let report = store.repair().expect("repair");
    assert!(report.is_sound(), "{report:?}");
    assert_eq!(report.stale_locks_cleared.len(), 1, "{report:?}");
    assert_eq!(
        report.stale_locks_cleared[0].holder.as_ref().map(|h| h.pid),
        Some(pid)
    );
    let again = store.repair().expect("repair");
    assert!(again.stale_locks_cleared.is_empty(), "{again:?}");
    assert_eq!(store.create(new("three")).expect("create").id, 3);
}
