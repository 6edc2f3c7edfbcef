//! `kaji ps` through the real binary: a live session with a running
//! background task is listed; dead sessions are skipped; corrupt state files
//! are reported on stderr.

use std::process::Stdio;
use std::time::Duration;

use kaji_tasks::RuntimeTaskRegistry;
use kaji_tasks::runtime::{MAIN_CALLER, RuntimeConfig};
use serde_json::Value;

use crate::common::{Wire, kaji_at};

fn kaji_ps(home: &std::path::Path, json: bool) -> std::process::Output {
    let mut cmd = kaji_at(home);
    cmd.arg("ps");
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

/// Writes the files of a session whose kaji process is gone but whose
/// background task's process group (`pgid`) still runs.
fn write_dead_session(home: &std::path::Path, pgid: i32) {
    let dead_pid = 2_147_483_647u32;
    let dir = home.join("runs/crashed");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let ticks = kaji_tasks::process::read_stat(pgid)
        .expect("stat")
        .start_ticks;
    let task = serde_json::json!({
        "id": "b0rphan00", "type": "local_bash", "status": "running",
        "description": "left behind", "command": "sleep 1000", "owner": "main",
        "pid": pgid, "started_at_ms": 0, "output_path": dir.join("b0rphan00.output"),
        "output_bytes": 0, "dropped_bytes": 0,
    });
    let state = serde_json::json!({
        "schema_version": 1, "session_id": "crashed", "pid": dead_pid,
        "started_at_ms": 0, "tasks": [task],
    });
    std::fs::write(dir.join("session.json"), state.to_string()).expect("write");
    let groups = serde_json::json!({
        "schema_version": 1, "pid": dead_pid,
        "groups": [{"pgid": pgid, "leader_start_ticks": ticks, "command": "sleep 1000",
                    "started_at_ms": 0}],
    });
    std::fs::write(dir.join("groups.json"), groups.to_string()).expect("write");
}

#[test]
fn orphans_of_dead_sessions_are_listed_as_orphaned_and_killed_on_request() {
    use std::os::unix::process::CommandExt;
    let home = tempfile::tempdir().expect("tempdir");
    let mut orphan = std::process::Command::new("sleep")
        .arg("1000")
        .process_group(0)
        .spawn()
        .expect("spawn");
    let pgid = i32::try_from(orphan.id()).expect("pid");
    write_dead_session(home.path(), pgid);

    let table = kaji_ps(home.path(), false);
    assert_eq!(table.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&table.stdout);
    let row = stdout.lines().nth(1).expect("one row");
    assert!(row.starts_with("b0rphan00"), "{stdout}");
    assert!(
        row.contains("orphaned") && !row.contains("running"),
        "{stdout}"
    );
    assert!(row.contains(&format!("pgid {pgid}")), "{stdout}");
    let stderr = String::from_utf8_lossy(&table.stderr);
    assert!(stderr.contains("--kill-orphans"), "{stderr}");

    let json = kaji_ps(home.path(), true);
    let items: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(items[0]["status"], "orphaned");
    assert_eq!(items[0]["recorded_status"], "running");
    assert_eq!(items[0]["session_alive"], false);
    assert_eq!(items[0]["live_pids"], serde_json::json!([pgid]));

    let out = kaji_at(home.path())
        .env("KAJI_KILL_GRACE_MS", "200")
        .args(["ps", "--kill-orphans", "--json"])
        .output()
        .expect("kaji ps --kill-orphans");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["killed"][0]["pgid"], pgid);
    assert_eq!(report["killed"][0]["task_id"], "b0rphan00");
    assert_eq!(report["survived"], serde_json::json!([]));
    let status = orphan.wait().expect("reap");
    assert!(!status.success(), "the orphan was killed");

    let after = kaji_ps(home.path(), true);
    assert_eq!(String::from_utf8_lossy(&after.stdout).trim(), "[]");
}

/// Every live descendant of `root` (children, grandchildren, …), from /proc.
fn descendants(root: i32) -> Vec<i32> {
    let stats: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
        .filter_map(|pid| kaji_tasks::process::read_stat(pid).map(|s| (pid, s.ppid)))
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            stats
                .iter()
                .filter(|(_, ppid)| *ppid == parent)
                .map(|(pid, _)| *pid),
        );
        i += 1;
    }
    found.retain(|&p| p != root && !kaji_tasks::process::is_gone(p));
    found
}

