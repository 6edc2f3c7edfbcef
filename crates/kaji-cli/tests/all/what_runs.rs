//! What you see is what runs (#32), through the real binary and the
//! scripted model server: print mode is one request for a text answer,
//! piped input reaches the model, `-p --json` is `exec --json`; the errors
//! a newcomer hits are one line that says what to do; the small commands
//! (`tasks list`, `login`, `doctor`, `permissions check`) tell the truth;
//! lines of a sub-agent say whose they are.

use std::path::Path;
use std::process::Stdio;

use crate::common::files::Helper;
use crate::common::{Wire, json_lines, kaji, model, serve};
use kaji_test_support::{Fault, ScriptedModelServer, Turn};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// `kaji FLAGS -C WORK --provider anthropic … ` (the prompt added by the
/// caller).
fn against(home: &Path, work: &Path, base_url: &str, flags: &[&str]) -> Command {
    let mut cmd = kaji(home);
    cmd.current_dir(work).args(flags).arg("-C").arg(work);
    model(&mut cmd, Wire::Anthropic, base_url);
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The text of the last user message of a request.
fn last_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn print_mode_answers_a_question_in_one_request_printed_once() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let answer = "add() returns the sum of its two arguments.";
    let server = serve([
        Turn::text(answer),
        Turn::text("a second request should never come"),
    ])
    .await;
    let mut cmd = against(
        home.path(),
        work.path(),
        &server.anthropic_base_url(),
        &["-p"],
    );
    let out = cmd.arg("what does add() do?").output().await.unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert_eq!(server.requests().len(), 1, "one request: {stdout}");
    assert_eq!(stdout.matches(answer).count(), 1, "printed once: {stdout}");
    assert!(stdout.contains("[completed] 1 turn(s)"), "{stdout}");

    // `kaji exec` does the same; `on_text_reply = "nudge"` brings back the
    // seed's loop.
    let server = serve([Turn::text("no tools"), Turn::text("still none")]).await;
    std::fs::create_dir_all(home.path().join("kaji-home")).unwrap();
    std::fs::write(
        home.path().join("kaji-home/config.toml"),
        "on_text_reply = \"nudge\"\n",
    )
    .unwrap();
    let mut cmd = against(
        home.path(),
        work.path(),
        &server.anthropic_base_url(),
        &["exec", "--json", "--max-mistakes", "2"],
    );
    let out = cmd.arg("hi").output().await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        json_lines(&out.stdout).last().unwrap()["status"],
        "mistake_limit"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn piped_input_is_added_to_the_print_mode_prompt() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("It is a panic.")]).await;
    let mut cmd = against(
        home.path(),
        work.path(),
        &server.anthropic_base_url(),
        &["-p"],
    );
    cmd.arg("explain").stdin(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"thread 'main' panicked at src/main.rs:3:5\n")
        .await
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let sent = last_user_text(&server.requests()[0].body);
    assert!(sent.contains("explain"), "{sent}");
    assert!(
        sent.contains("thread 'main' panicked at src/main.rs:3:5"),
        "{sent}"
    );
}

#[tokio::test]
async fn print_mode_json_is_exec_json() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("hello")]).await;
    let mut cmd = against(
        home.path(),
        work.path(),
        &server.anthropic_base_url(),
        &["-p", "--json"],
    );
    let out = cmd.arg("say hello").output().await.unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines = json_lines(&out.stdout);
    assert_eq!(lines[0]["type"], "task_started");
    assert_eq!(lines[0]["schema_version"], 1);
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "result");
    assert_eq!(last["status"], "completed");
    assert_eq!(last["result"], "hello");

    // --json without -p is not a flag of the UI.
    let out = kaji(home.path()).arg("--json").output().await.unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test]
