//! The hook runner against real `sh` processes: exit codes, matchers,
//! stdin payloads, timeouts and cancellation (the process groups must be
//! gone afterwards).

use std::path::Path;
use std::time::Duration;

use kaji_core::PermissionMode;
use kaji_core::hooks::{
    HookEvent, HookPayload, HookRunner, HookSpec, HooksConfig, PermissionDecision, ToolMatcher,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn runner(event: HookEvent, hooks: Vec<HookSpec>) -> HookRunner {
    let mut config = HooksConfig::new();
    for hook in hooks {
        config.push(event, hook);
    }
    HookRunner::new(config)
}

fn payload(cwd: &Path) -> HookPayload {
    HookPayload::task("task-1", cwd, PermissionMode::Default)
}

/// Every live (non-zombie) process whose process group is `pgid`.
fn live_group_members(pgid: i32) -> Vec<i32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some(stat) = kaji_tasks::process::read_stat(pid)
            && stat.pgrp == pgid
            && stat.state != 'Z'
            && stat.state != 'X'
        {
            members.push(pid);
        }
    }
    members
}

#[tokio::test]
async fn exit_zero_adds_stdout_as_context() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(
        HookEvent::TaskStart,
        vec![
            HookSpec::new("echo 'remember: run cargo fmt'"),
            HookSpec::new("true"),
        ],
    );
    let outcome = r
        .run(
            HookEvent::TaskStart,
            payload(dir.path()),
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome.blocked, None);
    assert_eq!(
        outcome.context,
        vec!["remember: run cargo fmt\n".to_string()]
    );
    assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);
    assert!(!outcome.cancelled);
}

#[tokio::test]
async fn context_is_capped_at_ten_thousand_characters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(
        HookEvent::TaskStart,
        vec![HookSpec::new("head -c 20000 /dev/zero | tr '\\0' x")],
    );
    let outcome = r
        .run(
            HookEvent::TaskStart,
            payload(dir.path()),
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome.context.len(), 1);
    let text = &outcome.context[0];
    assert!(text.starts_with(&"x".repeat(10_000)));
    assert!(!text.contains(&"x".repeat(10_001)));
    assert!(text.contains("10000 more characters cut"), "{text}");
}

#[tokio::test]
async fn exit_two_blocks_with_stderr_and_stops_later_hooks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("later-ran");
    let r = runner(
        HookEvent::PreToolUse,
        vec![
            HookSpec::new("echo 'rm is not allowed here' >&2; echo ignored; exit 2"),
            HookSpec::new(format!("touch '{}'", marker.display())),
        ],
    );
    let p = payload(dir.path()).with_tool("Bash", json!({"command": "rm -rf /"}));
    let outcome = r
        .run(HookEvent::PreToolUse, p, &CancellationToken::new())
        .await;
    assert_eq!(outcome.blocked.as_deref(), Some("rm is not allowed here"));
    assert!(outcome.context.is_empty());
    assert!(!marker.exists(), "a hook after a block must not run");
}

#[tokio::test]
async fn exit_two_without_stderr_names_the_hook() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(HookEvent::UserPromptSubmit, vec![HookSpec::new("exit 2")]);
    let p = payload(dir.path()).with_prompt("hello");
    let outcome = r
        .run(HookEvent::UserPromptSubmit, p, &CancellationToken::new())
        .await;
    let reason = outcome.blocked.expect("blocked");
    assert!(
        reason.contains("UserPromptSubmit hook `exit 2`"),
        "{reason}"
    );
}

#[tokio::test]
async fn other_exit_codes_warn_without_blocking() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(
        HookEvent::PostToolUse,
        vec![
            HookSpec::new("echo 'lint broke' >&2; exit 1"),
            HookSpec::new("echo second"),
        ],
    );
    let p = payload(dir.path())
        .with_tool("Write", json!({"file_path": "a.txt"}))
        .with_tool_response(json!("ok"));
    let outcome = r
        .run(HookEvent::PostToolUse, p, &CancellationToken::new())
        .await;
    assert_eq!(outcome.blocked, None);
    assert_eq!(outcome.warnings.len(), 1);
    let warning = &outcome.warnings[0];
    assert!(warning.contains("exit code 1"), "{warning}");
    assert!(warning.contains("lint broke"), "{warning}");
    assert!(
        warning.contains("PostToolUse hook `echo 'lint broke' >&2; exit 1`"),
        "{warning}"
    );
    assert_eq!(outcome.context, vec!["second\n".to_string()]);
}