/// `kaji exec` that starts a background shell and a foreground shell, each
/// with two grandchildren, and blocks; returns it once everything runs,
/// with its descendants.
async fn exec_with_grandchildren(
    home: &std::path::Path,
    work: &std::path::Path,
    server: &kaji_test_support::ScriptedModelServer,
    watchdog: bool,
) -> (tokio::process::Child, Vec<i32>) {
    let fifo = work.join("ready.fifo");
    kaji_test_support::fixtures::mkfifo(&fifo);
    let mut cmd = crate::common::exec_json(home, work, server, Wire::Anthropic);
    cmd.env("KAJI_KILL_GRACE_MS", "200")
        .args(["--yolo", "start things"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if !watchdog {
        cmd.env("KAJI_WATCHDOG", "off");
    }
    let child = cmd.spawn().expect("spawn kaji exec");
    let kaji_pid = i32::try_from(child.id().expect("pid")).expect("pid");
    // The foreground command waits (in its shell) for the background one,
    // then says so through the FIFO.
    let fifo2 = fifo.clone();
    tokio::task::spawn_blocking(move || std::fs::read_to_string(fifo2).expect("read fifo"))
        .await
        .expect("join");
    // kaji records a group just after spawning it, so a command can get
    // this far first: wait for both records, or a kill now could race them.
    let recorded = wait_until(Duration::from_secs(60), || {
        recorded_groups(&home.join("kaji-home")) >= 2
    });
    assert!(recorded, "kaji never recorded both process groups");
    let pids = descendants(kaji_pid);
    assert!(pids.len() >= 6, "two shells with two sleeps each: {pids:?}");
    (child, pids)
}

/// How many process groups the sessions under `kaji_home` have recorded.
fn recorded_groups(kaji_home: &std::path::Path) -> usize {
    let Ok(runs) = std::fs::read_dir(kaji_home.join("runs")) else {
        return 0;
    };
    runs.flatten()
        .filter_map(|run| std::fs::read_to_string(run.path().join("groups.json")).ok())
        .filter_map(|text| serde_json::from_str::<Value>(&text).ok())
        .map(|file| file["groups"].as_array().map_or(0, Vec::len))
        .sum()
}

/// Polls `done` until it holds; false if `limit` (a hang guard) passes.
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

fn grandchildren_script() -> kaji_test_support::Script {
    use kaji_test_support::{Script, Turn};
    Script::new([
        Turn::tool_call(
            "Bash",
            serde_json::json!({
                "command": "sleep 1000 & sleep 1000 & echo up > bg.up; wait",
                "run_in_background": true
            }),
        ),
        Turn::tool_call(
            "Bash",
            serde_json::json!({
                "command": "while [ ! -s bg.up ]; do sleep 0.01; done; sleep 1000 & sleep 1000 & echo ready > ready.fifo; wait"
            }),
        ),
    ])
}

/// Waits, in a bounded loop over process state, until every pid is gone.
fn all_gone_within(pids: &[i32], limit: Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if pids.iter().all(|&p| kaji_tasks::process::is_gone(p)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

#[tokio::test]
async fn sigkill_of_kaji_exec_leaves_no_child_or_grandchild() {
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let server = kaji_test_support::ScriptedModelServer::start(grandchildren_script()).await;
    let (mut kaji, pids) = exec_with_grandchildren(home.path(), work.path(), &server, true).await;
    kaji.start_kill().expect("SIGKILL kaji");
    kaji.wait().await.expect("reap kaji");
    assert!(
        all_gone_within(&pids, Duration::from_secs(30)),
        "survivors of SIGKILL: {:?}",
        pids.iter()
            .filter(|&&p| !kaji_tasks::process::is_gone(p))
            .collect::<Vec<_>>()
    );
    let listing = kaji_ps(&home.path().join("kaji-home"), true);
    assert_eq!(String::from_utf8_lossy(&listing.stdout).trim(), "[]");
}

#[tokio::test]
async fn without_the_watchdog_kaji_ps_lists_what_a_killed_exec_left_and_kills_it() {
    let home = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let server = kaji_test_support::ScriptedModelServer::start(grandchildren_script()).await;
    let (mut kaji, pids) = exec_with_grandchildren(home.path(), work.path(), &server, false).await;
    kaji.start_kill().expect("SIGKILL kaji");
    kaji.wait().await.expect("reap kaji");
    assert!(
        pids.iter().all(|&p| !kaji_tasks::process::is_gone(p)),
        "the control"
    );

    let kaji_home = home.path().join("kaji-home");
    let listing = kaji_ps(&kaji_home, true);
    let items: Value = serde_json::from_slice(&listing.stdout).expect("JSON");
    let items = items.as_array().expect("array");
    assert_eq!(
        items.len(),
        2,
        "the background task and the foreground command: {items:?}"
    );
    assert!(
        items
            .iter()
            .all(|i| i["status"] == "orphaned" && i["session_alive"] == false)
    );
    assert!(
        items
            .iter()
            .any(|i| i["type"] == "local_bash" && i["recorded_status"] == "running"),
        "{items:?}"
    );

    let out = kaji_at(&kaji_home)
        .env("KAJI_KILL_GRACE_MS", "200")
        .args(["ps", "--kill-orphans"])
        .output()
        .expect("kaji ps --kill-orphans");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert_eq!(stdout.matches("ended group").count(), 2, "{stdout}");
    assert!(all_gone_within(&pids, Duration::from_secs(30)));
}
