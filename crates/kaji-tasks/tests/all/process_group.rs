//! `kaji_tasks::process` against real processes: the group dies with its
//! handle, `shutdown` escalates to SIGKILL and returns only once every
//! member is dead, and output comes through one pipe in write order.

use std::io::Read;
use std::time::Duration;

use kaji_tasks::process::{self, read_stat};

/// Reads lines from the pipe until `count` lines starting with `label=`
/// arrived; returns their numbers.
fn read_pids(reader: &mut std::io::PipeReader, label: &str, count: usize) -> Vec<i32> {
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    loop {
        let pids: Vec<i32> = text
            .lines()
            .filter_map(|l| l.strip_prefix(label))
            .filter_map(|v| v.trim().parse().ok())
            .collect();
        if pids.len() >= count {
            return pids;
        }
        let n = reader.read(&mut buf).expect("read pipe");
        assert!(
            n > 0,
            "the pipe closed before {count} pids were printed: {text}"
        );
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

/// Blocks until `pid` exits (pidfd); false if it did not within a minute.
fn wait_exit(pid: i32) -> bool {
    // SAFETY: plain syscalls on integers and a pollfd we own.
    unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, pid, 0) as i32;
        if fd < 0 {
            return true;
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

const STUBBORN: &str = r#"
    bash -c 'trap "" TERM; echo "pid=$$"; exec sleep 1000' &
    sleep 1000 & echo "pid=$!"
    wait
"#;

#[tokio::test]
async fn shutdown_escalates_and_returns_when_every_member_is_dead() {
    let (mut child, mut reader) =
        process::spawn_with_merged_output(process::shell_command(STUBBORN)).expect("spawn");
    let mut pids = tokio::task::spawn_blocking(move || {
        let pids = read_pids(&mut reader, "pid=", 2);
        (pids, reader)
    })
    .await
    .expect("reader");
    let leader = child.pid();
    assert_eq!(child.group().id(), leader);
    let members = child.group().live_members().expect("linux has /proc");
    assert!(members.contains(&leader), "{members:?}");
    for pid in &pids.0 {
        assert!(members.contains(pid), "{pid} not in {members:?}");
        assert_eq!(read_stat(*pid).expect("alive").pgrp, leader);
    }
    let status = child
        .shutdown(Duration::from_millis(100))
        .await
        .expect("shutdown");
    assert!(!status.success());
    for pid in pids.0.iter().chain([leader].iter()) {
        assert!(
            kaji_tasks::process::is_gone(*pid),
            "{pid} survived shutdown"
        );
    }
    // Every writer is gone: the pipe reaches end-of-file.
    let mut rest = Vec::new();
    pids.1.read_to_end(&mut rest).expect("read to end");
}

#[tokio::test]
async fn dropping_the_handle_kills_the_group() {
    let (child, mut reader) =
        process::spawn_with_merged_output(process::shell_command(STUBBORN)).expect("spawn");
    let leader = child.pid();
    let (pids, reader) = tokio::task::spawn_blocking(move || {
        let pids = read_pids(&mut reader, "pid=", 2);
        (pids, reader)
    })
    .await
    .expect("reader");
    drop(child);
    let all: Vec<i32> = pids.iter().copied().chain([leader]).collect();
    let ok = tokio::task::spawn_blocking(move || all.iter().all(|pid| wait_exit(*pid)))
        .await
        .expect("watcher");
    assert!(ok, "a member of a dropped group is still running");
    drop(reader);
}

#[tokio::test]
async fn a_finished_leader_with_no_members_is_not_signalled() {
    let mut cmd = process::shell_command("exit 5");
    cmd.stdout(std::process::Stdio::null());
    let mut child = process::spawn_in_group(cmd).expect("spawn");
    let status = child.wait().await.expect("wait");
    assert_eq!(status.code(), Some(5));
    assert_eq!(child.exit_status().and_then(|s| s.code()), Some(5));
    let again = child
        .shutdown(Duration::from_secs(2))
        .await
        .expect("shutdown");
    assert_eq!(again.code(), Some(5));
    assert_eq!(child.group().live_members(), Some(Vec::new()));
}

#[tokio::test]
async fn kill_now_does_not_wait_for_a_grace_period() {
    let (mut child, mut reader) =
        process::spawn_with_merged_output(process::shell_command(STUBBORN)).expect("spawn");
    let (pids, _reader) = tokio::task::spawn_blocking(move || {
        let pids = read_pids(&mut reader, "pid=", 2);
        (pids, reader)
    })
    .await
    .expect("reader");
    let status = child.kill_now().await.expect("kill");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    for pid in pids {
        assert!(kaji_tasks::process::is_gone(pid), "{pid} survived kill_now");
    }
}

#[test]
fn the_shell_is_bash_when_there_is_one() {
    let shell = process::shell_path();
    assert!(
        shell.ends_with("bash") || shell.ends_with("sh"),
        "{}",
        shell.display()
    );
}

/// A descriptor closed in the background is closed here at once, and the
/// child that makes the last close holds nothing of this process: a pipe
/// whose write end this process then closes reaches end-of-file.
#[test]
fn a_descriptor_closed_in_the_background_is_released() {
    use std::os::fd::{AsRawFd, OwnedFd};
    let (mut reader, writer) = std::io::pipe().expect("pipe");
    let (mut other_reader, other_writer) = std::io::pipe().expect("pipe");
    let raw = writer.as_raw_fd();
    process::close_in_background(OwnedFd::from(writer));
    // SAFETY: asks about a descriptor number; no memory involved.
    let flags = unsafe { libc::fcntl(raw, libc::F_GETFD) };
    assert!(flags < 0, "still open here");
    let mut buf = Vec::new();
    reader.read_to_end(&mut buf).expect("read");
    assert!(buf.is_empty());
    drop(other_writer);
    other_reader.read_to_end(&mut buf).expect("read");
    assert!(buf.is_empty());
}
