//! Reasoning through the task loop: with `reasoning` on, the thinking a
//! provider returns (Anthropic signatures, Responses reasoning items with
//! their encrypted content) goes back unchanged in the next round, and
//! again after the history went through JSON (as a resumed session's does).

use crate::common;

use common::*;
use kaji_core::{PermissionMode, ToolProtocol};
use kaji_llm::{ProviderKind, Reasoning};
use kaji_protocol::{AskResponse, Message, TaskStatus};
use kaji_test_support::Turn;
use serde_json::{Value, json};

use crate::common::{done, serve};

/// Runs a task whose first round thinks and reads a file, then a second
/// task continuing from the first one's saved (JSON round-tripped)
/// history. Returns the bodies of the requests.
async fn two_tasks(kind: ProviderKind) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let server = serve([
        Turn::reasoning("I should read a.txt.")
            .and_redacted_reasoning("opaque-blob")
            .and_tool_call("Read", json!({"file_path": "a.txt"})),
        done("alpha"),
        done("still alpha"),
    ])
    .await;
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Approve);
    let mut cfg = provider_config(&server, kind);
    cfg.reasoning = Reasoning::Medium;
    let config = |history: Vec<Message>| {
        let mut config = kaji_core::TaskConfig::new(
            dir.path().to_path_buf(),
            kaji_llm::build_provider(&cfg).unwrap(),
            "scripted-model".into(),
        );
        config.tool_protocol = ToolProtocol::Native;
        config.permission_mode = PermissionMode::Default;
        config.kaji_home = dir.path().join(".kaji-home");
        config.history = history;
        config
    };
    let executor = || kaji_core::ToolExecutor::new(kaji_tools::builtin_tools());
    let first = kaji_core::Task::new(config(Vec::new()), executor(), frontend.clone())
        .run("what is in a.txt?".into())
        .await;
    assert_eq!(first.status, TaskStatus::Completed, "{kind:?}");
    let saved = serde_json::to_string(&first.history).unwrap();
    let history: Vec<Message> = serde_json::from_str(&saved).unwrap();
    let second = kaji_core::Task::new(config(history), executor(), frontend)
        .run("and now?".into())
        .await;
    assert_eq!(second.status, TaskStatus::Completed, "{kind:?}");
    server.requests().into_iter().map(|r| r.body).collect()
}

#[tokio::test]
async fn anthropic_thinking_keeps_its_signature_across_rounds_and_resume() {
    let bodies = two_tasks(ProviderKind::Anthropic).await;
    assert_eq!(
        bodies[0]["thinking"],
        json!({"type": "enabled", "budget_tokens": 10000})
    );
    for body in &bodies[1..] {
        let assistant = &body["messages"][1]["content"];
        assert_eq!(
            assistant[0],
            json!({"type": "thinking", "thinking": "I should read a.txt.", "signature": "scripted-signature-0-0"}),
            "{body:#}"
        );
        assert_eq!(
            assistant[1],
            json!({"type": "redacted_thinking", "data": "opaque-blob"})
        );
    }
}

#[tokio::test]
async fn responses_reasoning_items_go_back_across_rounds_and_resume() {
    let bodies = two_tasks(ProviderKind::OpenAiResponses).await;
    assert_eq!(bodies[0]["reasoning"]["effort"], json!("medium"));
    for body in &bodies[1..] {
        let input = body["input"].as_array().unwrap();
        assert_eq!(
            input[1],
            json!({"type": "reasoning", "id": "rs_scripted_0_0",
                   "summary": [{"type": "summary_text", "text": "I should read a.txt."}],
                   "encrypted_content": "scripted-encrypted-0-0"}),
            "{body:#}"
        );
        assert_eq!(
            input[2],
            json!({"type": "reasoning", "id": "rs_scripted_0_1", "summary": [], "encrypted_content": "opaque-blob"})
        );
        assert_eq!(input[3]["type"], json!("function_call"));
        assert_eq!(input[3]["name"], json!("Read"));
    }
}
