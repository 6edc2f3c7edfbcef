//! Soak: random faults from the reliability issue's list against one
//! session, in CI-friendly size (200 faults by default; `KAJI_SOAK_FAULTS`,
//! seed printed, `KAJI_SOAK_SEED` to repeat). After every prompt and at the
//! end the invariants are checked: every prompt ended (nothing hangs past
//! its bound: idle timeouts, reply caps and the mistake limit end them),
//! peak RSS stays under 128 MB, no process kaji started is left running,
//! and no file an earlier prompt wrote is lost.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed expectation is a test failure"
)]

#[path = "all/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{RecordingFrontend, provider_config};
use kaji_core::{SessionBuilder, SessionOptions};
use kaji_llm::ProviderKind;
use kaji_protocol::AskResponse;
use kaji_test_support::{Fault, Script, ScriptedModelServer, Turn};
use serde_json::json;

fn faults(pick: u64) -> Fault {
    match pick % 12 {
        0 => Fault::BreakAfterFirstContent,
        1 => Fault::ManyDataLines {
            lines: 2_000,
            line_bytes: 1_000,
        },
        2 => Fault::Endless,
        3 => Fault::PingsOnly { interval_ms: 20 },
        4 => Fault::ToolCallsIndexZero,
        5 => Fault::DropMidStream { after_bytes: 40 },
        6 => Fault::MalformedSse,
        7 => Fault::InvalidJsonChunk,
        8 => Fault::status(500),
        9 => Fault::Empty,
        10 => Fault::Stall { after_bytes: 30 },
        _ => Fault::ErrorBodyWith200,
    }
}

fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_random_faults_against_one_session() {
    let total: u64 = std::env::var("KAJI_SOAK_FAULTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let seeds = kaji_test_support::seeds::seeds("soak", &[0x9e37_79b9], Some("KAJI_SOAK_SEED"));
    for seed in seeds {
        soak(total, seed).await;
    }
}

async fn soak(total: u64, seed: u64) {
    eprintln!("soak: {total} faults, seed {seed} (KAJI_TEST_SEED={seed} to repeat)");
    let mut rng = seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };

    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    // Each prompt: a turn that writes a file (and starts a short
    // background command), served with up to 5 faults first, then the
    // completion.
    let per_prompt = 5u64;
    let prompts = total.div_ceil(per_prompt);
    let mut turns = Vec::new();
    for p in 0..prompts {
        let faults: Vec<Fault> = (0..per_prompt).map(|_| faults(next())).collect();
        turns.push(
            Turn::tool_call(
                "Write",
                json!({"file_path": format!("out-{p}.txt"), "content": format!("prompt {p}\n")}),
            )
            .and_tool_call(
                "Bash",
                json!({"command": "sleep 0.2", "run_in_background": true}),
            )
            .with_faults(faults),
        );
        turns.push(Turn::tool_call(
            "AttemptCompletion",
            json!({"result": format!("done {p}")}),
        ));
    }
    let server = ScriptedModelServer::start(Script::new(turns)).await;
    let mut provider = provider_config(&server, ProviderKind::Anthropic);
    provider.idle_timeout = Duration::from_millis(300);
    provider.max_reply_bytes = 1 << 20;
    provider.max_event_bytes = 256 << 10;
    provider.max_attempts = 2;
    // Nobody answers, as in `kaji exec`: a failed request is not retried
    // by hand, the mistake limit is not waved through.
    let (frontend, _rx) = RecordingFrontend::new(AskResponse::Deny { feedback: None });
    let options = SessionOptions {
        cwd: Some(work.path().to_path_buf()),
        permission_mode: Some(kaji_core::PermissionMode::Yolo),
        no_checkpoints: true,
        ..SessionOptions::default()
    };
    let (session, _) = SessionBuilder::new(home.path(), options)
        .provider(provider)
        .build(frontend.clone() as Arc<_>)
        .await
        .unwrap();

    let mut completed = 0;
    for p in 0..prompts {
        let outcome = tokio::time::timeout(
            Duration::from_secs(60),
            session.submit(format!("prompt {p}")),
        )
        .await
        .unwrap_or_else(|_| {
            let events = frontend.events();
            let tail: Vec<String> = events
                .iter()
                .rev()
                .take(12)
                .map(|e| format!("{e:?}").chars().take(300).collect())
                .collect();
            panic!(
                "seed {seed}: prompt {p} hung; last events:\n{}",
                tail.join("\n")
            )
        })
        .unwrap();
        if outcome.status == kaji_protocol::TaskStatus::Completed {
            completed += 1;
        }
        // No file an earlier prompt wrote is lost.
        for q in 0..=p {
            let path = work.path().join(format!("out-{q}.txt"));
            if path.exists() {
                assert_eq!(
                    std::fs::read_to_string(&path).unwrap(),
                    format!("prompt {q}\n"),
                    "seed {seed}"
                );
            }
        }
        let rss = peak_rss_kb();
        assert!(
            rss < 128 * 1024,
            "seed {seed}: peak RSS {rss} kB after prompt {p}"
        );
    }
    assert!(completed > 0, "seed {seed}: no prompt completed");
    // No orphan: everything the session started is gone after shutdown.
    let stopped = session.shutdown().await;
    for t in &stopped {
        assert_eq!(t.status, "running", "{t:?}");
    }
    let leftovers = session.background_tasks();
    assert!(
        leftovers.is_empty(),
        "seed {seed}: processes left: {leftovers:?}"
    );
}
