//! `kaji ps` through the real binary: a live session with a running
//! background task is listed; dead sessions are skipped; corrupt state files
//! are reported on stderr.

use std::time::Duration;

use assert_cmd::Command;
use kaji_tasks::RuntimeTaskRegistry;
use kaji_tasks::runtime::{MAIN_CALLER, RuntimeConfig};
use serde_json::Value;

fn kaji_ps(home: &std::path::Path, json: bool) -> std::process::Output {
    let mut cmd = Command::cargo_bin("kaji").expect("kaji binary");
    cmd.env("KAJI_HOME", home).arg("ps");
    if json {
        cmd.arg("--json");
    }
    cmd.output().expect("kaji ps runs")
}

#[tokio::test]
async fn lists_the_tasks_of_running_sessions_only() {
    let home = tempfile::tempdir().expect("tempdir");
    let config = RuntimeConfig {
        kill_grace: Duration::from_millis(100),
        ..RuntimeConfig::default()
    };
    let reg = RuntimeTaskRegistry::new(home.path(), "live-session", config).expect("registry");
    let info = reg
        .start_local_bash("sleep 1000", "a long sleep", home.path(), MAIN_CALLER)
        .await
        .expect("start");

    // A session whose process is gone, and a corrupt state file.
    let live_state = std::fs::read_to_string(home.path().join("runs/live-session/session.json"))
        .expect("state file");
    let dead_dir = home.path().join("runs/dead-session");
    std::fs::create_dir_all(&dead_dir).expect("mkdir");
    std::fs::write(
        dead_dir.join("session.json"),
        live_state.replace("live-session", "dead-session").replace(
            &format!("\"pid\": {}", std::process::id()),
            "\"pid\": 2147483647",
        ),
    )
    .expect("write");
    let bad_dir = home.path().join("runs/broken");
    std::fs::create_dir_all(&bad_dir).expect("mkdir");
    std::fs::write(bad_dir.join("session.json"), "[1, 2").expect("write");

    let table = kaji_ps(home.path(), false);
    assert_eq!(table.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&table.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    for column in ["ID", "TYPE", "STATUS", "AGE", "DESCRIPTION"] {
        assert!(lines[0].contains(column), "{stdout}");
    }
    assert!(lines[1].starts_with(info.id.as_str()), "{stdout}");
    assert!(
        lines[1].contains("local_bash") && lines[1].contains("running"),
        "{stdout}"
    );
    assert!(lines[1].ends_with("a long sleep"), "{stdout}");
    let stderr = String::from_utf8_lossy(&table.stderr);
    assert!(stderr.contains("broken/session.json"), "{stderr}");

    let json = kaji_ps(home.path(), true);
    assert_eq!(json.status.code(), Some(0));
    let items: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    let items = items.as_array().expect("an array");
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["id"], info.id.as_str());
    assert_eq!(items[0]["type"], "local_bash");
    assert_eq!(items[0]["status"], "running");
    assert_eq!(items[0]["description"], "a long sleep");
    assert_eq!(items[0]["session_id"], "live-session");
    assert_eq!(items[0]["session_pid"], std::process::id());
    assert!(items[0]["age_seconds"].is_u64());

    reg.stop_all().await;
    let after = kaji_ps(home.path(), true);
    let items: Value = serde_json::from_slice(&after.stdout).expect("JSON");
    assert_eq!(items[0]["status"], "killed");
}

#[test]
fn no_sessions_is_not_an_error() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = kaji_ps(home.path(), false);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("No runtime tasks"));
    let out = kaji_ps(home.path(), true);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
}
