//! The control protocol (#34), driven by the official SDKs against the
//! real binary and the scripted model server: `can_use_tool`, SDK MCP
//! servers (`mcp_message`), agents from `initialize`, a multi-turn
//! `ClaudeSDKClient` with `interrupt` and `set_permission_mode`, and the
//! TypeScript SDK (`tests/agent-sdk/drive.mjs`).
//!
//! `tests/agent-sdk/client.py` and `drive.mjs` print each message and
//! each callback the SDK made (class `Callback`) as JSON lines.

use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};
use tokio::process::Command;

use super::agent_sdk::{Sdk, of_class, only_kaji_answered, repo_root, result};

pub(crate) fn python(scenario: &str) -> Command {
    let mut c = Command::new("python3");
    c.arg(repo_root().join("tests/agent-sdk/client.py"))
        .arg(scenario);
    c
}

/// Fails with how to install the TypeScript SDK when it is missing.
pub(crate) fn node(scenario: &str) -> Command {
    let sdk = repo_root().join("tests/agent-sdk/node_modules/@anthropic-ai/claude-agent-sdk");
    assert!(
        sdk.is_dir(),
        "the Claude Agent SDK for TypeScript is not installed: run \
         `npm ci --omit=optional --prefix tests/agent-sdk` (see .ci/run)"
    );
    let mut c = Command::new("node");
    c.arg(repo_root().join("tests/agent-sdk/drive.mjs"))
        .arg(scenario);
    c
}

pub(crate) fn callbacks<'a>(messages: &'a [Value], kind: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .filter(|m| m["class"] == "Callback" && m["kind"] == kind)
        .collect()
}

/// The text of every tool result block the SDK received.
pub(crate) fn tool_results(messages: &[Value], class: &str) -> Vec<String> {
    of_class(messages, class)
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["class"] == "ToolResultBlock" || b["type"] == "tool_result")
        .map(|b| b["content"].to_string())
        .collect()
}

fn permission_script() -> Script {
    Script::new([
        Turn::tool_call(
            "Edit",
            json!({"file_path": "a.txt", "old_string": "alpha", "new_string": "beta"}),
        ),
        Turn::tool_call("Bash", json!({"command": "touch ran.txt"})),
        Turn::text("Done."),
    ])
}

