//! Issue 30 through the real binary against the scripted model server: a
//! Claude Code setup's agents, commands, rule files and `.mcp.json` work
//! unchanged — custom agents are listed in the first request, an agent
//! with a `tools:` list can finish, a command's `!touch X` line (without
//! backticks) does not run while `` !`cmd` `` does, a command's arguments
//! reach the model, a CLAUDE.md `@import` reaches the system prompt, and a
//! bad `.mcp.json` entry leaves the session running.

use std::path::Path;

use crate::common::{Wire, exec_json, run, serve};
use kaji_test_support::{ScriptedModelServer, Turn};
use serde_json::json;
use tokio::process::Command;

fn kaji(home: &Path, work: &Path, server: &ScriptedModelServer) -> Command {
    let mut cmd = exec_json(home, work, server, Wire::Anthropic);
    cmd.args(["--no-checkpoints", "--sandbox", "off", "--yolo"]);
    cmd
}

fn setup() -> (tempfile::TempDir, tempfile::TempDir) {
    let home = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(home.path().join("kaji-home")).expect("mkdir");
    let work = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(work.path().join(".git")).expect("mkdir");
    (home, work)
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn done() -> Turn {
    Turn::tool_call("AttemptCompletion", json!({"result": "done"}))
}

#[tokio::test]
async fn the_first_request_lists_every_custom_agent_and_a_tools_list_agent_finishes() {
    let (home, work) = setup();
    // The provider's own search, which the scripted server runs.
    crate::web_search_cli::configure_native(home.path());
    write(
        work.path(),
        ".claude/agents/review/code-reviewer.md",
        "---\nname: code-reviewer\ndescription: >\n  Reviews code. Use PROACTIVELY\n  after every change.\ntools:\n  - Read\n  - WebSearch\nmodel: sonnet\n---\nYou review code.\n",
    );
    write(
        work.path(),
        ".claude/agents/db-expert.md",
        "---\nname: db-expert\ndescription: \"Knows databases\"\ntools: Read, Grep\n---\nYou know databases.\n",
    );
    write(
        home.path(),
        ".claude/agents/personal.md",
        "---\nname: personal-helper\ndescription: The user's own helper\n---\nHelp.\n",
    );
    let server = serve([
        Turn::tool_call(
            "Agent",
            json!({"description": "review", "prompt": "review a.rs", "subagent_type": "code-reviewer"}),
        ),
        Turn::tool_call("AttemptCompletion", json!({"result": "SUB-AGENT-REPORT"})),
        done(),
    ])
    .await;
    let mut cmd = kaji(home.path(), work.path(), &server);
    cmd.arg("review my code");
    let (code, lines, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    let requests = server.requests();
    let first = requests[0].body["system"].to_string();
    for line in [
        "- general-purpose:",
        "- Explore:",
        "- code-reviewer: Reviews code. Use PROACTIVELY after every change. (Tools: Read, WebSearch)",
        "- db-expert: Knows databases (Tools: Read, Grep)",
        "- personal-helper: The user's own helper (Tools: *)",
    ] {
        assert!(first.contains(line), "{line} missing from {first}");
    }
    // WebSearch is a kaji tool now: no warning names it.
    assert_eq!(err.matches("WebSearch (code-reviewer)").count(), 0, "{err}");
    // The sub-agent has only its tools (Read, WebSearch), and the finishing
    // tool; on Anthropic's wire, with WebSearch allowed and `[web_search]
    // provider = "native"`, the provider's own search (`web_search`) stands
    // in for WebSearch (docs/tools.md).
    let sub_tools: Vec<String> = requests[1].body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        sub_tools,
        ["web_search", "Read", "AttemptCompletion"],
        "{sub_tools:?}"
    );
    let report = lines
        .iter()
        .filter(|l| l["type"] == "tool_result")
        .any(|l| l["output"].to_string().contains("SUB-AGENT-REPORT"));
    assert!(report, "{lines:?}");
}

#[tokio::test]
async fn a_command_runs_only_backtick_shell_and_its_arguments_reach_the_model() {
    let (home, work) = setup();
    write(
        work.path(),
        ".claude/commands/git/ship.md",
        "---\ndescription: Ship it\nallowed-tools:\n  - Bash(touch:*)\n---\nShip the change.\n!touch NOT-RUN\nContext: !`touch RAN`\n",
    );
    let server = serve([done(), done()]).await;
    let mut cmd = kaji(home.path(), work.path(), &server);
    cmd.args(["--trust", "/ship fast please"]);
    let (code, _, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    assert!(work.path().join("RAN").exists(), "{err}");
    assert!(!work.path().join("NOT-RUN").exists(), "{err}");
    let body = server.requests()[0].body["messages"].to_string();
    assert!(body.contains("Ship the change.\\n!touch NOT-RUN"), "{body}");
    assert!(body.contains("ARGUMENTS: fast please"), "{body}");

    // `/dir:name` still works.
    let mut cmd = kaji(home.path(), work.path(), &server);
    cmd.args(["--trust", "/git:ship again"]);
    let (code, _, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    let body = server.requests().last().expect("request").body["messages"].to_string();
    assert!(body.contains("ARGUMENTS: again"), "{body}");
}

#[tokio::test]
async fn a_claude_md_import_reaches_the_system_prompt() {
    let (home, work) = setup();
    write(
        work.path(),
        "CLAUDE.md",
        "Project rules. See @docs/style.md.\n",
    );
    write(work.path(), "docs/style.md", "IMPORTED-STYLE-MARKER\n");
    write(work.path(), "CLAUDE.local.md", "LOCAL-MARKER\n");
    write(
        home.path(),
        ".claude/CLAUDE.md",
        "USER-MARKER @../../outside.md\n",
    );
    let server = serve([done()]).await;
    let mut cmd = kaji(home.path(), work.path(), &server);
    cmd.arg("hello");
    let (code, _, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    let system = server.requests()[0].body["system"].to_string();
    for marker in ["IMPORTED-STYLE-MARKER", "LOCAL-MARKER", "USER-MARKER"] {
        assert!(system.contains(marker), "{marker} missing: {system}");
    }
    assert!(system.contains("imported by"), "{system}");
}

#[tokio::test]
async fn a_bad_mcp_json_entry_is_skipped_and_the_session_goes_on() {
    let (home, work) = setup();
    let config = json!({"mcpServers": {
        "needs-var": {"command": "${KAJI_TEST_UNSET_VAR}/server"},
        "odd": {"type": "carrier-pigeon", "url": "x"},
    }});
    std::fs::write(work.path().join(".mcp.json"), config.to_string()).expect("write");
    let server = serve([done()]).await;
    let mut cmd = kaji(home.path(), work.path(), &server);
    cmd.args(["--trust", "hello"]);
    let (code, _, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("MCP server `needs-var` skipped"), "{err}");
    assert!(err.contains("KAJI_TEST_UNSET_VAR"), "{err}");
    assert!(err.contains("MCP server `odd` skipped"), "{err}");
    assert_eq!(server.requests().len(), 1);
}
