//! A running task's two helpers: the thread that copies its output pipe
//! into the capped log, and the supervisor that waits for its end, stops
//! the rest of its process group, records how it ended and queues the
//! notice. They never decide what to start or stop.

use super::*;

/// Reads the merged output pipe on a thread of its own until every writer
/// is gone, appending to the log. Blocking reads keep the copy cheap and
/// off the async runtime; the producer is never throttled by the cap.
pub(super) fn spawn_capture(
    id: &RuntimeTaskId,
    mut reader: std::io::PipeReader,
    log: Arc<OutputLog>,
) -> std::io::Result<tokio::sync::oneshot::Receiver<()>> {
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(format!("kaji-capture-{id}"))
        .spawn(move || {
            let mut buf = vec![0u8; 256 * 1024];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => log.append(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
            let _ = done_tx.send(());
        })?;
    Ok(done_rx)
}

/// Waits for the task's leader to exit (or for a stop), stops the rest of
/// its group, waits for the capture to finish, records the end and queues
/// the notice.
pub(super) async fn supervise(
    shared: Arc<Shared>,
    entry: Arc<TaskEntry>,
    mut child: GroupChild,
    capture_done: tokio::sync::oneshot::Receiver<()>,
) {
    let grace = shared.config.kill_grace;
    let mut killed = false;
    let status = tokio::select! {
        status = child.wait() => status,
        _ = entry.stop.cancelled() => {
            killed = true;
            child.shutdown(grace).await
        }
    };
    // Members left behind by a leader that ended on its own.
    if !killed {
        let hurry = tokio::select! {
            _ = child.shutdown(grace) => false,
            _ = entry.stop.cancelled() => true,
        };
        if hurry {
            // A stop while the leftovers wind down: no more grace.
            let _ = child.kill_now().await;
        }
    }
    // Every writer of the pipe is dead, unless a process escaped the group:
    // do not wait for such a one forever.
    let _ = tokio::time::timeout(process::KILL_WAIT_LIMIT, capture_done).await;
    {
        let mut st = entry.state();
        st.ended_at_ms = Some(now_ms());
        st.pid = None;
        match &status {
            Ok(s) => {
                use std::os::unix::process::ExitStatusExt;
                st.exit_code = s.code();
                st.signal = s.signal();
                st.status = if killed {
                    RuntimeTaskStatus::Killed
                } else if s.success() {
                    RuntimeTaskStatus::Completed
                } else {
                    RuntimeTaskStatus::Failed
                };
            }
            Err(e) => {
                st.status = if killed {
                    RuntimeTaskStatus::Killed
                } else {
                    RuntimeTaskStatus::Failed
                };
                st.error = Some(format!("waiting for the process failed: {e}"));
            }
        }
    }
    shared.notices().push(entry.id.clone());
    let _ = shared.persist();
    entry.log.finish();
}
