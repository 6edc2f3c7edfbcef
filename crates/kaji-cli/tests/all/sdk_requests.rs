//! The SDKs' less common control requests (#34), driven by the Python
//! SDK's `ClaudeSDKClient` against the real binary and the scripted model
//! server: `get_context_usage`.

use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

use super::agent_sdk::{Sdk, result};
use super::agent_sdk_control::{callbacks, python};

/// After a prompt, the context usage is what the last round filled: its
/// input (cached or not) plus its reply, in the model's window.
#[tokio::test]
async fn get_context_usage_reports_the_last_rounds_context() {
    let sdk = Sdk::new();
    let server = ScriptedModelServer::start(Script::new([Turn::text("Hello.")])).await;
    let (messages, code) = sdk
        .drive(python("context"), &server, "say hello", json!({}))
        .await;
    assert_eq!(code, 0, "{messages:#?}");
    let usage = &callbacks(&messages, "context_usage")[0]["usage"];
    let u = &result(&messages)["usage"];
    let filled = [
        "input_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "output_tokens",
    ]
    .iter()
    .map(|k| u[k].as_u64().unwrap_or(0))
    .sum::<u64>();
    assert!(filled > 0, "{u}");
    assert_eq!(usage["totalTokens"], filled, "{usage}");
    let max = usage["maxTokens"].as_u64().unwrap();
    assert!(max > filled, "{usage}");
    assert_eq!(usage["model"], "scripted");
    let categories = usage["categories"].as_array().unwrap();
    let sum: u64 = categories
        .iter()
        .map(|c| c["tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, max, "the rows fill the window: {usage}");
    let percentage = usage["percentage"].as_f64().unwrap();
    assert!(
        (percentage - filled as f64 * 100.0 / max as f64).abs() < 0.1,
        "{usage}"
    );
}

/// `toggle_mcp_server` turns one of kaji's MCP servers off (its tools are
/// not offered to the model) and on again; `reconnect_mcp_server`
/// restarts it, and names an unknown server in its error.
#[tokio::test]
async fn mcp_toggle_and_reconnect_switch_a_server() {
    let sdk = Sdk::new();
    let server =
        ScriptedModelServer::start(Script::new([Turn::text("one"), Turn::text("two")])).await;
    let bin = kaji_test_support::fixtures::mcp_server_bin("mcp-server-everything");
    let options = json!({"mcp_servers": {"everything": {
        "command": bin.to_string_lossy(), "args": ["stdio"]}}});
    let (messages, code) = sdk.drive(python("mcp_switch"), &server, "", options).await;
    assert_eq!(code, 0, "{messages:#?}");
    let statuses = callbacks(&messages, "mcp_status");
    assert_eq!(
        statuses[0]["servers"]["everything"], "disabled",
        "{statuses:?}"
    );
    assert_eq!(
        statuses[1]["servers"]["everything"], "connected",
        "{statuses:?}"
    );
    let nope = &callbacks(&messages, "reconnect_nope")[0];
    assert!(
        nope["error"].as_str().is_some_and(|e| e.contains("nope")),
        "{nope}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let offered = |i: usize| requests[i].body["tools"].to_string();
    assert!(!offered(0).contains("mcp__everything__"), "{}", offered(0));
    assert!(
        offered(1).contains("mcp__everything__echo"),
        "{}",
        offered(1)
    );
}
