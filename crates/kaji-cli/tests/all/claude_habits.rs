//! Issue 17 through the real binary against the scripted model server:
//! the `reasoning` setting and `--reasoning` on all three wires (thinking
//! with its signature goes back unchanged, also after `--resume`), a
//! project's `.mcp.json` (used when trusted, ignored with a notice when
//! not), Agent Skills loaded on demand, and PreToolUse hooks answering in
//! Claude Code's JSON style.

use std::path::Path;

use crate::common::{self, Wire, done, exec_json, home_and_work, run, serve, tool_results};
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};
use tokio::process::Command;

fn kaji(home: &Path, work: &Path, server: &ScriptedModelServer, wire: Wire) -> Command {
    let mut cmd = exec_json(home, work, server, wire);
    cmd.args(["--no-checkpoints", "--sandbox", "off"]);
    cmd
}

fn thinking_script() -> Script {
    Script::new([
        Turn::reasoning("I should read a.txt.")
            .and_tool_call("Read", json!({"file_path": "a.txt"})),
        done("alpha"),
        done("still alpha"),
    ])
}

#[tokio::test]
async fn the_reasoning_setting_thinks_on_anthropic_and_the_signature_survives_resume() {
    let (home, work) = home_and_work();
    std::fs::write(
        home.path().join("kaji-home/config.toml"),
        "reasoning = \"medium\"\n",
    )
    .unwrap();
    let server = ScriptedModelServer::start(thinking_script()).await;
    let mut first = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    first.args(["--yolo", "what is in a.txt?"]);
    let (code, lines, err) = run(first).await;
    assert_eq!(code, 0, "{err}");
    let id = lines[0]["session_id"].as_str().unwrap().to_string();
    let mut second = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    second.args(["--yolo", "--resume", &id, "and now?"]);
    let (code, _, err) = run(second).await;
    assert_eq!(code, 0, "{err}");

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    for request in &requests {
        assert_eq!(
            request.body["thinking"],
            json!({"type": "enabled", "budget_tokens": 10000})
        );
        assert_eq!(
            request.header("anthropic-beta"),
            Some("interleaved-thinking-2025-05-14")
        );
    }
    // The next round and the resumed session send the thinking back as it
    // came, signature and all.
    for request in &requests[1..] {
        assert_eq!(
            request.body["messages"][1]["content"][0],
            json!({"type": "thinking", "thinking": "I should read a.txt.", "signature": "scripted-signature-0-0"}),
            "{:#}",
            request.body
        );
    }
}

#[tokio::test]
async fn reasoning_flag_reaches_chat_completions_as_reasoning_effort() {
    let (home, work) = home_and_work();
    let server = ScriptedModelServer::start(thinking_script()).await;
    let mut cmd = kaji(home.path(), work.path(), &server, Wire::OpenAi);
    cmd.args(["--yolo", "--reasoning", "high", "what is in a.txt?"]);
    let (code, _, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    for request in server.requests() {
        assert_eq!(request.body["reasoning_effort"], "high", "{}", request.body);
    }
}

#[tokio::test]
async fn responses_end_to_end_with_reasoning_carried_between_rounds_and_resume() {
    let (home, work) = home_and_work();
    // The flag wins over the setting.
    std::fs::write(
        home.path().join("kaji-home/config.toml"),
        "reasoning = \"medium\"\n",
    )
    .unwrap();
    let server = ScriptedModelServer::start(thinking_script()).await;
    let mut first = kaji(home.path(), work.path(), &server, Wire::Responses);
    first.args(["--yolo", "--reasoning", "low", "what is in a.txt?"]);
    let (code, lines, err) = run(first).await;
    assert_eq!(code, 0, "{err}");
    let read = &tool_results(&lines)[0];
    assert_eq!(read["is_error"], false, "{read}");
    assert!(read["output"].as_str().unwrap().contains("alpha"), "{read}");
    let id = lines[0]["session_id"].as_str().unwrap().to_string();
    let mut second = kaji(home.path(), work.path(), &server, Wire::Responses);
    second.args(["--yolo", "--reasoning", "low", "--resume", &id, "and now?"]);
    let (code, _, err) = run(second).await;
    assert_eq!(code, 0, "{err}");

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        requests[0].path.ends_with("/responses"),
        "{}",
        requests[0].path
    );
    for request in &requests {
        assert_eq!(request.body["reasoning"]["effort"], "low");
    }
    for request in &requests[1..] {
        let input = request.body["input"].as_array().unwrap();
        assert_eq!(
            input[1],
            json!({"type": "reasoning", "id": "rs_scripted_0_0",
                   "summary": [{"type": "summary_text", "text": "I should read a.txt."}],
                   "encrypted_content": "scripted-encrypted-0-0"}),
            "{:#}",
            request.body
        );
        assert_eq!(input[2]["type"], "function_call");
    }
}

