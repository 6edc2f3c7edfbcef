//! A `Bash` command does not inherit kaji's secrets: provider keys and
//! variables that look like secrets are removed from its environment
//! unless `env_passthrough` names them. One test in its own binary,
//! because it sets process environment variables before any thread starts.

use kaji_tasks::process::EnvPolicy;
use kaji_tools::{ToolContext, builtin_tools};
use serde_json::json;

#[test]
fn a_bash_command_gets_no_secrets() {
    // SAFETY: set before any other thread of this test binary exists.
    unsafe {
        std::env::set_var("ANTHROPIC_API_KEY", "sk-ant-do-not-leak");
        std::env::set_var("GITHUB_TOKEN", "ghp-do-not-leak");
        std::env::set_var("KAJI_TEST_CUSTOM", "custom-do-not-leak");
        std::env::set_var("KAJI_PASS_TOKEN", "passed-on-purpose");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut ctx = ToolContext::new(dir.path());
    ctx.services_mut().env_policy = std::sync::Arc::new(EnvPolicy {
        secret_env: vec!["KAJI_TEST_CUSTOM".to_string()],
        env_passthrough: vec!["KAJI_PASS_TOKEN".to_string()],
        set: Vec::new(),
    });
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let output = runtime
        .block_on(async {
            let registry = builtin_tools();
            let tool = registry.get("Bash").expect("Bash is registered");
            tool.call(
                json!({"command": "env; echo \"key=[$ANTHROPIC_API_KEY]\""}),
                &ctx,
            )
            .await
        })
        .expect("env runs");
    let text = output.content;
    for leaked in [
        "sk-ant-do-not-leak",
        "ghp-do-not-leak",
        "custom-do-not-leak",
    ] {
        assert!(
            !text.contains(leaked),
            "{leaked} reached the command:\n{text}"
        );
    }
    assert!(text.contains("key=[]"), "{text}");
    assert!(text.contains("KAJI_PASS_TOKEN=passed-on-purpose"), "{text}");
}
