//! Issue 29 through the real binary against the scripted model server:
//! Claude Code's settings files (`~/.claude/settings.json`,
//! `.claude/settings.json`, `.claude/settings.local.json`) — their hooks
//! fire with Claude Code's input fields, their allow rules count only in a
//! trusted project, a `Read` deny hides the file from Grep and Glob, and
//! a broken file is a warning naming file and line while the session goes
//! on.

use std::path::Path;

use kaji_tasks::process::is_gone;
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};
use tokio::process::Command;

use crate::common::{Wire, done, exec_json, kaji_sync, run, serve, tool_results};

fn kaji(home: &Path, work: &Path, server: &ScriptedModelServer) -> Command {
    let mut cmd = exec_json(home, work, server, Wire::Anthropic);
    cmd.args(["--no-checkpoints", "--sandbox", "off"]);
    cmd
}

fn home_and_work() -> (tempfile::TempDir, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("kaji-home")).unwrap();
    std::fs::create_dir_all(home.path().join(".claude")).unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join(".git")).unwrap();
    std::fs::create_dir_all(work.path().join(".claude")).unwrap();
    (home, work)
}

/// Claude Code's documented hook input: the fields every event gets, and
/// each event's own (hooks reference, "Hook input").
fn documented_fields(event: &str) -> &'static [&'static str] {
    match event {
        "PreToolUse" => &["tool_name", "tool_input", "tool_use_id"],
        "PostToolUse" => &["tool_name", "tool_input", "tool_response", "tool_use_id"],
        "PostToolUseFailure" => &["tool_name", "tool_input", "tool_use_id", "error"],
        "UserPromptSubmit" => &["prompt"],
        "SessionStart" => &["source"],
        "SessionEnd" => &["reason"],
        "Stop" => &["stop_hook_active", "last_assistant_message"],
        _ => &[],
    }
}

const COMMON: [&str; 5] = [
    "session_id",
    "transcript_path",
    "cwd",
    "permission_mode",
    "hook_event_name",
];

#[tokio::test]
async fn a_settings_json_hook_gets_claude_codes_input_fields() {
    let (home, work) = home_and_work();
    let log = home.path().join("payloads.jsonl");
    let script = home.path().join("log.sh");
    std::fs::write(
        &script,
        format!(
            "input=$(cat)\nprintf '%s\\t%s\\n' \"$CLAUDE_PROJECT_DIR\" \"$input\" >> '{}'\n",
            log.display()
        ),
    )
    .unwrap();
    let hook = |matcher: Option<&str>| {
        let mut group = json!({"hooks": [{
            "type": "command",
            "command": format!("sh '{}'", script.display()),
            "timeout": 30,
            "statusMessage": "logging",
            "async": false
        }]});
        if let Some(m) = matcher {
            group["matcher"] = json!(m);
        }
        json!([group])
    };
    let user = json!({
        "$schema": "https://json.schemastore.org/claude-code-settings.json",
        "hooks": {
            "SessionStart": hook(None),
            "UserPromptSubmit": hook(None),
            "PreToolUse": hook(Some("Bash")),
            "PostToolUse": hook(Some("")),
            "PostToolUseFailure": hook(Some("Read")),
            "Stop": hook(Some("")),
            "SessionEnd": hook(None),
        }
    });
    std::fs::write(
        home.path().join(".claude/settings.json"),
        serde_json::to_string_pretty(&user).unwrap(),
    )
    .unwrap();
    let server = serve([
        Turn::tool_call("Bash", json!({"command": "echo HELLO-OUT"})),
        Turn::tool_call("Read", json!({"file_path": "missing.txt"})),
        Turn::text("All checked.").and_tool_call("AttemptCompletion", json!({"result": "done"})),
    ])
    .await;
    let mut cmd = kaji(home.path(), work.path(), &server);
    cmd.args(["--permission-mode", "bypassPermissions", "check it"]);
    let (code, lines, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    // The first run names the hooks of ~/.claude/settings.json.
    assert!(
        err.contains("hooks of your Claude Code settings") && err.contains("PreToolUse: sh"),
        "{err}"
    );
    let session_id = lines[0]["session_id"].as_str().unwrap();
    let work_dir = work.path().canonicalize().unwrap();
    let entries: Vec<(String, Value)> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| {
            let (dir, json) = l.split_once('\t').unwrap();
            (dir.to_string(), serde_json::from_str(json).unwrap())
        })
        .collect();
    let events: Vec<&str> = entries
        .iter()
        .map(|(_, p)| p["hook_event_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        [
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PostToolUse",
            "PostToolUseFailure",
            "PostToolUse",
            "Stop",
            "SessionEnd"
        ]
    );
    for (dir, p) in &entries {
        assert_eq!(dir, work_dir.to_str().unwrap(), "CLAUDE_PROJECT_DIR");
        let event = p["hook_event_name"].as_str().unwrap();
        for field in COMMON.iter().chain(documented_fields(event)) {
            assert!(p.get(*field).is_some(), "{event} lacks {field}: {p}");
        }
        assert_eq!(p["session_id"], session_id);
        assert_eq!(p["permission_mode"], "bypassPermissions", "{p}");
        assert_eq!(p["cwd"], work_dir.to_str().unwrap());
    }
    let pre = &entries[2].1;
    let post = &entries[3].1;
    assert_eq!(pre["tool_input"], json!({"command": "echo HELLO-OUT"}));
    assert!(pre["tool_use_id"].as_str().is_some_and(|id| !id.is_empty()));
    assert_eq!(pre["tool_use_id"], post["tool_use_id"]);
    let response = &post["tool_response"];
    assert_eq!(response["stdout"], "HELLO-OUT\n", "{post}");
    assert_eq!(response["stderr"], "");
    assert_eq!(response["interrupted"], false);
    assert_eq!(response["isImage"], false);
    assert!(post["duration_ms"].is_u64(), "{post}");
    let failure = &entries[4].1;
    assert_eq!(failure["tool_name"], "Read");
    assert!(failure["error"].as_str().is_some_and(|e| !e.is_empty()));
    let stop = &entries[6].1;
    assert_eq!(stop["stop_hook_active"], false);
    assert_eq!(stop["last_assistant_message"], "All checked.", "{stop}");
    assert_eq!(entries[0].1["source"], "startup");

    // A second run says nothing more about them.
    let server = serve([done("done")]).await;
    let mut cmd = kaji(home.path(), work.path(), &server);
    cmd.args(["--yolo", "again"]);
    let (code, _, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("hooks of your Claude Code settings"), "{err}");
}

