//! What the sandbox costs a command: spawning `true` through
//! `process::spawn_with_merged_output_with` and waiting for it, unconfined
//! and in the workspace-write sandbox (which prepares the policy — mount
//! points, Landlock ruleset, seccomp program — per spawn, then enters a user
//! and mount namespace in the child). Skips the sandboxed case when the
//! kernel lacks a layer (it prints why).
//!
//! Run: `cargo bench -p kaji-tasks --bench sandbox_spawn`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmark setup: a failed step aborts the measurement"
)]

use std::sync::Arc;

use kaji_sandbox::{SandboxMode, SandboxPolicy};
use kaji_tasks::process::{self, SpawnOptions};

fn main() {
    divan::main();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn spawn_true(rt: &tokio::runtime::Runtime, dir: &std::path::Path, options: &SpawnOptions) {
    rt.block_on(async {
        let mut cmd = tokio::process::Command::new("true");
        cmd.current_dir(dir).stdin(std::process::Stdio::null());
        let (mut child, _reader) =
            process::spawn_with_merged_output_with(cmd, options).expect("spawn");
        let status = child.wait().await.expect("wait");
        assert!(status.success());
    });
}

#[divan::bench(sample_count = 30, sample_size = 5)]
fn unconfined(bencher: divan::Bencher) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let options = SpawnOptions::default();
    bencher.bench_local(|| spawn_true(&rt, dir.path(), &options));
}

#[divan::bench(sample_count = 30, sample_size = 5)]
fn workspace_write(bencher: divan::Bencher) {
    let support = kaji_sandbox::probe();
    if !support.is_complete() {
        eprintln!("sandboxed case skipped: {:?}", support.problems);
        return;
    }
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = SandboxPolicy::workspace(SandboxMode::WorkspaceWrite, dir.path());
    let options = SpawnOptions::sandboxed(Some(Arc::new(policy)));
    bencher.bench_local(|| spawn_true(&rt, dir.path(), &options));
}
