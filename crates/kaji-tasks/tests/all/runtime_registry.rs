//! The runtime task registry against real processes: capped output files,
//! incremental reads, blocking reads, stopping whole process groups, notices
//! and the session state file. Nothing here sleeps or measures time: every
//! wait is a blocking read that the registry wakes.

use std::path::Path;
use std::time::Duration;

use kaji_tasks::RuntimeTaskRegistry;
use kaji_tasks::runtime::{
    MAIN_CALLER, OutputRead, ReadWait, RuntimeConfig, RuntimeError, RuntimeTaskStatus,
    RuntimeTaskType, StartRequest, scan_sessions,
};

const LONG: Duration = Duration::from_secs(120);

fn registry(home: &Path, config: RuntimeConfig) -> RuntimeTaskRegistry {
    RuntimeTaskRegistry::new(home, "test-session", config).expect("registry")
}

fn small_grace() -> RuntimeConfig {
    RuntimeConfig {
        kill_grace: Duration::from_millis(100),
        ..RuntimeConfig::default()
    }
}

/// Reads as `caller` until the task has ended, returning every byte read.
async fn read_to_end(
    reg: &RuntimeTaskRegistry,
    caller: &str,
    id: &str,
) -> (Vec<u8>, Vec<OutputRead>) {
    let mut all = Vec::new();
    let mut reads = Vec::new();
    loop {
        let read = reg
            .read_since_last(caller, id, true, LONG)
            .await
            .expect("read");
        assert!(!read.timed_out, "a read waited {LONG:?} without news");
        all.extend_from_slice(&read.output);
        let done = read.task.status.is_terminal();
        reads.push(read);
        if done {
            return (all, reads);
        }
    }
}

/// Reads as `caller` until the output contains `count` lines starting with
/// `label=`, and returns their numbers.
async fn read_pids(
    reg: &RuntimeTaskRegistry,
    caller: &str,
    id: &str,
    label: &str,
    count: usize,
) -> Vec<i32> {
    let mut text = String::new();
    loop {
        let pids: Vec<i32> = text
            .lines()
            .filter_map(|l| l.strip_prefix(label))
            .filter_map(|v| v.trim().parse().ok())
            .collect();
        if pids.len() >= count {
            return pids;
        }
        let read = reg
            .read_waiting(caller, id, ReadWait::NewOutput, LONG)
            .await
            .expect("read");
        assert!(
            !read.task.status.is_terminal(),
            "task ended before printing its pids: {text}"
        );
        text.push_str(&read.text());
    }
}

fn seq(n: u32) -> Vec<u8> {
    (1..=n)
        .map(|i| format!("{i}\n"))
        .collect::<String>()
        .into_bytes()
}

#[tokio::test]
async fn output_past_the_cap_keeps_the_newest_bytes_and_says_so() {
    let home = tempfile::tempdir().expect("tempdir");
    let cap = 4096;
    let reg = registry(
        home.path(),
        RuntimeConfig {
            output_cap_bytes: cap,
            ..RuntimeConfig::default()
        },
    );
    let info = reg
        .start_local_bash("seq 1 100000", "count", home.path(), MAIN_CALLER)
        .await
        .expect("start");
    assert_eq!(
        info.output_path,
        home.path()
            .join("runs/test-session")
            .join(format!("{}.output", info.id))
    );
    let full = seq(100_000);
    // Wait for the end without reading (another caller waits).
    let _ = read_to_end(&reg, "watcher", info.id.as_str()).await;
    let done = reg.get(info.id.as_str()).expect("get");
    assert_eq!(done.status, RuntimeTaskStatus::Completed);
    assert_eq!(done.exit_code, Some(0));
    assert_eq!(done.output_bytes, full.len() as u64);
    assert!(done.dropped_bytes > 0);

    let file = std::fs::read(&info.output_path).expect("output file");
    assert!(
        file.len() as u64 <= cap + 200,
        "file is {} bytes, cap {cap}",
        file.len()
    );
    let header = format!(
        "[kaji: this output passed its cap of {cap} bytes; the oldest {} bytes were dropped",
        done.dropped_bytes
    );
    assert!(
        String::from_utf8_lossy(&file).starts_with(&header),
        "{}",
        String::from_utf8_lossy(&file[..200])
    );
    assert!(file.ends_with(&full[done.dropped_bytes as usize..]));

    let read = reg
        .read_since_last(MAIN_CALLER, info.id.as_str(), false, LONG)
        .await
        .expect("read");
    assert_eq!(read.dropped_bytes, done.dropped_bytes);
    assert_eq!(read.output, &full[done.dropped_bytes as usize..]);
    assert!(read.to_prompt_text().contains(&format!(
        "{} bytes of output were dropped",
        done.dropped_bytes
    )));
}

