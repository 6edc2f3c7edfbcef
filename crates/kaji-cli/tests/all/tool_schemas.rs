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

use serde_json::Value;

use crate::common::{Wire, done, kaji, scripted, serve};

/// The `tools` of the first request `kaji exec` sends with `provider`.
async fn tools_sent(provider: &str) -> Value {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let server = serve([done("done")]).await;
    let wire = *Wire::ALL
        .iter()
        .find(|w| w.provider() == provider)
        .expect("a provider the scripted server speaks");
    let mut cmd = kaji(home.path());
    cmd.arg("exec");
    scripted(&mut cmd, &server, wire);
    let out = cmd
        .arg("-C")
        .arg(work.path())
        .arg("hello")
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
