//! The watchdog is forked from kaji without exec, so it starts with a copy
//! of every descriptor kaji has: it must close them all (a lock file it
//! kept open would keep the lock held after kaji let go), and it must live
//! outside kaji's process group. One test in its own binary, so that this
//! spawn is the one that forks the watchdog.

use std::time::Duration;

use kaji_tasks::TaskListStore;
use kaji_tasks::process::{read_stat, shell_command, spawn_in_group};

#[tokio::test]
async fn the_watchdog_holds_no_lock_of_kaji_and_lives_in_its_own_group() {
    let home = tempfile::tempdir().expect("tempdir");
    let store = TaskListStore::open(home.path(), "fds").expect("open");
    let held = store.lock().expect("lock");
    assert!(
        kaji_tasks::watchdog::watchdog_pid().is_none(),
        "no spawn yet"
    );

    let mut child = spawn_in_group(shell_command("exit 0")).expect("spawn");
    let watchdog = kaji_tasks::watchdog::watchdog_pid().expect("the first spawn starts it");
    child.wait().await.expect("wait");
    drop(held);

    let other = store.clone().with_lock_timeout(Duration::from_secs(20));
    other
        .lock()
        .expect("the list lock is free once kaji drops it: the watchdog closed its copy");
    let own = read_stat(i32::try_from(std::process::id()).expect("pid")).expect("own stat");
    let dog = read_stat(watchdog).expect("the watchdog runs");
    assert_ne!(dog.pgrp, own.pgrp, "the watchdog must leave kaji's group");
}