#[tokio::test]
async fn incremental_reads_never_repeat_or_skip_a_byte() {
    let home = tempfile::tempdir().expect("tempdir");
    let reg = registry(
        home.path(),
        RuntimeConfig {
            reply_cap_chars: 100_000_000,
            ..RuntimeConfig::default()
        },
    );
    // Writes in many small pieces while the readers read.
    let info = reg
        .start_local_bash(
            "for i in $(seq 1 20000); do echo \"line $i\"; done",
            "lines",
            home.path(),
            MAIN_CALLER,
        )
        .await
        .expect("start");
    let id = info.id.as_str();
    let (main, sub) = tokio::join!(
        read_to_end(&reg, MAIN_CALLER, id),
        read_to_end(&reg, "sub-agent", id)
    );
    let expected: Vec<u8> = (1..=20000)
        .map(|i| format!("line {i}\n"))
        .collect::<String>()
        .into_bytes();
    let file = std::fs::read(&info.output_path).expect("output file");
    assert_eq!(file, expected);
    for (bytes, reads) in [main, sub] {
        assert_eq!(bytes.len(), expected.len());
        assert!(
            bytes == expected,
            "the concatenated reads differ from the output"
        );
        let mut offset = 0;
        for read in &reads {
            assert_eq!(read.start_offset, offset);
            assert_eq!((read.dropped_bytes, read.skipped_bytes), (0, 0));
            offset = read.end_offset;
        }
    }
    // Everything was read: a further read is empty.
    let again = reg
        .read_since_last(MAIN_CALLER, id, false, LONG)
        .await
        .expect("read");
    assert!(again.output.is_empty());
    assert!(again.to_prompt_text().contains("no new output"));
}

#[tokio::test]
async fn the_reply_cap_keeps_the_newest_characters() {
    let home = tempfile::tempdir().expect("tempdir");
    let reg = registry(
        home.path(),
        RuntimeConfig {
            reply_cap_chars: 100,
            ..RuntimeConfig::default()
        },
    );
    let info = reg
        .start_local_bash("seq 1 1000", "count", home.path(), MAIN_CALLER)
        .await
        .expect("start");
    let _ = read_to_end(&reg, "watcher", info.id.as_str()).await;
    let read = reg
        .read_since_last(MAIN_CALLER, info.id.as_str(), false, LONG)
        .await
        .expect("read");
    let full = seq(1000);
    assert_eq!(read.output, &full[full.len() - 100..]);
    assert_eq!(read.skipped_bytes, full.len() as u64 - 100);
    let text = read.to_prompt_text();
    assert!(
        text.contains(&format!("{} older bytes", full.len() - 100)),
        "{text}"
    );
    assert!(
        text.contains(&info.output_path.display().to_string()),
        "{text}"
    );
}

#[tokio::test]
async fn a_blocking_read_wakes_when_the_task_ends() {
    let home = tempfile::tempdir().expect("tempdir");
    let fifo = home.path().join("go");
    kaji_test_support::fixtures::mkfifo(&fifo);
    let reg = registry(home.path(), small_grace());
    // Silent until the test writes to the fifo, then exits 7.
    let info = reg
        .start_local_bash(
            "read -r line < go; exit 7",
            "wait for go",
            home.path(),
            MAIN_CALLER,
        )
        .await
        .expect("start");
    let id = info.id.as_str();

    // With nothing happening, a short blocking read times out.
    let quiet = reg
        .read_since_last(MAIN_CALLER, id, true, Duration::from_millis(50))
        .await
        .expect("read");
    assert!(quiet.timed_out);
    assert_eq!(quiet.task.status, RuntimeTaskStatus::Running);
    assert!(quiet.to_prompt_text().contains("timed out"));

    let read = reg.read_since_last(MAIN_CALLER, id, true, LONG);
    let release =
        tokio::task::spawn_blocking(move || std::fs::write(&fifo, "go\n").expect("write fifo"));
    let (read, released) = tokio::join!(read, release);
    released.expect("writer");
    let read = read.expect("read");
    assert!(!read.timed_out);
    assert_eq!(read.task.status, RuntimeTaskStatus::Failed);
    assert_eq!(read.task.exit_code, Some(7));
    assert!(
        read.to_prompt_text().contains("failed (exit code 7)"),
        "{}",
        read.to_prompt_text()
    );
}

