//! `can_use_tool` answers (#34), driven by the Python SDK against the real
//! binary and the scripted model server: a program's deny is an answer,
//! not the model's mistake, and each ask names the exact call it is about.

use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};

use super::agent_sdk::{Sdk, of_class, only_kaji_answered, result};
use super::agent_sdk_control::{callbacks, python};

/// The ids of the `tool_use` blocks the SDK received, in order.
fn tool_use_ids(messages: &[Value]) -> Vec<String> {
    of_class(messages, "AssistantMessage")
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|b| b.get("input").and(b["id"].as_str()).map(str::to_string))
        .collect()
}

/// Four denied commands in a row: more than the mistake limit (3), yet the
/// task goes on, since somebody answered each; the model gets the
/// program's message as each call's result.
#[tokio::test]
async fn a_programs_denials_are_not_mistakes() {
    let sdk = Sdk::new();
    let mut turns: Vec<Turn> = (1..=4)
        .map(|n| Turn::tool_call("Bash", json!({"command": format!("touch ran{n}.txt")})))
        .collect();
    turns.push(Turn::text("I was not allowed to run anything."));
    let server = ScriptedModelServer::start(Script::new(turns)).await;
    let (messages, code) = sdk
        .drive(
            python("permissions"),
            &server,
            "make four files",
            json!({"extra_args": {"sandbox": "off"}}),
        )
        .await;
    assert_eq!(code, 0, "{messages:#?}");
    only_kaji_answered(&server, &messages, 5);
    assert_eq!(callbacks(&messages, "can_use_tool").len(), 4);
    for n in 1..=4 {
        assert!(!sdk.work.path().join(format!("ran{n}.txt")).exists());
    }
    let r = result(&messages);
    assert_eq!(r["subtype"], "success", "{r}");
    assert_eq!(r["result"], "I was not allowed to run anything.");
    assert_eq!(
        r["permission_denials"].as_array().map(Vec::len),
        Some(4),
        "{r}"
    );
    // The deny message is the tool result, as it is.
    let results: Vec<&Value> = of_class(&messages, "UserMessage")
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|b| b.get("tool_use_id").is_some())
        .collect();
    assert_eq!(results.len(), 4, "{messages:#?}");
    for b in results {
        assert_eq!(b["content"], "no shell for you", "{b}");
        assert_eq!(b["is_error"], true, "{b}");
    }
}

/// Two identical calls in one reply: each ask carries its own call's id.
#[tokio::test]
async fn each_ask_names_its_own_call_among_identical_ones() {
    let sdk = Sdk::new();
    let call = json!({"command": "echo twice >> twice.txt"});
    let server = ScriptedModelServer::start(Script::new([
        Turn::tool_call("Bash", call.clone()).and_tool_call("Bash", call),
        Turn::text("Ran it twice."),
    ]))
    .await;
    let (messages, code) = sdk
        .drive(
            python("permissions_allow"),
            &server,
            "run it twice",
            json!({"extra_args": {"sandbox": "off"}}),
        )
        .await;
    assert_eq!(code, 0, "{messages:#?}");
    only_kaji_answered(&server, &messages, 2);
    let ids = tool_use_ids(&messages);
    assert_eq!(ids.len(), 2, "{messages:#?}");
    assert_ne!(ids[0], ids[1]);
    let asked: Vec<&Value> = callbacks(&messages, "can_use_tool")
        .into_iter()
        .map(|c| &c["tool_use_id"])
        .collect();
    assert_eq!(asked, [&json!(ids[0]), &json!(ids[1])], "{messages:#?}");
    assert_eq!(
        std::fs::read_to_string(sdk.work.path().join("twice.txt")).unwrap(),
        "twice\ntwice\n"
    );
}
