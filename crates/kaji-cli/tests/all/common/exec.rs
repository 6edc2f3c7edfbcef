//! `kaji exec` and its output: the model flags that point a command at
//! the scripted server, the JSON lines `kaji exec --json` prints, and the
//! exit code, stdout and stderr of a finished process. Never a real key.

use std::path::Path;
use std::process::Output;

use kaji_test_support::ScriptedModelServer;
use serde_json::Value;
use tokio::process::Command;

use super::{TEST_KEY, Wire, kaji};

/// Points `cmd` at `base_url` on `wire`: the test key for both
/// providers, `--provider`, `--base-url` and `--model scripted`.
pub fn model<'a>(cmd: &'a mut Command, wire: Wire, base_url: &str) -> &'a mut Command {
    cmd.env("ANTHROPIC_API_KEY", TEST_KEY)
        .env("OPENAI_API_KEY", TEST_KEY)
        .args(["--provider", wire.provider(), "--base-url", base_url])
        .args(["--model", "scripted"])
}

/// [`model`] with the base URL of `server` for `wire`.
pub fn scripted<'a>(
    cmd: &'a mut Command,
    server: &ScriptedModelServer,
    wire: Wire,
) -> &'a mut Command {
    model(cmd, wire, &wire.base_url(server))
}

/// `kaji exec --json -C WORK` against `server` on `wire`, with the model
/// `scripted` and a test key for both providers. Flags and the prompt
/// follow.
pub fn exec_json(home: &Path, work: &Path, server: &ScriptedModelServer, wire: Wire) -> Command {
    let mut cmd = kaji(home);
    cmd.args(["exec", "--json", "-C"]).arg(work);
    scripted(&mut cmd, server, wire);
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

/// Runs a blocking `cmd` to its end: the exit code (-1 for a signal),
/// its stdout and its stderr as text.
pub fn output(cmd: &mut std::process::Command) -> (i32, String, String) {
    let out = cmd.output().expect("kaji runs");
    (out.status.code().unwrap_or(-1), stdout(&out), stderr(&out))
}

/// The stdout of `out` as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The stderr of `out` as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The lines of `lines` whose `type` is `kind`.
pub fn of_type(lines: &[Value], kind: &str) -> Vec<Value> {
    lines
        .iter()
        .filter(|l| l["type"] == kind)
        .cloned()
        .collect()
}

/// The run's `result` line (the last one), or null when there is none.
pub fn result_line(lines: &[Value]) -> Value {
    lines
        .iter()
        .rev()
        .find(|l| l["type"] == "result")
        .cloned()
        .unwrap_or(Value::Null)
}

/// The `tool_result` lines.
pub fn tool_results(lines: &[Value]) -> Vec<Value> {
    of_type(lines, "tool_result")
}

/// `kaji worker --task-list LIST --name NAME` against `server` (Anthropic
/// wire). Flags follow.
pub fn worker(home: &Path, server: &ScriptedModelServer, list: &str, name: &str) -> Command {
    let mut cmd = kaji(home);
    cmd.args(["worker", "--task-list", list, "--name", name]);
    scripted(&mut cmd, server, Wire::Anthropic);
    cmd
}
