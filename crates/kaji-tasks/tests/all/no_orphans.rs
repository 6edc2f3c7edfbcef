//! No orphans: whatever kaji starts dies with it, even when kaji is
//! killed with `SIGKILL` (the watchdog of `kaji_tasks::watchdog`); and
//! when the watchdog is out of the way, the groups a dead session left
//! behind are found and ended (`kaji_tasks::runtime::orphans`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kaji_tasks::process::{is_gone, read_stat};
use kaji_tasks::runtime::{find_orphans, kill_orphans, scan_sessions};

const PROBE: &str = env!("CARGO_BIN_EXE_runtime-orphan-probe");

/// Starts the probe and returns it with the pids of every member of its
/// two process groups (shells and grandchildren).
fn start_probe(home: &Path, watchdog: bool) -> (Child, Vec<i32>, [i32; 2]) {
    let mut cmd = Command::new(PROBE);
    cmd.arg(home).arg("probe-session").stdout(Stdio::piped());
    if !watchdog {
        cmd.env("KAJI_WATCHDOG", "off");
    }
    cmd.env("KAJI_KILL_GRACE_MS", "200");
    let mut child = cmd.spawn().expect("spawn probe");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read");
    let groups: Vec<i32> = line
        .strip_prefix("ready ")
        .unwrap_or_else(|| panic!("probe said {line:?}"))
        .split_whitespace()
        .map(|p| p.parse().expect("pgid"))
        .collect();
    let groups = [groups[0], groups[1]];
    let members: Vec<i32> = std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .filter(|&pid| read_stat(pid).is_some_and(|s| groups.contains(&s.pgrp) && !is_gone(pid)))
        .collect();
    for g in groups {
        let count = members
            .iter()
            .filter(|&&p| read_stat(p).map(|s| s.pgrp) == Some(g))
            .count();
        assert!(
            count >= 3,
            "group {g} should have a shell and two sleeps: {members:?}"
        );
    }
    (child, members, groups)
}

/// Waits, in a bounded loop over process state, until every pid is gone.
fn all_gone_within(pids: &[i32], limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if pids.iter().all(|&p| is_gone(p)) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn kill9(child: &mut Child) {
    child.kill().expect("SIGKILL the probe");
    child.wait().expect("reap the probe");
}

#[test]
fn sigkill_of_kaji_leaves_no_child_or_grandchild() {
    let home = tempfile::tempdir().expect("tempdir");
    let (mut probe, members, _) = start_probe(home.path(), true);
    kill9(&mut probe);
    assert!(
        all_gone_within(&members, Duration::from_secs(30)),
        "survivors: {:?}",
        members.iter().filter(|&&p| !is_gone(p)).collect::<Vec<_>>()
    );
}

/// A command whose first act is to kill kaji — before kaji's `spawn`
/// returned and could record anything — still dies with it: the child
/// registered its own group with the watchdog before it ran.
#[test]
fn a_command_that_kills_kaji_at_once_leaves_no_orphan() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pid_file = dir.path().join("pids");
    let mut probe = Command::new(PROBE)
        .arg("--killed-by-its-child")
        .arg(&pid_file)
        .env("KAJI_KILL_GRACE_MS", "200")
        .spawn()
        .expect("spawn probe");
    let status = probe.wait().expect("wait for the probe");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "the probe should have been killed by its child: {status:?}"
    );
    let text = std::fs::read_to_string(&pid_file).expect("the shell wrote its pids first");
    let pids: Vec<i32> = text
        .split_whitespace()
        .map(|p| p.parse().expect("pid"))
        .collect();
    assert_eq!(pids.len(), 2, "{text:?}");
    assert!(
        all_gone_within(&pids, Duration::from_secs(30)),
        "survivors: {:?}",
        pids.iter().filter(|&&p| !is_gone(p)).collect::<Vec<_>>()
    );
}

#[test]
fn without_the_watchdog_the_orphans_are_found_and_ended() {
    let home = tempfile::tempdir().expect("tempdir");
    let (mut probe, members, groups) = start_probe(home.path(), false);
    kill9(&mut probe);
    // The control: nothing else ends them.
    assert!(members.iter().all(|&p| !is_gone(p)), "{members:?}");

    let scan = scan_sessions(home.path());
    assert!(scan.live.is_empty());
    assert_eq!(scan.dead.len(), 1);
    let orphans = find_orphans(home.path(), &scan);
    let mut found: Vec<i32> = orphans.iter().map(|o| o.pgid).collect();
    found.sort();
    let mut expected = groups.to_vec();
    expected.sort();
    assert_eq!(found, expected, "{orphans:?}");
    let task_group = orphans
        .iter()
        .find(|o| o.pgid == groups[0])
        .expect("task group");
    let task = task_group
        .task
        .as_ref()
        .expect("the background task is named");
    assert_eq!(task.description, "probe background");
    assert_eq!(
        task.status.as_str(),
        "running",
        "the stale state file says running"
    );

    let killed = kill_orphans(&orphans, Duration::from_millis(200));
    assert!(killed.iter().all(|k| k.survivors.is_empty()), "{killed:?}");
    assert!(all_gone_within(&members, Duration::from_secs(30)));
    assert!(find_orphans(home.path(), &scan_sessions(home.path())).is_empty());
}
