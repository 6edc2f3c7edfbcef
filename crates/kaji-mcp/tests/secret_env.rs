//! An MCP stdio server does not inherit kaji's secrets: provider keys and
//! variables that look like secrets are removed from its environment,
//! except those `env_passthrough` names and those its own configuration
//! sets. One test in its own binary, because it sets process environment
//! variables before any thread starts.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed expectation is a test failure"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use kaji_mcp::{McpManager, McpManagerOptions, McpServerConfig, McpTransportConfig};
use kaji_tasks::process::EnvPolicy;

#[test]
fn an_mcp_server_gets_no_secrets() {
    // SAFETY: set before any other thread of this test binary exists.
    unsafe {
        std::env::set_var("KAJI_TEST_API_KEY", "sk-test-do-not-leak");
        std::env::set_var("ANTHROPIC_AUTH_TOKEN", "auth-do-not-leak");
        std::env::set_var("KAJI_TEST_CUSTOM", "custom-do-not-leak");
        std::env::set_var("KAJI_PASS_TOKEN", "passed-on-purpose");
        std::env::set_var("KAJI_TEST_PLAIN", "plain");
    }
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let names = runtime.block_on(server_env_names());
    for absent in [
        "KAJI_TEST_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "KAJI_TEST_CUSTOM",
    ] {
        assert!(
            !names.iter().any(|n| n == absent),
            "{absent} reached the server"
        );
    }
    for present in [
        "KAJI_PASS_TOKEN",
        "KAJI_TEST_PLAIN",
        "SERVER_OWN_TOKEN",
        "PATH",
    ] {
        assert!(
            names.iter().any(|n| n == present),
            "{present} missing: {names:?}"
        );
    }
}

/// Starts the faulty test server in `env` mode and returns the variable
/// names it saw.
async fn server_env_names() -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("env.txt");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/faulty_server.js");
    let mut config = McpServerConfig::stdio("node", [script.to_string_lossy().into_owned()]);
    if let McpTransportConfig::Stdio { env, .. } = &mut config.transport {
        env.insert("FAULT".into(), "env".into());
        env.insert("STATE_FILE".into(), state.to_string_lossy().into_owned());
        // Configured for this server on purpose: kept.
        env.insert("SERVER_OWN_TOKEN".into(), "configured".into());
    }
    let servers = BTreeMap::from([("envprobe".to_string(), config)]);
    let options = McpManagerOptions {
        restart_backoff_initial: Duration::ZERO,
        restart_backoff_max: Duration::ZERO,
        kill_grace: Duration::from_millis(500),
        env_policy: std::sync::Arc::new(EnvPolicy {
            secret_env: vec!["KAJI_TEST_CUSTOM".to_string()],
            env_passthrough: vec!["KAJI_PASS_TOKEN".to_string()],
            set: Vec::new(),
        }),
    };
    let manager = McpManager::start_with_options(servers, dir.path(), options);
    let pending = manager.wait_ready(Duration::from_secs(60)).await;
    assert!(pending.is_empty(), "server still connecting: {pending:?}");
    let text = std::fs::read_to_string(&state).expect("the server wrote its environment");
    manager.shutdown().await;
    text.lines().map(str::to_string).collect()
}