#[tokio::test]
async fn a_settings_json_allow_rule_counts_only_once_the_project_is_trusted() {
    let (home, work) = home_and_work();
    std::fs::write(
        work.path().join(".claude/settings.json"),
        r#"{"permissions": {"allow": ["Bash(touch made-by-rule.txt)"], "ask": ["Bash(git commit*)"]}}"#,
    )
    .unwrap();
    let script = || {
        Script::new([
            Turn::tool_call("Bash", json!({"command": "touch made-by-rule.txt"})),
            done("done"),
        ])
    };
    // Untrusted: the allow rule is inert, the headless ask is denied.
    let server = ScriptedModelServer::start(script()).await;
    let mut cmd = kaji(home.path(), work.path(), &server);
    cmd.args(["--max-mistakes", "5", "make it"]);
    let (_, lines, err) = run(cmd).await;
    let results = tool_results(&lines);
    assert_eq!(results[0]["is_error"], true, "{}", results[0]);
    assert!(!work.path().join("made-by-rule.txt").exists());
    assert!(
        err.contains("permissions.allow in") && err.contains(".claude/settings.json"),
        "{err}"
    );
    // Trusted: the same rule runs the command without asking.
    let server = ScriptedModelServer::start(script()).await;
    let mut cmd = kaji(home.path(), work.path(), &server);
    cmd.args(["--trust", "make it"]);
    let (code, lines, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(tool_results(&lines)[0]["is_error"], false);
    assert!(work.path().join("made-by-rule.txt").exists());

    // `kaji permissions list` names the file of each rule.
    let out = kaji_sync(home.path())
        .args(["permissions", "-C"])
        .arg(work.path())
        .args(["list", "--json"])
        .output()
        .unwrap();
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rules = list["rules"].as_array().unwrap();
    let file = work
        .path()
        .canonicalize()
        .unwrap()
        .join(".claude/settings.json");
    for (kind, rule) in [
        ("allow", "Bash(touch made-by-rule.txt)"),
        ("ask", "Bash(git commit*)"),
    ] {
        assert!(
            rules.iter().any(|r| r["kind"] == kind
                && r["rule"] == rule
                && r["source"] == file.to_str().unwrap()),
            "{kind} {rule} from {}: {list:#}",
            file.display()
        );
    }
}

#[tokio::test]
async fn a_read_deny_hides_the_file_from_grep_and_glob() {
    let (home, work) = home_and_work();
    std::fs::create_dir_all(work.path().join("secrets")).unwrap();
    std::fs::write(work.path().join("secrets/key.txt"), "TOKEN=NEEDLE-SECRET\n").unwrap();
    std::fs::write(work.path().join("notes.txt"), "NEEDLE-PUBLIC\n").unwrap();
    std::fs::write(
        work.path().join(".claude/settings.local.json"),
        r#"{"permissions": {"deny": ["Read(./secrets/**)"]}}"#,
    )
    .unwrap();
    let server = serve([
        Turn::tool_call(
            "Grep",
            json!({"pattern": "NEEDLE", "output_mode": "content"}),
        ),
        Turn::tool_call("Glob", json!({"pattern": "**/*.txt"})),
        Turn::tool_call(
            "Grep",
            json!({"pattern": "NEEDLE", "path": "secrets/key.txt"}),
        ),
        Turn::tool_call("Read", json!({"file_path": "secrets/key.txt"})),
        done("done"),
    ])
    .await;
    let mut cmd = kaji(home.path(), work.path(), &server);
    cmd.args(["--max-mistakes", "9", "--yolo", "look"]);
    let (code, lines, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    let results = tool_results(&lines);
    let output = |i: usize| results[i]["output"].as_str().unwrap().to_string();
    assert!(output(0).contains("NEEDLE-PUBLIC"), "{}", output(0));
    assert!(!output(0).contains("NEEDLE-SECRET"), "{}", output(0));
    assert!(output(1).contains("notes.txt"), "{}", output(1));
    assert!(!output(1).contains("key.txt"), "{}", output(1));
    assert!(!output(2).contains("NEEDLE-SECRET"), "{}", output(2));
    assert_eq!(results[3]["is_error"], true, "{}", results[3]);
    assert!(!output(3).contains("NEEDLE-SECRET"), "{}", output(3));
}

#[tokio::test]
async fn a_broken_settings_file_is_a_warning_naming_file_and_line() {
    let (home, work) = home_and_work();
    std::fs::write(
        work.path().join(".claude/settings.json"),
        "{\n  \"permissions\": {\n    \"deny\": [\"Bash(rm:*)\",]\n  }\n}\n",
    )
    .unwrap();
    std::fs::write(
        work.path().join(".claude/settings.local.json"),
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": ""}]}], "NoSuchEvent": []},
"permissions": {"ask": ["Bash(ls:*)"]}, "spinnerTipsEnabled": false}"#,
    )
    .unwrap();
    std::fs::write(
        home.path().join("kaji-home/config.toml"),
        "[permissions]\nallow = [\"Bash(ls:*)\"]\n",
    )
    .unwrap();
    let server = serve([done("done")]).await;
    let mut cmd = kaji(home.path(), work.path(), &server);
    cmd.args(["--trust", "go"]);
    let (code, _, err) = run(cmd).await;
    assert_eq!(code, 0, "the session goes on: {err}");
    let settings = work.path().canonicalize().unwrap().join(".claude");
    let json = format!("{}:3:", settings.join("settings.json").display());
    assert!(
        err.contains(&json) && err.contains("not valid JSON"),
        "{err}"
    );
    let local = settings.join("settings.local.json");
    for key in [
        "key `hooks.Stop[0].hooks[0].command`: the command is empty",
        "key `hooks.NoSuchEvent`",
        "key `spinnerTipsEnabled`",
        "key `permissions.ask`: the rule Bash(ls:*) is also in",
    ] {
        assert!(
            err.contains(&format!("{}:", local.display())) && err.contains(key),
            "{key}: {err}"
        );
    }
}

// The child is detached before the hook's main process exits: `setsid`
// runs in the foreground and its shell starts the child in the new session.
// (A `setsid … &` started in the background may still be in the hook's
// process group when the hook exits, and then the group kill ends it before
// it ever holds the output alone: the flake of 2026-12-02.) The timeout
// only has to cover starting three processes, even on a busy machine.
#[tokio::test]
async fn a_hook_that_detaches_a_child_holding_its_output_ends_at_its_timeout() {
    let (home, work) = home_and_work();
    let pid_file = home.path().join("detached.pid");
    let command = format!(
        "setsid sh -c 'sleep 1000 & echo $! > {}'; echo started",
        pid_file.display()
    );
    let settings = json!({"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": command, "timeout": 2}
    ]}]}});
    std::fs::write(
        home.path().join(".claude/settings.json"),
        settings.to_string(),
    )
    .unwrap();
    let server = serve([done("done")]).await;
    let mut cmd = kaji(home.path(), work.path(), &server);
    cmd.args(["--yolo", "go"]);
    let (code, lines, err) = run(cmd).await;
    assert_eq!(code, 0, "the session goes on: {err}");
    let shown = format!("{lines:?}{err}");
    assert!(shown.contains("timed out after 2 s"), "{shown}");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(is_gone(pid), "the detached child {pid} still runs");
}

