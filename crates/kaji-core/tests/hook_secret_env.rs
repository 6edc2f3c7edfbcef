//! A hook does not inherit kaji's secrets: provider keys and variables that
//! look like secrets are removed from its environment unless
//! `env_passthrough` names them. One test in its own binary, because it
//! sets process environment variables before any thread starts.

use kaji_core::PermissionMode;
use kaji_core::hooks::{HookEvent, HookPayload, HookRunner, HookSpec, HooksConfig};
use kaji_tasks::process::EnvPolicy;
use tokio_util::sync::CancellationToken;

#[test]
fn a_hook_gets_no_secrets() {
    // SAFETY: set before any other thread of this test binary exists.
    unsafe {
        std::env::set_var("KAJI_TEST_API_KEY", "sk-test-do-not-leak");
        std::env::set_var("ANTHROPIC_AUTH_TOKEN", "auth-do-not-leak");
        std::env::set_var("KAJI_TEST_CUSTOM", "custom-do-not-leak");
        std::env::set_var("KAJI_PASS_TOKEN", "passed-on-purpose");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = HooksConfig::new();
    config.push(
        HookEvent::TaskStart,
        HookSpec::new("env | cut -d= -f1 | sort"),
    );
    let runner = HookRunner::new(config).with_env_policy(std::sync::Arc::new(EnvPolicy {
        secret_env: vec!["KAJI_TEST_CUSTOM".to_string()],
        env_passthrough: vec!["KAJI_PASS_TOKEN".to_string()],
        set: Vec::new(),
    }));
    let payload = HookPayload::task("task-1", dir.path(), PermissionMode::Default);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let outcome =
        runtime.block_on(runner.run(HookEvent::TaskStart, payload, &CancellationToken::new()));
    let names: Vec<&str> = outcome.context.iter().flat_map(|c| c.lines()).collect();
    for absent in [
        "KAJI_TEST_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "KAJI_TEST_CUSTOM",
    ] {
        assert!(!names.contains(&absent), "{absent} reached the hook");
    }
    for present in ["KAJI_PASS_TOKEN", "KAJI_PROJECT_DIR", "PATH"] {
        assert!(names.contains(&present), "{present} missing: {names:?}");
    }
}
