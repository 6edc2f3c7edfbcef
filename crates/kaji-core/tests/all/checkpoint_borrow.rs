//! The first checkpoint of a git checkout starts from what git already
//! knows: the shadow borrows the checkout's objects and index, hashes only
//! dirty and untracked files, then copies what it borrowed so that the
//! user's `git gc` or `git prune` never breaks a restore.

use std::path::Path;
use std::process::Command;

use kaji_core::checkpoints::CheckpointStore;

use crate::checkpoints::{snapshot, user_git, write};

/// A committed checkout with one dirty, one untracked and one ignored file.
fn checkout(root: &Path) {
    user_git(root, &["init", "-q", "-b", "main"]);
    write(root, ".gitignore", "*.log\n");
    write(root, "clean.txt", "clean and committed\n");
    write(root, "dir/b.txt", "bravo\n");
    write(root, "dirty.txt", "committed\n");
    user_git(root, &["add", "."]);
    user_git(root, &["commit", "-q", "-m", "one"]);
    write(root, "dirty.txt", "changed since\n");
    write(root, "untracked.txt", "new\n");
    write(root, "build.log", "ignored\n");
}

/// The object id git gives `contents` as a blob.
fn blob_id(contents: &str) -> String {
    let mut child = Command::new("git")
        .args(["hash-object", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("git runs");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(contents.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("git hash-object");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Whether the shadow holds the object itself (loose or packed), not
/// counting what it borrows: asked of a copy of its object store without
/// the alternates list.
fn holds_own(git_dir: &Path, oid: &str) -> bool {
    let copy = tempfile::tempdir().expect("copy");
    let status = Command::new("cp")
        .arg("-r")
        .arg(git_dir.join("objects"))
        .arg(copy.path())
        .status()
        .expect("cp");
    assert!(status.success());
    let _ = std::fs::remove_file(copy.path().join("objects/info/alternates"));
    Command::new("git")
        .args(["cat-file", "-e", oid])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_DIR", git_dir)
        .env("GIT_OBJECT_DIRECTORY", copy.path().join("objects"))
        .stderr(std::process::Stdio::null())
        .status()
        .expect("git runs")
        .success()
}

fn user_has(root: &Path, oid: &str) -> bool {
    Command::new("git")
        .args(["cat-file", "-e", oid])
        .current_dir(root)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stderr(std::process::Stdio::null())
        .status()
        .expect("git runs")
        .success()
}

#[tokio::test]
async fn the_first_checkpoint_hashes_only_dirty_and_untracked_files() {
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let root = work.path();
    checkout(root);
    let store = CheckpointStore::open(home.path(), root).expect("open");
    let start = store
        .commit("task start")
        .await
        .expect("commit")
        .expect("checkpoint");
    let at_start = snapshot(root, false);
    let git_dir = store.git_dir();

    assert!(git_dir.join("objects/info/alternates").is_file());
    // Clean files were not hashed again; dirty and untracked ones were.
    assert!(!holds_own(git_dir, &blob_id("clean and committed\n")));
    assert!(holds_own(git_dir, &blob_id("changed since\n")));
    assert!(holds_own(git_dir, &blob_id("new\n")));
    // The user's repository was not touched.
    assert!(!user_has(root, &blob_id("changed since\n")));
    // What it holds is what a checkpoint always held.
    let diff = store.diff(&start.id, None).await.expect("diff");
    assert!(diff.is_empty(), "{diff}");

    write(root, "clean.txt", "edited\n");
    std::fs::remove_file(root.join("dir/b.txt")).expect("rm");
    std::fs::remove_file(root.join("untracked.txt")).expect("rm");
    store.commit("turn 1: Bash").await.expect("commit");
    store.restore(&start.id).await.expect("restore");
    assert_eq!(snapshot(root, false), at_start);
}

#[tokio::test]
async fn restore_is_exact_after_the_user_repository_prunes_what_was_borrowed() {
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let root = work.path();
    checkout(root);
    let store = CheckpointStore::open(home.path(), root).expect("open");
    let start = store
        .commit("task start")
        .await
        .expect("commit")
        .expect("checkpoint");
    let at_start = snapshot(root, false);
    store
        .finish_borrowing()
        .await
        .expect("copy what was borrowed");
    assert!(!store.git_dir().join("objects/info/alternates").exists());
    assert!(holds_own(
        store.git_dir(),
        &blob_id("clean and committed\n")
    ));

    // The user rewrites history and prunes: the old blobs are gone.
    write(root, "clean.txt", "rewritten\n");
    user_git(root, &["add", "clean.txt"]);
    user_git(root, &["commit", "-q", "--amend", "-m", "one, rewritten"]);
    user_git(root, &["reflog", "expire", "--expire=now", "--all"]);
    user_git(root, &["gc", "-q", "--prune=now"]);
    assert!(!user_has(root, &blob_id("clean and committed\n")));

    store.restore(&start.id).await.expect("restore");
    assert_eq!(snapshot(root, false), at_start);
}

#[tokio::test]
async fn restore_copies_what_was_borrowed_after_the_users_gc() {
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let root = work.path();
    checkout(root);
    let store = CheckpointStore::open(home.path(), root).expect("open");
    let start = store
        .commit("task start")
        .await
        .expect("commit")
        .expect("checkpoint");
    let at_start = snapshot(root, false);
    // Repacked under the shadow's feet, objects moved into a new pack.
    user_git(root, &["gc", "-q", "--aggressive"]);
    write(root, "clean.txt", "edited\n");
    write(root, "more.txt", "more\n");

    let outcome = store.restore(&start.id).await.expect("restore");
    assert_eq!(snapshot(root, false), at_start);
    // The restore stopped borrowing; undoing it works too.
    assert!(!store.git_dir().join("objects/info/alternates").exists());
    store.restore(&outcome.before).await.expect("undo");
    assert_eq!(
        std::fs::read_to_string(root.join("clean.txt")).expect("read"),
        "edited\n"
    );
}

#[tokio::test]
async fn entries_git_would_not_look_at_are_read_from_disk() {
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let root = work.path();
    checkout(root);
    // git skips stat checks of assume-unchanged files: the user's index
    // would hide this change.
    user_git(root, &["update-index", "--assume-unchanged", "clean.txt"]);
    write(root, "clean.txt", "changed behind git's back\n");
    let store = CheckpointStore::open(home.path(), root).expect("open");
    let start = store
        .commit("task start")
        .await
        .expect("commit")
        .expect("checkpoint");
    write(root, "clean.txt", "later\n");
    store.restore(&start.id).await.expect("restore");
    assert_eq!(
        std::fs::read_to_string(root.join("clean.txt")).expect("read"),
        "changed behind git's back\n"
    );
}