#[tokio::test]
async fn stop_kills_grandchildren_that_ignore_sigterm() {
    let home = tempfile::tempdir().expect("tempdir");
    let reg = registry(home.path(), small_grace());
    let script = r#"
        for n in 1 2; do
            bash -c 'trap "" TERM; echo "pid=$$"; exec sleep 1000' &
        done
        sh -c 'sleep 1000 & echo "pid=$!"; wait' &
        wait
    "#;
    let info = reg
        .start_local_bash(script, "stubborn", home.path(), MAIN_CALLER)
        .await
        .expect("start");
    let pids = read_pids(&reg, "test", info.id.as_str(), "pid=", 3).await;
    let leader = info.pid.expect("a running task has a pid");
    let stopped = reg.stop(info.id.as_str()).await.expect("stop");
    assert_eq!(stopped.status, RuntimeTaskStatus::Killed);
    assert_eq!(stopped.pid, None);
    assert!(
        kaji_tasks::process::is_gone(leader),
        "the shell {leader} survived"
    );
    for pid in pids {
        assert!(
            kaji_tasks::process::is_gone(pid),
            "grandchild {pid} survived TaskStop"
        );
    }
    // Stopping again is refused, saying it already ended.
    let err = reg.stop(info.id.as_str()).await.expect_err("already ended");
    assert!(matches!(err, RuntimeError::NotRunning { .. }), "{err}");
    assert!(err.to_string().contains("killed"), "{err}");
}

#[tokio::test]
async fn shutdown_leaves_no_process_behind_reports_what_it_stopped_and_refuses_new_tasks() {
    let home = tempfile::tempdir().expect("tempdir");
    let reg = registry(home.path(), small_grace());
    let script = r#"
        bash -c 'trap "" TERM; echo "pid=$$"; exec sleep 1000' &
        sleep 1000 & echo "pid=$!"
        wait
    "#;
    let mut ids = Vec::new();
    let mut pids = Vec::new();
    for n in 0..3 {
        let info = reg
            .start_local_bash(script, &format!("sleeper {n}"), home.path(), MAIN_CALLER)
            .await
            .expect("start");
        pids.extend(read_pids(&reg, "test", info.id.as_str(), "pid=", 2).await);
        pids.push(info.pid.expect("pid"));
        ids.push(info.id);
    }
    let finished = reg
        .start_local_bash("true", "done already", home.path(), MAIN_CALLER)
        .await
        .expect("start");
    reg.wait_finished(finished.id.as_str()).await.expect("wait");
    let stopped = reg.shutdown().await;
    let mut stopped_ids: Vec<_> = stopped.iter().map(|s| s.id.clone()).collect();
    stopped_ids.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(
        stopped_ids, expected,
        "exactly the running tasks are reported"
    );
    for s in &stopped {
        assert_eq!(s.status_before, RuntimeTaskStatus::Running);
        assert_eq!(s.info.status, RuntimeTaskStatus::Killed);
        assert_eq!(s.command.as_deref(), Some(script));
        assert!(s.description.starts_with("sleeper "), "{s:?}");
    }
    assert!(reg.is_shut_down());
    for id in &ids {
        assert_eq!(
            reg.get(id.as_str()).expect("get").status,
            RuntimeTaskStatus::Killed
        );
    }
    for pid in pids {
        assert!(
            kaji_tasks::process::is_gone(pid),
            "pid {pid} survived shutdown"
        );
    }
    let err = reg
        .start_local_bash("true", "late", home.path(), MAIN_CALLER)
        .await
        .expect_err("shut down");
    assert!(matches!(err, RuntimeError::ShuttingDown), "{err}");
}

#[tokio::test]
async fn stop_all_and_stop_owned_by_leave_the_registry_usable() {
    let home = tempfile::tempdir().expect("tempdir");
    let reg = registry(home.path(), small_grace());
    let mine = reg
        .start_local_bash("sleep 1000", "main's", home.path(), MAIN_CALLER)
        .await
        .expect("start");
    let theirs = reg
        .start_local_bash("sleep 1000", "sub-agent's", home.path(), "agent-1")
        .await
        .expect("start");
    let stopped = reg.stop_owned_by("agent-1").await;
    assert_eq!(stopped.len(), 1);
    assert_eq!(stopped[0].id, theirs.id);
    assert_eq!(
        reg.get(mine.id.as_str()).expect("get").status,
        RuntimeTaskStatus::Running
    );

    // An aborted prompt may stop everything, but the session goes on.
    let stopped = reg.stop_all().await;
    assert_eq!(stopped.len(), 1);
    assert_eq!(stopped[0].id, mine.id);
    assert!(!reg.is_shut_down());
    let later = reg
        .start_local_bash("echo later", "after the abort", home.path(), MAIN_CALLER)
        .await
        .expect("a new background task starts after stop_all");
    let info = reg.wait_finished(later.id.as_str()).await.expect("wait");
    assert_eq!(info.status, RuntimeTaskStatus::Completed);
    assert!(reg.stop_all().await.is_empty(), "nothing left to stop");
}

