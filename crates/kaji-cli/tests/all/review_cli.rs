//! `kaji review` through the binary on a repository with a planted bug:
//! the model (scripted) sees the diff, reads with read-only tools, cannot
//! change anything, and reports findings that `--json` prints and
//! `--fail-on` turns into the exit code.

use std::path::Path;

use kaji_test_support::fixtures::git;
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};
use tokio::process::Command;

use crate::common::{Wire, done, kaji, scripted, serve};

const GOOD: &str = "pub fn last(xs: &[i32]) -> Option<i32> {\n    xs.last().copied()\n}\n";
const PLANTED: &str = "pub fn last(xs: &[i32]) -> Option<i32> {\n    Some(xs[xs.len() - 1])\n}\n";

/// A repository whose committed `src/lib.rs` is fine; with `planted`, the
/// working tree has the bug.
fn repo(planted: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), GOOD).unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    git(dir.path(), &["add", "."]);
    git(dir.path(), &["commit", "-q", "-m", "init"]);
    if planted {
        std::fs::write(dir.path().join("src/lib.rs"), PLANTED).unwrap();
    }
    dir
}

fn review(home: &Path, work: &Path, server: &ScriptedModelServer, flags: &[&str]) -> Command {
    let mut cmd = kaji(home);
    cmd.arg("review").args(flags).arg("-C").arg(work);
    scripted(&mut cmd, server, Wire::Anthropic).arg("--no-checkpoints");
    cmd
}

fn finding() -> Value {
    json!({"file": "src/lib.rs", "line": 2, "severity": "high",
        "title": "panics on an empty slice",
        "body": "xs.len() - 1 underflows when xs is empty.",
        "suggestion": "    xs.last().copied()"})
}

fn script() -> Script {
    Script::new([
        Turn::tool_call("Read", json!({"file_path": "src/lib.rs"})),
        // A review may not change anything.
        Turn::tool_call(
            "Write",
            json!({"file_path": "src/lib.rs", "content": "oops"}),
        ),
        Turn::tool_call(
            "AttemptCompletion",
            json!({"result": format!("```json\n{}\n```", json!({"findings": [finding()]}))}),
        ),
    ])
}

#[tokio::test]
async fn the_planted_bug_is_reported_and_fails_the_run() {
    let home = tempfile::tempdir().unwrap();
    let work = repo(true);
    let server = ScriptedModelServer::start(script()).await;
    let out = review(home.path(), work.path(), &server, &["--json"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, json!([finding()]));
    // The model saw the diff of the planted line.
    let requests = server.requests();
    let first = requests[0].messages()[0].to_string();
    assert!(first.contains("+    Some(xs[xs.len() - 1])"), "{first}");
    // Its Write was refused: the tree is as it was.
    assert_eq!(
        std::fs::read_to_string(work.path().join("src/lib.rs")).unwrap(),
        PLANTED
    );
    let after_write = requests[2].messages().last().unwrap().to_string();
    assert!(after_write.contains("is_error"), "{after_write}");
}

#[tokio::test]
async fn fail_on_and_the_text_report() {
    let home = tempfile::tempdir().unwrap();
    let work = repo(true);
    let server = ScriptedModelServer::start(script()).await;
    let out = review(
        home.path(),
        work.path(),
        &server,
        &["--fail-on", "critical"],
    )
    .output()
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("src/lib.rs:2 [high] panics on an empty slice")
            && stdout.contains("xs.last().copied()"),
        "{stdout}"
    );
}

#[tokio::test]
async fn a_branch_against_its_base() {
    let home = tempfile::tempdir().unwrap();
    let work = repo(false);
    git(work.path(), &["checkout", "-q", "-b", "feature"]);
    std::fs::write(work.path().join("src/lib.rs"), PLANTED).unwrap();
    git(work.path(), &["commit", "-q", "-am", "faster last"]);
    let server = ScriptedModelServer::start(script()).await;
    let out = review(
        home.path(),
        work.path(),
        &server,
        &["--json", "--base", "main"],
    )
    .output()
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = server.requests()[0].messages()[0].to_string();
    assert!(
        first.contains("this branch against main") && first.contains("xs[xs.len() - 1]"),
        "{first}"
    );
}

#[tokio::test]
async fn nothing_to_review_and_unreadable_answers() {
    let home = tempfile::tempdir().unwrap();
    let clean = repo(false);
    let server = ScriptedModelServer::start(script()).await;
    let out = review(home.path(), clean.path(), &server, &["--json"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
    assert!(server.requests().is_empty());

    let work = repo(true);
    let server = serve([done("Looks fine to me!")]).await;
    let out = review(home.path(), work.path(), &server, &["--json"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("could not be read") && stderr.contains("Looks fine to me!"),
        "{stderr}"
    );
}
