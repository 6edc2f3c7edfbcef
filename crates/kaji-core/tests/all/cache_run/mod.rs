//! A 50-round task against the scripted model server, shared by the prompt
//! cache test and benchmark: returns the recorded request bodies.

use std::sync::Arc;
use std::time::Duration;

use kaji_core::{SessionBuilder, SessionOptions, TaskFrontend};
use kaji_llm::{ProviderConfig, ProviderKind};
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};

/// Rounds of the task.
pub const ROUNDS: usize = 50;

/// Runs the task with `frontend` and returns every request body.
pub async fn fifty_rounds(kind: ProviderKind, frontend: Arc<dyn TaskFrontend>) -> Vec<Value> {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("AGENTS.md"), "Run the tests.\n").unwrap();
    std::fs::write(work.path().join("a.txt"), "one\ntwo\nthree\n".repeat(20)).unwrap();
    let turns = (0..ROUNDS - 1)
        .map(|i| {
            Turn::text(format!("Step {i}: reading again."))
                .and_tool_call("Read", json!({"file_path": "a.txt", "offset": i % 5 + 1}))
        })
        .chain([Turn::tool_call(
            "AttemptCompletion",
            json!({"result": "done"}),
        )]);
    let server = ScriptedModelServer::start(Script::new(turns)).await;
    let base = match kind {
        ProviderKind::Anthropic => server.anthropic_base_url(),
        ProviderKind::OpenAi | ProviderKind::OpenAiResponses => server.openai_base_url(),
    };
    let mut provider = ProviderConfig::new(kind, "scripted-model", base);
    provider.api_key = Some("test-key".into());
    provider.retry_base_delay = Duration::from_millis(1);
    let options = SessionOptions {
        cwd: Some(work.path().to_path_buf()),
        no_checkpoints: true,
        persist: false,
        ..SessionOptions::default()
    };
    let (session, _) = SessionBuilder::new(home.path(), options)
        .provider(provider)
        .build(frontend)
        .await
        .unwrap();
    let outcome = session
        .submit("read the file fifty times".into())
        .await
        .unwrap();
    assert_eq!(outcome.turns as usize, ROUNDS);
    session.shutdown().await;
    server.requests().into_iter().map(|r| r.body).collect()
}
