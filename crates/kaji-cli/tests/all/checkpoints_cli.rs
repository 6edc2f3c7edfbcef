//! `kaji checkpoints` through the real binary with a temporary KAJI_HOME:
//! list (text and --json), diff between checkpoints and to the present,
//! restore and its undo, and the exit codes of bad ids and directories.

use std::path::Path;

use kaji_core::checkpoints::CheckpointStore;
use serde_json::Value;

use crate::common::{kaji_at, kaji_sync, stderr, stdout};

fn kaji(home: &Path, args: &[&str]) -> std::process::Output {
    kaji_at(home)
        .arg("checkpoints")
        .args(args)
        .output()
        .expect("kaji runs")
}

#[tokio::test]
async fn list_diff_restore_and_undo() {
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let dir = work.path().to_str().expect("utf-8 temp path");
    let store = CheckpointStore::open(home.path(), work.path()).expect("open");

    let empty = kaji(home.path(), &["-C", dir, "list"]);
    assert_eq!(empty.status.code(), Some(0), "{}", stderr(&empty));
    assert!(
        stdout(&empty).contains("No checkpoints"),
        "{}",
        stdout(&empty)
    );

    std::fs::write(work.path().join("a.txt"), "first\n").expect("write");
    let first = store
        .commit("task start")
        .await
        .expect("commit")
        .expect("checkpoint");
    std::fs::write(work.path().join("a.txt"), "second\n").expect("write");
    std::fs::write(work.path().join("b.txt"), "created\n").expect("write");
    let second = store
        .commit("turn 1: Write")
        .await
        .expect("commit")
        .expect("checkpoint");

    let table = kaji(home.path(), &["-C", dir, "list"]);
    assert_eq!(table.status.code(), Some(0), "{}", stderr(&table));
    let text = stdout(&table);
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 3, "{text}");
    assert!(
        rows[1].starts_with(second.id.short()) && rows[1].ends_with("turn 1: Write"),
        "{text}"
    );
    assert!(
        rows[2].starts_with(first.id.short()) && rows[2].ends_with("task start"),
        "{text}"
    );

    let json = kaji(home.path(), &["list", "--json", "-C", dir]);
    assert_eq!(json.status.code(), Some(0), "{}", stderr(&json));
    let items: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(items[0]["id"], second.id.as_str());
    assert_eq!(items[0]["label"], "turn 1: Write");
    assert!(
        items[1]["time"].as_u64().is_some_and(|t| t > 1_600_000_000),
        "{items}"
    );

    let diff = kaji(
        home.path(),
        &["-C", dir, "diff", first.id.short(), second.id.short()],
    );
    assert_eq!(diff.status.code(), Some(0), "{}", stderr(&diff));
    let patch = stdout(&diff);
    assert!(
        patch.contains("-first") && patch.contains("+second") && patch.contains("b.txt"),
        "{patch}"
    );

    std::fs::write(work.path().join("c.txt"), "uncheckpointed\n").expect("write");
    let to_present = kaji(home.path(), &["-C", dir, "diff", second.id.as_str()]);
    assert_eq!(to_present.status.code(), Some(0), "{}", stderr(&to_present));
    assert!(
        stdout(&to_present).contains("+uncheckpointed"),
        "{}",
        stdout(&to_present)
    );

    let restored = kaji(home.path(), &["-C", dir, "restore", first.id.short()]);
    assert_eq!(restored.status.code(), Some(0), "{}", stderr(&restored));
    assert_eq!(
        std::fs::read_to_string(work.path().join("a.txt")).expect("read"),
        "first\n"
    );
    assert!(!work.path().join("b.txt").exists() && !work.path().join("c.txt").exists());
    let message = stdout(&restored);
    let undo_id = message
        .split("restore ")
        .last()
        .map(str::trim)
        .expect("undo command printed")
        .to_string();
    assert!(
        message.contains("undo with: kaji checkpoints -C"),
        "{message}"
    );

    let undone = kaji(home.path(), &["-C", dir, "restore", &undo_id]);
    assert_eq!(undone.status.code(), Some(0), "{}", stderr(&undone));
    assert_eq!(
        std::fs::read_to_string(work.path().join("a.txt")).expect("read"),
        "second\n"
    );
    assert!(work.path().join("b.txt").is_file() && work.path().join("c.txt").is_file());
}

