//! Throughput of the task list with 1, 4 and 16 processes writing one list
//! at once: creates, field updates and claims per second.
//!
//! Each sample starts `processes` copies of `task-list-worker`, which
//! share `OPS` operations between them, and waits for all of them; the
//! time includes starting the processes (about 1 ms each). The list lives
//! in the default temporary directory (set `TMPDIR` to choose the disk):
//! every write is fsynced, so the disk decides the result. Numbers and the
//! machine they came from are in docs/benchmarks.md.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmark setup: a failed step aborts the measurement"
)]

use std::path::Path;
use std::process::Command;

use divan::Bencher;
use divan::counter::ItemsCount;
use kaji_tasks::list::{NewListTask, TaskListStore};

const WORKER: &str = env!("CARGO_BIN_EXE_task-list-worker");
const LIST: &str = "bench";
/// Operations per sample, shared by the processes (divisible by 16).
const OPS: u64 = 320;

fn main() {
    divan::main();
}

/// Runs `processes` workers doing `kind` and waits for them.
fn run_workers(home: &Path, kind: &str, processes: u64) {
    let children: Vec<_> = (0..processes)
        .map(|w| {
            Command::new(WORKER)
                .args(["bench"])
                .arg(home)
                .args([LIST, kind])
                .args([
                    w.to_string(),
                    processes.to_string(),
                    (OPS / processes).to_string(),
                ])
                .spawn()
                .expect("spawn task-list-worker")
        })
        .collect();
    for mut child in children {
        let status = child.wait().expect("wait for worker");
        assert!(status.success(), "a benchmark worker failed");
    }
}

/// A fresh list holding `tasks` pending tasks.
fn list_with(tasks: u64) -> tempfile::TempDir {
    let home = tempfile::tempdir().expect("temp dir");
    let store = TaskListStore::open(home.path(), LIST).expect("open list");
    for i in 0..tasks {
        store
            .create(NewListTask::new(format!("task {i}")))
            .expect("create");
    }
    home
}

#[divan::bench(args = [1, 4, 16], sample_count = 5, sample_size = 1)]
fn create(bencher: Bencher, processes: u64) {
    bencher
        .counter(ItemsCount::new(OPS))
        .with_inputs(|| list_with(0))
        .bench_local_values(|home| {
            run_workers(home.path(), "create", processes);
            home
        });
}

/// Each process changes the metadata of its own task (task lock only).
#[divan::bench(args = [1, 4, 16], sample_count = 5, sample_size = 1)]
fn update(bencher: Bencher, processes: u64) {
    bencher
        .counter(ItemsCount::new(OPS))
        .with_inputs(|| list_with(processes))
        .bench_local_values(|home| {
            run_workers(home.path(), "update", processes);
            home
        });
}

/// Every task is claimed once, by id (list lock and task lock).
#[divan::bench(args = [1, 4, 16], sample_count = 5, sample_size = 1)]
fn claim(bencher: Bencher, processes: u64) {
    bencher
        .counter(ItemsCount::new(OPS))
        .with_inputs(|| list_with(OPS))
        .bench_local_values(|home| {
            run_workers(home.path(), "claim", processes);
            home
        });
}
