//! Tools start before the reply ends, with every provider: the scripted
//! server holds the stream open after the calls until the test releases
//! it, and the first call's result must arrive while it is held — for two
//! calls (call 1 closes when call 2 begins) and for one call whose
//! arguments are complete JSON.

use crate::common;

use std::time::Duration;

use common::{RecordingFrontend, deny, task};
use kaji_core::{PermissionMode, ToolProtocol};
use kaji_llm::ProviderKind;
use kaji_protocol::{TaskEvent, TaskStatus};
use kaji_test_support::Turn;
use serde_json::json;

use crate::common::{done, serve};

async fn first_result_arrives_while_held(kind: ProviderKind, calls: usize) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let mut turn = Turn::new();
    for _ in 0..calls {
        turn = turn.and_tool_call("Read", json!({"file_path": "a.txt"}));
    }
    let server = serve([turn.and_hold(), done("ok")]).await;
    let (frontend, mut rx) = RecordingFrontend::new(deny());
    let t = task(
        &server,
        kind,
        ToolProtocol::Native,
        PermissionMode::Default,
        dir.path(),
        frontend,
    );
    let run = tokio::spawn(t.run("read".into()));
    // The hang guard: without early tools, no result comes while held.
    let got = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(event) = rx.recv().await {
            if let TaskEvent::ToolResult { is_error, .. } = event {
                return Some(is_error);
            }
        }
        None
    })
    .await;
    assert_eq!(
        got,
        Ok(Some(false)),
        "{kind:?}, {calls} call(s): no tool result while the reply was still open"
    );
    server.release();
    let outcome = run.await.unwrap();
    assert_eq!(outcome.status, TaskStatus::Completed, "{kind:?}");
}

#[tokio::test]
async fn two_calls_then_a_stall_anthropic() {
    first_result_arrives_while_held(ProviderKind::Anthropic, 2).await;
}

#[tokio::test]
async fn two_calls_then_a_stall_openai() {
    first_result_arrives_while_held(ProviderKind::OpenAi, 2).await;
}

#[tokio::test]
async fn one_complete_call_then_a_stall_anthropic() {
    first_result_arrives_while_held(ProviderKind::Anthropic, 1).await;
}

#[tokio::test]
async fn one_complete_call_then_a_stall_openai() {
    first_result_arrives_while_held(ProviderKind::OpenAi, 1).await;
}

#[tokio::test]
async fn two_calls_then_a_stall_responses() {
    first_result_arrives_while_held(ProviderKind::OpenAiResponses, 2).await;
}

#[tokio::test]
async fn one_complete_call_then_a_stall_responses() {
    first_result_arrives_while_held(ProviderKind::OpenAiResponses, 1).await;
}