#[tokio::test]
async fn a_bad_reasoning_level_is_a_usage_error_naming_the_flag() {
    let (home, work) = home_and_work();
    let server = ScriptedModelServer::start(thinking_script()).await;
    let mut cmd = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    cmd.args(["--reasoning", "loud", "x"]);
    let (code, _, err) = run(cmd).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--reasoning"), "{err}");
    assert!(err.contains("off"), "{err}");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn provider_help_lists_openai_responses() {
    let home = tempfile::tempdir().unwrap();
    let out = common::kaji(home.path())
        .args(["exec", "--help"])
        .output()
        .await
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("openai-responses"), "{help}");
    assert!(help.contains("--reasoning"), "{help}");
}

fn write_mcp_json(work: &Path) {
    let bin = kaji_test_support::fixtures::mcp_server_bin("mcp-server-everything");
    let config = json!({"mcpServers": {"everything": {"command": bin, "args": ["stdio"]}}});
    std::fs::write(work.join(".mcp.json"), config.to_string()).unwrap();
}

fn echo_script() -> Script {
    Script::new([
        Turn::tool_call(
            "mcp__everything__echo",
            json!({"message": "hello over .mcp.json"}),
        ),
        done("echoed"),
    ])
}

#[tokio::test]
async fn a_trusted_projects_mcp_json_server_is_called_end_to_end() {
    let (home, work) = home_and_work();
    write_mcp_json(work.path());
    let server = ScriptedModelServer::start(echo_script()).await;
    let mut cmd = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    cmd.args(["--yolo", "--trust", "echo something"]);
    let (code, lines, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    let tools = server.requests()[0].body["tools"].to_string();
    assert!(tools.contains("mcp__everything__echo"), "{tools}");
    let result = &tool_results(&lines)[0];
    assert_eq!(result["is_error"], false, "{result}");
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("hello over .mcp.json"),
        "{result}"
    );
}

#[tokio::test]
async fn an_untrusted_projects_mcp_json_is_ignored_with_a_notice() {
    let (home, work) = home_and_work();
    write_mcp_json(work.path());
    let server = ScriptedModelServer::start(echo_script()).await;
    let mut cmd = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    cmd.args(["--yolo", "echo something"]);
    let (_, lines, err) = run(cmd).await;
    assert!(err.contains("not trusted"), "{err}");
    assert!(err.contains("mcpServers in "), "{err}");
    assert!(err.contains(".mcp.json"), "{err}");
    let tools = server.requests()[0].body["tools"].to_string();
    assert!(!tools.contains("mcp__everything"), "{tools}");
    assert_eq!(tool_results(&lines)[0]["is_error"], true);
}

fn write_skill(root: &Path, folder: &str, front: &str, body: &str) {
    let dir = root.join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), format!("---\n{front}\n---\n{body}")).unwrap();
}

#[tokio::test]
async fn a_skill_is_listed_in_the_system_prompt_and_loaded_on_demand() {
    let (home, work) = home_and_work();
    write_skill(
        &work.path().join(".claude/skills"),
        "release",
        "name: release\ndescription: Cut a release of this project",
        "RELEASE-STEPS-MARKER: bump, tag, push.\n",
    );
    write_skill(
        &home.path().join(".claude/skills"),
        "notes",
        "name: notes\ndescription: \"Write release notes\"",
        "Notes body.\n",
    );
    let server = serve([
        Turn::tool_call("Skill", json!({"skill": "release"})),
        done("released"),
    ])
    .await;
    let mut cmd = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    cmd.arg("cut a release");
    let (code, lines, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    let first = &server.requests()[0].body;
    let system = first["system"].to_string();
    assert!(
        system.contains("- release: Cut a release of this project"),
        "{system}"
    );
    assert!(system.contains("- notes: Write release notes"), "{system}");
    assert!(first["tools"].to_string().contains("\"Skill\""));
    let result = &tool_results(&lines)[0];
    assert_eq!(result["is_error"], false, "{result}");
    let output = result["output"].as_str().unwrap();
    assert!(output.contains("RELEASE-STEPS-MARKER"), "{output}");
    assert!(!output.contains("description:"), "{output}");
}

/// A PreToolUse hook in Claude Code's style: it allows `touch` (with
/// context), denies `rm`, asks about secret.txt, blocks with exit 2, and
/// logs every payload.
fn write_guard(home: &Path) -> std::path::PathBuf {
    let log = home.join("payloads.jsonl");
    let script = home.join("guard.sh");
    std::fs::write(
        &script,
        format!(
            r#"input=$(cat)
printf '%s\n' "$input" >> '{log}'
case "$input" in
  *PostToolUse*) exit 0 ;;
  *rm-me*) echo '{{"hookSpecificOutput": {{"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "NO-RM-HERE"}}}}' ;;
  *exit-two*) echo 'EXIT-TWO-REASON' >&2; exit 2 ;;
  *touch*) echo '{{"hookSpecificOutput": {{"hookEventName": "PreToolUse", "permissionDecision": "allow", "additionalContext": "HOOK-CONTEXT-MARKER"}}}}' ;;
  *secret.txt*) echo '{{"hookSpecificOutput": {{"hookEventName": "PreToolUse", "permissionDecision": "ask"}}}}' ;;
