//! Sub-agents in parallel in one process: a session whose main agent
//! starts N background sub-agents at once (`Agent` with
//! `run_in_background`), each doing two rounds (a `Glob`, then its
//! result) against the scripted model server over real HTTP/SSE, until
//! every one has ended. Wall time for 1 and 16 agents (target: 16 under
//! twice one), and, printed before the timings, the process's peak RSS
//! for each (target: under 40 MB with 16; the scripted server lives in
//! the same process and is counted too). Twice: with a model that answers
//! at once (then the 2 cores' CPU is what 16 agents share: it measures
//! kaji's own work per round) and with one that streams (a 2 ms pause
//! before every event of the sub-agents' replies, about 40 ms a reply, as
//! a fast real model would; the main agent's turns answer at once).
//! Results go to docs/benchmarks.md.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmark setup: a failed step aborts the measurement"
)]

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use kaji_core::{AskRequest, Session, SessionBuilder, SessionOptions, TaskFrontend};
use kaji_llm::{ProviderConfig, ProviderKind};
use kaji_protocol::AskResponse;
use kaji_test_support::{Fault, Script, ScriptedModelServer, Turn};
use serde_json::json;

const EXPLORE: &str = "You are the Explore sub-agent";

struct Quiet;

#[async_trait]
impl TaskFrontend for Quiet {
    fn emit(&self, _event: kaji_protocol::SessionEvent) {}
    async fn answer(&self, _ask: &AskRequest) -> AskResponse {
        AskResponse::Approve
    }
}

fn script(agents: usize, pause_ms: u64) -> Script {
    let mut start = Turn::text("Starting the agents.");
    for n in 0..agents {
        start = start.and_tool_call(
            "Agent",
            json!({"description": format!("scan {n}"), "prompt": "Find the text files.", "subagent_type": "Explore", "run_in_background": true}),
        );
    }
    let mut explore = Script::new([
        Turn::text("Looking for the files.").and_tool_call("Glob", json!({"pattern": "*.txt"})),
        Turn::text("Found them.")
            .and_tool_call("AttemptCompletion", json!({"result": "a.txt and b.txt"})),
    ]);
    if pause_ms > 0 {
        explore = explore.with_fault_on_every_request(Fault::Slow { delay_ms: pause_ms });
    }
    // The main agent's own turns answer at once: what is compared is the
    // sub-agents' work, not the length of the reply that starts them.
    Script::new([
        start,
        Turn::tool_call("AttemptCompletion", json!({"result": "started"})),
    ])
    .with_agent(EXPLORE, explore)
}

/// One run: start `agents` sub-agents and wait until all have ended.
async fn run(agents: usize, pause_ms: u64) -> usize {
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    std::fs::write(work.path().join("a.txt"), "a\n").expect("write");
    std::fs::write(work.path().join("b.txt"), "b\n").expect("write");
    let server = ScriptedModelServer::start(script(agents, pause_ms)).await;
    let mut provider = ProviderConfig::new(
        ProviderKind::Anthropic,
        "scripted",
        server.anthropic_base_url(),
    );
    provider.api_key = Some("bench".into());
    let options = SessionOptions {
        cwd: Some(work.path().to_path_buf()),
        no_checkpoints: true,
        persist: false,
        ..SessionOptions::default()
    };
    let (session, _) = SessionBuilder::new(home.path(), options)
        .provider(provider)
        .build(Arc::new(Quiet))
        .await
        .expect("session");
    session.submit("scan".into()).await.expect("submit");
    wait_all(&session).await;
    session.shutdown().await;
    server.max_requests_in_flight()
}

async fn wait_all(session: &Session) {
    for task in session.runtime().list() {
        let _ = session.runtime().wait_finished(task.id.as_str()).await;
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// `VmHWM` (peak resident set) of this process, in kB.
fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Peak RSS of one run in a fresh runtime, after resetting the peak to
/// the present size (`/proc/self/clear_refs` 5).
fn measure(agents: usize, pause_ms: u64) {
    let rt = runtime();
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = peak_rss_kb().unwrap_or(0);
    let started = Instant::now();
    let in_flight = rt.block_on(run(agents, pause_ms));
    let wall = started.elapsed();
    let peak = peak_rss_kb().unwrap_or(0);
    eprintln!(
        "parallel_agents: {agents:>2} agent(s), pause {pause_ms} ms: peak RSS {:.1} MB (at start {:.1} MB), wall {:.0} ms, at most {in_flight} requests in flight",
        peak as f64 / 1024.0,
        before as f64 / 1024.0,
        wall.as_secs_f64() * 1000.0
    );
}

fn main() {
    if std::env::var_os("KAJI_BENCH_MEASURE_ONLY").is_some() {
        measure(16, 2);
        return;
    }
    for pause in [0, 2] {
        measure(1, pause);
        measure(16, pause);
    }
    divan::main();
}

#[divan::bench(args = [1, 16], sample_count = 10)]
fn instant_model(bencher: divan::Bencher, agents: usize) {
    let rt = runtime();
    bencher.bench_local(|| rt.block_on(run(agents, 0)))
}

#[divan::bench(args = [1, 16], sample_count = 10)]
fn streaming_model(bencher: divan::Bencher, agents: usize) {
    let rt = runtime();
    bencher.bench_local(|| rt.block_on(run(agents, 2)))
}
