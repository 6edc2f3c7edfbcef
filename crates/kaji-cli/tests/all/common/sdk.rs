//! The official Claude Agent SDK (Python, and TypeScript for some tests)
//! driving the real `kaji` binary: a home and a working directory, the
//! driver programs of `tests/agent-sdk/` and the checks every SDK test
//! makes. The driver is given the test key and the scripted server's URL,
//! never a real provider's, and nothing else of the caller's environment
//! but `PATH` ([`super::clean_env`]): no `HOME`, no real keys, no
//! `CARGO_*`, for the driver and for the `kaji` the SDK starts.

use std::path::{Path, PathBuf};

use kaji_test_support::ScriptedModelServer;
use serde_json::{Value, json};
use tokio::process::Command;

use super::{KAJI, TEST_KEY, clean_env, json_lines};

/// The repository's root (where `tests/agent-sdk/` is).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Fails with how to install the SDK when it is missing.
pub fn require_sdk() {
    static FOUND: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *FOUND.get_or_init(|| {
        let mut python = std::process::Command::new("python3");
        clean_env(&mut python, &std::env::temp_dir());
        python
            .args([
                "-c",
                "import importlib.util, sys; sys.exit(importlib.util.find_spec('claude_agent_sdk') is None)",
            ])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    assert!(
        ok,
        "the Claude Agent SDK for Python is not installed: run the pip line of .ci/run \
         (pip install --no-binary claude-agent-sdk claude-agent-sdk==VERSION)"
    );
}

/// One SDK run's directories.
pub struct Sdk {
    pub home: tempfile::TempDir,
    pub work: tempfile::TempDir,
}

impl Sdk {
    pub fn new() -> Self {
        require_sdk();
        let sdk = Self {
            home: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(sdk.kaji_home()).unwrap();
        sdk
    }

    pub fn kaji_home(&self) -> PathBuf {
        self.home.path().join("kaji-home")
    }

    /// Prices for the scripted model: $1 per million tokens each way.
    pub fn with_prices(self) -> Self {
        std::fs::write(
            self.kaji_home().join("config.toml"),
            "[models.\"scripted\"]\ninput_price = 1.0\noutput_price = 1.0\n",
        )
        .unwrap();
        self
    }

    /// Runs `query(prompt, ClaudeAgentOptions(cli_path=kaji, **options))`;
    /// returns the messages and the driver's exit code.
    pub async fn query(
        &self,
        server: &ScriptedModelServer,
        prompt: &str,
        options: Value,
    ) -> (Vec<Value>, i32) {
        let mut driver = Command::new("python3");
        driver.arg(repo_root().join("tests/agent-sdk/drive.py"));
        self.drive(driver, server, prompt, options).await
    }

    /// Runs a driver program (see tests/agent-sdk/) with the SDK's
    /// environment and nothing of the caller's but `PATH`; returns the
    /// JSON lines it printed and its exit code.
    pub async fn drive(
        &self,
        mut driver: Command,
        server: &ScriptedModelServer,
        prompt: &str,
        options: Value,
    ) -> (Vec<Value>, i32) {
        let mut options = options;
        options["model"] = json!("scripted");
        // HOME, and KAJI_HOME = HOME/kaji-home, as for `kaji()`.
        clean_env(driver.as_std_mut(), self.home.path());
        let out = driver
            .env("ANTHROPIC_API_KEY", TEST_KEY)
            .env("ANTHROPIC_BASE_URL", server.anthropic_base_url())
            .env("CLAUDE_AGENT_SDK_SKIP_VERSION_CHECK", "1")
            // No `__pycache__` left in tests/agent-sdk/.
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("KAJI_BIN", KAJI)
            .env("KAJI_WORK", self.work.path())
            .env("KAJI_PROMPT", prompt)
            .env("KAJI_SDK_OPTIONS", options.to_string())
            .kill_on_drop(true)
            .output()
            .await
            .expect("python3 runs");
        let messages = json_lines(&out.stdout);
        assert!(
            !messages.is_empty(),
            "the SDK received nothing; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        (messages, out.status.code().unwrap_or(-1))
    }
}

/// Only kaji answered: every request reached the scripted server from
/// kaji's client, and `init` is kaji's.
pub fn only_kaji_answered(server: &ScriptedModelServer, messages: &[Value], requests: usize) {
    let seen = server.requests();
    assert_eq!(seen.len(), requests, "requests the scripted server saw");
    for r in &seen {
        let agent = r.header("user-agent").unwrap_or("");
        assert!(
            agent.starts_with("kaji/"),
            "a request not from kaji: {agent}"
        );
    }
    let init = &messages[0];
    assert_eq!(init["class"], "SystemMessage", "{init}");
    assert_eq!(init["subtype"], "init");
    assert_eq!(init["data"]["kaji_version"], env!("CARGO_PKG_VERSION"));
}

pub fn of_class<'a>(messages: &'a [Value], class: &str) -> Vec<&'a Value> {
    messages.iter().filter(|m| m["class"] == class).collect()
}

pub fn result(messages: &[Value]) -> &Value {
    messages
        .iter()
        .find(|m| m["class"] == "ResultMessage")
        .unwrap_or_else(|| panic!("no ResultMessage: {messages:?}"))
}
