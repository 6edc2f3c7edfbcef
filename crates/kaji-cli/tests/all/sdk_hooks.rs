//! The program's hook callbacks (#34): `hooks` registered in `initialize`
//! and called with `hook_callback`, from both official SDKs, against the
//! real binary and the scripted model server. The callbacks of
//! tests/agent-sdk/client.py and drive.mjs print a `Callback` line of kind
//! `hook` each time they run.

use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};

use super::agent_sdk::{Sdk, of_class, only_kaji_answered, result};
use super::agent_sdk_control::{callbacks, node, python};

fn bash_script() -> Script {
    Script::new([
        Turn::tool_call("Bash", json!({"command": "touch ran.txt"})),
        Turn::text("Done."),
    ])
}

/// The ids of the `tool_use` blocks the SDK received.
fn tool_use_ids(messages: &[Value]) -> Vec<String> {
    of_class(messages, "AssistantMessage")
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_use" || b.get("input").is_some())
        .filter_map(|b| b["id"].as_str().map(str::to_string))
        .collect()
}

/// The callback ran once, for the Bash call, with its id.
fn check_called(messages: &[Value]) {
    let hooks = callbacks(messages, "hook");
    assert_eq!(hooks.len(), 1, "{messages:#?}");
    assert_eq!(hooks[0]["event"], "PreToolUse");
    assert_eq!(hooks[0]["tool"], "Bash");
    let ids = tool_use_ids(messages);
    assert_eq!(ids.len(), 1, "{messages:#?}");
    assert_eq!(hooks[0]["tool_use_id"], ids[0], "{:?}", hooks[0]);
}

/// A PreToolUse callback that denies: the command never runs (even in
/// bypassPermissions) and the model is told the callback's reason.
fn check_blocked(sdk: &Sdk, server: &ScriptedModelServer, messages: &[Value], code: i32) {
    assert_eq!(code, 0, "{messages:#?}");
    only_kaji_answered(server, messages, 2);
    check_called(messages);
    assert!(
        !sdk.work.path().join("ran.txt").exists(),
        "the blocked Bash must not run"
    );
    let told = server.requests()[1].body.to_string();
    assert!(told.contains("the hook says no"), "{told}");
    let warnings = messages[0]["data"]["kaji_warnings"].to_string();
    assert!(!warnings.contains("hook"), "{warnings}");
    assert_eq!(result(messages)["subtype"], "success");
}

/// A PreToolUse callback that allows: the command runs where nobody could
/// have approved it (no sandbox, nobody answers asks).
fn check_allowed(sdk: &Sdk, server: &ScriptedModelServer, messages: &[Value], code: i32) {
    assert_eq!(code, 0, "{messages:#?}");
    only_kaji_answered(server, messages, 2);
    check_called(messages);
    assert!(
        sdk.work.path().join("ran.txt").exists(),
        "the allowed Bash runs: {messages:#?}"
    );
    assert_eq!(result(messages)["permission_denials"], json!([]));
}

#[tokio::test]
async fn a_python_hook_callback_blocks_a_command() {
    let sdk = Sdk::new();
    let server = ScriptedModelServer::start(bash_script()).await;
    let (messages, code) = sdk
        .drive(python("hooks"), &server, "make ran.txt", json!({}))
        .await;
    check_blocked(&sdk, &server, &messages, code);
}

#[tokio::test]
async fn a_python_hook_callback_allows_a_command() {
    let sdk = Sdk::new();
    let server = ScriptedModelServer::start(bash_script()).await;
    let (messages, code) = sdk
        .drive(
            python("hooks_allow"),
            &server,
            "make ran.txt",
            json!({"extra_args": {"sandbox": "off"}}),
        )
        .await;
    check_allowed(&sdk, &server, &messages, code);
    // The hook input carries the call's id too (Claude Code's field).
    let hook = &callbacks(&messages, "hook")[0];
    assert_eq!(hook["input_tool_use_id"], hook["tool_use_id"]);
}

#[tokio::test]
async fn a_typescript_hook_callback_blocks_a_command() {
    let sdk = Sdk::new();
    let server = ScriptedModelServer::start(bash_script()).await;
    let (messages, code) = sdk
        .drive(node("hooks"), &server, "make ran.txt", json!({}))
        .await;
    check_blocked(&sdk, &server, &messages, code);
}

#[tokio::test]
async fn a_typescript_hook_callback_allows_a_command() {
    let sdk = Sdk::new();
    let server = ScriptedModelServer::start(bash_script()).await;
    let (messages, code) = sdk
        .drive(
            node("hooks_allow"),
            &server,
            "make ran.txt",
            json!({"extraArgs": {"sandbox": "off"}}),
        )
        .await;
    check_allowed(&sdk, &server, &messages, code);
}

/// A callback that never answers is given up at its matcher's timeout:
/// a warning, and the call goes on (no `onFailure: "block"`).
#[tokio::test]
async fn a_hook_callback_that_never_answers_is_bounded_by_its_timeout() {
    let sdk = Sdk::new();
    let server = ScriptedModelServer::start(bash_script()).await;
    let (messages, code) = sdk
        .drive(python("hooks_hang"), &server, "make ran.txt", json!({}))
        .await;
    assert_eq!(code, 0, "{messages:#?}");
    assert_eq!(callbacks(&messages, "hook").len(), 1, "{messages:#?}");
    let notices: Vec<String> = of_class(&messages, "SystemMessage")
        .iter()
        .map(|m| m["data"].to_string())
        .collect();
    assert!(
        notices
            .iter()
            .any(|n| n.contains("hook callback") && n.contains("no answer within")),
        "{notices:#?}"
    );
    assert!(sdk.work.path().join("ran.txt").exists());
    assert_eq!(result(&messages)["subtype"], "success");
}
