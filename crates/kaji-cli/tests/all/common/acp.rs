//! The clients of `kaji acp`: the official ACP TypeScript SDK
//! (`tests/acp-client/client.mjs`, run by node) and a raw JSON-RPC peer
//! that writes lines by hand. Both start kaji in the clean environment of
//! [`super::kaji`]; nothing here reads the caller's home or keys.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use kaji_test_support::ScriptedModelServer;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use super::{KAJI, TEST_KEY, program};

/// The ACP test client; fails with how to install it when it is missing.
pub fn client_script() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/acp-client");
    assert!(
        dir.join("node_modules/@agentclientprotocol/sdk").is_dir(),
        "the ACP test client is not installed: run `npm ci --prefix tests/acp-client` in the repository root first"
    );
    dir.join("client.mjs")
}

/// The flags that point `kaji acp` at `server`.
pub fn model_flags(server: &ScriptedModelServer) -> Vec<String> {
    vec![
        "--provider".into(),
        "anthropic".into(),
        "--base-url".into(),
        server.anthropic_base_url(),
        "--model".into(),
        "scripted".into(),
    ]
}

/// `name` in the clean environment of [`program`], with the test key.
fn command(name: &str, home: &Path) -> Command {
    let mut cmd = program(name, home);
    cmd.env("ANTHROPIC_API_KEY", TEST_KEY);
    cmd
}

/// Runs one scenario of the node client; returns what it logged.
pub async fn client(
    scenario: &str,
    home: &Path,
    work: &Path,
    server: &ScriptedModelServer,
    vars: &[(&str, &str)],
) -> Value {
    client_with(scenario, home, work, server, vars, &[]).await
}

/// [`client`], with more flags for `kaji acp`.
pub async fn client_with(
    scenario: &str,
    home: &Path,
    work: &Path,
    server: &ScriptedModelServer,
    vars: &[(&str, &str)],
    flags: &[&str],
) -> Value {
    let mut cmd = command("node", home);
    cmd.arg(client_script())
        .arg(scenario)
        .arg("--")
        .args(model_flags(server))
        .args(flags)
        .env("KAJI_BIN", KAJI)
        .env("ACP_CWD", work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().await.expect("node runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let log: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the client printed no JSON ({e}): {}\nstderr: {stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert!(
        log.get("error").is_none(),
        "client failed: {log}\nstderr: {stderr}"
    );
    assert_eq!(log["agentExit"], 0, "kaji acp exit; stderr: {stderr}");
    log
}

/// The updates of one kind.
pub fn updates<'a>(log: &'a Value, kind: &str) -> Vec<&'a Value> {
    log["updates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| &n["update"])
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

/// The text of the updates of `kind`, joined.
pub fn text_of(log: &Value, kind: &str) -> String {
    updates(log, kind)
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

/// A raw JSON-RPC peer of `kaji acp`.
pub struct Raw {
    pub child: tokio::process::Child,
    pub stdin: Option<tokio::process::ChildStdin>,
    pub lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Raw {
    pub fn start(home: &Path, server: &ScriptedModelServer) -> Self {
        Self::start_with(home, server, &[])
    }

    /// [`Raw::start`], with more variables in `kaji acp`'s environment.
    pub fn start_with(home: &Path, server: &ScriptedModelServer, vars: &[(&str, &str)]) -> Self {
        let mut cmd = command(KAJI, home);
        cmd.envs(vars.iter().copied());
        cmd.arg("acp")
            .args(model_flags(server))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            child,
            stdin,
            lines,
        }
    }

    pub async fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// The next line on stdout, which must be JSON-RPC.
    pub async fn recv(&mut self) -> Value {
        let line = self
            .lines
            .next_line()
            .await
            .unwrap()
            .expect("kaji acp closed stdout");
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout is not JSON-RPC ({e}): {line}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
        v
    }

    /// The response to request `id` (notifications before it are skipped).
    pub async fn response(&mut self, id: u64) -> Value {
        loop {
            let v = self.recv().await;
            if v["id"] == id && v.get("method").is_none() {
                return v;
            }
        }
    }

    pub async fn init_and_session(&mut self, work: &Path) -> String {
        self.send(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#,
        )
        .await;
        assert!(self.response(1).await["result"].is_object());
        self.new_session(2, work).await
    }

    /// Opens another session in `work` with request id `id`.
    pub async fn new_session(&mut self, id: u64, work: &Path) -> String {
        let new = json!({"jsonrpc":"2.0","id":id,"method":"session/new","params":{"cwd": work, "mcpServers": []}});
        self.send(&new.to_string()).await;
        let r = self.response(id).await;
        r["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {r}"))
            .to_string()
    }

    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).await.unwrap();
        stdin.flush().await.unwrap();
    }
}
