//! Per-round cost over a long session: a 300-round task (each round one
//! `Read` of a different 2 KB file, then an `AttemptCompletion`) against
//! the scripted model server over real HTTP/SSE on loopback. The round's
//! time is the time between two `ApiReqStarted` says: request assembly,
//! the provider's serialisation, the server, streaming, presenting, the
//! tool and the history. Target: the median of rounds 281–300 at most
//! 1.2× the median of rounds 1–20 (the history shared, not copied and
//! re-serialised at every round).
//!
//! Not a divan bench: it prints the medians of each run and of all runs.
//! `KAJI_BENCH_RUNS` sets the number of runs (default 3), `KAJI_BENCH_ROUNDS`
//! the rounds (default 300).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmark setup: a failed step aborts the measurement"
)]

use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use kaji_core::{AskRequest, PermissionMode, Task, TaskConfig, TaskFrontend, ToolExecutor};
use kaji_llm::{ProviderConfig, ProviderKind};
use kaji_protocol::{AskResponse, SayKind, SessionEvent, TaskEvent};
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

/// Notes when each request starts.
#[derive(Default)]
struct Clock {
    starts: Mutex<Vec<Instant>>,
}

#[async_trait]
impl TaskFrontend for Clock {
    fn emit(&self, event: SessionEvent) {
        if let TaskEvent::Say {
            kind: SayKind::ApiReqStarted,
            ..
        } = event.event
        {
            self.starts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Instant::now());
        }
    }
    async fn answer(&self, _ask: &AskRequest) -> AskResponse {
        AskResponse::Approve
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One run: the round times in milliseconds.
fn run(rt: &tokio::runtime::Runtime, kind: ProviderKind, rounds: usize) -> Vec<f64> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let line = "the quick brown fox jumps over the lazy dog, again and again\n";
    for i in 0..rounds {
        let body = format!("file {i}\n{}", line.repeat(32));
        std::fs::write(dir.path().join(format!("f{i}.txt")), body).expect("a file");
    }
    let script = Script::new(
        (0..rounds)
            .map(|i| {
                Turn::text("Reading the next file.")
                    .and_tool_call("Read", json!({"file_path": format!("f{i}.txt")}))
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
    let provider = kaji_llm::build_provider(&cfg).expect("a provider");
    let mut config = TaskConfig::new(dir.path().to_path_buf(), provider, "bench".into());
    config.permission_mode = PermissionMode::Yolo;
    let clock = Arc::new(Clock::default());
    let task = Task::new(
        config,
        ToolExecutor::new(kaji_tools::builtin_tools()),
        clock.clone(),
    );
    let outcome = rt.block_on(task.run("read them all".into()));
    assert_eq!(outcome.turns as usize, rounds + 1, "{:?}", outcome.result);
    let starts = clock.starts.lock().unwrap_or_else(|e| e.into_inner());
    starts
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64() * 1000.0)
        .collect()
}

fn main() {
    let runs = env_usize("KAJI_BENCH_RUNS", 3);
    let rounds = env_usize("KAJI_BENCH_ROUNDS", 300);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    for kind in [ProviderKind::Anthropic, ProviderKind::OpenAi] {
        let (mut early, mut late) = (Vec::new(), Vec::new());
        for n in 1..=runs {
            let times = run(&rt, kind, rounds);
            let first = times[..20].to_vec();
            let last = times[rounds - 20..rounds].to_vec();
            println!(
                "{kind:?} run {n}: rounds 1-20 median {:.2} ms, rounds {}-{} median {:.2} ms",
                median(first.clone()),
                rounds - 19,
                rounds,
                median(last.clone()),
            );
            early.extend(first);
            late.extend(last);
        }
        let (e, l) = (median(early), median(late));
        println!(
            "{kind:?} all runs: rounds 1-20 median {e:.2} ms, rounds {}-{} median {l:.2} ms, ratio {:.2}",
            rounds - 19,
            rounds,
            l / e
        );
    }
}