async fn a_dead_base_url_is_one_line_that_says_what_to_do() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut cmd = against(home.path(), work.path(), &url, &["exec"]);
    let out = cmd.arg("hi").output().await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    let last_error = all
        .lines()
        .rfind(|l| l.starts_with("! ") && !l.contains("Retrying"))
        .unwrap_or_else(|| panic!("an error line: {all}"));
    assert!(last_error.contains(&url), "{last_error}");
    assert!(
        last_error.contains("is the server running? check --base-url"),
        "{last_error}"
    );
    assert_eq!(last_error.matches(&url).count(), 1, "{last_error}");
    assert!(last_error.chars().count() < 200, "{last_error}");
    assert!(!all.contains("Retry?"), "nobody can answer in exec: {all}");
}

#[tokio::test]
async fn a_refused_key_names_its_variable_and_is_not_offered_a_retry() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("x").with_faults([Fault::status(401)])]).await;
    let mut cmd = against(
        home.path(),
        work.path(),
        &server.anthropic_base_url(),
        &["exec", "--json"],
    );
    let out = cmd.arg("hi").output().await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    let lines = json_lines(&out.stdout);
    let last = lines.last().unwrap();
    assert_eq!(last["status"], "failed");
    let result = last["result"].as_str().unwrap();
    assert!(result.contains("401"), "{result}");
    assert!(result.contains("ANTHROPIC_API_KEY"), "{result}");
    assert!(
        !lines
            .iter()
            .any(|l| l["type"] == "ask" && l["kind"] == "api_req_failed"),
        "a retry cannot fix a refused key: {lines:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn tasks_list_on_a_fresh_install_is_an_empty_list() {
    let home = tempfile::tempdir().unwrap();
    let out = kaji(home.path())
        .args(["tasks", "list"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = kaji(home.path())
        .args(["tasks", "list", "--json"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list["tasks"], json!([]));
    assert_eq!(list["listId"], "default");
}

#[tokio::test]
async fn login_explains_keys_and_calls_no_model() {
    let home = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("paid")]).await;
    let out = kaji(home.path())
        .env("ANTHROPIC_API_KEY", "sk-secret-value")
        .env("ANTHROPIC_BASE_URL", server.anthropic_base_url())
        .arg("login")
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("ANTHROPIC_API_KEY"), "{stdout}");
    assert!(stdout.contains("OPENAI_API_KEY"), "{stdout}");
    assert!(!stdout.contains("sk-secret-value"), "{stdout}");
    assert!(server.requests().is_empty(), "no model call");
}

#[tokio::test]
async fn init_runs_what_slash_init_does_instead_of_sending_the_word() {
    // `kaji init` is a subcommand now: without a terminal the UI cannot
    // start, and the word "init" never reaches the model as a prompt.
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("paid")]).await;
    let mut cmd = against(
        home.path(),
        work.path(),
        &server.anthropic_base_url(),
        &["init"],
    );
    let out = cmd.output().await.unwrap();
    assert_ne!(out.status.code(), Some(0));
    for r in server.requests() {
        assert_ne!(last_user_text(&r.body).trim(), "init");
    }
    let help = kaji(home.path())
        .args(["init", "--help"])
        .output()
        .await
        .unwrap();
    assert!(
        text(&help.stdout).contains("/init"),
        "{}",
        text(&help.stdout)
    );
}

#[tokio::test]
async fn doctor_exits_non_zero_when_the_settings_cannot_be_read() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("kaji-home")).unwrap();
    std::fs::write(
        home.path().join("kaji-home/config.toml"),
        "provider = [unclosed\n",
    )
    .unwrap();
    let out = kaji(home.path())
        .current_dir(work.path())
        .args(["doctor", "--json"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false);
    let broken = report["broken"].to_string();
    assert!(broken.contains("settings cannot be read"), "{broken}");
    // And with no provider at all.
    std::fs::write(home.path().join("kaji-home/config.toml"), "").unwrap();
    let out = kaji(home.path())
        .current_dir(work.path())
        .arg("doctor")
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("Broken\n"), "{stdout}");
}

