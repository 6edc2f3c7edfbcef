//! A tool presents its own calls, through the real binary: while a call's
//! arguments still stream, the TUI shows the tool's title for the part
//! that has come (`Edit: a.txt` once the path is whole), not a bare name.
//! The scripted model server holds the stream inside the arguments, so
//! the title must show while the call cannot be complete yet.

use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

use crate::common::tmux::{launch, quit, submit};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_edit_is_titled_with_its_file_before_it_is_complete() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "one\ntwo\n").unwrap();
    let new = "line 1\nline 2\nline 3\nline 4\nline 5\nline 6\n";
    // `file_path` comes first (in key order and as written), the hold
    // inside `new_string`.
    let server = ScriptedModelServer::start(Script::new([
        Turn::tool_call(
            "Edit",
            json!({"file_path": "a.txt", "new_string": new, "old_string": "one\n"}),
        )
        .with_chunk_size(7)
        .with_hold_in_arguments(40),
        Turn::tool_call("AttemptCompletion", json!({"result": "Edited a.txt"})),
    ]))
    .await;
    let tmux = launch("titles", home.path(), work.path(), &server);
    tmux.wait_for("Enter sends").await;
    submit(&tmux, "edit the file").await;

    let screen = tmux.wait_for("⏺ Edit: a.txt …").await;
    assert!(screen.contains("file_path: a.txt"), "{screen}");
    assert!(
        std::fs::read_to_string(work.path().join("a.txt")).unwrap() == "one\ntwo\n",
        "the edit ran before its arguments were complete"
    );
    server.release();

    tmux.wait_for("y approve").await;
    tmux.send_key("y");
    tmux.wait_for("Task complete").await;
    assert_eq!(
        std::fs::read_to_string(work.path().join("a.txt")).unwrap(),
        format!("{new}two\n")
    );
    tmux.send_key("Enter");
    tmux.wait_for("[completed] 2 turn(s)").await;
    assert_eq!(quit(&tmux, home.path()).await, "0");
}