#[tokio::test]
async fn a_hooks_continue_false_stops_the_task_with_its_stop_reason() {
    let (home, work) = home_and_work();
    let answer = r#"{"continue": false, "stopReason": "HALT-BY-HOOK"}"#;
    for (event, ran) in [("PreToolUse", false), ("PostToolUse", true)] {
        let settings = json!({"hooks": {event: [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": format!("echo '{answer}'")}
        ]}]}});
        std::fs::write(
            home.path().join(".claude/settings.json"),
            settings.to_string(),
        )
        .unwrap();
        let _ = std::fs::remove_file(work.path().join("made.txt"));
        let server = serve([
            Turn::tool_call("Bash", json!({"command": "touch made.txt"}))
                .and_tool_call("Bash", json!({"command": "touch second.txt"})),
            done("done"),
        ])
        .await;
        let mut cmd = kaji(home.path(), work.path(), &server);
        cmd.args(["--yolo", "go"]);
        let (code, lines, err) = run(cmd).await;
        assert_ne!(code, 0, "{event}: the task is not completed: {err}");
        let last = lines.last().unwrap();
        assert!(last.to_string().contains("HALT-BY-HOOK"), "{event}: {last}");
        assert_eq!(
            server.requests().len(),
            1,
            "{event}: no request after the stop"
        );
        assert_eq!(work.path().join("made.txt").exists(), ran, "{event}");
        assert!(!work.path().join("second.txt").exists(), "{event}");
    }
}
