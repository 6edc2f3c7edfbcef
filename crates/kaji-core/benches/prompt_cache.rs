//! Prompt caching over a 50-round scripted task (Anthropic wire): input
//! tokens billed without and with the cache (cache reads at 0.1, writes at
//! 1.25 of the input price) and the share of each request's prefix that an
//! earlier request's breakpoint covers. Printed once before divan times the
//! whole task.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmark setup: a failed step aborts the measurement"
)]

use std::sync::Arc;

use async_trait::async_trait;
use kaji_core::{AskRequest, TaskFrontend};
use kaji_llm::ProviderKind;
use kaji_protocol::AskResponse;
use kaji_test_support::cache;

#[path = "../tests/all/cache_run/mod.rs"]
mod cache_run;

struct Quiet;

#[async_trait]
impl TaskFrontend for Quiet {
    fn emit(&self, _event: kaji_protocol::SessionEvent) {}
    async fn answer(&self, _ask: &AskRequest) -> AskResponse {
        AskResponse::Approve
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn main() {
    let bodies = runtime().block_on(cache_run::fifty_rounds(
        ProviderKind::Anthropic,
        Arc::new(Quiet),
    ));
    let report = cache::report(&bodies);
    let later = &report.covered[1..];
    let min = later.iter().cloned().fold(f64::INFINITY, f64::min);
    let mean = later.iter().sum::<f64>() / later.len() as f64;
    println!(
        "prompt cache, {} requests: input tokens billed without cache {:.0}, with cache {:.0} ({:.1}%); prefix covered after the first request: min {:.1}%, mean {:.1}%",
        bodies.len(),
        report.tokens_without,
        report.tokens_with,
        report.tokens_with / report.tokens_without * 100.0,
        min * 100.0,
        mean * 100.0
    );
    divan::main();
}

#[divan::bench(sample_count = 5)]
fn fifty_round_task() {
    runtime().block_on(cache_run::fifty_rounds(
        ProviderKind::Anthropic,
        Arc::new(Quiet),
    ));
}
