//! Tests of the file tools (`Read`, `Write`, `Edit`, `Glob`, `Grep`) and
//! `.kajiignore`, called through the public registry exactly as the core
//! calls them, on real files in temporary directories.

mod delegated;
mod edit;
mod glob;
mod grep;
mod hostile;
mod kajiignore;
mod notebook;
mod read;
mod write;

use std::path::Path;

use kaji_tools::{ToolContext, ToolError, ToolOutput, builtin_tools};
use serde_json::Value;

/// Runs the built-in tool `name` with `input` in `cwd`.
pub async fn run(name: &str, input: Value, cwd: &Path) -> Result<ToolOutput, ToolError> {
    let registry = builtin_tools();
    let tool = registry
        .get(name)
        .unwrap_or_else(|| panic!("no tool named {name}"));
    tool.call(input, &ToolContext::new(cwd)).await
}

/// Runs a call that must succeed.
pub async fn ok(name: &str, input: Value, cwd: &Path) -> ToolOutput {
    match run(name, input.clone(), cwd).await {
        Ok(out) => out,
        Err(e) => panic!("{name} {input} failed: {e}"),
    }
}

/// Runs a call that must fail, returning the error text the model sees.
pub async fn err(name: &str, input: Value, cwd: &Path) -> String {
    match run(name, input.clone(), cwd).await {
        Ok(out) => panic!(
            "{name} {input} should have failed but returned: {}",
            out.content
        ),
        Err(e) => e.to_string(),
    }
}

/// A temporary working directory, canonicalized so paths in messages
/// compare equal.
pub fn workdir() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().canonicalize().expect("canonical temp dir");
    (dir, path)
}

/// Writes `content` to `root/rel`, creating parents.
pub fn put(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, content).expect("write");
}

pub use kaji_test_support::fixtures::mkfifo;
