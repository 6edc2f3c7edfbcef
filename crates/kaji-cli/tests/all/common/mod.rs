//! What the kaji-cli integration tests share: the `kaji` binary started
//! with a clean environment, the three wire formats of the scripted model
//! server, and the JSON lines `kaji exec --json` prints.
//!
//! A test file builds on these and adds only what is its own (flags,
//! settings, scripts); it never copies the environment set-up, so a new
//! variable kaji reads is cleared for every test in one place.

#![allow(dead_code)]

use std::path::Path;
use std::process::Stdio;

use kaji_test_support::ScriptedModelServer;
use serde_json::Value;
use tokio::process::Command;

/// The binary under test.
pub const KAJI: &str = env!("CARGO_BIN_EXE_kaji");

/// The API key every test run is given (the scripted server accepts any).
pub const TEST_KEY: &str = "test-key";

/// The wire formats the scripted model server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// Anthropic's Messages API.
    Anthropic,
    /// OpenAI's Chat Completions.
    OpenAi,
    /// OpenAI's Responses API.
    Responses,
}

impl Wire {
    /// All three, for tests that run on each.
    pub const ALL: [Wire; 3] = [Wire::Anthropic, Wire::OpenAi, Wire::Responses];

    /// The `--provider` value.
    pub fn provider(self) -> &'static str {
        match self {
            Wire::Anthropic => "anthropic",
            Wire::OpenAi => "openai",
            Wire::Responses => "openai-responses",
        }
    }

    /// The `--base-url` of `server` for this wire.
    pub fn base_url(self, server: &ScriptedModelServer) -> String {
        match self {
            Wire::Anthropic => server.anthropic_base_url(),
            Wire::OpenAi => server.openai_base_url(),
            Wire::Responses => server.responses_base_url(),
        }
    }
}

/// `kaji` with nothing of the caller's environment but `PATH`: `HOME` is
/// `home`, `KAJI_HOME` is `home/kaji-home`, stdin is empty, stdout and
/// stderr are piped, and the process is killed if the test drops it.
pub fn kaji(home: &Path) -> Command {
    let mut cmd = Command::new(KAJI);
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("KAJI_HOME", home.join("kaji-home"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// `kaji exec --json -C WORK` against `server` on `wire`, with the model
/// `scripted` and a test key for both providers. Flags and the prompt
/// follow.
pub fn exec_json(home: &Path, work: &Path, server: &ScriptedModelServer, wire: Wire) -> Command {
    let mut cmd = kaji(home);
    cmd.env("ANTHROPIC_API_KEY", TEST_KEY)
        .env("OPENAI_API_KEY", TEST_KEY)
        .args(["exec", "--json", "-C"])
        .arg(work)
        .args(["--provider", wire.provider(), "--base-url"])
        .arg(wire.base_url(server))
        .args(["--model", "scripted"]);
    cmd
}

/// Every line of `stdout` as JSON; a line that is not JSON fails the test.
pub fn json_lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Runs `cmd` to its end: the exit code (-1 for a signal), the JSON lines
/// of its stdout and its stderr.
pub async fn run(mut cmd: Command) -> (i32, Vec<Value>, String) {
    let out = cmd.output().await.expect("kaji runs");
    (
        out.status.code().unwrap_or(-1),
        json_lines(&out.stdout),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