#[tokio::test]
async fn matcher_selects_hooks_by_tool_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut edit_only = HookSpec::new("echo edit-or-write");
    edit_only.matcher = Some(ToolMatcher::new("Edit|Write").expect("regex"));
    let mut bash_only = HookSpec::new("echo bash");
    bash_only.matcher = Some(ToolMatcher::new("Bash").expect("regex"));
    let all = HookSpec::new("echo all");
    let r = runner(HookEvent::PreToolUse, vec![edit_only, bash_only, all]);

    let cancel = CancellationToken::new();
    let p = payload(dir.path()).with_tool("Write", json!({}));
    let outcome = r.run(HookEvent::PreToolUse, p, &cancel).await;
    assert_eq!(
        outcome.context,
        vec!["edit-or-write\n".to_string(), "all\n".to_string()]
    );

    let p = payload(dir.path()).with_tool("WriteMore", json!({}));
    let outcome = r.run(HookEvent::PreToolUse, p, &cancel).await;
    assert_eq!(outcome.context, vec!["all\n".to_string()]);

    let p = payload(dir.path()).with_tool("Bash", json!({}));
    let outcome = r.run(HookEvent::PreToolUse, p, &cancel).await;
    assert_eq!(
        outcome.context,
        vec!["bash\n".to_string(), "all\n".to_string()]
    );
}

#[tokio::test]
async fn hooks_get_the_payload_on_stdin_and_run_in_cwd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(
        HookEvent::PostToolUse,
        vec![HookSpec::new("cat > payload.json; pwd > where.txt")],
    );
    let p = HookPayload::task("t-42", dir.path(), PermissionMode::AcceptEdits)
        .with_tool(
            "Edit",
            json!({"file_path": "src/main.rs", "old_string": "a", "new_string": "b"}),
        )
        .with_tool_response(json!({"content": "edited"}));
    let outcome = r
        .run(HookEvent::PostToolUse, p, &CancellationToken::new())
        .await;
    assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);

    let text = std::fs::read_to_string(dir.path().join("payload.json")).expect("payload written");
    let got: Value = serde_json::from_str(&text).expect("one JSON object");
    assert_eq!(
        got,
        json!({
            "hook_event_name": "PostToolUse",
            "task_id": "t-42",
            "cwd": dir.path().to_string_lossy(),
            "permission_mode": "acceptEdits",
            "tool_name": "Edit",
            "tool_input": {"file_path": "src/main.rs", "old_string": "a", "new_string": "b"},
            "tool_response": {"content": "edited"},
        })
    );
    let cwd = std::fs::read_to_string(dir.path().join("where.txt")).expect("pwd written");
    assert_eq!(
        Path::new(cwd.trim()).canonicalize().expect("canon"),
        dir.path().canonicalize().expect("canon")
    );
}

#[tokio::test]
async fn user_prompt_submit_payload_carries_the_prompt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(
        HookEvent::UserPromptSubmit,
        vec![HookSpec::new("cat > payload.json")],
    );
    let p = payload(dir.path()).with_prompt("fix the bug");
    r.run(HookEvent::UserPromptSubmit, p, &CancellationToken::new())
        .await;
    let got: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("payload.json")).expect("written"),
    )
    .expect("json");
    assert_eq!(got["hook_event_name"], "UserPromptSubmit");
    assert_eq!(got["prompt"], "fix the bug");
    assert_eq!(got["permission_mode"], "default");
    assert!(got.get("tool_name").is_none());
}

#[tokio::test]
async fn a_hook_past_its_timeout_is_killed_with_its_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pid_file = dir.path().join("pid");
    let mut hook = HookSpec::new(format!(
        "echo $$ > '{}'; sleep 30; echo never",
        pid_file.display()
    ));
    hook.timeout = Duration::from_secs(1);
    let r = runner(HookEvent::TaskStart, vec![hook]);
    let outcome = r
        .run(
            HookEvent::TaskStart,
            payload(dir.path()),
            &CancellationToken::new(),
        )
        .await;

    assert_eq!(outcome.blocked, None, "a timeout never blocks");
    assert!(outcome.context.is_empty());
    assert_eq!(outcome.warnings.len(), 1);
    assert!(
        outcome.warnings[0].contains("timed out after 1 s and was killed"),
        "{:?}",
        outcome.warnings
    );
    let pgid: i32 = std::fs::read_to_string(&pid_file)
        .expect("the hook started")
        .trim()
        .parse()
        .expect("pid");
    assert_eq!(
        live_group_members(pgid),
        Vec::<i32>::new(),
        "the hook's group must be gone"
    );
}

