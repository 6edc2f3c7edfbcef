//! An Edit settles its own checkpoint with the watcher of the working
//! directory, temporary file included, through the real binary: a command
//! after it that writes nothing runs no git, although the Edit wrote its
//! file through a temporary file the watcher saw come and go.
//!
//! What git was asked is seen through a `git` earlier on `PATH` that logs
//! its arguments (`common::checkpoints`).

use kaji_core::checkpoints::CheckpointStore;
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

use crate::common::checkpoints::exec_logging_git;
use crate::common::run;

#[tokio::test]
async fn a_command_after_an_edit_does_not_look_for_the_edits_temporary_file() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("kaji-home")).unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join("src")).unwrap();
    std::fs::write(work.path().join("src/a.txt"), "alpha\n").unwrap();
    let server = ScriptedModelServer::start(Script::new([
        Turn::tool_call(
            "Edit",
            json!({"file_path": "src/a.txt", "old_string": "alpha", "new_string": "ALPHA"}),
        ),
        Turn::tool_call("Bash", json!({"command": "sh -c 'exit 0'"})),
        Turn::tool_call("AttemptCompletion", json!({"result": "done"})),
    ]))
    .await;
    let (cmd, log) = exec_logging_git(home.path(), work.path(), &server);
    let (code, _, stderr) = run(cmd).await;
    assert_eq!(code, 0, "{stderr}");

    let log = std::fs::read_to_string(&log).unwrap_or_default();
    // The initial checkpoint's scan, the Edit's four gits, and nothing
    // for the command.
    let listing = log
        .lines()
        .filter(|l| l.contains(" diff-files ") || l.contains(" ls-files --others"))
        .count();
    assert_eq!(listing, 2, "{log}");
    assert_eq!(log.matches(" commit-tree").count(), 2, "{log}");
    let store = CheckpointStore::open(&home.path().join("kaji-home"), work.path()).unwrap();
    let list = store.list().await.unwrap();
    let labels: Vec<&str> = list.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["turn 1: Edit", "task start: go"], "{list:?}");
    // The Edit's checkpoint holds the file, and nothing else changed.
    let diff = store.diff(&list[0].id, None).await.unwrap();
    assert!(diff.is_empty(), "{diff}");
}