#[tokio::test]
async fn dropping_the_registry_stops_its_tasks() {
    let home = tempfile::tempdir().expect("tempdir");
    let reg = registry(home.path(), small_grace());
    let info = reg
        .start_local_bash(
            "sleep 1000 & echo \"pid=$!\"; wait",
            "sleeper",
            home.path(),
            MAIN_CALLER,
        )
        .await
        .expect("start");
    let mut pids = read_pids(&reg, "test", info.id.as_str(), "pid=", 1).await;
    pids.push(info.pid.expect("pid"));
    drop(reg);
    // Dropping stops the tasks in the background: wait (through pidfds, no
    // polling) for every process to exit. The bound only turns a broken
    // drop into a failure instead of a hang.
    let pids = tokio::task::spawn_blocking(move || {
        for pid in &pids {
            assert!(
                wait_for_exit_via_pidfd(*pid),
                "pid {pid} of a dropped registry was not stopped"
            );
        }
        pids
    })
    .await
    .expect("watcher");
    for pid in pids {
        assert!(kaji_tasks::process::is_gone(pid));
    }
}

/// Blocks until `pid` has exited, watching a pidfd; returns whether it did
/// within a minute (the bound only turns a hang into a failure).
fn wait_for_exit_via_pidfd(pid: i32) -> bool {
    // SAFETY: plain syscalls on integers and a pollfd we own.
    unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, pid, 0) as i32;
        if fd < 0 {
            return true; // already gone
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ready = libc::poll(&mut pfd, 1, 60_000);
        libc::close(fd);
        ready == 1
    }
}

#[tokio::test]
async fn refusals_say_what_is_wrong() {
    let home = tempfile::tempdir().expect("tempdir");
    let reg = registry(home.path(), small_grace());
    let err = reg.stop("5").await.expect_err("plan id");
    assert!(matches!(err, RuntimeError::PlanTaskId { .. }), "{err}");
    assert!(
        err.to_string().contains("task-list (plan) task id"),
        "{err}"
    );
    let err = reg
        .read_since_last(MAIN_CALLER, "b00000000", false, LONG)
        .await
        .expect_err("unknown");
    assert!(matches!(err, RuntimeError::UnknownTask { .. }), "{err}");
    assert!(err.to_string().contains("b00000000"), "{err}");
    let err = reg.get("nonsense").expect_err("unknown");
    assert!(err.to_string().contains("like `b9x4k2m1p`"), "{err}");

    let err = reg
        .start_local_bash("true", "nowhere", &home.path().join("missing"), MAIN_CALLER)
        .await
        .expect_err("no such cwd");
    assert!(err.to_string().contains("missing"), "{err}");
    assert!(err.to_string().contains("working directory"), "{err}");

    let info = reg
        .start_local_bash("echo hi", "hi", home.path(), MAIN_CALLER)
        .await
        .expect("start");
    let _ = read_to_end(&reg, "watcher", info.id.as_str()).await;
    let err = reg.stop(info.id.as_str()).await.expect_err("finished");
    assert!(err.to_string().contains("completed (exit code 0)"), "{err}");

    for t in RuntimeTaskType::ALL
        .into_iter()
        .filter(|t| !t.is_implemented())
    {
        let err = reg
            .start(StartRequest {
                task_type: t,
                description: "x".into(),
                command: "true".into(),
                cwd: home.path().to_path_buf(),
                owner: MAIN_CALLER.into(),
            })
            .await
            .expect_err("not implemented");
        assert!(err.to_string().contains(t.as_str()), "{err}");
        assert!(err.to_string().contains("not implemented"), "{err}");
    }
    let err = reg
        .start(StartRequest {
            task_type: RuntimeTaskType::LocalAgent,
            description: "x".into(),
            command: "true".into(),
            cwd: home.path().to_path_buf(),
            owner: MAIN_CALLER.into(),
        })
        .await
        .expect_err("an agent is no command");
    assert!(err.to_string().contains("Agent tool"), "{err}");
}

