//! The loop's own overhead per turn: a 5-turn task (four Reads and an
//! AttemptCompletion) against the scripted model server over real HTTP/SSE
//! on loopback, with the tools doing next to nothing. What is measured is
//! request assembly, the provider, streaming, parsing, presenting, the
//! executor and the history — everything but the model.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmark setup: a failed step aborts the measurement"
)]

use std::sync::Arc;

use async_trait::async_trait;
use kaji_core::{AskRequest, PermissionMode, Task, TaskConfig, TaskFrontend, ToolExecutor};
use kaji_llm::{ProviderConfig, ProviderKind};
use kaji_protocol::AskResponse;
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

struct Quiet;

#[async_trait]
impl TaskFrontend for Quiet {
    fn emit(&self, _event: kaji_protocol::SessionEvent) {}
    async fn answer(&self, _ask: &AskRequest) -> AskResponse {
        AskResponse::Approve
    }
}

#[divan::bench(args = [ProviderKind::Anthropic, ProviderKind::OpenAi], sample_count = 30)]
fn five_turn_task(bencher: divan::Bencher, kind: ProviderKind) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
    let script = Script::new(
        (0..4)
            .map(|_| {
                Turn::text("Reading the file.")
                    .and_tool_call("Read", json!({"file_path": "a.txt"}))
                    .with_chunk_size(64)
            })
            .chain([Turn::tool_call(
                "AttemptCompletion",
                json!({"result": "done"}),
            )]),
    );
    let server = rt.block_on(ScriptedModelServer::start(script));
    let base = match kind {
        ProviderKind::Anthropic => server.anthropic_base_url(),
        ProviderKind::OpenAi | ProviderKind::OpenAiResponses => server.openai_base_url(),
    };
    let mut cfg = ProviderConfig::new(kind, "bench", base);
    cfg.api_key = Some("k".into());
    let provider = kaji_llm::build_provider(&cfg).unwrap();
    let registry = kaji_tools::builtin_tools();
    bencher
        .counter(divan::counter::ItemsCount::new(5usize))
        .bench_local(|| {
            let mut config =
                TaskConfig::new(dir.path().to_path_buf(), provider.clone(), "bench".into());
            config.permission_mode = PermissionMode::Yolo;
            let task = Task::new(config, ToolExecutor::new(registry.clone()), Arc::new(Quiet));
            let outcome = rt.block_on(task.run("read it".into()));
            assert_eq!(outcome.turns, 5);
        });
}

fn main() {
    divan::main();
}
