//! The Task's checkpoints: the initial one, taken in the background behind
//! the write gate, and one after each call that changed files. A failed
//! checkpoint is said, never fatal to the task.

use std::path::PathBuf;
use std::sync::Arc;

use kaji_protocol::{SayKind, SayPayload};

use super::Task;
use crate::checkpoints::{Checkpoint, CheckpointError};
use crate::parser::ToolCall;
use crate::storage::record::SessionRecord;

impl Task {
    /// The seed's initial checkpoint: taken in the background; the gate
    /// opens when it is done (or failed), so writes wait and reads do not.
    pub(super) fn start_initial_checkpoint(&self) {
        let Some(gate) = self.executor.checkpoint_gate().cloned() else {
            return;
        };
        let Some(store) = self.config.checkpoints.clone() else {
            return;
        };
        let emitter = self.emitter.clone();
        let state = Arc::clone(&self.state);
        let timeout = crate::checkpoints::initial_checkpoint_timeout();
        let slot = self.config.start_checkpoint.clone();
        let first = store.with_preimages(gate.preimages().clone());
        let label = start_label(&self.lock().prompt);
        tokio::spawn(async move {
            // Watching starts before the first checkpoint's scan: every
            // change after that scan is seen (see commit_changed).
            let watching = store.clone();
            let _ = tokio::task::spawn_blocking(move || watching.start_watching()).await;
            match first.commit_within(&label, timeout).await {
                Ok(taken) => {
                    // Nothing changed since the latest checkpoint: that
                    // one holds the files as they are.
                    let id = match taken {
                        Some(cp) => Some(cp.id),
                        None => store.latest_id().await.ok().flatten(),
                    };
                    if let Some(slot) = slot {
                        *slot.lock().unwrap_or_else(|e| e.into_inner()) =
                            id.map(|id| id.as_str().to_string());
                    }
                }
                Err(crate::checkpoints::CheckpointError::Timeout { after }) => {
                    // A huge tree never blocks the first write for long:
                    // this task goes on without checkpoints.
                    state.lock().unwrap_or_else(|e| e.into_inner()).checkpoints = None;
                    emitter.say(
                        SayKind::Error,
                        format!(
                            "The initial checkpoint took longer than {} s and was given up; this task takes no checkpoints (KAJI_CHECKPOINT_TIMEOUT_MS sets the limit).",
                            after.as_secs_f64()
                        ),
                        None,
                    );
                }
                // The task ended (and its runtime went away) before the
                // checkpoint did: nothing is left to protect.
                Err(crate::checkpoints::CheckpointError::Cancelled) => {}
                Err(e) => {
                    emitter.say(
                        SayKind::Error,
                        format!("The initial checkpoint failed; changes of this task cannot be undone with `kaji checkpoints`: {e}"),
                        None,
                    );
                }
            }
            // A shadow that borrowed the user's objects copies them: in a
            // detached process that outlives a short session, completed
            // under the shadow's lock (see checkpoints/borrow.rs). Started
            // before the gate opens, so a task that writes anything has
            // started it.
            let step = store.advance_borrowing().await;
            gate.open();
            match step {
                Ok(crate::checkpoints::BorrowStep::Started(mut copy)) => {
                    // Still running when the copy ends: complete it now.
                    if copy.wait().await.is_ok_and(|s| s.success())
                        && let Err(e) = store.finish_borrowing().await
                    {
                        tracing::warn!(error = %e, "checkpoints still borrow the repository's objects");
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "checkpoints still borrow the repository's objects");
                }
            }
        });
    }

    /// A checkpoint after a tool call that changed files. One that names
    /// the files it wrote gets a checkpoint of only those, read now and
    /// written while the task goes on: the next checkpoint and the task's
    /// end wait for it (and say it then).
    pub(super) async fn checkpoint_after(&self, call: &ToolCall, written: Option<&[PathBuf]>) {
        // After the initial checkpoint, never before it (a write that
        // did not wait for it saved its pre-images there), and after the
        // previous write's. A task with checkpoints always has a gate
        // (`Task::new`).
        let Some(gate) = self.executor.checkpoint_gate() else {
            return;
        };
        gate.wait(&self.cancel).await;
        gate.settle().await;
        let (store, turn) = {
            let st = self.lock();
            (st.checkpoints.clone(), st.turns)
        };
        let Some(store) = store else {
            return;
        };
        let report = Report {
            emitter: self.emitter.clone(),
            recorder: self.config.recorder.clone(),
            tool: call.name.clone(),
            label: format!("turn {turn}: {}", call.name),
        };
        let Some(paths) = written else {
            let taken = store.commit_changed(&report.label).await;
            return report.taken(taken);
        };
        // Read now, staged while the task goes on: the next call may
        // already change these files.
        let snapshot = store.snapshot(paths);
        let label = report.label.clone();
        let taking = tokio::spawn(async move { store.commit_snapshot(&label, snapshot).await });
        gate.defer(Box::pin(async move {
            match taking.await {
                Ok(taken) => report.taken(taken),
                Err(e) => report.failed(&e),
            }
        }));
    }

    /// Waits for the checkpoint of the last write, if it is still being
    /// taken (at the task's end: every checkpoint is said before it).
    pub(super) async fn settle_checkpoints(&self) {
        if let Some(gate) = self.executor.checkpoint_gate() {
            gate.settle().await;
        }
    }
}

/// Where a checkpoint after a call is recorded and said.
struct Report {
    emitter: crate::emitter::Emitter,
    recorder: crate::storage::recorder::Recorder,
    tool: String,
    label: String,
}

impl Report {
    fn taken(self, taken: Result<Option<Checkpoint>, CheckpointError>) {
        match taken {
            Ok(Some(cp)) => {
                let id = cp.id.as_str().to_string();
                self.recorder.record(SessionRecord::Checkpoint {
                    id: id.clone(),
                    label: self.label.clone(),
                });
                self.emitter.say(
                    SayKind::Info,
                    format!("checkpoint {} ({})", cp.id.short(), self.label),
                    Some(SayPayload::Checkpoint {
                        checkpoint: id,
                        label: self.label,
                    }),
                );
            }
            Ok(None) => {}
            Err(e) => self.failed(&e),
        }
    }

    fn failed(self, why: &dyn std::fmt::Display) {
        self.emitter.say(
            SayKind::Error,
            format!("checkpoint after {} failed: {why}", self.tool),
            None,
        );
    }
}

/// The label of a task's first checkpoint: `task start: PROMPT` (its
/// first line, cut to 60 characters), so a listing names the prompt.
fn start_label(prompt: &str) -> String {
    let first = prompt.trim().lines().next().unwrap_or("").trim();
    if first.is_empty() {
        return "task start".into();
    }
    let mut cut: String = first.chars().take(60).collect();
    if first.chars().count() > 60 {
        cut.push('…');
    }
    format!("task start: {cut}")
}