#[tokio::test]
async fn cancelling_kills_the_running_hook_and_skips_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("started");
    kaji_test_support::fixtures::mkfifo(&fifo);
    let marker = dir.path().join("second-ran");
    let r = runner(
        HookEvent::TaskCancel,
        vec![
            // Opening the FIFO for writing waits until the test reads it,
            // so the test knows the hook is running.
            HookSpec::new(format!("echo $$ > '{}'; sleep 30", fifo.display())),
            HookSpec::new(format!("touch '{}'", marker.display())),
        ],
    );
    let cancel = CancellationToken::new();
    let run = {
        let cancel = cancel.clone();
        let p = payload(dir.path());
        tokio::spawn(async move { r.run(HookEvent::TaskCancel, p, &cancel).await })
    };
    let pgid: i32 = tokio::fs::read_to_string(&fifo)
        .await
        .expect("read fifo")
        .trim()
        .parse()
        .expect("pid");
    assert!(!live_group_members(pgid).is_empty(), "the hook is running");
    cancel.cancel();
    let outcome = run.await.expect("join");
    assert!(outcome.cancelled);
    assert_eq!(outcome.blocked, None);
    assert_eq!(
        live_group_members(pgid),
        Vec::<i32>::new(),
        "the hook's group must be gone"
    );
    assert!(!marker.exists(), "hooks after a cancellation must not run");
}

#[tokio::test]
async fn processes_left_behind_by_a_hook_are_killed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(
        HookEvent::TaskComplete,
        vec![HookSpec::new("sleep 30 & echo $!; echo $$")],
    );
    let outcome = r
        .run(
            HookEvent::TaskComplete,
            payload(dir.path()),
            &CancellationToken::new(),
        )
        .await;
    assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);
    let text = outcome.context.first().expect("printed pids");
    let pgid: i32 = text
        .lines()
        .nth(1)
        .expect("two lines")
        .parse()
        .expect("pid");
    assert_eq!(live_group_members(pgid), Vec::<i32>::new());
}

#[tokio::test]
async fn a_command_that_does_not_exist_warns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(
        HookEvent::TaskStart,
        vec![HookSpec::new("kaji-no-such-command-xyz")],
    );
    let outcome = r
        .run(
            HookEvent::TaskStart,
            payload(dir.path()),
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome.blocked, None);
    assert_eq!(outcome.warnings.len(), 1);
    assert!(
        outcome.warnings[0].contains("exit code 127"),
        "{:?}",
        outcome.warnings
    );
}

#[tokio::test]
async fn has_hooks_and_no_hooks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(HookEvent::TaskCancel, vec![HookSpec::new("true")]);
    assert!(r.has_hooks(HookEvent::TaskCancel));
    assert!(!r.has_hooks(HookEvent::TaskStart));
    let outcome = r
        .run(
            HookEvent::TaskStart,
            payload(dir.path()),
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome, Default::default());
}

#[tokio::test]
async fn a_hook_that_ignores_a_large_stdin_does_not_stall() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(HookEvent::PreToolUse, vec![HookSpec::new("echo ok")]);
    let big = "x".repeat(1 << 20);
    let p = payload(dir.path()).with_tool("Write", json!({"content": big}));
    let outcome = r
        .run(HookEvent::PreToolUse, p, &CancellationToken::new())
        .await;
    assert_eq!(outcome.context, vec!["ok\n".to_string()]);
}

/// A hook that prints `json` on stdout (Claude Code's answer style).
fn answering(json: Value) -> HookSpec {
    HookSpec::new(format!("cat >/dev/null; printf '%s' '{json}'"))
}

fn pre_tool(dir: &Path) -> HookPayload {
    payload(dir).with_tool("Bash", json!({"command": "rm -rf build"}))
}