#[tokio::test]
async fn finished_tasks_leave_one_notice_for_their_owner() {
    let home = tempfile::tempdir().expect("tempdir");
    let reg = registry(home.path(), small_grace());
    let failing = reg
        .start_local_bash(
            "echo oops; exit 3",
            "failing step",
            home.path(),
            MAIN_CALLER,
        )
        .await
        .expect("start");
    let read_all = reg
        .start_local_bash("echo fine", "read step", home.path(), MAIN_CALLER)
        .await
        .expect("start");
    let other = reg
        .start_local_bash("echo sub", "sub step", home.path(), "sub-agent")
        .await
        .expect("start");
    let _ = read_to_end(&reg, "watcher", failing.id.as_str()).await;
    let _ = read_to_end(&reg, MAIN_CALLER, read_all.id.as_str()).await; // the owner saw the end
    let _ = read_to_end(&reg, "watcher", other.id.as_str()).await;

    let notices = reg.take_finished_notices_for(MAIN_CALLER);
    assert_eq!(notices.len(), 1, "{notices:?}");
    let n = &notices[0];
    assert_eq!(n.id, failing.id);
    assert_eq!(n.status, RuntimeTaskStatus::Failed);
    assert_eq!(n.exit_code, Some(3));
    assert_eq!(n.unread_bytes, 5);
    let text = n.to_prompt_text();
    assert!(
        text.contains("failing step") && text.contains("exit code 3") && text.contains("5 bytes"),
        "{text}"
    );

    assert!(reg.take_finished_notices_for(MAIN_CALLER).is_empty());
    let rest = reg.take_finished_notices();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].id, other.id);
    assert!(reg.take_finished_notices().is_empty());
}

#[tokio::test]
async fn the_session_state_file_lists_the_tasks_of_live_sessions() {
    let home = tempfile::tempdir().expect("tempdir");
    let reg = registry(home.path(), small_grace());
    let info = reg
        .start_local_bash("echo hi", "say hi", home.path(), MAIN_CALLER)
        .await
        .expect("start");
    let _ = read_to_end(&reg, MAIN_CALLER, info.id.as_str()).await;

    // A dead session (a pid that cannot exist) and a corrupt file are skipped.
    let dead = home.path().join("runs/dead-session");
    std::fs::create_dir_all(&dead).expect("mkdir");
    let live_state =
        std::fs::read_to_string(home.path().join("runs/test-session/session.json")).expect("state");
    let dead_state = live_state.replace("test-session", "dead-session").replace(
        &format!("\"pid\": {}", std::process::id()),
        "\"pid\": 2147483647",
    );
    std::fs::write(dead.join("session.json"), dead_state).expect("write");
    let corrupt = home.path().join("runs/corrupt");
    std::fs::create_dir_all(&corrupt).expect("mkdir");
    std::fs::write(corrupt.join("session.json"), "{not json").expect("write");

    let scan = scan_sessions(home.path());
    assert_eq!(scan.live.len(), 1, "{:?}", scan.live);
    let session = &scan.live[0];
    assert_eq!(session.session_id, "test-session");
    assert_eq!(session.pid, std::process::id());
    assert_eq!(session.tasks.len(), 1);
    assert_eq!(session.tasks[0].id, info.id);
    assert_eq!(session.tasks[0].status, RuntimeTaskStatus::Completed);
    assert_eq!(session.tasks[0].description, "say hi");
    assert_eq!(scan.skipped.len(), 1);
    assert!(scan.skipped[0].path.ends_with("corrupt/session.json"));
}

#[tokio::test]
async fn half_a_character_is_held_back_until_the_rest_arrives() {
    let home = tempfile::tempdir().expect("tempdir");
    let fifo = home.path().join("go");
    kaji_test_support::fixtures::mkfifo(&fifo);
    let reg = registry(home.path(), small_grace());
    // The first byte of "é", then (once released) the second and a newline.
    let info = reg
        .start_local_bash(
            r"printf '\303'; read -r x < go; printf '\251\n'",
            "split",
            home.path(),
            MAIN_CALLER,
        )
        .await
        .expect("start");
    let id = info.id.as_str();
    // Whether or not the first byte has been captured yet, a read must not
    // return it alone.
    let quiet = reg
        .read_since_last(MAIN_CALLER, id, true, Duration::from_millis(50))
        .await
        .expect("read");
    assert!(
        quiet.output.is_empty(),
        "half a character was returned: {:?}",
        quiet.output
    );
    assert!(quiet.timed_out);

    let read = reg.read_since_last(MAIN_CALLER, id, true, LONG);
    let release =
        tokio::task::spawn_blocking(move || std::fs::write(&fifo, "go\n").expect("write fifo"));
    let (read, released) = tokio::join!(read, release);
    released.expect("writer");
    let read = read.expect("read");
    assert_eq!(read.text(), "é\n");
    assert_eq!(read.start_offset, 0);
}
