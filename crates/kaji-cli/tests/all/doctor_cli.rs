//! `kaji doctor` through the real binary: the sandbox layers it reports
//! match what the kernel does, key names appear without their values, the
//! settings files it found are listed, and the exit code follows the
//! sandbox's support.

use serde_json::Value;

use crate::common::kaji_at;

#[test]
fn doctor_json_reports_the_sandbox_settings_and_key_names_only() {
    let home = tempfile::tempdir().expect("tempdir");
    std::fs::write(home.path().join("config.toml"), "").expect("user settings");
    let work = tempfile::tempdir().expect("tempdir");
    let out = kaji_at(home.path())
        .current_dir(work.path())
        .env("KAJI_DOCTOR_TEST_API_KEY", "sk-doctor-secret-value")
        .args(["doctor", "--json"])
        .output()
        .expect("kaji doctor runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("sk-doctor-secret-value"), "{stdout}");
    let report: Value = serde_json::from_str(&stdout).expect("one JSON object");

    let support = kaji_sandbox::probe();
    assert_eq!(report["sandbox"]["landlock_abi"], support.landlock_abi);
    assert_eq!(
        report["sandbox"]["user_namespaces"],
        support.user_namespaces
    );
    assert_eq!(report["sandbox"]["seccomp"], support.seccomp);
    assert_eq!(report["sandbox"]["complete"], support.is_complete());
    // No provider is configured here: doctor says so and exits 1.
    assert_eq!(report["ok"], false);
    assert!(
        report["broken"].to_string().contains("no provider"),
        "{report}"
    );
    assert_eq!(out.status.code(), Some(1));

    let keys = report["provider_keys"].as_array().expect("provider_keys");
    assert!(
        keys.iter().any(|k| k == "KAJI_DOCTOR_TEST_API_KEY"),
        "{keys:?}"
    );
    let files = report["settings_files"].as_array().expect("settings_files");
    let user = home.path().join("config.toml").display().to_string();
    assert!(
        files
            .iter()
            .any(|f| f["path"] == user.as_str() && f["found"] == true),
        "{files:?}"
    );
    assert_eq!(report["would_enforce"]["mode"], "workspace-write");
    assert_eq!(report["would_enforce"]["network"], false);
    assert!(
        report["git_version"]
            .as_str()
            .is_some_and(|v| v.starts_with("git version"))
    );
    assert_eq!(report["stdout_is_terminal"], false);
    // Looking changes nothing: no .kaji/ appears in the working directory.
    assert!(!work.path().join(".kaji").exists());
}

/// `kaji doctor --json` with these settings and environment.
fn doctor_json(home: &std::path::Path, work: &std::path::Path, settings: &str) -> (Value, String) {
    std::fs::write(home.join("config.toml"), settings).expect("user settings");
    let out = kaji_at(home)
        .current_dir(work)
        .env("ANTHROPIC_API_KEY", "sk-ant-doctor-secret")
        .env("TERM", "xterm-doctor")
        .env("KAJI_DOCTOR_MCP_WAIT_MS", "5000")
        .args(["doctor", "--json"])
        .output()
        .expect("kaji doctor runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        serde_json::from_str(&stdout).expect("one JSON object"),
        stdout,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_reports_the_provider_answering_mcp_servers_and_the_terminal() {
    let server =
        kaji_test_support::ScriptedModelServer::start(kaji_test_support::Script::new(Vec::<
            kaji_test_support::Turn,
        >::new(
        )))
        .await;
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let settings = format!(
        "provider = \"anthropic\"\nmodel = \"doctor-model\"\nbase_url = {:?}\n\n[mcp_servers.ghost]\ncommand = \"/nonexistent/kaji-no-such-mcp-server\"\n\n[mcp_servers.off]\ncommand = \"/nonexistent/never\"\nenabled = false\n",
        server.anthropic_base_url()
    );
    let (home_path, work_path) = (home.path().to_path_buf(), work.path().to_path_buf());
    let (report, stdout) =
        tokio::task::spawn_blocking(move || doctor_json(&home_path, &work_path, &settings))
            .await
            .expect("doctor");
    assert!(!stdout.contains("sk-ant-doctor-secret"), "{stdout}");
    let provider = &report["provider"];
    assert_eq!(provider["kind"], "anthropic", "{report}");
    assert_eq!(provider["model"], "doctor-model");
    assert_eq!(provider["key_set"], true);
    assert_eq!(provider["answers"], true, "{provider}");
    assert!(
        provider["answer"]
            .as_str()
            .is_some_and(|a| a.starts_with("HTTP ")),
        "{provider}"
    );
    let servers = report["mcp_servers"].as_array().expect("mcp_servers");
    let status = |name: &str| {
        servers
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["status"].clone())
    };
    assert_eq!(status("ghost"), Some(Value::from("failed")), "{servers:?}");
    assert_eq!(status("off"), Some(Value::from("disabled")), "{servers:?}");
    assert_eq!(report["terminal"]["term"], "xterm-doctor");
    assert_eq!(report["terminal"]["stdout_is_terminal"], false);
}

#[test]
fn doctor_says_when_the_provider_does_not_answer() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let settings = format!(
        "provider = \"anthropic\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:{port}\"\n"
    );
    let (report, _) = doctor_json(home.path(), work.path(), &settings);
    let provider = &report["provider"];
    assert_eq!(provider["answers"], false, "{provider}");
    assert!(
        provider["error"]
            .as_str()
            .is_some_and(|e| e.contains(&port.to_string())),
        "{provider}"
    );
    assert_eq!(report["mcp_servers"], serde_json::json!([]));
}

#[test]
fn doctor_lists_the_language_servers_and_their_state() {
    let home = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        home.path().join("config.toml"),
        "[lsp.mine]\ncommand = \"/bin/sh\"\nextensions = [\"foo\"]\n[lsp.pyright]\ndisabled = true\n[lsp.gone]\ncommand = \"/nonexistent/ls\"\nextensions = [\"bar\"]\n",
    )
    .expect("user settings");
    let work = tempfile::tempdir().expect("tempdir");
    // An untrusted project's .lsp.json is not read.
    std::fs::write(
        work.path().join(".lsp.json"),
        r#"{"evil": {"command": "/bin/sh", "extensionToLanguage": {".x": "x"}}}"#,
    )
    .expect(".lsp.json");
    let out = kaji_at(home.path())
        .current_dir(work.path())
        .args(["doctor", "--json"])
        .output()
        .expect("kaji doctor runs");
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let servers = report["language_servers"]["servers"]
        .as_array()
        .expect("servers");
    let by_name = |n: &str| servers.iter().find(|s| s["name"] == n).cloned();
    let mine = by_name("mine").expect("mine");
    assert_eq!(mine["source"], "settings");
    assert_eq!(mine["state"], "available at /bin/sh");
    assert_eq!(mine["extensions"], serde_json::json!(["foo"]));
    assert_eq!(by_name("pyright").expect("pyright")["state"], "disabled");
    assert_eq!(by_name("gone").expect("gone")["state"], "not found");
    assert_eq!(by_name("clangd").expect("clangd")["source"], "built-in");
    assert!(by_name("evil").is_none(), "{servers:?}");
}
