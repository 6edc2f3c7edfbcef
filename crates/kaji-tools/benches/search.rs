//! Speed of `Grep` and `Glob` on a 50,000-file tree (500 directories of 100
//! files of eight lines, the tree of `benches/fast-at-any-size.sh`), called
//! through the registry as the core calls them, next to `rg` with as many
//! threads as kaji's walker uses (one per core) when `rg` is installed.
//! Target (issue "Fast at any size"): Grep ≤ 1.2× `rg` at the same thread
//! count. Results are recorded in docs/benchmarks.md.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmark setup: a failed step aborts the measurement"
)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use kaji_tools::{ToolContext, builtin_tools};
use serde_json::{Value, json};

fn main() {
    divan::main();
}

const DIRS: usize = 500;
const FILES_PER_DIR: usize = 100;

/// The shared tree, made once per bench run: a git repository (so that
/// `.gitignore` rules are looked for, as in a real checkout) holding one
/// file with the searched line. `KAJI_BENCH_TREE` names an existing tree
/// to search instead (e.g. the one `benches/fast-at-any-size.sh` makes),
/// so that runs compared by their CPU time do not make it each time.
fn tree() -> &'static Path {
    static GIVEN: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();
    if let Some(path) = GIVEN.get_or_init(|| std::env::var_os("KAJI_BENCH_TREE").map(Into::into)) {
        return path;
    }
    static TREE: OnceLock<tempfile::TempDir> = OnceLock::new();
    TREE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join(".git")).expect("mkdir .git");
        kaji_test_support::fixtures::write_tree(dir.path(), DIRS, FILES_PER_DIR);
        std::fs::write(
            dir.path().join("calc.py"),
            "def add(a, b):\n    return a - b\n",
        )
        .expect("write");
        dir
    })
    .path()
}

fn call(name: &str, input: Value) -> String {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let rt = RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("runtime")
    });
    let registry = builtin_tools();
    let tool = registry.get(name).expect("tool");
    let out = rt
        .block_on(tool.call(input, &ToolContext::new(tree())))
        .expect("call");
    out.content
}

/// The search of the 5-turn fix: one matching file among 50,001.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn grep_files_with_matches_50k() -> String {
    call("Grep", json!({"pattern": "return a - b"}))
}

/// Every file matches: the output side (sorting, formatting) at its
/// largest.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn grep_every_file_matches_50k() -> String {
    call("Grep", json!({"pattern": "content of file"}))
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn grep_content_50k() -> String {
    call(
        "Grep",
        json!({"pattern": "return a - b", "output_mode": "content"}),
    )
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn glob_50k() -> String {
    call("Glob", json!({"pattern": "**/file7.txt"}))
}

/// `rg -l` with one thread per core, the reference of the target; skipped
/// (an empty run) when `rg` is not installed.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn rg_files_with_matches_50k() -> bool {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    Command::new("rg")
        .args(["-j", &threads.to_string(), "-l", "return a - b"])
        .arg(tree())
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
