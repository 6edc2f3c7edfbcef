//! A session that cannot be built says what and where, and the exit code
//! tells the caller's mistake (2) from a saved session that cannot be
//! opened or kaji's own failure (1). Each case is one `SessionError`
//! variant seen through `kaji exec`; the model is never reached.

use kaji_test_support::{Script, ScriptedModelServer};

use crate::common::{Wire, exec_json, run};

/// Runs `kaji exec --json` with `args` before the prompt; the exit code
/// and stderr.
async fn exec_fails(work: &std::path::Path, args: &[&str]) -> (i32, String) {
    let home = tempfile::tempdir().unwrap();
    let server = ScriptedModelServer::start(Script::new([])).await;
    let mut cmd = exec_json(home.path(), work, &server, Wire::Anthropic);
    cmd.args(args).arg("hello");
    let (code, _, err) = run(cmd).await;
    assert_eq!(server.requests().len(), 0, "the model was asked: {err}");
    (code, err)
}

#[tokio::test]
async fn a_missing_working_directory_is_a_usage_error_naming_it() {
    let root = tempfile::tempdir().unwrap();
    let missing = root.path().join("nowhere");
    let (code, err) = exec_fails(&missing, &[]).await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("working directory {}: ", missing.display())),
        "{err}"
    );
}

#[tokio::test]
async fn a_file_as_working_directory_is_a_usage_error() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("file.txt");
    std::fs::write(&file, "x").unwrap();
    let (code, err) = exec_fails(&file, &[]).await;
    assert_eq!(code, 2, "{err}");
    let canonical = file.canonicalize().unwrap();
    assert!(
        err.contains(&format!(
            "working directory {} is not a directory",
            canonical.display()
        )),
        "{err}"
    );
}

#[tokio::test]
async fn a_bad_allow_rule_is_a_usage_error_naming_the_flag_and_rule() {
    let work = tempfile::tempdir().unwrap();
    let (code, err) = exec_fails(work.path(), &["--allow", "Bash(git"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--allow \"Bash(git\": "), "{err}");
}

#[tokio::test]
async fn zero_max_requests_is_a_usage_error() {
    let work = tempfile::tempdir().unwrap();
    let (code, err) = exec_fails(work.path(), &["--max-requests", "0"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("max_requests must be at least 1"), "{err}");
}

#[tokio::test]
async fn a_negative_budget_is_a_usage_error() {
    let work = tempfile::tempdir().unwrap();
    let (code, err) = exec_fails(work.path(), &["--max-budget-usd=-1"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("max_budget_usd must be a positive number of dollars, not -1"),
        "{err}"
    );
}

#[tokio::test]
async fn continue_without_a_saved_session_is_not_a_usage_error() {
    let work = tempfile::tempdir().unwrap();
    let (code, err) = exec_fails(work.path(), &["--continue"]).await;
    assert_eq!(code, 1, "{err}");
    let canonical = work.path().canonicalize().unwrap();
    assert!(
        err.contains(&format!(
            "no saved session to continue in {} (see `kaji sessions list --all`)",
            canonical.display()
        )),
        "{err}"
    );
}

#[tokio::test]
async fn resuming_an_unknown_session_is_not_a_usage_error() {
    let work = tempfile::tempdir().unwrap();
    let (code, err) = exec_fails(work.path(), &["--resume", "feedbeef"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no session matches \"feedbeef\""), "{err}");
}
