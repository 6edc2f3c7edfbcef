//! What a round costs in checkpoints, through the real binary: an Edit's
//! checkpoint starts four git processes (`hash-object`, `update-index`,
//! `write-tree`, `commit-tree`; the branch is moved and read as a file,
//! ignore rules are read in-process), the checkpoints it makes restore exactly, and a
//! command the approval analysis classes read-only never waits for the
//! task's initial checkpoint.
//!
//! What git was asked is seen through a `git` earlier on `PATH` that logs
//! its arguments (`common::checkpoints`); waiting is seen by holding the
//! shadow's lock so that the initial checkpoint cannot finish: the
//! observables are which commands ran and whether the task ended, never
//! how long anything took.

use std::path::Path;

use kaji_core::checkpoints::CheckpointStore;
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

use crate::common::checkpoints::{exec_logging_git, oldest_first};
use crate::common::{Wire, exec_json, run};

/// The git subcommands run on the shadow `git_dir`, in order.
fn shadow_commands(log: &str, git_dir: &Path) -> Vec<String> {
    let marker = format!("--git-dir={}", git_dir.display());
    log.lines()
        .filter(|l| l.contains(&marker))
        .filter_map(|l| {
            let mut words = l.split(' ').skip_while(|w| !w.starts_with("--work-tree="));
            words.next();
            let mut rest = words.peekable();
            while rest.peek() == Some(&"-c") {
                rest.next();
                rest.next();
            }
            rest.next().map(str::to_string)
        })
        .collect()
}

#[tokio::test]
async fn an_edit_costs_four_gits_and_its_checkpoints_restore() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("kaji-home")).unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "alpha\n").unwrap();
    std::fs::write(work.path().join(".gitignore"), "*.log\n").unwrap();
    let server = ScriptedModelServer::start(Script::new([
        Turn::tool_call(
            "Edit",
            json!({"file_path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"}),
        ),
        // An ignored file: git is asked, and no checkpoint is made.
        Turn::tool_call(
            "Write",
            json!({"file_path": "run.log", "content": "ignored\n"}),
        ),
        Turn::tool_call(
            "Edit",
            json!({"file_path": "a.txt", "old_string": "ALPHA", "new_string": "ALPHA 2"}),
        ),
        Turn::tool_call("AttemptCompletion", json!({"result": "done"})),
    ]))
    .await;
    let (cmd, log) = exec_logging_git(home.path(), work.path(), &server);
    let (code, _, stderr) = run(cmd).await;
    assert_eq!(code, 0, "{stderr}");

    let store = CheckpointStore::open(&home.path().join("kaji-home"), work.path()).unwrap();
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    let commands = shadow_commands(&log, store.git_dir());
    // The initial checkpoint scans the tree; after it, each Edit runs
    // exactly four gits and the ignored file only `check-ignore`.
    let first = commands
        .iter()
        .position(|c| c == "commit-tree")
        .unwrap_or_else(|| panic!("no commit-tree in {commands:?}\n{log}"));
    assert_eq!(
        commands[first + 1..],
        [
            "hash-object",
            "update-index",
            "write-tree",
            "commit-tree",
            "check-ignore",
            "hash-object",
            "update-index",
            "write-tree",
            "commit-tree",
        ],
        "{log}"
    );

    let list = oldest_first(&store).await;
    let labels: Vec<&str> = list.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        labels,
        ["task start: go", "turn 1: Edit", "turn 3: Edit"],
        "{list:?}"
    );
    let diff = store.diff(&list[0].id, None).await.unwrap();
    assert!(
        diff.contains("-alpha") && diff.contains("+ALPHA 2") && !diff.contains("run.log"),
        "{diff}"
    );
    let outcome = store.restore(&list[0].id).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(work.path().join("a.txt")).unwrap(),
        "alpha\n"
    );
    // The ignored file is not in the way of anything: left alone.
    assert!(work.path().join("run.log").exists());
    store.restore(&outcome.before).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(work.path().join("a.txt")).unwrap(),
        "ALPHA 2\n"
    );
}

#[tokio::test]
async fn a_read_only_command_does_not_wait_for_the_initial_checkpoint() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("kaji-home")).unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "alpha\n").unwrap();
    // Another kaji holds the shadow: the initial checkpoint cannot finish
    // while this test holds the lock.
    let store = CheckpointStore::open(&home.path().join("kaji-home"), work.path()).unwrap();
    std::fs::create_dir_all(store.git_dir()).unwrap();
    let lock = std::fs::File::create(store.git_dir().join("kaji.lock")).unwrap();
    lock.try_lock().unwrap();
    let server = ScriptedModelServer::start(Script::new([
        Turn::tool_call("Bash", json!({"command": "true"})),
        Turn::tool_call("Bash", json!({"command": "cat a.txt"})),
        Turn::tool_call("AttemptCompletion", json!({"result": "done"})),
    ]))
    .await;
    let mut cmd = exec_json(home.path(), work.path(), &server, Wire::Anthropic);
    // Had the commands waited, the gate would open only at this limit,
    // with the error below.
    cmd.env("KAJI_CHECKPOINT_TIMEOUT_MS", "120000").args([
        "--permission-mode",
        "yolo",
        "--sandbox",
        "off",
        "go",
    ]);
    let (code, lines, stderr) = run(cmd).await;
    assert_eq!(code, 0, "{stderr}");
    let text = serde_json::to_string(&lines).unwrap();
    assert!(!text.contains("initial checkpoint took longer"), "{text}");
    assert!(text.contains("alpha"), "{text}");
    drop(lock);
    // Nothing was written: the abandoned initial checkpoint leaves the
    // shadow usable, and the next checkpoint is complete.
    assert!(store.commit("after").await.unwrap().is_some());
    assert_eq!(oldest_first(&store).await.len(), 1);
}
