//! #32: an error that asking again cannot fix is not retried. A server on
//! this machine that refuses the connection, a wrong endpoint (404) and a
//! request the server refuses (400) each print one line that says what to
//! do, with no `Retrying…` line before it, in `kaji exec` and `kaji -p`;
//! a transient error (429) keeps its retry.

use std::path::Path;

use crate::common::{TEST_KEY, kaji};
use kaji_test_support::{Fault, Script, ScriptedModelServer, Turn};

/// `kaji MODE… --base-url URL hi`: its exit code and everything it printed.
async fn run(home: &Path, work: &Path, mode: &[&str], base_url: &str) -> (i32, String) {
    let mut cmd = kaji(home);
    cmd.env("ANTHROPIC_API_KEY", TEST_KEY)
        .args(mode)
        .arg("-C")
        .arg(work)
        .args([
            "--provider",
            "anthropic",
            "--model",
            "scripted",
            "--base-url",
        ])
        .arg(base_url)
        .arg("hi");
    let out = cmd.output().await.unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), all)
}

/// The one error line of `all`; fails when there is none, more than one,
/// or a retry was announced.
fn one_error_line(all: &str) -> String {
    assert!(!all.contains("Retrying"), "retried: {all}");
    let errors: Vec<&str> = all.lines().filter(|l| l.starts_with("! ")).collect();
    assert_eq!(errors.len(), 1, "one error line: {all}");
    errors[0].to_string()
}

const MODES: [&[&str]; 2] = [&["exec"], &["-p"]];

#[tokio::test]
async fn a_refused_local_connection_is_one_line_and_not_retried() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    for mode in MODES {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let (code, all) = run(home.path(), work.path(), mode, &url).await;
        assert_eq!(code, 1, "{mode:?}: {all}");
        let line = one_error_line(&all);
        assert!(line.contains(&url), "{line}");
        assert!(
            line.contains("is the server running? check --base-url"),
            "{line}"
        );
    }
}

#[tokio::test]
async fn a_wrong_endpoint_and_a_refused_request_are_asked_once() {
    let server = ScriptedModelServer::start(Script::new([Turn::text("unused")])).await;
    // 404: the scripted server has no such route.
    let wrong = format!("{}/not-here", server.anthropic_base_url());
    let refused = ScriptedModelServer::start(
        Script::new([Turn::text("x")]).with_fault_on_every_request(Fault::status(400)),
    )
    .await;
    for mode in MODES {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let before = server.requests().len();
        let (code, all) = run(home.path(), work.path(), mode, &wrong).await;
        assert_eq!(code, 1, "{mode:?}: {all}");
        let line = one_error_line(&all);
        assert!(line.contains("HTTP 404"), "{line}");
        assert!(line.contains("check --base-url"), "{line}");
        assert_eq!(server.requests().len(), before + 1, "asked once: {all}");

        let before = refused.requests().len();
        let (code, all) = run(
            home.path(),
            work.path(),
            mode,
            &refused.anthropic_base_url(),
        )
        .await;
        assert_eq!(code, 1, "{mode:?}: {all}");
        let line = one_error_line(&all);
        assert!(line.contains("HTTP 400"), "{line}");
        assert!(line.contains("check --model"), "{line}");
        assert_eq!(refused.requests().len(), before + 1, "asked once: {all}");
    }
}

#[tokio::test]
async fn a_rate_limit_is_still_retried() {
    for mode in MODES {
        let server = ScriptedModelServer::start(Script::new([
            Turn::text("fine after all").with_fault(Fault::rate_limited_ms(5))
        ]))
        .await;
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let (code, all) = run(home.path(), work.path(), mode, &server.anthropic_base_url()).await;
        assert_eq!(code, 0, "{mode:?}: {all}");
        assert!(all.contains("Retrying"), "{all}");
        assert!(all.contains("fine after all"), "{all}");
        assert_eq!(server.requests().len(), 2);
    }
}
