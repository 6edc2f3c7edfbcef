//! The `Bash` tool against real processes: output, exit codes, the output
//! cap, timeouts and cancellation that take grandchildren with them.

use std::path::Path;

use kaji_tools::{ToolContext, ToolError, builtin_tools};
use serde_json::{Value, json};

async fn bash(ctx: &ToolContext, input: Value) -> Result<kaji_tools::ToolOutput, ToolError> {
    let registry = builtin_tools();
    let tool = registry.get("Bash").expect("Bash is registered");
    tool.call(input, ctx).await
}

/// The numbers printed after `label=` in `text`.
fn pids_after(text: &str, label: &str) -> Vec<i32> {
    text.lines()
        .filter_map(|l| l.strip_prefix(label))
        .filter_map(|v| v.trim().parse().ok())
        .collect()
}

#[tokio::test]
async fn reports_output_in_order_and_the_exit_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ToolContext::new(dir.path());
    let out = bash(
        &ctx,
        json!({"command": "echo one; echo two >&2; echo three; pwd; exit 3"}),
    )
    .await
    .expect("runs");
    let cwd = std::fs::canonicalize(dir.path()).expect("canonical");
    let expected = format!("one\ntwo\nthree\n{}\n[exit code 3, ", cwd.display());
    assert!(out.content.starts_with(&expected), "{}", out.content);
    let data = out.data.expect("data");
    assert_eq!(data["exit_code"], 3);
    assert_eq!(data["timed_out"], false);
    assert!(out.changed_files);
}

#[tokio::test]
async fn long_output_keeps_start_and_end_with_a_marker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ToolContext::new(dir.path());
    let out = bash(&ctx, json!({"command": "seq 1 200000"}))
        .await
        .expect("runs");
    let full: String = (1..=200_000).map(|i| format!("{i}\n")).collect();
    assert!(
        out.content.starts_with("1\n2\n3\n"),
        "{}",
        &out.content[..100]
    );
    assert!(
        out.content.contains("200000\n[exit code 0"),
        "{}",
        &out.content[out.content.len() - 200..]
    );
    assert!(out.content.contains("[... output cut: "), "no marker");
    let omitted = out.data.as_ref().expect("data")["omitted_bytes"]
        .as_u64()
        .expect("omitted_bytes");
    assert_eq!(omitted, full.len() as u64 - 30_000);
    assert!(
        out.content
            .contains(&format!("{omitted} of {} bytes omitted", full.len()))
    );
    assert!(out.content.chars().count() < 30_000 + 200);
}

#[tokio::test]
async fn timeout_kills_the_whole_group_including_term_ignoring_grandchildren() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ToolContext::new(dir.path());
    let script = r#"
        sleep 1000 & echo "child=$!"
        bash -c 'trap "" TERM; echo "stubborn=$$"; exec sleep 1000' &
        sleep 1000
    "#;
    let out = bash(&ctx, json!({"command": script, "timeout": 1000}))
        .await
        .expect("runs");
    assert!(out.content.contains("timed out"), "{}", out.content);
    assert_eq!(out.data.as_ref().expect("data")["timed_out"], true);
    let mut pids = pids_after(&out.content, "child=");
    pids.extend(pids_after(&out.content, "stubborn="));
    assert_eq!(
        pids.len(),
        2,
        "both pids printed before the timeout: {}",
        out.content
    );
    for pid in pids {
        assert!(
            kaji_tasks::process::is_gone(pid),
            "pid {pid} survived the timeout"
        );
    }
}

#[tokio::test]
async fn processes_left_in_the_background_are_stopped_when_the_command_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ToolContext::new(dir.path());
    let out = bash(
        &ctx,
        json!({"command": "sleep 1000 & echo \"child=$!\"; echo done"}),
    )
    .await
    .expect("runs");
    assert!(
        out.content.contains("done\n[exit code 0"),
        "{}",
        out.content
    );
    let pids = pids_after(&out.content, "child=");
    assert_eq!(pids.len(), 1, "{}", out.content);
    assert!(
        kaji_tasks::process::is_gone(pids[0]),
        "background job {} survived",
        pids[0]
    );
}

#[tokio::test]
async fn cancellation_kills_the_group_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("pids");
    kaji_test_support::fixtures::mkfifo(&fifo);
    let ctx = ToolContext::new(dir.path());
    let cancel = ctx.cancel.clone();
    let script = "bash -c 'trap \"\" TERM; exec sleep 1000' & echo $! > pids; wait";
    let call = tokio::spawn({
        let ctx = ctx.clone();
        async move { bash(&ctx, json!({"command": script})).await }
    });
    // Blocks until the script has written the pid: no sleeping.
    let fifo_path = fifo.clone();
    let pid: i32 = tokio::task::spawn_blocking(move || read_fifo(&fifo_path))
        .await
        .expect("reader")
        .trim()
        .parse()
        .expect("a pid");
    cancel.cancel();
    let result = call.await.expect("the call task");
    assert!(matches!(result, Err(ToolError::Cancelled)), "{result:?}");
    assert!(
        kaji_tasks::process::is_gone(pid),
        "pid {pid} survived the abort"
    );
}

fn read_fifo(path: &Path) -> String {
    std::fs::read_to_string(path).expect("read fifo")
}

#[tokio::test]
async fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ToolContext::new(dir.path());
    let err = bash(&ctx, json!({"command": "true", "timeout": 700_000}))
        .await
        .expect_err("too long");
    assert!(err.to_string().contains("600000"), "{err}");
    let err = bash(&ctx, json!({"cmd": "true"}))
        .await
        .expect_err("wrong field");
    assert!(err.to_string().contains("Bash"), "{err}");
    let err = bash(&ctx, json!({"command": "  "}))
        .await
        .expect_err("empty");
    assert!(err.to_string().contains("empty"), "{err}");
    let gone = ToolContext::new(dir.path().join("missing"));
    let err = bash(&gone, json!({"command": "true"}))
        .await
        .expect_err("no cwd");
    assert!(err.to_string().contains("missing"), "{err}");
}

#[tokio::test]
async fn background_without_a_registry_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ToolContext::new(dir.path());
    let err = bash(&ctx, json!({"command": "true", "run_in_background": true}))
        .await
        .expect_err("no registry");
    assert!(err.to_string().contains("run_in_background"), "{err}");
}

#[tokio::test]
async fn timeouts_written_as_floats_or_strings_are_accepted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ToolContext::new(dir.path());
    for timeout in [json!(5000.0), json!("5000"), json!(5000)] {
        let out = bash(&ctx, json!({"command": "echo ok", "timeout": timeout}))
            .await
            .expect("runs");
        assert!(out.content.starts_with("ok\n"), "{}", out.content);
    }
    for bad in [json!(1.5), json!(-3), json!("soon"), json!([1])] {
        let err = bash(&ctx, json!({"command": "true", "timeout": bad}))
            .await
            .expect_err("bad timeout");
        assert!(
            err.to_string().contains("whole number of milliseconds"),
            "{err}"
        );
    }
}
