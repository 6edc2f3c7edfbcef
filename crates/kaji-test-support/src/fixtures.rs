//! Small helpers that tests and benchmarks across the workspace share: a
//! `git` that never reads the user's configuration, a generated tree of
//! many files, the npm-installed MCP servers, and FIFOs.
//!
//! Like the rest of this crate they are for tests: they panic with a clear
//! message instead of returning errors.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `git ARGS` in `dir` with no system or global configuration and a
/// fixed identity, and returns its standard output. Panics, naming the
/// command and its stderr, when git fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "kaji-test")
        .env("GIT_AUTHOR_EMAIL", "kaji-test@example.com")
        .env("GIT_COMMITTER_NAME", "kaji-test")
        .env("GIT_COMMITTER_EMAIL", "kaji-test@example.com")
        .output()
        .unwrap_or_else(|e| panic!("git cannot be started: {e}"));
    assert!(
        out.status.success(),
        "git {args:?} failed in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes a tree of `dirs × files_per_dir` small text files under `root`
/// (`dir{d/50}/sub{d}/file{f}.txt`, eight lines each, every file
/// different): the benchmarks' generated repository (500 × 100 is the
/// 50,000-file tree of docs/benchmarks.md).
pub fn write_tree(root: &Path, dirs: usize, files_per_dir: usize) {
    for d in 0..dirs {
        let sub = root.join(format!("dir{}/sub{d}", d / 50));
        std::fs::create_dir_all(&sub)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", sub.display()));
        for f in 0..files_per_dir {
            let line = format!("content of file {f} in directory {d}\n");
            let file = sub.join(format!("file{f}.txt"));
            std::fs::write(&file, line.repeat(8))
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", file.display()));
        }
    }
}

/// The installed binary of an npm MCP server (`mcp-server-everything`,
/// `mcp-server-filesystem`) under `tests/mcp-servers/node_modules/.bin` of
/// the repository. Panics with the command that installs them when they
/// are missing.
pub fn mcp_server_bin(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/mcp-servers/node_modules/.bin")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: the MCP test servers are not installed. Run `npm ci --prefix tests/mcp-servers` \
         in the repository root first.",
        path.display()
    );
    path
}

/// Makes a FIFO (mode 0600) at `path`: a file whose reader blocks until a
/// writer comes, which tests use to hold a command or a task at a known
/// point instead of sleeping. Panics when it cannot be made.
pub fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo")
        .args(["-m", "600"])
        .arg(path)
        .status()
        .unwrap_or_else(|e| panic!("mkfifo cannot be started: {e}"));
    assert!(status.success(), "mkfifo {}: {status}", path.display());
}
