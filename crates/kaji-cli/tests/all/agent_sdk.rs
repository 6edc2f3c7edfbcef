//! The official Claude Agent SDK (Python, installed by `.ci/run` without
//! its bundled CLI) drives the real `kaji` binary against the scripted
//! model server: messages arrive as the SDK's classes, sub-agents' carry
//! `parent_tool_use_id`, `--json-schema`, `--max-budget-usd`, resume.
//!
//! `tests/agent-sdk/drive.py` runs one `query()` and prints each message
//! it received as JSON (its class and fields). Every test also checks that
//! only kaji answered: the scripted server saw every request, each from
//! kaji's HTTP client, and the `init` message names kaji's version.

use std::path::{Path, PathBuf};

use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};

use crate::common::{TEST_KEY, done, kaji, serve};

// Other modules have imported these from here since before `common::sdk`.
pub(crate) use crate::common::sdk::{
    Sdk, of_class, only_kaji_answered, repo_root, require_sdk, result,
};

#[tokio::test]
async fn a_one_shot_query_edits_a_file() {
    let sdk = Sdk::new().with_prices();
    let server = serve([
        Turn::text("Editing.")
            .and_tool_call("Write", json!({"file_path": "b.txt", "content": "beta\n"})),
        Turn::text("Wrote b.txt."),
    ])
    .await;
    let (messages, code) = sdk
        .query(
            &server,
            "write b.txt",
            json!({"permission_mode": "acceptEdits"}),
        )
        .await;
    assert_eq!(code, 0, "{messages:?}");
    only_kaji_answered(&server, &messages, 2);
    assert_eq!(
        std::fs::read_to_string(sdk.work.path().join("b.txt")).unwrap(),
        "beta\n"
    );
    let init = &messages[0]["data"];
    assert_eq!(init["permissionMode"], "acceptEdits");
    assert_eq!(init["model"], "scripted");
    assert!(init["tools"].as_array().unwrap().contains(&json!("Write")));
    let assistant = of_class(&messages, "AssistantMessage");
    let blocks: Vec<&Value> = assistant
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap())
        .collect();
    assert!(
        blocks
            .iter()
            .any(|b| b["class"] == "TextBlock" && b["text"] == "Editing.")
    );
    let call = blocks
        .iter()
        .find(|b| b["class"] == "ToolUseBlock")
        .expect("a ToolUseBlock");
    assert_eq!(call["name"], "Write");
    let user = of_class(&messages, "UserMessage");
    let tool_result = &user[0]["content"][0];
    assert_eq!(tool_result["class"], "ToolResultBlock");
    assert_eq!(tool_result["tool_use_id"], call["id"]);
    assert_eq!(tool_result["is_error"], false);
    let r = result(&messages);
    assert_eq!(r["subtype"], "success");
    assert_eq!(r["is_error"], false);
    assert_eq!(r["num_turns"], 2);
    assert_eq!(r["result"], "Wrote b.txt.");
    assert!(r["total_cost_usd"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r["usage"]["input_tokens"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["session_id"], init["session_id"]);
    assert_eq!(messages.last().unwrap()["class"], "ResultMessage");
}

#[tokio::test]
async fn a_sub_agents_messages_carry_parent_tool_use_id() {
    let sdk = Sdk::new();
    let explore = Script::new([
        Turn::text("Looking.").and_tool_call("Glob", json!({"pattern": "*"})),
        done("nothing here"),
    ]);
    let server = ScriptedModelServer::start(
        Script::new([
            Turn::tool_call(
                "Agent",
                json!({"description": "scan", "prompt": "Scan it", "subagent_type": "Explore"}),
            ),
            Turn::text("The agent found nothing."),
        ])
        .with_agent("You are the Explore sub-agent", explore),
    )
    .await;
    let (messages, code) = sdk.query(&server, "scan", json!({})).await;
    assert_eq!(code, 0, "{messages:?}");
    only_kaji_answered(&server, &messages, 4);
    let assistant = of_class(&messages, "AssistantMessage");
    let agent_call = assistant
        .iter()
        .map(|m| &m["content"][0])
        .find(|b| b["name"] == "Agent")
        .expect("the Agent call");
    let id = agent_call["id"].clone();
    let from_child: Vec<_> = messages
        .iter()
        .filter(|m| m["parent_tool_use_id"] == id)
        .collect();
    assert!(
        from_child
            .iter()
            .any(|m| m["class"] == "AssistantMessage" && m["content"][0]["text"] == "Looking."),
        "{messages:?}"
    );
    assert!(from_child.iter().any(|m| m["class"] == "UserMessage"));
    // The main agent's messages have none.
    assert!(agent_call.is_object());
    let main_final = assistant
        .iter()
        .find(|m| m["content"][0]["text"] == "The agent found nothing.")
        .unwrap();
    assert_eq!(main_final["parent_tool_use_id"], Value::Null);
}

#[tokio::test]
async fn json_schema_returns_structured_output() {
    let sdk = Sdk::new();
    let server = serve([
        Turn::text("The answer is four."),
        Turn::text("{\"answer\": 4}"),
    ])
    .await;
    let schema = json!({"type": "object", "required": ["answer"],
        "properties": {"answer": {"type": "integer"}}});
    let (messages, code) = sdk
        .query(
            &server,
            "what is 2+2?",
            json!({"output_format": {"type": "json_schema", "schema": schema}}),
        )
        .await;
    assert_eq!(code, 0, "{messages:?}");
    // The first answer is not JSON: it goes back once, with the reason.
    only_kaji_answered(&server, &messages, 2);
    let retry = server.requests()[1].body.to_string();
    assert!(retry.contains("does not match the JSON Schema"), "{retry}");
    let r = result(&messages);
    assert_eq!(r["subtype"], "success");
    assert_eq!(r["structured_output"], json!({"answer": 4}));
}

#[tokio::test]
async fn max_budget_usd_stops_a_run() {
    let sdk = Sdk::new().with_prices();
    let call = || Turn::tool_call("Glob", json!({"pattern": "*"}));
    let server = serve([call(), call(), call(), Turn::text("done")]).await;
    // One request costs about a cent (≈10k input tokens at $1/M).
    let (messages, code) = sdk
        .query(&server, "look around", json!({"max_budget_usd": 0.001}))
        .await;
    let r = result(&messages);
    assert_eq!(r["subtype"], "error_max_budget_usd", "{r}");
    assert_eq!(r["is_error"], true);
    // The SDK raises after an error result, as with Claude Code.
    assert_eq!(code, 3, "{messages:?}");
    assert!(
        server.requests().len() < 4,
        "the run went on past its budget"
    );
    only_kaji_answered(&server, &messages, server.requests().len());
}

#[tokio::test]
async fn resume_continues_a_session() {
    let sdk = Sdk::new();
    let server = serve([
        Turn::text("The secret word is noted."),
        Turn::text("It was marmalade."),
        Turn::text("Still marmalade."),
    ])
    .await;
    let (first, code) = sdk
        .query(&server, "remember the word marmalade", json!({}))
        .await;
    assert_eq!(code, 0, "{first:?}");
    let session = result(&first)["session_id"].as_str().unwrap().to_string();
    let (second, code) = sdk
        .query(&server, "what was the word?", json!({"resume": session}))
        .await;
    assert_eq!(code, 0, "{second:?}");
    assert_eq!(result(&second)["session_id"], session.as_str());
    assert_eq!(result(&second)["result"], "It was marmalade.");
    let request = server.requests()[1].body.to_string();
    assert!(
        request.contains("remember the word marmalade"),
        "the resumed request lacks the first prompt: {request}"
    );
    // `continue_conversation` takes the directory's latest session.
    let (third, code) = sdk
        .query(
            &server,
            "and again?",
            json!({"continue_conversation": true}),
        )
        .await;
    assert_eq!(code, 0, "{third:?}");
    assert_eq!(result(&third)["session_id"], session.as_str());
    assert_eq!(result(&third)["result"], "Still marmalade.");
    only_kaji_answered(&server, &third, 3);
}

#[tokio::test]
async fn max_turns_ends_with_error_max_turns() {
    let sdk = Sdk::new();
    let call = || Turn::tool_call("Glob", json!({"pattern": "*"}));
    let server = serve([call(), call(), call()]).await;
    let options = json!({"max_turns": 1, "fallback_model": "other", "settings": "{\"a\": 1}"});
    let (messages, _) = sdk.query(&server, "look around", options).await;
    // Flags kaji does not act on are named in `init`, never dropped.
    let warnings = messages[0]["data"]["kaji_warnings"].to_string();
    assert!(warnings.contains("--fallback-model"), "{warnings}");
    assert!(warnings.contains("--settings"), "{warnings}");
    let r = result(&messages);
    assert_eq!(r["subtype"], "error_max_turns", "{r}");
    assert_eq!(r["num_turns"], 1);
    only_kaji_answered(&server, &messages, 1);
}

#[tokio::test]
async fn allowed_and_disallowed_tools_are_rules() {
    let sdk = Sdk::new();
    let server = serve([
        Turn::tool_call("Write", json!({"file_path": "a.txt", "content": "a\n"}))
            .and_tool_call("Glob", json!({"pattern": "*"})),
        Turn::text("done"),
    ])
    .await;
    let options = json!({"allowed_tools": ["Read", "Write"], "disallowed_tools": ["Glob"]});
    let (messages, code) = sdk.query(&server, "write a", options).await;
    assert_eq!(code, 0, "{messages:?}");
    only_kaji_answered(&server, &messages, 2);
    // Allowed in the default mode, where a write would otherwise be denied.
    assert!(sdk.work.path().join("a.txt").exists(), "{messages:?}");
    let results: Vec<&Value> = of_class(&messages, "UserMessage")
        .into_iter()
        .map(|m| &m["content"][0])
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0]["is_error"], false, "{results:?}");
    assert_eq!(
        results[1]["is_error"], true,
        "Glob was not denied: {results:?}"
    );
}

