//! The tools array the model sees, on every wire (Anthropic Messages,
//! Chat Completions, Responses), byte for byte: `kaji exec` runs against
//! the scripted model server and the `tools` of its first request are
//! compared with the recorded ones in `tests/tool_schemas/<wire>.json`,
//! key order included (this binary's JSON keeps it). A change of any
//! tool's name, description or input schema shows here, and it moves the
//! prompt cache prefix; when it is meant, record the new bodies with
//! `KAJI_RECORD_TOOL_SCHEMAS=1 cargo test -p kaji-cli --test all tool_schemas::`
//! and review the diff.

use std::path::PathBuf;
use std::process::Stdio;

use kaji_test_support::{Script, ScriptedModelServer, Turn};
use serde_json::{Value, json};
use tokio::process::Command;

/// The `tools` of the first request `kaji exec` sends with `provider`.
async fn tools_sent(provider: &str) -> Value {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = ScriptedModelServer::start(Script::new([Turn::tool_call(
        "AttemptCompletion",
        json!({"result": "done"}),
    )]))
    .await;
    let base = match provider {
        "anthropic" => server.anthropic_base_url(),
        _ => server.openai_base_url(),
    };
    let out = Command::new(env!("CARGO_BIN_EXE_kaji"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("KAJI_HOME", home.path().join("kaji-home"))
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("OPENAI_API_KEY", "test-key")
        .args(["exec", "--provider", provider, "--base-url", &base])
        .args(["--model", "scripted", "-C"])
        .arg(work.path())
        .arg("hello")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = server.requests();
    let first = requests.first().expect("kaji sent a request");
    first.body["tools"].clone()
}

async fn same_as_recorded(provider: &str) {
    let tools = tools_sent(provider).await;
    assert!(
        tools.as_array().is_some_and(|t| t.len() > 20),
        "{provider}: {tools}"
    );
    let got = format!("{}\n", serde_json::to_string_pretty(&tools).unwrap());
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/tool_schemas")
        .join(format!("{provider}.json"));
    if std::env::var_os("KAJI_RECORD_TOOL_SCHEMAS").is_some() {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(g, w)| g != w)
            .map_or(0, |i| i + 1);
        panic!(
            "the tools sent on {provider} changed (first difference on line {line} of {}); \
             the whole array as sent now:\n{got}",
            path.display()
        );
    }
}

#[tokio::test]
async fn anthropic_tools_are_the_recorded_ones() {
    same_as_recorded("anthropic").await;
}

#[tokio::test]
async fn chat_completions_tools_are_the_recorded_ones() {
    same_as_recorded("openai").await;
}

#[tokio::test]
async fn responses_tools_are_the_recorded_ones() {
    same_as_recorded("openai-responses").await;
}
