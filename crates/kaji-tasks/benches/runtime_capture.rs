//! Output capture throughput of a background task that writes as fast as it
//! can (`head -c N /dev/zero`): from start to "ended, output complete",
//! through the real registry, pipe, capture thread and capped output file.
//! Baselines: `direct_to_dev_null` is the same producer with no capture;
//! `direct_to_file` is the producer redirected by the shell into a file in
//! the same directory (what the disk allows, with no cap).
//!
//! Run: `cargo bench -p kaji-tasks --bench runtime_capture`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmark setup: a failed step aborts the measurement"
)]

use std::time::Duration;

use divan::counter::BytesCount;
use kaji_tasks::RuntimeTaskRegistry;
use kaji_tasks::runtime::{MAIN_CALLER, RuntimeConfig, RuntimeTaskStatus};

fn main() {
    divan::main();
}

const MIB: u64 = 1024 * 1024;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Captures `mib` MiB into a file capped at 64 MiB (the default): 64 MiB
/// fits, 256 MiB forces the oldest bytes to be dropped three times over.
#[divan::bench(args = [64, 256], sample_count = 5, sample_size = 1)]
fn capture(bencher: divan::Bencher, mib: u64) {
    let rt = runtime();
    let home = tempfile::tempdir().expect("tempdir");
    let cap: u64 = std::env::var("CAP_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let reg = RuntimeTaskRegistry::new(
        home.path(),
        "bench",
        RuntimeConfig {
            output_cap_bytes: cap * MIB,
            ..RuntimeConfig::default()
        },
    )
    .expect("registry");
    let command = format!("head -c {} /dev/zero", mib * MIB);
    bencher.counter(BytesCount::new(mib * MIB)).bench_local(|| {
        rt.block_on(async {
            let info = reg
                .start_local_bash(&command, "bench", home.path(), MAIN_CALLER)
                .await
                .expect("start");
            let done = reg.wait_finished(info.id.as_str()).await.expect("wait");
            assert_eq!(done.status, RuntimeTaskStatus::Completed);
            assert_eq!(done.output_bytes, mib * MIB);
            // Keep the machine's page cache from filling with old runs.
            std::fs::remove_file(&done.output_path).expect("remove output");
        })
    });
    rt.block_on(reg.stop_all());
    rt.shutdown_timeout(Duration::from_secs(5));
}

/// The producer alone, its output going straight to /dev/null.
#[divan::bench(args = [64, 256], sample_count = 5, sample_size = 1)]
fn direct_to_dev_null(bencher: divan::Bencher, mib: u64) {
    let command = format!("head -c {} /dev/zero > /dev/null", mib * MIB);
    bencher.counter(BytesCount::new(mib * MIB)).bench_local(|| {
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(&command)
            .status()
            .expect("sh runs");
        assert!(status.success());
    });
}

/// The producer redirected into a file in the bench's temporary directory.
#[divan::bench(args = [64, 256], sample_count = 5, sample_size = 1)]
fn direct_to_file(bencher: divan::Bencher, mib: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("direct.output");
    let command = format!("head -c {} /dev/zero > '{}'", mib * MIB, file.display());
    bencher.counter(BytesCount::new(mib * MIB)).bench_local(|| {
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(&command)
            .status()
            .expect("sh runs");
        assert!(status.success());
        std::fs::remove_file(&file).expect("remove output");
    });
}
