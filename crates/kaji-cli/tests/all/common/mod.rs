//! What the kaji-cli integration tests share: the `kaji` binary started
//! with a clean environment, the three wire formats of the scripted model
//! server, and the helpers of each family of tests (`exec`: `kaji exec`
//! and its JSON lines; `files`: workspaces; `tmux`: a real terminal;
//! `acp`/`sdk`: the clients that drive `kaji acp` and the Agent SDK).
//!
//! A test file builds on these and adds only what is its own (flags,
//! settings, scripts); it never copies the environment set-up, so a new
//! variable kaji reads is cleared for every test in one place. Nothing
//! here may read the caller's `HOME` or a real provider key.

#![allow(dead_code, unused_imports)]

pub mod acp;
pub mod checkpoints;
pub mod exec;
pub mod files;
pub mod sdk;
pub mod tmux;

use std::path::Path;
use std::process::Stdio;

use kaji_test_support::ScriptedModelServer;
use tokio::process::Command;

pub use exec::{
    exec_json, json_lines, model, of_type, output, result_line, run, scripted, stderr, stdout,
    tool_results, worker,
};
pub use files::{
    PRICED_MODEL, done, home_and_work, home_with_settings, input_tokens, serve, serve_held_tasks,
    write,
};

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

/// Clears `cmd`'s environment but for `PATH`, and gives it `HOME=home`
/// and `KAJI_HOME=home/kaji-home`: the one place a test process's
/// environment is made.
pub fn clean_env(cmd: &mut std::process::Command, home: &Path) {
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("KAJI_HOME", home.join("kaji-home"));
}

/// [`kaji`] for a blocking test: stdin empty, stdout and stderr piped.
pub fn kaji_sync(home: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(KAJI);
    clean_env(&mut cmd, home);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// `kaji` with nothing of the caller's environment but `PATH`: `HOME` is
/// `home`, `KAJI_HOME` is `home/kaji-home`, stdin is empty, stdout and
/// stderr are piped, and the process is killed if the test drops it.
pub fn kaji(home: &Path) -> Command {
    let mut cmd = Command::from(kaji_sync(home));
    cmd.kill_on_drop(true);
    cmd
}

/// Another program (`node`, `python3`, `tmux`) in the same clean
/// environment as [`kaji`], killed if the test drops it; stdio is left
/// to the caller.
pub fn program(name: &str, home: &Path) -> Command {
    let mut cmd = std::process::Command::new(name);
    clean_env(&mut cmd, home);
    let mut cmd = Command::from(cmd);
    cmd.kill_on_drop(true);
    cmd
}

/// [`kaji_sync`] with `KAJI_HOME` = `dir`, which is also its `HOME`: for
/// the subcommands that read kaji's own files (tasks, sessions,
/// checkpoints, doctor).
pub fn kaji_at(dir: &Path) -> std::process::Command {
    let mut cmd = kaji_sync(dir);
    cmd.env("KAJI_HOME", dir);
    cmd
}
