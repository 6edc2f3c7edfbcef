//! Issue 31 through the real binary: docs/hooks.md's way to start something
//! from a hook that outlives it really detaches it. The hook's process group
//! is killed when the hook's main process exits, so a child started with
//! `setsid … &` in the background can be killed before it leaves the group
//! (3 of 20 runs on a busy machine); the documented form runs `setsid` in the
//! foreground, so the child is in its own session before the hook ends.

use kaji_tasks::process::is_gone;
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

use crate::common::{Wire, exec_json, run};

/// Kills the detached child when the test ends, passed or not.
struct KillOnDrop(Option<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // SAFETY: kill takes two integers; the pid is the test's child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

#[tokio::test]
async fn the_documented_detach_outlives_the_hook_without_a_timeout() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("kaji-home")).unwrap();
    std::fs::create_dir_all(home.path().join(".claude")).unwrap();
    std::fs::create_dir_all(work.path().join(".git")).unwrap();
    let pid_file = home.path().join("server.pid");
    // docs/hooks.md: `setsid sh -c 'my-server >/dev/null 2>&1 </dev/null &'`
    let command = format!(
        "setsid sh -c 'sleep 1000 >/dev/null 2>&1 </dev/null & echo $! > {}'",
        pid_file.display()
    );
    let settings = json!({"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": command, "timeout": 30}
    ]}]}});
    std::fs::write(
        home.path().join(".claude/settings.json"),
        settings.to_string(),
    )
    .unwrap();
    let server = ScriptedModelServer::start(Script::new([Turn::tool_call(
        "AttemptCompletion",
        json!({"result": "done"}),
    )]))
    .await;
    let mut cmd = exec_json(home.path(), work.path(), &server, Wire::Anthropic);
    cmd.args(["--no-checkpoints", "--sandbox", "off", "--yolo", "go"]);
    let (code, lines, err) = run(cmd).await;
    let pid = std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok());
    let _guard = KillOnDrop(pid);
    assert_eq!(code, 0, "{err}");
    let shown = format!("{lines:?}{err}");
    assert!(
        !shown.contains("timed out"),
        "the hook ended by itself: {shown}"
    );
    let pid = pid.unwrap_or_else(|| panic!("the hook's child never ran: {shown}"));
    assert!(
        !is_gone(pid),
        "the detached child {pid} was killed with the hook"
    );
}