#[tokio::test]
async fn unknown_ids_and_missing_directories_exit_2() {
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let dir = work.path().to_str().expect("utf-8 temp path");
    std::fs::write(work.path().join("a.txt"), "a\n").expect("write");
    CheckpointStore::open(home.path(), work.path())
        .expect("open")
        .commit("one")
        .await
        .expect("commit");

    for args in [
        vec!["-C", dir, "restore", "deadbeef"],
        vec!["-C", dir, "diff", "not-an-id"],
        vec!["-C", dir, "restore", "HEAD~1"],
    ] {
        let out = kaji(home.path(), &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("no checkpoint"), "{}", stderr(&out));
    }
    assert_eq!(
        std::fs::read_to_string(work.path().join("a.txt")).expect("read"),
        "a\n"
    );

    let missing = work.path().join("does-not-exist");
    let out = kaji(
        home.path(),
        &["-C", missing.to_str().expect("utf-8"), "list"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("does-not-exist"), "{}", stderr(&out));

    let out = kaji(home.path(), &["-C", dir, "frobnicate"]);
    assert_eq!(out.status.code(), Some(2), "usage error");
}

/// A relative `KAJI_HOME` is resolved against kaji's starting directory,
/// not against the `-C` directory git runs in.
#[tokio::test]
async fn a_relative_kaji_home_works_with_dash_c() {
    let base = tempfile::tempdir().expect("base");
    let home = base.path().join("home");
    let work = base.path().join("work");
    std::fs::create_dir_all(&work).expect("mkdir work");
    std::fs::write(work.join("a.txt"), "first\n").expect("write");
    let store = CheckpointStore::open(&home, &work).expect("open");
    let first = store
        .commit("task start")
        .await
        .expect("commit")
        .expect("checkpoint");
    std::fs::write(work.join("a.txt"), "second\n").expect("write");

    let relative = |args: &[&str]| {
        kaji_sync(base.path())
            .env("KAJI_HOME", "home")
            .current_dir(base.path())
            .arg("checkpoints")
            .args(args)
            .output()
            .expect("kaji runs")
    };
    let listed = relative(&["-C", "work", "list", "--json"]);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    let items: Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    assert_eq!(items[0]["id"], first.id.as_str(), "{items}");

    let restored = relative(&["-C", "work", "restore", first.id.short()]);
    assert_eq!(restored.status.code(), Some(0), "{}", stderr(&restored));
    assert_eq!(
        std::fs::read_to_string(work.join("a.txt")).expect("read"),
        "first\n"
    );
}

/// A restore over something it cannot save (a FIFO where the checkpoint
/// has a file) exits 1, names the path, and changes nothing; `list` shows
/// the file a checkpoint left out.
#[cfg(unix)]
#[tokio::test]
async fn a_restore_that_would_lose_a_file_is_refused() {
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let dir = work.path().to_str().expect("utf-8 temp path");
    let store = CheckpointStore::open(home.path(), work.path()).expect("open");
    std::fs::write(work.path().join("pipe"), "a file once\n").expect("write");
    std::fs::write(work.path().join("a.txt"), "first\n").expect("write");
    let first = store
        .commit("task start")
        .await
        .expect("commit")
        .expect("checkpoint");
    std::fs::remove_file(work.path().join("pipe")).expect("rm");
    kaji_test_support::fixtures::mkfifo(&work.path().join("pipe"));
    std::fs::write(work.path().join("a.txt"), "second\n").expect("write");
    let second = store
        .commit("turn 1")
        .await
        .expect("commit")
        .expect("checkpoint");
    assert_eq!(second.skipped.len(), 1, "{:?}", second.skipped);

    let listed = kaji(home.path(), &["-C", dir, "list"]);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    assert!(
        stdout(&listed).contains("left out, cannot be read: pipe (a FIFO)"),
        "{}",
        stdout(&listed)
    );

    let out = kaji(home.path(), &["-C", dir, "restore", first.id.short()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("restore refused, nothing was changed")
            && stderr(&out).contains("pipe (a FIFO, which cannot be saved)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(work.path().join("a.txt")).expect("read"),
        "second\n"
    );
}
