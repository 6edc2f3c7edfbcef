//! Per-round cost over a long session: a 300-round task (each round one
//! `Read` of a different 2 KB file, then an `AttemptCompletion`) against
//! the scripted model server over real HTTP/SSE on loopback. The round's
//! time is the time between two `ApiReqStarted` says: request assembly,
//! the provider's serialisation, the server, streaming, presenting, the
//! tool and the history. Target: the median of rounds 281–300 at most
//! 1.2× the median of rounds 1–20 (the history shared, not copied and
//! re-serialised at every round).
//!
//! A second clock separates kaji's own request work from the rest: the
//! time the provider takes to assemble and serialise each request (the
//! body is made when the stream starts), the test server's handling of
//! each request (its reading of the body and choice of the reply, timed
//! by the server; that cost is the test's, not kaji's), and, for
//! comparison, a whole parse of each recorded body, timed after the run.
//!
//! The process's CPU time between two says is printed too: on a loaded
//! machine it says what the rounds cost better than the wall clock.
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
use kaji_llm::{ModelProvider, ModelRequest, ModelStream, ProviderConfig, ProviderKind};
use kaji_protocol::{AskResponse, SayKind, SessionEvent, TaskEvent};
use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::json;

/// Notes when each request starts, on the wall clock and in the CPU time
/// of the whole process (kaji and the server: on a loaded machine the
/// wall clock mostly measures waiting for a core).
#[derive(Default)]
struct Clock {
    starts: Mutex<Vec<(Instant, f64)>>,
}

/// The CPU time the process has used, in milliseconds.
fn process_cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1000.0 + ts.tv_nsec as f64 / 1e6
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
                .push((Instant::now(), process_cpu_ms()));
        }
    }
    async fn answer(&self, _ask: &AskRequest) -> AskResponse {
        AskResponse::Approve
    }
}

/// The provider, timing how long each request takes to assemble and
/// serialise (all of it happens when the stream is made).
struct Timed {
    inner: Arc<dyn ModelProvider>,
    build_ms: Mutex<Vec<f64>>,
}

impl ModelProvider for Timed {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn stream(&self, request: ModelRequest) -> ModelStream {
        let start = Instant::now();
        let stream = self.inner.stream(request);
        self.build_ms
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(start.elapsed().as_secs_f64() * 1000.0);
        stream
    }
}

/// One run's times in milliseconds: each round, each request's assembly
/// and serialisation, the server's handling of each request and a whole
/// parse of each body.
struct Times {
    rounds: Vec<f64>,
    cpu: Vec<f64>,
    build: Vec<f64>,
    handling: Vec<f64>,
    parse: Vec<f64>,
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

/// One run.
fn run(rt: &tokio::runtime::Runtime, kind: ProviderKind, rounds: usize) -> Times {
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
    let timed = Arc::new(Timed {
        inner: kaji_llm::build_provider(&cfg).expect("a provider"),
        build_ms: Mutex::default(),
    });
    let provider: Arc<dyn ModelProvider> = timed.clone();
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
    let handling = (server.handling_times().iter())
        .map(|d| d.as_secs_f64() * 1000.0)
        .collect();
    let parse = server
        .requests()
        .iter()
        .map(|r| {
            let start = Instant::now();
            let body: serde_json::Value = serde_json::from_str(&r.raw_body).expect("JSON");
            std::hint::black_box(body);
            start.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    let build = std::mem::take(&mut *timed.build_ms.lock().unwrap_or_else(|e| e.into_inner()));
    Times {
        rounds: starts
            .windows(2)
            .map(|w| (w[1].0 - w[0].0).as_secs_f64() * 1000.0)
            .collect(),
        cpu: starts.windows(2).map(|w| w[1].1 - w[0].1).collect(),
        build,
        handling,
        parse,
    }
}

/// The medians of the first and of the last 20 of `xs` over all runs.
fn ends(all: &[Vec<f64>], rounds: usize) -> (f64, f64) {
    let early = all.iter().flat_map(|xs| xs[..20].to_vec()).collect();
    let late = all
        .iter()
        .flat_map(|xs| xs[rounds - 20..rounds].to_vec())
        .collect();
    (median(early), median(late))
}

fn main() {
    let runs = env_usize("KAJI_BENCH_RUNS", 3);
    let rounds = env_usize("KAJI_BENCH_ROUNDS", 300);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let kinds = [
        ProviderKind::Anthropic,
        ProviderKind::OpenAi,
        ProviderKind::OpenAiResponses,
    ];
    for kind in kinds {
        let (mut all, mut build, mut parse) = (Vec::new(), Vec::new(), Vec::new());
        let (mut cpu, mut handling) = (Vec::new(), Vec::new());
        for n in 1..=runs {
            let times = run(&rt, kind, rounds);
            let (e, l) = ends(std::slice::from_ref(&times.rounds), rounds);
            println!(
                "{kind:?} run {n}: rounds 1-20 median {e:.2} ms, rounds {}-{} median {l:.2} ms",
                rounds - 19,
                rounds,
            );
            all.push(times.rounds);
            cpu.push(times.cpu);
            build.push(times.build);
            handling.push(times.handling);
            parse.push(times.parse);
        }
        let last = format!("{}-{}", rounds - 19, rounds);
        let (e, l) = ends(&all, rounds);
        println!(
            "{kind:?} all runs: rounds 1-20 median {e:.2} ms, rounds {last} median {l:.2} ms, ratio {:.2}",
            l / e
        );
        let (ce, cl) = ends(&cpu, rounds);
        println!(
            "{kind:?} CPU time of the process a round (kaji and the server): rounds 1-20 median {ce:.2} ms, rounds {last} median {cl:.2} ms, ratio {:.2}",
            cl / ce
        );
        let (be, bl) = ends(&build, rounds);
        let (he, hl) = ends(&handling, rounds);
        let (pe, pl) = ends(&parse, rounds);
        println!(
            "{kind:?} request assembly+serialisation (kaji): rounds 1-20 median {be:.3} ms, rounds {last} median {bl:.3} ms; \
             the test server's handling of the request: {he:.3} ms, {hl:.3} ms; a whole parse of the body (re-timed): {pe:.3} ms, {pl:.3} ms"
        );
        println!(
            "{kind:?} rounds less the server's handling: 1-20 {:.2} ms, {last} {:.2} ms, ratio {:.2}",
            e - he,
            l - hl,
            (l - hl) / (e - he)
        );
    }
}
