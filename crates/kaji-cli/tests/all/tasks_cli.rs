//! `kaji tasks` through the real binary, on a temporary `$KAJI_HOME`.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use assert_cmd::Command as TestCommand;
use serde_json::Value;

use crate::common::{kaji_at, output};

use kaji_test_support::fixtures::mkfifo;

struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn kaji(&self, args: &[&str]) -> TestCommand {
        let mut cmd = TestCommand::from_std(kaji_at(self.dir.path()));
        cmd.arg("tasks").args(args);
        cmd
    }

    /// Runs and returns (exit code, stdout, stderr).
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        output(kaji_at(self.dir.path()).arg("tasks").args(args))
    }

    fn json(&self, args: &[&str]) -> Value {
        let (code, stdout, stderr) = self.run(args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {stdout}"))
    }
}

#[test]
fn create_list_show_update_claim_release_delete() {
    let home = Home::new();
    let a = home.json(&[
        "create",
        "Write the parser",
        "--description",
        "all of it",
        "--json",
    ]);
    assert_eq!(a["id"], 1);
    assert_eq!(a["status"], "pending");
    let b = home.json(&[
        "create",
        "Ship it",
        "--active-form",
        "Shipping",
        "--blocked-by",
        "1",
        "--json",
    ]);
    assert_eq!(b["blockedBy"], serde_json::json!([1]));

    let (code, table, _) = home.run(&["list"]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines[0], "ID  STATUS   OWNER  SUBJECT           BLOCKED BY");
    assert_eq!(lines[1], "1   pending  -      Write the parser");
    assert_eq!(lines[2], "2   pending  -      Ship it           #1");

    let (code, show, _) = home.run(&["show", "2"]);
    assert_eq!(code, 0);
    assert!(show.contains("active form  Shipping"), "{show}");

    // Claiming a blocked task is refused (1) and says why.
    let (code, out, err) = home.run(&["claim", "2", "--owner", "ann", "--json"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("blocked: waiting for #1"), "{err}");
    let refusal: Value = serde_json::from_str(&out).expect("json error");
    assert_eq!(refusal["error"]["reason"], "blocked");

    let claimed = home.json(&["claim", "--owner", "ann", "--json"]);
    assert_eq!(
        (claimed["id"].as_u64(), claimed["owner"].as_str()),
        (Some(1), Some("ann"))
    );
    let updated = home.json(&["update", "1", "--status", "completed", "--json"]);
    assert_eq!(updated["unblocked"], serde_json::json!([2]));
    let claimed = home.json(&[
        "--list", "default", "claim", "2", "--owner", "bob", "--json",
    ]);
    assert_eq!(claimed["status"], "in_progress");
    assert_eq!(
        home.json(&["release", "--owner", "bob", "--json"])["released"],
        serde_json::json!([2])
    );

    let (code, _, err) = home.run(&["update", "2", "--add-blocked-by", "2"]);
    assert_eq!(code, 1, "a self-dependency is a cycle: {err}");
    let (code, _, err) = home.run(&["update", "2", "--add-blocked-by", "9"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("9.json"), "{err}");

    let (code, out, _) = home.run(&["delete", "1"]);
    assert_eq!((code, out.as_str()), (0, "deleted #1: Write the parser\n"));
    let list = home.json(&["list", "--json"]);
    assert_eq!(list["tasks"].as_array().map(Vec::len), Some(1));
    assert_eq!(list["tasks"][0]["blockedBy"], serde_json::json!([]));
    assert_eq!(list["highwatermark"], 2);
    assert_eq!(home.json(&["create", "Next", "--json"])["id"], 3);
    let (code, _, _) = home.run(&["update", "3", "--status", "deleted"]);
    assert_eq!(code, 0);
}

#[test]
fn exit_codes_for_missing_lists_tasks_and_bad_usage() {
    let home = Home::new();
    // A list nobody wrote to is listed empty (#32); other commands say
    // it is missing.
    let (code, out, err) = home.run(&["list"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("no tasks"), "{out}");
    let (code, _, err) = home.run(&["show", "1"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("task list \"default\" does not exist"),
        "{err}"
    );
    home.json(&["--list", "team", "create", "x", "--json"]);
    let (code, _, err) = home.run(&["--list", "team", "show", "5"]);
    assert_eq!(code, 2);
    assert!(err.contains("task #5 does not exist"), "{err}");
    let (code, _, err) = home.run(&["--list", "team", "update", "1", "--status", "done"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, _) = home.run(&["--list", "team", "show", "abc"]);
    assert_eq!(code, 2);
    let (code, _, err) = home.run(&["--list", "team", "claim", "7", "--owner", "x"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = home.run(&["--list", "team", "claim", "--owner", "x"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = home.run(&["--list", "team", "claim", "--owner", "y"]);
    assert_eq!(code, 1, "nothing left to claim: {err}");

    // The environment chooses the list when the flag is missing.
    let out = home
        .kaji(&["list", "--json"])
        .env("KAJI_TASK_LIST_ID", "team")
        .output()
        .expect("run");
    let list: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(list["listId"], "team");
}

#[test]
fn a_corrupt_file_is_named_and_the_rest_still_works() {
    let home = Home::new();
    home.json(&["create", "good", "--json"]);
    home.json(&["create", "bad", "--json"]);
    let bad = home.dir.path().join("tasks/default/2.json");
    std::fs::write(
        &bad,
        "{\"id\": 2, \"subject\": \"bad\", \"status\": \"maybe\"}",
    )
    .expect("write");
    let (code, out, err) = home.run(&["list"]);
    assert_eq!(code, 0);
    assert!(out.contains("good"), "{out}");
    assert!(
        err.contains("2.json") && err.contains("unknown variant `maybe`"),
        "{err}"
    );
    let (code, _, err) = home.run(&["show", "2"]);
    assert_eq!(code, 1);
    assert!(err.contains("2.json"), "{err}");
    let (code, _, _) = home.run(&["update", "1", "--owner", "z"]);
    assert_eq!(code, 0);
}

#[test]
fn watch_redraws_when_a_task_changes() {
    let home = Home::new();
    home.json(&["create", "first", "--json"]);
    let mut child = kaji_at(home.dir.path())
        .args(["tasks", "watch", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn watch");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // A guard against hanging forever, not a timing assertion.
    let next = || {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("watch printed a state");
        serde_json::from_str::<Value>(&line).expect("json line")
    };
    let first = next();
    assert_eq!(first["tasks"][0]["subject"], "first");
    home.json(&["create", "second", "--json"]);
    let mut state = next();
    // A create writes .highwatermark and then the task: wait for the task.
    while state["tasks"].as_array().map(Vec::len) != Some(2) {
        state = next();
    }
    assert_eq!(state["tasks"][1]["subject"], "second");
    home.json(&["update", "1", "--status", "completed", "--json"]);
    let mut state = next();
    while state["tasks"][0]["status"] != "completed" {
        state = next();
    }
    child.kill().expect("kill watch");
    child.wait().expect("reap watch");
}

#[test]
fn a_fifo_and_a_symlink_to_dev_zero_are_named_and_the_rest_is_listed() {
    let home = Home::new();
    home.json(&["create", "one", "--json"]);
    let dir = home.dir.path().join("tasks/default");
    mkfifo(&dir.join("7.json"));
    std::os::unix::fs::symlink("/dev/zero", dir.join("8.json")).expect("symlink");
    // The timeout guards against a hang; it is no timing assertion.
    let out = home
        .kaji(&["list"])
        .timeout(Duration::from_secs(60))
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("one"), "{stdout}");
    assert!(
        stderr.contains("7.json") && stderr.contains("FIFO"),
        "{stderr}"
    );
    assert!(
        stderr.contains("8.json") && stderr.contains("character device"),
        "{stderr}"
    );
}

#[test]
fn create_on_a_held_lock_says_who_holds_it_then_times_out() {
    let home = Home::new();
    home.json(&["create", "one", "--json"]);
    let store = kaji_tasks::TaskListStore::open(home.dir.path(), "default").expect("open");
    let _held = store.lock().expect("hold the list lock");
    let out = home
        .kaji(&["create", "two"])
        .env("KAJI_LOCK_TIMEOUT_MS", "1000")
        .timeout(Duration::from_secs(60))
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let waiting = format!(
        "waiting for the list lock held by pid {}",
        std::process::id()
    );
    assert_eq!(stderr.matches(&waiting).count(), 1, "{stderr}");
    assert!(stderr.contains("timed out after"), "{stderr}");
    assert!(
        stderr.contains(&format!("pid {}", std::process::id())),
        "{stderr}"
    );
}

#[test]
fn repair_rebuilds_the_mark_and_exits_by_soundness() {
    let home = Home::new();
    for subject in ["one", "two", "three"] {
        home.json(&["create", subject, "--json"]);
    }
    let dir = home.dir.path().join("tasks/default");
    std::fs::write(dir.join(".highwatermark"), "garbage").expect("write");
    let (code, _, stderr) = home.run(&["create", "refused"]);
    assert_eq!(code, 1, "{stderr}");
    let report = home.json(&["repair", "--json"]);
    assert_eq!(report["sound"], true);
    assert_eq!(report["highwatermark"]["after"], 3);
    assert_eq!(report["highwatermark"]["rewritten"], true);
    assert!(report["highwatermark"]["problem"].is_string(), "{report}");
    assert_eq!(home.json(&["create", "four", "--json"])["id"], 4);

    std::fs::write(dir.join("9.json"), "{").expect("write");
    let (code, stdout, _) = home.run(&["repair"]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("9.json"), "{stdout}");
    assert!(stdout.contains("NOT sound"), "{stdout}");
}

/// Runs `kaji <args>` with stdout connected to `stdout`.
fn run_with_stdout(home: &Home, args: &[&str], stdout: Stdio) -> std::process::Output {
    kaji_at(home.dir.path())
        .args(args)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .expect("run kaji")
}

#[test]
fn a_closed_stdout_ends_quietly_and_a_full_disk_with_an_error() {
    let home = Home::new();
    home.json(&["create", "one", "--json"]);
    for args in [
        &["tasks", "list"][..],
        &["tasks", "list", "--json"],
        &["ps"],
    ] {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let out = run_with_stdout(&home, args, Stdio::from(writer));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");

        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let out = run_with_stdout(&home, args, Stdio::from(full));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(
            stderr.contains("No space left on device"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn list_filters_and_every_list() {
    let home = Home::new();
    let (code, out, _) = home.run(&["lists"]);
    assert_eq!((code, out.as_str()), (0, "no task lists\n"));
    for subject in ["a", "b", "c"] {
        home.json(&["create", subject, "--json"]);
    }
    home.json(&["update", "2", "--add-blocked-by", "1", "--json"]);
    home.json(&["claim", "3", "--owner", "bob", "--json"]);
    home.json(&["--list", "other", "create", "x", "--json"]);
    let ids = |args: &[&str]| -> Vec<u64> {
        let mut all = vec!["list", "--json"];
        all.extend_from_slice(args);
        home.json(&all)["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .filter_map(|t| t["id"].as_u64())
            .collect()
    };
    assert_eq!(ids(&["--available"]), vec![1]);
    assert_eq!(ids(&["--blocked"]), vec![2]);
    assert_eq!(ids(&["--owner", "bob"]), vec![3]);
    assert_eq!(ids(&["--status", "in_progress"]), vec![3]);
    assert_eq!(ids(&["--status", "pending", "--owner", ""]), vec![1, 2]);
    let (code, table, _) = home.run(&["list", "--blocked"]);
    assert_eq!(code, 0);
    assert!(
        table.contains("#1"),
        "the open blocker stays named: {table}"
    );
    assert!(!table.contains(" a "), "{table}");
    let (code, _, err) = home.run(&["list", "--status", "done"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown status \"done\""), "{err}");
    let (_, shown, _) = home.run(&["show", "1"]);
    assert!(shown.contains("unblocks     #2"), "{shown}");

    let lists = home.json(&["lists", "--json"]);
    assert_eq!(
        lists,
        serde_json::json!([
            {"listId": "default", "sessions": 0, "tasks": 3, "open": 3,
             "updatedAt": lists[0]["updatedAt"]},
            {"listId": "other", "sessions": 0, "tasks": 1, "open": 1,
             "updatedAt": lists[1]["updatedAt"]},
        ])
    );
    let (code, table, _) = home.run(&["lists"]);
    assert_eq!(code, 0);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(header, ["LIST", "SESSIONS", "TASKS", "OPEN", "UPDATED"]);
    assert!(
        table.lines().nth(1).unwrap_or("").starts_with("default  0"),
        "{table}"
    );
}
