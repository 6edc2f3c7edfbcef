//! Checkpoints after commands find what changed through the watcher of the
//! working directory, not by scanning the tree, through the real binary:
//! a command that writes deep in the tree is checkpointed (and restorable)
//! with git looking only at the paths the watcher named; one that writes
//! nothing runs no git at all; a tree over the watcher's cap is scanned as
//! before and checkpointed just as well.
//!
//! What git was asked is seen through a `git` earlier on `PATH` that logs
//! its arguments and runs the real one: the observable is which commands
//! ran, never how long they took.

use std::path::Path;

use kaji_core::checkpoints::CheckpointStore;
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

use crate::common::checkpoints::{exec_logging_git, oldest_first};
use crate::common::run;

/// A tree of 2 × 2 × 3 directories and a few files, with an ignored one.
fn tree(work: &Path) {
    for a in ["a", "b"] {
        for b in ["x", "y"] {
            let dir = work.join("deep").join(a).join(b).join("c/d");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("f.txt"), format!("{a}{b}\n")).unwrap();
        }
    }
    std::fs::write(work.join("deep/a/gone.txt"), "gone\n").unwrap();
    std::fs::write(work.join(".gitignore"), "build/\n").unwrap();
    std::fs::create_dir_all(work.join("build")).unwrap();
}

/// Writes deep in the tree (a change, a new file, a new directory, a
/// deletion, an ignored file), then runs a command that writes nothing.
fn script() -> Script {
    Script::new([
        Turn::tool_call(
            "Bash",
            json!({"command": "printf 'changed\\n' > deep/b/y/c/d/f.txt && printf 'new\\n' > deep/a/x/c/new.txt && mkdir -p deep/n/m && printf 'm\\n' > deep/n/m/g.txt && rm deep/a/gone.txt && printf o > build/out.o"}),
        ),
        Turn::tool_call("Bash", json!({"command": "sh -c 'exit 0'"})),
        Turn::tool_call("AttemptCompletion", json!({"result": "done"})),
    ])
}

/// Runs the script in a fresh tree (`max_watches` for the watcher's cap,
/// if any); returns the home, the tree and the git log.
async fn run_script(max_watches: Option<&str>) -> (tempfile::TempDir, tempfile::TempDir, String) {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("kaji-home")).unwrap();
    let work = tempfile::tempdir().unwrap();
    tree(work.path());
    let server = ScriptedModelServer::start(script()).await;
    let (mut cmd, log) = exec_logging_git(home.path(), work.path(), &server);
    if let Some(max) = max_watches {
        cmd.env("KAJI_CHECKPOINT_MAX_WATCHES", max);
    }
    let (code, _, stderr) = run(cmd).await;
    assert_eq!(code, 0, "{stderr}");
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    (home, work, log)
}

/// The paths of a unified diff's `+++ b/…` and `--- a/…` lines.
fn changed_paths(diff: &str) -> Vec<&str> {
    let mut paths: Vec<&str> = diff
        .lines()
        .filter_map(|l| l.strip_prefix("+++ b/").or(l.strip_prefix("--- a/")))
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// The log's lines that scan the whole tree: `diff-files` or `ls-files
/// --others` without a pathspec.
fn full_scans(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            (l.contains(" diff-files ") || l.contains(" ls-files --others")) && !l.contains(" -- ")
        })
        .collect()
}

/// What both runs must show: the deep changes checkpointed (the ignored
/// file left out), no checkpoint for the command that wrote nothing, and
/// the task start restorable.
async fn assert_checkpointed(home: &Path, work: &Path) {
    let store = CheckpointStore::open(&home.join("kaji-home"), work).unwrap();
    let list = oldest_first(&store).await;
    let labels: Vec<&str> = list.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["task start: go", "turn 1: Bash"], "{list:?}");
    let diff = store.diff(&list[0].id, Some(&list[1].id)).await.unwrap();
    assert_eq!(
        changed_paths(&diff),
        [
            "deep/a/gone.txt",
            "deep/a/x/c/new.txt",
            "deep/b/y/c/d/f.txt",
            "deep/n/m/g.txt"
        ],
        "{diff}"
    );
    store.restore(&list[0].id).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(work.join("deep/b/y/c/d/f.txt")).unwrap(),
        "by\n"
    );
    assert_eq!(
        std::fs::read_to_string(work.join("deep/a/gone.txt")).unwrap(),
        "gone\n"
    );
    assert!(!work.join("deep/a/x/c/new.txt").exists());
    assert!(!work.join("deep/n/m/g.txt").exists());
}

#[tokio::test]
async fn a_command_is_checkpointed_from_what_the_watcher_saw() {
    let (home, work, log) = run_script(None).await;
    assert_checkpointed(home.path(), work.path()).await;
    // Only the initial checkpoint scanned the tree (one diff-files, one
    // ls-files); the command's checkpoint looked at the named paths, and
    // the command that wrote nothing ran no git at all.
    assert_eq!(full_scans(&log).len(), 2, "{log}");
    let scoped: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" diff-files ") && l.contains(" -- "))
        .collect();
    assert_eq!(scoped.len(), 1, "{log}");
    assert!(
        scoped[0].contains(":(literal)deep/b/y/c/d/f.txt")
            && scoped[0].contains(":(literal)deep/n"),
        "{log}"
    );
    assert_eq!(log.matches(" write-tree").count(), 2, "{log}");
}

#[tokio::test]
async fn a_tree_over_the_watchers_cap_is_scanned_and_checkpointed_as_well() {
    // The tree has 17 directories; the watcher may watch 4.
    let (home, work, log) = run_script(Some("4")).await;
    assert_checkpointed(home.path(), work.path()).await;
    // Both commands scanned the tree, as without a watcher.
    assert_eq!(full_scans(&log).len(), 6, "{log}");
}
