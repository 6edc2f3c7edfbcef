//! The Agent SDK drivers and the `kaji` they start see nothing of the
//! test process's environment but `PATH`: the SDK tests run with the
//! clean environment of `common::kaji` (a temporary `HOME`, the test key),
//! so a developer's `HOME`, provider keys or `CARGO_*` never reach them.
//!
//! Each driver (Python and TypeScript SDK) runs `env` through kaji's Bash
//! tool; the output the model receives is checked against the caller's
//! variables.

use std::collections::BTreeMap;

use kaji_test_support::{ScriptedModelServer, Turn};
use serde_json::{Value, json};
use tokio::process::Command;

use super::agent_sdk::{Sdk, repo_root, result};
use super::agent_sdk_control::node;
use crate::common::serve;

/// Variables given on purpose (`PATH`, Python's no-bytecode switch) or
/// set by a program for its child whatever it inherited: bash's own, and
/// what a `pyenv` shim or Python's locale coercion add.
fn set_by_the_programs(name: &str) -> bool {
    [
        "PATH",
        "PYTHONDONTWRITEBYTECODE",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
    ]
    .contains(&name)
        || name.starts_with("PYENV")
        || name.starts_with("LC_")
}

/// Every string inside `value`, depth first.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// The `NAME=value` lines of the `env` output the model received in its
/// second request.
fn env_seen_by_the_model(server: &ScriptedModelServer) -> BTreeMap<String, String> {
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "the Bash round and the answer");
    let last = requests[1].body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or_default();
    let mut texts = Vec::new();
    strings(&last, &mut texts);
    texts
        .iter()
        .flat_map(|t| t.lines())
        .filter_map(|l| l.split_once('='))
        .filter(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// Runs `env` through the SDK driver `driver` with `options`, and checks
/// that no variable of this process reached kaji's shell.
async fn check(driver: Command, options: Value) {
    let sdk = Sdk::new();
    let server = serve([
        Turn::tool_call("Bash", json!({"command": "env"})),
        Turn::text("Listed."),
    ])
    .await;
    let (messages, code) = sdk.drive(driver, &server, "list env", options).await;
    assert_eq!(code, 0, "{messages:#?}");
    assert_eq!(result(&messages)["subtype"], "success", "{messages:#?}");
    let seen = env_seen_by_the_model(&server);
    let home = sdk.home.path().to_string_lossy().to_string();
    assert_eq!(seen.get("HOME"), Some(&home), "{seen:#?}");
    let leaked: Vec<String> = std::env::vars()
        .filter(|(name, value)| {
            !set_by_the_programs(name) && seen.get(name).is_some_and(|v| v == value)
        })
        .map(|(name, _)| name)
        .collect();
    assert!(
        leaked.is_empty(),
        "the caller's environment reached kaji through the SDK: {leaked:?}"
    );
    // There is something that could leak (under `cargo test`, `CARGO_*`).
    assert!(std::env::vars().any(|(name, _)| !set_by_the_programs(&name)));
}

#[tokio::test]
async fn the_python_sdk_and_its_kaji_get_a_clean_environment() {
    let mut driver = Command::new("python3");
    driver.arg(repo_root().join("tests/agent-sdk/drive.py"));
    check(
        driver,
        json!({"permission_mode": "bypassPermissions", "extra_args": {"sandbox": "off"}}),
    )
    .await;
}

#[tokio::test]
async fn the_typescript_sdk_and_its_kaji_get_a_clean_environment() {
    check(
        node("query"),
        json!({
            "permissionMode": "bypassPermissions",
            "allowDangerouslySkipPermissions": true,
            "extraArgs": {"sandbox": "off"},
        }),
    )
    .await;
}