#[tokio::test]
async fn claude_code_payload_fields_reach_the_hook() {
    let dir = tempfile::tempdir().expect("tempdir");
    let seen = dir.path().join("payload.json");
    for event in [
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::Stop,
        HookEvent::SubagentStop,
        HookEvent::Notification,
        HookEvent::PreCompact,
    ] {
        let r = runner(
            event,
            vec![HookSpec::new(format!("cat > '{}'", seen.display()))],
        );
        let transcript = dir.path().join("sessions/s1.jsonl");
        let p = payload(dir.path())
            .with_session("s1", Some(transcript.clone()))
            .with_field("source", "startup")
            .with_field("hook_event_name", "forged");
        let outcome = r.run(event, p, &CancellationToken::new()).await;
        assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);
        let text = std::fs::read_to_string(&seen).expect("payload written");
        let v: Value = serde_json::from_str(text.trim()).expect("JSON");
        assert_eq!(v["hook_event_name"], json!(event.as_str()));
        assert_eq!(v["session_id"], json!("s1"));
        assert_eq!(v["transcript_path"], json!(transcript.to_string_lossy()));
        assert_eq!(v["cwd"], json!(dir.path().to_string_lossy()));
        assert_eq!(v["source"], json!("startup"));
    }
    assert_eq!(
        "SubagentStop".parse::<HookEvent>(),
        Ok(HookEvent::SubagentStop)
    );
}

#[tokio::test]
async fn json_deny_blocks_with_its_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("later-ran");
    let r = runner(
        HookEvent::PreToolUse,
        vec![
            answering(json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                "permissionDecision": "deny", "permissionDecisionReason": "no rm in this repo"}})),
            HookSpec::new(format!("touch '{}'", marker.display())),
        ],
    );
    let outcome = r
        .run(
            HookEvent::PreToolUse,
            pre_tool(dir.path()),
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome.blocked.as_deref(), Some("no rm in this repo"));
    assert_eq!(outcome.permission, Some(PermissionDecision::Deny));
    assert!(outcome.context.is_empty(), "the JSON is not context");
    assert!(!marker.exists(), "a hook after a deny must not run");
}

#[tokio::test]
async fn json_allow_and_ask_are_exposed_and_ask_wins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let allow = answering(json!({"hookSpecificOutput": {"permissionDecision": "allow"}}));
    let r = runner(HookEvent::PreToolUse, vec![allow.clone()]);
    let outcome = r
        .run(
            HookEvent::PreToolUse,
            pre_tool(dir.path()),
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome.permission, Some(PermissionDecision::Allow));
    assert!(!outcome.is_blocked());
    let ask = answering(json!({"hookSpecificOutput": {"permissionDecision": "ask"}}));
    let r = runner(HookEvent::PreToolUse, vec![ask, allow]);
    let outcome = r
        .run(
            HookEvent::PreToolUse,
            pre_tool(dir.path()),
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome.permission, Some(PermissionDecision::Ask));
}

#[tokio::test]
async fn json_additional_context_system_message_and_decision_block() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = runner(
        HookEvent::SessionStart,
        vec![answering(json!({"systemMessage": "loaded notes",
            "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "The build uses make."}}))],
    );
    let outcome = r
        .run(
            HookEvent::SessionStart,
            payload(dir.path()),
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome.context, vec!["The build uses make.".to_string()]);
    assert_eq!(outcome.messages, vec!["loaded notes".to_string()]);
    assert_eq!(outcome.permission, None);

    let r = runner(
        HookEvent::Stop,
        vec![answering(
            json!({"decision": "block", "reason": "the tests still fail"}),
        )],
    );
    let outcome = r
        .run(
            HookEvent::Stop,
            payload(dir.path()),
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome.blocked.as_deref(), Some("the tests still fail"));

    let r = runner(
        HookEvent::PostToolUse,
        vec![answering(
            json!({"continue": false, "stopReason": "budget spent"}),
        )],
    );
    let outcome = r
        .run(
            HookEvent::PostToolUse,
            pre_tool(dir.path()),
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome.stop.as_deref(), Some("budget spent"));
    assert!(outcome.is_blocked());

    // Not one JSON object: plain text context, as before.
    let r = runner(
        HookEvent::TaskStart,
        vec![HookSpec::new("echo '{not json'")],
    );
    let outcome = r
        .run(
            HookEvent::TaskStart,
            payload(dir.path()),
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(outcome.context, vec!["{not json\n".to_string()]);
}
