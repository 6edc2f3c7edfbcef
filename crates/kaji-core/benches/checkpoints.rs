//! Speed of checkpoints on a 50,000-file tree (500 directories of 100
//! small files): the initial checkpoint into a fresh shadow repository, a
//! checkpoint after a one-file change (target: under 200 ms), a checkpoint
//! when nothing changed, and a restore that undoes a one-file change; an
//! Edit's checkpoint (only the path it wrote, target: 30 ms) and the first
//! checkpoint of the same tree committed in a git checkout (borrowing its
//! objects and index, target: 0.5 s). Results are recorded in
//! docs/benchmarks.md.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmark setup: a failed step aborts the measurement"
)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use kaji_core::checkpoints::CheckpointStore;

fn main() {
    divan::main();
}

const DIRS: usize = 500;
const FILES_PER_DIR: usize = 100;

/// The shared 50,000-file tree, made once per bench run.
fn tree() -> &'static Path {
    static TREE: OnceLock<tempfile::TempDir> = OnceLock::new();
    TREE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        kaji_test_support::fixtures::write_tree(dir.path(), DIRS, FILES_PER_DIR);
        dir
    })
    .path()
}

/// A copy of the tree committed in a git checkout of its own, made once.
fn committed_tree() -> &'static Path {
    static TREE: OnceLock<tempfile::TempDir> = OnceLock::new();
    TREE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let status = std::process::Command::new("cp")
            .arg("-r")
            .arg(format!("{}/.", tree().display()))
            .arg(dir.path())
            .status()
            .expect("cp");
        assert!(status.success());
        let git = |args: &[&str]| kaji_test_support::fixtures::git(dir.path(), args);
        git(&["init", "-q"]);
        git(&["add", "."]);
        git(&["commit", "-q", "-m", "tree"]);
        dir
    })
    .path()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A store over the shared tree whose initial checkpoint is taken.
fn warm_store() -> &'static (tempfile::TempDir, CheckpointStore) {
    static STORE: OnceLock<(tempfile::TempDir, CheckpointStore)> = OnceLock::new();
    STORE.get_or_init(|| {
        let home = tempfile::tempdir().expect("home");
        let store = CheckpointStore::open(home.path(), tree()).expect("open");
        runtime()
            .block_on(store.commit("initial"))
            .expect("initial checkpoint");
        (home, store)
    })
}

fn changed_file() -> PathBuf {
    tree().join("dir3/sub150/file7.txt")
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn initial_checkpoint_50k_files(bencher: divan::Bencher) {
    let rt = runtime();
    bencher
        .with_inputs(|| {
            let home = tempfile::tempdir().expect("home");
            let store = CheckpointStore::open(home.path(), tree()).expect("open");
            (home, store)
        })
        .bench_local_values(|(home, store)| {
            rt.block_on(store.commit("initial")).expect("commit");
            home
        });
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn initial_checkpoint_borrowed_50k_files(bencher: divan::Bencher) {
    let rt = runtime();
    let tree = committed_tree();
    bencher
        .with_inputs(|| {
            let home = tempfile::tempdir().expect("home");
            let store = CheckpointStore::open(home.path(), tree).expect("open");
            (home, store)
        })
        .bench_local_values(|(home, store)| {
            rt.block_on(store.commit("initial")).expect("commit");
            home
        });
}

#[divan::bench(sample_count = 20, sample_size = 1)]
fn edit_checkpoint_50k_files(bencher: divan::Bencher) {
    let rt = runtime();
    let (_, store) = warm_store();
    let mut n = 0u64;
    let written = [changed_file()];
    bencher
        .with_inputs(|| {
            n += 1;
            std::fs::write(changed_file(), format!("edited {n}\n")).expect("write");
        })
        .bench_local_values(|()| {
            let made = rt
                .block_on(store.commit_paths("Edit", &written))
                .expect("commit");
            assert!(made.is_some());
        });
}

#[divan::bench(sample_count = 20, sample_size = 1)]
fn one_file_change_50k_files(bencher: divan::Bencher) {
    let rt = runtime();
    let (_, store) = warm_store();
    let mut n = 0u64;
    bencher
        .with_inputs(|| {
            n += 1;
            std::fs::write(changed_file(), format!("edit {n}\n")).expect("write");
        })
        .bench_local_values(|()| {
            let made = rt.block_on(store.commit("one file")).expect("commit");
            assert!(made.is_some());
        });
}

#[divan::bench(sample_count = 20, sample_size = 1)]
fn no_change_50k_files(bencher: divan::Bencher) {
    let rt = runtime();
    let (_, store) = warm_store();
    rt.block_on(store.commit("settle")).expect("commit");
    bencher.bench_local(|| rt.block_on(store.commit("nothing")).expect("commit"));
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn restore_one_file_change_50k_files(bencher: divan::Bencher) {
    let rt = runtime();
    let (_, store) = warm_store();
    let base = rt
        .block_on(async {
            store.commit("base").await.expect("commit");
            store.latest().await
        })
        .expect("latest")
        .expect("a checkpoint");
    let mut n = 0u64;
    bencher
        .with_inputs(|| {
            n += 1;
            std::fs::write(changed_file(), format!("to be undone {n}\n")).expect("write");
        })
        .bench_local_values(|()| {
            rt.block_on(store.restore(&base.id)).expect("restore");
        });
}