#[tokio::test]
async fn permissions_check_answers_what_the_session_would_do_sandbox_included() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let check = |extra: &[&str]| {
        let mut cmd = kaji(home.path());
        cmd.current_dir(work.path())
            .args(["permissions", "check", "python3 -m unittest -v"])
            .args(extra);
        cmd
    };
    let out = check(&[]).output().await.unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let first = stdout.lines().next().unwrap_or("");
    if kaji_sandbox::probe().is_complete() {
        assert_eq!(first, "allow (sandboxed)", "{stdout}");
        assert!(
            stdout.contains("sandbox: workspace-write — commands run without asking"),
            "{stdout}"
        );
    } else {
        assert_eq!(first, "ask", "{stdout}");
    }
    let out = check(&["--sandbox", "off"]).output().await.unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(stdout.lines().next(), Some("ask"), "{stdout}");
    assert!(stdout.contains("sandbox off"), "{stdout}");
    let out = check(&["--permission-mode", "plan", "--json"])
        .output()
        .await
        .unwrap();
    let value: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["decision"], "deny", "{value}");
    assert_eq!(value["permission_mode"], "plan");
    let out = check(&["--sandbox", "sideways"]).output().await.unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// In a sub-agent's system prompt: routes its requests to its script.
const HELPER: &str = "HELPER-AGENT-MARKER";

#[tokio::test]
async fn every_json_line_of_a_sub_agent_names_it_and_its_agent_call() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let script = Helper {
        marker: HELPER,
        description: "help",
        prompt: "echo something",
        says: "The helper is done.",
        then: "All done.",
    }
    .install(work.path());
    let server = ScriptedModelServer::start(script).await;
    let mut cmd = against(
        home.path(),
        work.path(),
        &server.anthropic_base_url(),
        &["exec", "--json", "--yolo"],
    );
    let out = cmd.arg("use the helper").output().await.unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines = json_lines(&out.stdout);
    let agent_call = lines
        .iter()
        .find(|l| l["type"] == "tool_use" && l["name"] == "Agent")
        .expect("the Agent call");
    assert!(agent_call.get("agent_id").is_none(), "{agent_call}");
    let inner: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "tool_use" && l["name"] == "Bash")
        .chain(
            lines
                .iter()
                .filter(|l| l["type"] == "tool_result" && l["name"] == "Bash"),
        )
        .collect();
    assert_eq!(inner.len(), 2, "{lines:?}");
    for line in inner {
        assert_eq!(line["parent_tool_use_id"], agent_call["id"], "{line}");
        assert!(
            line["agent_id"]
                .as_str()
                .is_some_and(|a| a.starts_with("helper")),
            "{line}"
        );
    }
    for line in lines.iter().filter(|l| l.get("agent_id").is_none()) {
        assert!(line.get("parent_tool_use_id").is_none(), "{line}");
    }
}

#[tokio::test]
async fn checkpoints_restore_dry_run_shows_what_would_change_and_changes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let store =
        kaji_core::checkpoints::CheckpointStore::open(&home.path().join("kaji-home"), work.path())
            .unwrap();
    std::fs::write(work.path().join("kept.txt"), "first\n").unwrap();
    std::fs::write(work.path().join("gone.txt"), "old\n").unwrap();
    let first = store.commit("task start").await.unwrap().unwrap();
    std::fs::write(work.path().join("kept.txt"), "second\n").unwrap();
    std::fs::remove_file(work.path().join("gone.txt")).unwrap();
    std::fs::write(work.path().join("mine.txt"), "the user's own work\n").unwrap();

    let dir = work.path().to_str().unwrap();
    let out = kaji(home.path())
        .args([
            "checkpoints",
            "-C",
            dir,
            "restore",
            first.id.short(),
            "--dry-run",
        ])
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("remove  mine.txt (created after the checkpoint)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("restore gone.txt (deleted after the checkpoint)"),
        "{stdout}"
    );
    assert!(stdout.contains("revert  kept.txt"), "{stdout}");
    assert!(
        work.path().join("mine.txt").exists(),
        "a dry run changed nothing"
    );
    assert_eq!(
        std::fs::read_to_string(work.path().join("kept.txt")).unwrap(),
        "second\n"
    );

    // Without --dry-run (and no terminal to confirm in) it restores, after
    // saying what it does.
    let out = kaji(home.path())
        .args(["checkpoints", "-C", dir, "restore", first.id.short()])
        .output()
        .await
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.contains("remove  mine.txt"), "{stdout}");
    assert!(!work.path().join("mine.txt").exists());
    assert!(work.path().join("gone.txt").exists());
}

