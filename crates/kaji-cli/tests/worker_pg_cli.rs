#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_list_url_without_a_list_is_a_usage_error_for_worker_and_exec() {
    let home = tempfile::tempdir().expect("tempdir");
    let url = "postgres://kaji:hunter2@127.0.0.1:1/db";
    for args in [
        vec!["worker", "--name", "w1", "--task-list", url],
        vec!["exec", "--task-list", url, "hello"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_kaji"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("KAJI_HOME", home.path().join("kaji-home"))
            .env("ANTHROPIC_API_KEY", "test-key")
            .args(&args)
            .args([
                "--provider",
                "anthropic",
                "--base-url",
                "http://127.0.0.1:1",
            ])
            .args(["--model", "scripted", "--no-checkpoints", "-C"])
            .arg(home.path())
            .stdin(Stdio::null())
            .output()
            .await
            .expect("run kaji");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("?list=NAME"), "{args:?}: {stderr}");
        assert!(!stderr.contains("hunter2"), "{args:?}: {stderr}");
        // Never taken for a file list name.
        assert!(!home.path().join("kaji-home/tasks").exists(), "{args:?}");
    }
}