/// Checks a run of [`permission_script`]: the Edit ran with the program's
/// input, the Bash never ran, and the model saw the program's message.
fn check_permissions(sdk: &Sdk, server: &ScriptedModelServer, messages: &[Value], user: &str) {
    let asked = callbacks(messages, "can_use_tool");
    assert_eq!(asked.len(), 2, "{messages:#?}");
    assert_eq!(asked[0]["tool"], "Edit");
    assert_eq!(asked[0]["input"]["new_string"], "beta");
    assert!(
        asked[0]["tool_use_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "{:?}",
        asked[0]
    );
    assert_eq!(asked[1]["tool"], "Bash");
    assert_eq!(
        std::fs::read_to_string(sdk.work.path().join("a.txt")).unwrap(),
        "gamma\n",
        "the Edit ran with the program's changed input"
    );
    assert!(
        !sdk.work.path().join("ran.txt").exists(),
        "the denied Bash must not run"
    );
    let last = server.requests().last().unwrap().body.to_string();
    assert!(last.contains("no shell for you"), "{last}");
    let results = tool_results(messages, user);
    assert!(
        results.iter().any(|r| r.contains("no shell for you")),
        "{results:?}"
    );
    assert_eq!(result(messages)["subtype"], "success", "{messages:#?}");
}

#[tokio::test]
async fn can_use_tool_edits_an_input_and_denies_a_command() {
    let sdk = Sdk::new();
    std::fs::write(sdk.work.path().join("a.txt"), "alpha\n").unwrap();
    let server = ScriptedModelServer::start(permission_script()).await;
    // Without the sandbox every command that writes asks.
    let (messages, code) = sdk
        .drive(
            python("permissions"),
            &server,
            "edit a.txt",
            json!({"extra_args": {"sandbox": "off"}}),
        )
        .await;
    assert_eq!(code, 0, "{messages:#?}");
    only_kaji_answered(&server, &messages, 3);
    check_permissions(&sdk, &server, &messages, "UserMessage");
}

#[tokio::test]
async fn an_sdk_mcp_server_tool_is_called_by_the_model() {
    let sdk = Sdk::new();
    let server = ScriptedModelServer::start(Script::new([
        Turn::tool_call("mcp__calc__add", json!({"a": 2, "b": 3})),
        Turn::text("It is 5."),
    ]))
    .await;
    let (messages, code) = sdk
        .drive(python("mcp"), &server, "add 2 and 3", json!({}))
        .await;
    assert_eq!(code, 0, "{messages:#?}");
    only_kaji_answered(&server, &messages, 2);
    let init = &messages[0]["data"];
    assert!(
        init["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("mcp__calc__add")),
        "{init}"
    );
    let called = callbacks(&messages, "mcp_tool");
    assert_eq!(called.len(), 1, "{messages:#?}");
    assert_eq!(called[0]["args"], json!({"a": 2, "b": 3}));
    let second = server.requests()[1].body.to_string();
    assert!(
        second.contains("\"5\"") || second.contains(":\"5"),
        "{second}"
    );
    assert_eq!(result(&messages)["result"], "It is 5.");
}

#[tokio::test]
async fn an_agent_defined_in_the_options_runs_through_the_agent_tool() {
    let sdk = Sdk::new();
    let reviewer = Script::new([Turn::tool_call(
        "AttemptCompletion",
        json!({"result": "looks fine"}),
    )]);
    let server = ScriptedModelServer::start(
        Script::new([
            Turn::tool_call(
                "Agent",
                json!({"description": "review", "prompt": "Review it", "subagent_type": "reviewer"}),
            ),
            Turn::text("The reviewer is happy."),
        ])
        .with_agent("You are the reviewer sub-agent of this program.", reviewer),
    )
    .await;
    let (messages, code) = sdk
        .drive(python("agents"), &server, "review", json!({}))
        .await;
    assert_eq!(code, 0, "{messages:#?}");
    only_kaji_answered(&server, &messages, 3);
    let init = &messages[0]["data"];
    assert!(
        init["agents"]
            .as_array()
            .unwrap()
            .contains(&json!("reviewer")),
        "{init}"
    );
    // The model is offered the program's agent like a file-defined one.
    let first = server.requests()[0].body.to_string();
    assert!(first.contains("Reviews code for mistakes."), "{first}");
    let results = tool_results(&messages, "UserMessage");
    assert!(
        results.iter().any(|r| r.contains("looks fine")),
        "{results:?}"
    );
    assert_eq!(result(&messages)["result"], "The reviewer is happy.");
}

#[tokio::test]
async fn a_multi_turn_client_interrupts_and_changes_the_permission_mode_and_model() {
    let sdk = Sdk::new();
    let server = ScriptedModelServer::start(Script::new([
        Turn::text("Thinking about it").and_hold(),
        Turn::text("Writing.")
            .and_tool_call("Write", json!({"file_path": "c.txt", "content": "c\n"})),
        Turn::text("Wrote c.txt."),
    ]))
    .await;
    let (messages, code) = sdk.drive(python("client"), &server, "", json!({})).await;
    assert_eq!(code, 0, "{messages:#?}");
    assert_eq!(
        callbacks(&messages, "interrupted").len(),
        1,
        "{messages:#?}"
    );
    let results: Vec<&Value> = of_class(&messages, "ResultMessage");
    assert_eq!(results.len(), 2, "{messages:#?}");
    assert_eq!(results[0]["subtype"], "error_during_execution");
    assert_eq!(callbacks(&messages, "mode_set").len(), 1);
    assert!(callbacks(&messages, "mcp_status")[0]["status"]["mcpServers"].is_array());
    // Without acceptEdits the Write would have been denied (nobody
    // answers asks here).
    assert_eq!(results[1]["subtype"], "success", "{messages:#?}");
    assert_eq!(
        std::fs::read_to_string(sdk.work.path().join("c.txt")).unwrap(),
        "c\n"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].body["model"], "scripted");
    // set_model applies from the next prompt on.
    assert_eq!(requests[1].body["model"], "scripted-2");
    assert_eq!(requests[2].body["model"], "scripted-2");
}

#[tokio::test]
async fn typescript_query_edits_a_file() {
    let sdk = Sdk::new();
    let server = ScriptedModelServer::start(Script::new([
        Turn::text("Editing.")
            .and_tool_call("Write", json!({"file_path": "b.txt", "content": "beta\n"})),
        Turn::text("Wrote b.txt."),
    ]))
    .await;
    let (messages, code) = sdk
        .drive(
            node("query"),
            &server,
            "write b.txt",
            json!({"permissionMode": "acceptEdits"}),
        )
        .await;
    assert_eq!(code, 0, "{messages:#?}");
    only_kaji_answered(&server, &messages, 2);
    assert_eq!(
        std::fs::read_to_string(sdk.work.path().join("b.txt")).unwrap(),
        "beta\n"
    );
    let r = result(&messages);
    assert_eq!(r["subtype"], "success");
    assert_eq!(r["result"], "Wrote b.txt.");
    assert_eq!(r["num_turns"], 2);
}

#[tokio::test]
async fn typescript_can_use_tool_edits_an_input_and_denies_a_command() {
    let sdk = Sdk::new();
    std::fs::write(sdk.work.path().join("a.txt"), "alpha\n").unwrap();
    let server = ScriptedModelServer::start(permission_script()).await;
    let (messages, code) = sdk
        .drive(
            node("permissions"),
            &server,
            "edit a.txt",
            json!({"extraArgs": {"sandbox": "off"}}),
        )
        .await;
    assert_eq!(code, 0, "{messages:#?}");
    only_kaji_answered(&server, &messages, 3);
    check_permissions(&sdk, &server, &messages, "UserMessage");
}

#[tokio::test]
async fn typescript_sdk_mcp_server_tool_is_called_by_the_model() {
    let sdk = Sdk::new();
    let server = ScriptedModelServer::start(Script::new([
        Turn::tool_call("mcp__calc__add", json!({"a": 2, "b": 3})),
        Turn::text("It is 5."),
    ]))
    .await;
    let (messages, code) = sdk
        .drive(node("mcp"), &server, "add 2 and 3", json!({}))
        .await;
    assert_eq!(code, 0, "{messages:#?}");
    only_kaji_answered(&server, &messages, 2);
    let called = callbacks(&messages, "mcp_tool");
    assert_eq!(called.len(), 1, "{messages:#?}");
    assert_eq!(called[0]["args"], json!({"a": 2, "b": 3}));
    assert_eq!(result(&messages)["result"], "It is 5.");
}

/// The system prompt of the scripted server's first request.
fn first_system(server: &ScriptedModelServer) -> String {
    let system = &server.requests()[0].body["system"];
    match system.as_array() {
        Some(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        None => system.as_str().unwrap_or_default().to_string(),
    }
}

#[tokio::test]
async fn system_prompt_options_reach_the_model() {
    let replaced = Sdk::new();
    let server = ScriptedModelServer::start(Script::new([Turn::text("ok")])).await;
    let mut driver = Command::new("python3");
    driver.arg(repo_root().join("tests/agent-sdk/drive.py"));
    let (messages, code) = replaced
        .drive(
            driver,
            &server,
            "hi",
            json!({"system_prompt": "You are the test calculator."}),
        )
        .await;
    assert_eq!(code, 0, "{messages:#?}");
    let system = first_system(&server);
    assert!(system.contains("You are the test calculator."), "{system}");
    assert!(!system.contains("You are kaji"), "{system}");
    // kaji's environment and agent sections stay.
    assert!(system.contains("Working directory"), "{system}");

    let appended = Sdk::new();
    let server = ScriptedModelServer::start(Script::new([Turn::text("ok")])).await;
    let mut driver = Command::new("python3");
    driver.arg(repo_root().join("tests/agent-sdk/drive.py"));
    let (messages, code) = appended
        .drive(
            driver,
            &server,
            "hi",
            json!({"system_prompt": {"type": "preset", "preset": "claude_code", "append": "Always answer in French."}}),
        )
        .await;
    assert_eq!(code, 0, "{messages:#?}");
    let system = first_system(&server);
    assert!(system.contains("You are kaji"), "{system}");
    assert!(system.ends_with("Always answer in French."), "{system}");

    // The TypeScript SDK sends its system prompt in `initialize`.
    let ts = Sdk::new();
    let server = ScriptedModelServer::start(Script::new([Turn::text("ok")])).await;
    let (messages, code) = ts
        .drive(
            node("query"),
            &server,
            "hi",
            json!({"systemPrompt": "You are the TypeScript calculator."}),
        )
        .await;
    assert_eq!(code, 0, "{messages:#?}");
    let system = first_system(&server);
    assert!(
        system.contains("You are the TypeScript calculator."),
        "{system}"
    );
    assert!(!system.contains("You are kaji"), "{system}");
}

/// kaji run by hand over the control protocol, as the SDKs run it.
struct Raw {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    seen: Vec<Value>,
}

impl Raw {
    fn start(sdk: &Sdk, server: &ScriptedModelServer, env: &[(&str, &str)]) -> Self {
        use tokio::io::AsyncBufReadExt;
        // The clean environment of every test's kaji: HOME = the SDK's
        // home, KAJI_HOME = HOME/kaji-home.
        let mut cmd = crate::common::kaji(sdk.home.path());
        cmd.args([
            "--output-format",
            "stream-json",
            "--input-format",
            "stream-json",
            "--verbose",
            "--permission-prompt-tool",
            "stdio",
            "--sandbox",
            "off",
            "--model",
            "scripted",
        ])
        .current_dir(sdk.work.path())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", server.anthropic_base_url())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("kaji starts");
        let stdin = child.stdin.take().unwrap();
        let lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    async fn send(&mut self, value: Value) {
        use tokio::io::AsyncWriteExt;
        self.stdin
            .write_all(format!("{value}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
    }

    async fn request(&mut self, id: &str, request: Value) {
        self.send(json!({"type": "control_request", "request_id": id, "request": request}))
            .await;
    }

    /// Reads messages until one matches; panics at the end of output.
    async fn until(&mut self, what: impl Fn(&Value) -> bool) -> Value {
        loop {
            let line = self
                .lines
                .next_line()
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("output ended; seen: {:#?}", self.seen));
            let value: Value = serde_json::from_str(&line).unwrap();
            self.seen.push(value.clone());
            if what(&value) {
                return value;
            }
        }
    }

    async fn response(&mut self, id: &str) -> Value {
        self.until(|m| m["type"] == "control_response" && m["response"]["request_id"] == id)
            .await["response"]
            .clone()
    }

    async fn initialize(&mut self) {
        self.request("init", json!({"subtype": "initialize", "hooks": null}))
            .await;
        assert_eq!(self.response("init").await["subtype"], "success");
    }

    async fn prompt(&mut self, text: &str) {
        self.send(json!({"type": "user", "message": {"role": "user", "content": text}}))
            .await;
    }

    async fn can_use_tool(&mut self) -> Value {
        self.until(|m| m["type"] == "control_request" && m["request"]["subtype"] == "can_use_tool")
            .await
    }

    async fn finish(mut self) -> i32 {
        drop(self.stdin);
        while let Ok(Some(_)) = self.lines.next_line().await {}
        self.child.wait().await.unwrap().code().unwrap_or(-1)
    }
}

#[tokio::test]
async fn an_unknown_request_gets_an_error_and_an_interrupt_ends_an_unanswered_ask() {
    let sdk = Sdk::new();
    let server = ScriptedModelServer::start(Script::new([
        Turn::tool_call("Bash", json!({"command": "touch x.txt"})),
        Turn::text("unused"),
    ]))
    .await;
    let mut kaji = Raw::start(&sdk, &server, &[]);
    kaji.initialize().await;
    kaji.request("odd", json!({"subtype": "frobnicate"})).await;
    let odd = kaji.response("odd").await;
    assert_eq!(odd["subtype"], "error");
    assert!(
        odd["error"].as_str().unwrap().contains("frobnicate"),
        "{odd}"
    );
    kaji.request(
        "stop",
        json!({"subtype": "stop_task", "task_id": "no-such-task"}),
    )
    .await;
    let stop = kaji.response("stop").await;
    assert_eq!(stop["subtype"], "error", "{stop}");
    assert!(
        stop["error"].as_str().unwrap().contains("no-such-task"),
        "{stop}"
    );
    kaji.prompt("make x.txt").await;
    let ask = kaji.can_use_tool().await;
    assert_eq!(ask["request"]["tool_name"], "Bash");
    assert_eq!(ask["request"]["input"]["command"], "touch x.txt");
    let ask_id = ask["request_id"].as_str().unwrap().to_string();
    // The ask is never answered; the interrupt still ends the prompt.
    kaji.request("int", json!({"subtype": "interrupt"})).await;
    assert_eq!(kaji.response("int").await["subtype"], "success");
    let result = kaji.until(|m| m["type"] == "result").await;
    assert_eq!(result["subtype"], "error_during_execution", "{result}");
    assert!(
        kaji.seen
            .iter()
            .any(|m| m["type"] == "control_cancel_request" && m["request_id"] == ask_id),
        "the unanswered ask is cancelled: {:#?}",
        kaji.seen
    );
    assert!(!sdk.work.path().join("x.txt").exists());
    assert_eq!(kaji.finish().await, 1);
}

#[tokio::test]
async fn an_unanswered_ask_is_denied_at_the_ask_timeout() {
    let sdk = Sdk::new();
    let server = ScriptedModelServer::start(Script::new([
        Turn::tool_call("Bash", json!({"command": "touch x.txt"})),
        Turn::text("It was not allowed."),
    ]))
    .await;
    let mut kaji = Raw::start(&sdk, &server, &[("KAJI_ASK_TIMEOUT_MS", "50")]);
    kaji.initialize().await;
    kaji.prompt("make x.txt").await;
    let ask = kaji.can_use_tool().await;
    let ask_id = ask["request_id"].as_str().unwrap().to_string();
    let result = kaji.until(|m| m["type"] == "result").await;
    assert_eq!(result["subtype"], "success", "{result}");
    assert!(
        kaji.seen
            .iter()
            .any(|m| m["type"] == "control_cancel_request" && m["request_id"] == ask_id)
    );
    let told = server.requests()[1].body.to_string();
    assert!(told.contains("did not answer within 50 ms"), "{told}");
    assert!(!sdk.work.path().join("x.txt").exists());
    assert_eq!(kaji.finish().await, 0);
}

#[tokio::test]
async fn session_id_names_a_session_and_fork_session_copies_one() {
    let sdk = Sdk::new();
    let server = ScriptedModelServer::start(Script::new([
        Turn::text("Noted."),
        Turn::text("It was marmalade."),
        Turn::text("Still marmalade."),
    ]))
    .await;
    let py = || {
        let mut c = Command::new("python3");
        c.arg(repo_root().join("tests/agent-sdk/drive.py"));
        c
    };
    let id = "0e5b3c2a-1f4d-4c8e-9a7b-123456789abc";
    let (first, code) = sdk
        .drive(
            py(),
            &server,
            "remember marmalade",
            json!({"session_id": id}),
        )
        .await;
    assert_eq!(code, 0, "{first:#?}");
    assert_eq!(first[0]["data"]["session_id"], id);
    assert_eq!(result(&first)["session_id"], id);
    let (forked, code) = sdk
        .drive(
            py(),
            &server,
            "what was it?",
            json!({"resume": id, "fork_session": true}),
        )
        .await;
    assert_eq!(code, 0, "{forked:#?}");
    let fork_id = result(&forked)["session_id"].as_str().unwrap().to_string();
    assert_ne!(fork_id, id, "a fork is a new session");
    assert!(
        server.requests()[1]
            .body
            .to_string()
            .contains("remember marmalade"),
        "the fork has the history"
    );
    // The original is unchanged: resuming it again does not see the
    // fork's prompt.
    let (again, code) = sdk
        .drive(py(), &server, "and now?", json!({"resume": id}))
        .await;
    assert_eq!(code, 0, "{again:#?}");
    assert_eq!(result(&again)["session_id"], id);
    let third = server.requests()[2].body.to_string();
    assert!(third.contains("remember marmalade"), "{third}");
    assert!(!third.contains("what was it?"), "{third}");
    // A session id that is not a UUID is a usage error, as in Claude Code.
    let (bad, code) = sdk
        .drive(py(), &server, "hi", json!({"session_id": "not-a-uuid"}))
        .await;
    assert_eq!(code, 3, "{bad:#?}");
}

#[tokio::test]
async fn settings_allow_rules_apply_and_other_keys_are_named() {
    let sdk = Sdk::new();
    let server = ScriptedModelServer::start(Script::new([
        Turn::tool_call("Write", json!({"file_path": "s.txt", "content": "s\n"})),
        Turn::text("Wrote s.txt."),
    ]))
    .await;
    let mut driver = Command::new("python3");
    driver.arg(repo_root().join("tests/agent-sdk/drive.py"));
    let settings = json!({"permissions": {"allow": ["Write"]}, "theme": "dark"}).to_string();
    let (messages, code) = sdk
        .drive(
            driver,
            &server,
            "write s.txt",
            json!({"settings": settings}),
        )
        .await;
    assert_eq!(code, 0, "{messages:#?}");
    // Nobody answers asks here: only the settings' rule lets it run.
    assert_eq!(
        std::fs::read_to_string(sdk.work.path().join("s.txt")).unwrap(),
        "s\n"
    );
    let warnings = messages[0]["data"]["kaji_warnings"].to_string();
    assert!(warnings.contains("--settings: theme"), "{warnings}");
}
