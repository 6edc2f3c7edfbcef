//! `Bash` with `run_in_background`, `TaskOutput` and `TaskStop` through the
//! tool interface, against real processes.

use std::sync::Arc;
use std::time::Duration;

use kaji_tasks::RuntimeTaskRegistry;
use kaji_tasks::runtime::RuntimeConfig;
use kaji_tools::{ToolAccess, ToolContext, ToolError, ToolOutput, builtin_tools};
use serde_json::{Value, json};

async fn call(ctx: &ToolContext, tool: &str, input: Value) -> Result<ToolOutput, ToolError> {
    let registry = builtin_tools();
    let tool = registry
        .get(tool)
        .unwrap_or_else(|| panic!("{tool} is registered"));
    tool.call(input, ctx).await
}

fn context(dir: &std::path::Path) -> ToolContext {
    let mut ctx = ToolContext::new(dir);
    ctx.session_id = "tools-session".to_string();
    let config = RuntimeConfig {
        kill_grace: Duration::from_millis(100),
        ..RuntimeConfig::default()
    };
    let registry = RuntimeTaskRegistry::new(&dir.join(".kaji-home"), &ctx.session_id, config)
        .expect("registry");
    ctx.services_mut().runtime = Some(Arc::new(registry));
    ctx
}

async fn start(ctx: &ToolContext, command: &str) -> (String, String) {
    let out = call(
        ctx,
        "Bash",
        json!({"command": command, "run_in_background": true, "description": "bg job"}),
    )
    .await
    .expect("starts");
    let data = out.data.expect("data");
    let id = data["task_id"].as_str().expect("task_id").to_string();
    let path = data["output_path"]
        .as_str()
        .expect("output_path")
        .to_string();
    assert!(
        out.content.contains(&id) && out.content.contains(&path),
        "{}",
        out.content
    );
    (id, path)
}

#[tokio::test]
async fn background_output_is_read_incrementally_until_the_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = context(dir.path());
    let (id, path) = start(&ctx, "echo first; echo second; exit 4").await;
    assert!(
        path.ends_with(&format!("runs/tools-session/{id}.output")),
        "{path}"
    );
    let mut text = String::new();
    loop {
        let out = call(
            &ctx,
            "TaskOutput",
            json!({"task_id": id, "timeout": 120000}),
        )
        .await
        .expect("reads");
        let data = out.data.expect("data");
        assert_eq!(data["timed_out"], false);
        text.push_str(&out.content);
        if data["status"] != "running" {
            assert_eq!(data["status"], "failed");
            assert_eq!(data["exit_code"], 4);
            break;
        }
    }
    assert_eq!(text.matches("first").count(), 1, "{text}");
    assert_eq!(text.matches("second").count(), 1, "{text}");
    assert!(text.contains("failed (exit code 4)"), "{text}");
    assert_eq!(
        std::fs::read_to_string(&path).expect("file"),
        "first\nsecond\n"
    );
    // Nothing new after the end.
    let again = call(&ctx, "TaskOutput", json!({"task_id": id, "block": false}))
        .await
        .expect("reads");
    assert!(again.content.contains("no new output"), "{}", again.content);
}

#[tokio::test]
async fn task_stop_kills_the_group_and_refuses_what_it_cannot_stop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = context(dir.path());
    let (id, _) = start(
        &ctx,
        "bash -c 'trap \"\" TERM; echo \"pid=$$\"; exec sleep 1000' & wait",
    )
    .await;
    let mut seen = String::new();
    let pid: i32 = loop {
        if let Some(pid) = seen.lines().find_map(|l| l.strip_prefix("pid=")) {
            break pid.trim().parse().expect("pid");
        }
        // TaskOutput with block waits for the end: follow the output as
        // it comes through the registry instead.
        let read = ctx
            .services
            .runtime
            .as_ref()
            .expect("runtime")
            .read_waiting(
                "observer",
                &id,
                kaji_tasks::runtime::ReadWait::NewOutput,
                Duration::from_secs(120),
            )
            .await
            .expect("reads");
        seen.push_str(&read.text());
    };
    let stopped = call(&ctx, "TaskStop", json!({"task_id": id}))
        .await
        .expect("stops");
    assert!(stopped.content.contains("killed"), "{}", stopped.content);
    assert!(
        kaji_tasks::process::is_gone(pid),
        "grandchild {pid} survived TaskStop"
    );

    let err = call(&ctx, "TaskStop", json!({"task_id": id}))
        .await
        .expect_err("already ended");
    assert!(
        err.to_string().contains("not running") && err.to_string().contains("killed"),
        "{err}"
    );
    let err = call(&ctx, "TaskStop", json!({"task_id": "3"}))
        .await
        .expect_err("plan id");
    assert!(
        err.to_string().contains("task-list (plan) task id"),
        "{err}"
    );
    let err = call(&ctx, "TaskOutput", json!({"task_id": "b0000zzzz"}))
        .await
        .expect_err("unknown");
    assert!(
        err.to_string().contains("no runtime task `b0000zzzz`"),
        "{err}"
    );
    let err = call(
        &ctx,
        "TaskOutput",
        json!({"task_id": id, "timeout": 600001}),
    )
    .await
    .expect_err("too long");
    assert!(err.to_string().contains("600000"), "{err}");
}

#[tokio::test]
async fn without_a_registry_the_tools_say_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = ToolContext::new(dir.path());
    let err = call(&ctx, "TaskOutput", json!({"task_id": "b00000000"}))
        .await
        .expect_err("none");
    assert!(err.to_string().contains("no runtime tasks"), "{err}");
    let err = call(&ctx, "TaskStop", json!({"task_id": "b00000000"}))
        .await
        .expect_err("none");
    assert!(err.to_string().contains("no runtime tasks"), "{err}");
}

#[test]
fn access_and_read_only_flags() {
    let tools = builtin_tools();
    let ctx = ToolContext::new("/tmp");
    let bash = tools.get("Bash").expect("Bash");
    assert!(!bash.is_read_only());
    assert_eq!(
        bash.access(&json!({"command": "ls -l"}), &ctx),
        ToolAccess::Execute {
            command: "ls -l".to_string()
        }
    );
    let output = tools.get("TaskOutput").expect("TaskOutput");
    assert!(output.is_read_only());
    let stop = tools.get("TaskStop").expect("TaskStop");
    assert!(!stop.is_read_only());
    assert_eq!(
        stop.access(&json!({"task_id": "b1"}), &ctx),
        ToolAccess::SessionState
    );
}