/// The installed Python SDK passes no flag missing from the committed list
/// (and so from docs/sdk.md's table, which a unit test checks).
#[test]
fn the_python_sdk_passes_only_listed_flags() {
    require_sdk();
    let mut python = std::process::Command::new("python3");
    crate::common::clean_env(&mut python, &std::env::temp_dir());
    let out = python
        .args([
            "-c",
            "import importlib.util; print(importlib.util.find_spec('claude_agent_sdk').submodule_search_locations[0])",
        ])
        .output()
        .unwrap();
    let dir = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let source =
        std::fs::read_to_string(dir.join("_internal/transport/subprocess_cli.py")).unwrap();
    let listed =
        std::fs::read_to_string(repo_root().join("tests/agent-sdk/sdk-flags.tsv")).unwrap();
    let listed: Vec<&str> = listed
        .lines()
        .filter(|l| l.starts_with("--"))
        .filter_map(|l| l.split('\t').next())
        .collect();
    let re = regex::Regex::new(r#"f?"(--[A-Za-z][A-Za-z-]*)[="]"#).unwrap();
    let mut found = 0;
    for flag in re.captures_iter(&source).map(|c| c[1].to_string()) {
        assert!(
            listed.contains(&flag.as_str()),
            "the Python SDK passes {flag}, which tests/agent-sdk/sdk-flags.tsv and docs/sdk.md lack"
        );
        found += 1;
    }
    assert!(found >= 30, "only {found} flags found in {}", dir.display());
}

/// What varies from run to run, replaced: uuids' salt, the session id, the
/// directories, durations, the pid, kaji's version.
fn normalise(line: &str, work: &Path, session: &str) -> String {
    let uuid = regex::Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-4000-8000-[0-9a-f]{12}").unwrap();
    let mut v: Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    for key in ["duration_ms", "duration_api_ms"] {
        if v.get(key).is_some() {
            v[key] = json!(0);
        }
    }
    if v["response"]["response"].get("pid").is_some() {
        v["response"]["response"]["pid"] = json!(0);
    }
    if v.get("kaji_version").is_some() {
        v["kaji_version"] = json!("VERSION");
    }
    let text = v.to_string();
    let text = uuid.replace_all(&text, "UUID");
    let work = work.canonicalize().unwrap();
    text.replace(session, "SESSION")
        .replace(&work.to_string_lossy().to_string(), "WORK")
}

/// `--input-format stream-json --output-format stream-json
/// --include-partial-messages` through the real binary, byte for byte
/// against `tests/golden/sdk_stream.jsonl` (`KAJI_BLESS=1` rewrites it).
#[tokio::test]
async fn stream_json_golden() {
    use tokio::io::AsyncWriteExt;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "alpha\n").unwrap();
    let server = serve([
        Turn::text("Reading.").and_tool_call("Read", json!({"file_path": "a.txt"})),
        Turn::text("It says alpha."),
    ])
    .await;
    let mut child = kaji(home.path())
        .env("ANTHROPIC_API_KEY", TEST_KEY)
        .env("ANTHROPIC_BASE_URL", server.anthropic_base_url())
        .current_dir(work.path())
        .args([
            "--output-format",
            "stream-json",
            "--verbose",
            "--system-prompt",
            "",
        ])
        .args(["--model", "scripted", "--include-partial-messages"])
        .args(["--input-format", "stream-json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = [
        json!({"type": "control_request", "request_id": "req_1", "request": {"subtype": "initialize", "hooks": null}}),
        json!({"type": "control_request", "request_id": "req_2", "request": {"subtype": "rewind_files"}}),
        json!({"type": "user", "session_id": "", "message": {"role": "user", "content": "what does a.txt say?"}, "parent_tool_use_id": null}),
    ];
    for line in input {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let session = stdout
        .lines()
        .find_map(|l| {
            let v: Value = serde_json::from_str(l).ok()?;
            v["session_id"].as_str().map(str::to_string)
        })
        .expect("a session id");
    let got = merge_deltas(
        stdout
            .lines()
            .map(|l| normalise(l, work.path(), &session))
            .collect(),
    );
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/sdk_stream.jsonl");
    if std::env::var("KAJI_BLESS").is_ok() {
        std::fs::write(&golden, got.join("\n") + "\n").unwrap();
        return;
    }
    let want = std::fs::read_to_string(&golden).unwrap_or_default();
    let want: Vec<&str> = want.lines().collect();
    for (i, (g, w)) in got.iter().zip(want.iter()).enumerate() {
        assert_eq!(g, w, "line {} of {}", i + 1, golden.display());
    }
    assert_eq!(got.len(), want.len(), "lines: got {got:#?}");
}

/// Consecutive text deltas of one block as one: how the model's reply is
/// cut into chunks is the stream's business, not the protocol's.
fn merge_deltas(lines: Vec<String>) -> Vec<String> {
    let mut out: Vec<Value> = Vec::new();
    for line in lines {
        let v: Value = serde_json::from_str(&line).unwrap();
        let is_delta = |v: &Value| v["event"]["type"] == "content_block_delta";
        if let Some(last) = out.last_mut()
            && is_delta(last)
            && is_delta(&v)
            && last["event"]["index"] == v["event"]["index"]
        {
            let more = v["event"]["delta"]["text"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let text = last["event"]["delta"]["text"]
                .as_str()
                .unwrap_or("")
                .to_string();
            last["event"]["delta"]["text"] = json!(text + &more);
            continue;
        }
        out.push(v);
    }
    out.iter().map(Value::to_string).collect()
}
