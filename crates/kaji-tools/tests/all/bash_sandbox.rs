//! The `Bash` tool with a sandbox in its context, against the real kernel:
//! a refused write is a `SandboxDenied` error that says so, in the
//! foreground and in the background.
//!
//! Like kaji-tasks' sandbox tests, each test fails naming the missing
//! layer when this kernel lacks one, unless `KAJI_SANDBOX_TESTS_OPTIONAL=1`
//! is set (then it says on stderr that it was skipped).

use std::path::PathBuf;
use std::sync::Arc;

use kaji_sandbox::{SandboxMode, SandboxPolicy};
use kaji_tasks::RuntimeTaskRegistry;
use kaji_tasks::runtime::RuntimeConfig;
use kaji_tools::{ToolContext, ToolError, ToolOutput, builtin_tools};
use serde_json::{Value, json};

fn sandbox_available() -> bool {
    let support = kaji_sandbox::probe();
    if support.is_complete() {
        return true;
    }
    let why = format!("this kernel lacks sandbox layers: {:?}", support.problems);
    if std::env::var_os("KAJI_SANDBOX_TESTS_OPTIONAL").is_some() {
        eprintln!("SKIPPED: {why}");
        return false;
    }
    panic!("{why}; set KAJI_SANDBOX_TESTS_OPTIONAL=1 to skip these tests on such a kernel");
}

async fn bash(ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
    let registry = builtin_tools();
    let tool = registry.get("Bash").expect("Bash is registered");
    tool.call(input, ctx).await
}

/// A context for a workspace `ws` whose Bash runs sandboxed with only `ws`
/// writable, and the directory `outside` next to it.
fn setup(dir: &tempfile::TempDir) -> (ToolContext, PathBuf) {
    let base = std::fs::canonicalize(dir.path()).expect("canonical");
    let (ws, outside) = (base.join("ws"), base.join("outside"));
    std::fs::create_dir_all(&ws).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    let mut policy = SandboxPolicy::workspace(SandboxMode::WorkspaceWrite, &ws);
    policy.writable_roots.retain(|r| r.starts_with(&ws));
    let mut ctx = ToolContext::new(&ws);
    ctx.sandbox = Some(Arc::new(policy));
    (ctx, outside)
}

#[tokio::test]
async fn a_refused_write_is_a_sandbox_error() {
    if !sandbox_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (ctx, outside) = setup(&dir);
    let ok = bash(&ctx, json!({"command": "echo in > inside.txt"})).await;
    assert!(ok.is_ok(), "{ok:?}");
    let target = outside.join("x.txt");
    let command = format!("echo out > {}", target.display());
    let err = bash(&ctx, json!({ "command": command }))
        .await
        .expect_err("the write is refused");
    assert!(matches!(err, ToolError::SandboxDenied { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("this may have been blocked by the sandbox (workspace-write): "),
        "{text}"
    );
    assert!(text.contains("Permission denied"), "{text}");
    assert!(!target.exists());

    // Without the sandbox the same command works: the error was its.
    let mut open = ctx.clone();
    open.sandbox = None;
    assert!(bash(&open, json!({ "command": command })).await.is_ok());
}

#[tokio::test]
async fn a_background_command_runs_in_the_sandbox() {
    if !sandbox_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut ctx, outside) = setup(&dir);
    let registry = RuntimeTaskRegistry::new(
        &ctx.project_dir.join("../kaji-home"),
        "s",
        RuntimeConfig::default(),
    )
    .expect("registry");
    let registry = Arc::new(registry);
    ctx.services_mut().runtime = Some(Arc::clone(&registry));
    let command = format!("echo in > bg-in; echo out > {}/bg-out", outside.display());
    let out = bash(&ctx, json!({"command": command, "run_in_background": true}))
        .await
        .expect("started");
    let id = out
        .data
        .as_ref()
        .and_then(|d| d["task_id"].as_str())
        .expect("task id");
    let done = registry.wait_finished(id).await.expect("finished");
    assert_ne!(done.exit_code, Some(0), "{done:?}");
    assert!(ctx.cwd.join("bg-in").exists());
    assert!(!outside.join("bg-out").exists());
}

#[tokio::test]
async fn what_kajiignore_excludes_is_unreadable_to_sandboxed_commands() {
    if !sandbox_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (ctx, _outside) = setup(&dir);
    let ws = ctx.cwd.clone();
    std::fs::write(ws.join(".kajiignore"), "secret.env\nprivate/\n").expect("write");
    std::fs::write(ws.join("secret.env"), "TOKEN=hidden-value\n").expect("write");
    std::fs::create_dir_all(ws.join("private/deep")).expect("mkdir");
    std::fs::write(ws.join("private/deep/key"), "hidden-value\n").expect("write");
    std::fs::write(ws.join("public.txt"), "shown\n").expect("write");
    let command = "cat secret.env private/deep/key public.txt 2>&1; true";
    let out = bash(&ctx, json!({ "command": command }))
        .await
        .expect("runs");
    assert!(!out.content.contains("hidden-value"), "{}", out.content);
    assert!(out.content.contains("shown"), "{}", out.content);
    // Unconfined, the same command reads them: the sandbox hid them.
    let mut open = ctx.clone();
    open.sandbox = None;
    let out = bash(&open, json!({ "command": command }))
        .await
        .expect("runs");
    assert!(out.content.contains("hidden-value"), "{}", out.content);
}