esac
"#,
            log = log.display()
        ),
    )
    .unwrap();
    std::fs::write(
        home.join("kaji-home/config.toml"),
        format!(
            "[[hooks.PreToolUse]]\nmatcher = \"Bash|Read\"\ncommand = \"sh '{0}'\"\n\n\
             [[hooks.PostToolUse]]\nmatcher = \"Bash\"\ncommand = \"sh '{0}'\"\n",
            script.display()
        ),
    )
    .unwrap();
    log
}

#[tokio::test]
async fn claude_code_json_hooks_allow_deny_ask_and_add_context() {
    let (home, work) = home_and_work();
    std::fs::write(work.path().join("secret.txt"), "s3cret\n").unwrap();
    let log = write_guard(home.path());
    let bash = |command: &str| Turn::tool_call("Bash", json!({"command": command}));
    let server = serve([
        bash("touch allowed.txt"),
        bash("rm -f rm-me.txt"),
        bash("touch blocked.txt"),
        Turn::tool_call("Read", json!({"file_path": "secret.txt"})),
        bash("true exit-two"),
        done("done"),
    ])
    .await;
    // Default mode, headless: every ask is denied, so only the hook's
    // allow lets the first command run.
    let mut cmd = kaji(home.path(), work.path(), &server, Wire::Anthropic);
    cmd.args([
        "--deny",
        "Bash(touch blocked.txt)",
        "--max-mistakes",
        "9",
        "go",
    ]);
    let (code, lines, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    let results = tool_results(&lines);
    let output = |i: usize| results[i]["output"].as_str().unwrap().to_string();

    assert_eq!(results[0]["is_error"], false, "{}", results[0]);
    assert!(work.path().join("allowed.txt").exists());
    assert!(output(0).contains("HOOK-CONTEXT-MARKER"), "{}", output(0));

    assert_eq!(results[1]["is_error"], true);
    assert!(output(1).contains("NO-RM-HERE"), "{}", output(1));

    // An allow never overrides a deny rule.
    assert_eq!(results[2]["is_error"], true);
    assert!(output(2).contains("denied"), "{}", output(2));
    assert!(!work.path().join("blocked.txt").exists());

    // An ask makes even a read ask (and exec denies asks).
    assert_eq!(results[3]["is_error"], true, "{}", results[3]);
    assert!(!output(3).contains("s3cret"), "{}", output(3));

    assert_eq!(results[4]["is_error"], true);
    assert!(output(4).contains("EXIT-TWO-REASON"), "{}", output(4));

    // Claude Code's payload fields.
    let payloads: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let session_id = lines[0]["session_id"].as_str().unwrap();
    let pre = &payloads[0];
    assert_eq!(pre["hook_event_name"], "PreToolUse");
    assert_eq!(pre["session_id"], session_id);
    assert_eq!(pre["tool_name"], "Bash");
    assert_eq!(pre["tool_input"], json!({"command": "touch allowed.txt"}));
    assert_eq!(
        pre["cwd"],
        work.path().canonicalize().unwrap().to_str().unwrap()
    );
    assert!(
        Path::new(pre["transcript_path"].as_str().unwrap()).is_file(),
        "{pre}"
    );
    let post = &payloads[1];
    assert_eq!(post["hook_event_name"], "PostToolUse");
    assert_eq!(post["tool_name"], "Bash");
    assert_eq!(post["session_id"], session_id);
    assert!(post["tool_response"].is_object(), "{post}");
}