#[tokio::test]
async fn an_aborted_task_reports_the_tokens_it_used() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([Turn::text("a long answer that is still streaming")
        .and_hold()
        .without_usage()])
    .await;
    let mut cmd = against(
        home.path(),
        work.path(),
        &server.anthropic_base_url(),
        &["exec", "--json"],
    );
    let child = cmd.arg("tell me everything").spawn().unwrap();
    server.wait_for_holds(1).await;
    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    let lines = json_lines(&out.stdout);
    let last = lines.last().unwrap();
    assert_eq!(last["status"], "aborted", "{last}");
    assert!(
        last["usage"]["input_tokens"].as_u64().unwrap_or(0) > 0,
        "the aborted request was paid for: {last}"
    );
    server.release();
}

#[tokio::test]
async fn a_checkpoint_label_names_its_prompt() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([
        Turn::tool_call("Write", json!({"file_path": "a.txt", "content": "a\n"})),
        Turn::text("Wrote it."),
    ])
    .await;
    let mut cmd = against(
        home.path(),
        work.path(),
        &server.anthropic_base_url(),
        &["exec", "--yolo"],
    );
    let out = cmd.arg("make the file please").output().await.unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = kaji(home.path())
        .args(["checkpoints", "-C"])
        .arg(work.path())
        .arg("list")
        .output()
        .await
        .unwrap();
    let listing = text(&out.stdout);
    assert!(
        listing.contains("task start: make the file please"),
        "{listing}"
    );
}

#[tokio::test]
async fn the_exec_transcript_shows_each_edit_as_a_numbered_diff_and_the_task_list_as_lines() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "one\ntwo\nthree\nfour\n").unwrap();
    let server = serve([
        Turn::tool_call(
            "Edit",
            json!({"file_path": "a.txt", "old_string": "three", "new_string": "THREE"}),
        ),
        Turn::tool_call(
            "TaskCreate",
            json!({"subject": "Ship it", "description": "x"}),
        ),
        Turn::tool_call(
            "Bash",
            json!({"command": "echo first\necho the-last-line-of-the-command"}),
        ),
        Turn::text("Done."),
    ])
    .await;
    let mut cmd = against(
        home.path(),
        work.path(),
        &server.anthropic_base_url(),
        &["exec", "--yolo"],
    );
    let out = cmd.arg("edit it").output().await.unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    // One diff, with context and line numbers.
    assert!(stdout.contains("-    3 three"), "{stdout}");
    assert!(stdout.contains("+    3 THREE"), "{stdout}");
    assert!(stdout.contains("     2 two"), "{stdout}");
    assert_eq!(stdout.matches("+    3 THREE").count(), 1, "{stdout}");
    // The task list as lines, not JSON.
    assert!(stdout.contains("#1 [pending] Ship it"), "{stdout}");
    assert!(!stdout.contains("\"subject\""), "{stdout}");
    // A command of several lines is shown whole.
    assert!(
        stdout.contains("│ echo the-last-line-of-the-command"),
        "{stdout}"
    );
}

#[tokio::test]
async fn the_exec_transcript_indents_a_sub_agent_under_its_call() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let script = Helper {
        marker: HELPER,
        description: "help",
        prompt: "the-sub-agent-prompt",
        says: "The helper is done.",
        then: "All done.",
    }
    .install(work.path());
    let server = ScriptedModelServer::start(script).await;
    let mut cmd = against(
        home.path(),
        work.path(),
        &server.anthropic_base_url(),
        &["exec", "--yolo"],
    );
    let out = cmd.arg("use the helper").output().await.unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("│ [helper-"), "{stdout}");
    assert!(
        stdout.contains("] ⏺ Bash: echo from-the-helper"),
        "{stdout}"
    );
    assert!(!stdout.contains("> the-sub-agent-prompt"), "{stdout}");
    assert_eq!(stdout.matches("[completed]").count(), 1, "{stdout}");
}
