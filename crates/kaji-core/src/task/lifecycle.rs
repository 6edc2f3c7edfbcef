//! A Task's start and end and the hooks around them (TaskStart,
//! UserPromptSubmit, Stop, TaskComplete, TaskCancel), and the outcome it
//! hands back. It must never run a model request.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use kaji_protocol::{BackgroundTask, ContentBlock, SayKind, SayPayload, TaskEvent, TaskStatus};
use tokio_util::sync::CancellationToken;

use super::config::TaskConfig;
use super::{FinalEvent, Task, TaskOutcome};
use crate::executor::report_hook_warnings;
use crate::hooks::{HookEvent, HookPayload};
use crate::storage::record::SessionRecord;
use crate::storage::recorder::now_millis;

impl Task {
    /// TaskStart, then UserPromptSubmit. Their context joins the first
    /// user message; a block (exit 2) ends the task before the first
    /// request, with the hook's reason.
    pub(super) async fn start_hooks(
        &self,
        prompt: &str,
        user_content: &mut Vec<ContentBlock>,
    ) -> Option<(TaskStatus, Option<String>)> {
        self.cancel_hook.started.store(true, Ordering::SeqCst);
        let hooks = self.config.hooks.as_ref()?;
        // A sub-agent's prompt is its parent's call, not the user's: only
        // SubagentStart, whose context the sub-agent gets.
        if self.config.agent != "main" {
            if hooks.has_hooks(HookEvent::SubagentStart) {
                let outcome = hooks
                    .run(HookEvent::SubagentStart, self.hook_payload(), &self.cancel)
                    .await;
                report_hook_warnings(&self.emitter, &outcome.warnings);
                for context in outcome.context {
                    user_content.push(ContentBlock::text(format!(
                        "[SubagentStart hook]\n{context}"
                    )));
                }
            }
            return None;
        }
        // A Task that continues a session loaded from disk is a resumption
        // (the seed's TaskResume); every other one starts.
        let first = if self.config.resumed.is_some() {
            (
                HookEvent::TaskResume,
                "the TaskResume hook stopped the task",
            )
        } else {
            (HookEvent::TaskStart, "the TaskStart hook stopped the task")
        };
        for (event, what) in [
            first,
            (
                HookEvent::UserPromptSubmit,
                "a UserPromptSubmit hook refused the prompt",
            ),
        ] {
            if !hooks.has_hooks(event) {
                continue;
            }
            let mut payload = self.hook_payload();
            if event == HookEvent::UserPromptSubmit {
                payload = payload.with_prompt(prompt);
            }
            let outcome = hooks.run(event, payload, &self.cancel).await;
            report_hook_warnings(&self.emitter, &outcome.warnings);
            if outcome.cancelled || self.cancel.is_cancelled() {
                return Some((TaskStatus::Aborted, None));
            }
            if let Some(reason) = outcome.blocked {
                let msg = format!("{what}: {reason}");
                self.emitter.say(SayKind::Error, msg.clone(), None);
                return Some((TaskStatus::Failed, Some(msg)));
            }
            for context in outcome.context {
                user_content.push(ContentBlock::text(format!(
                    "[{} hook]\n{context}",
                    event.as_str()
                )));
            }
        }
        None
    }

    /// The Stop hook (SubagentStop for a sub-agent) when the agent's turn
    /// ends (not on abort). A block of a completed turn keeps it working:
    /// the next user content, with the hook's reason.
    pub(super) async fn stop_hooks(
        &self,
        status: TaskStatus,
        stop_hook_active: bool,
    ) -> Option<Vec<ContentBlock>> {
        let hooks = self.config.hooks.as_ref()?;
        let event = if self.config.agent == "main" {
            HookEvent::Stop
        } else {
            HookEvent::SubagentStop
        };
        if status == TaskStatus::Aborted || !hooks.has_hooks(event) {
            return None;
        }
        let mut payload = self
            .hook_payload()
            .with_field("stop_hook_active", stop_hook_active)
            .with_field("last_assistant_message", self.last_assistant_text());
        if event == HookEvent::SubagentStop
            && let Some(path) = &self.config.transcript_path
        {
            payload =
                payload.with_field("agent_transcript_path", path.to_string_lossy().into_owned());
        }
        let outcome = hooks.run(event, payload, &self.cancel).await;
        report_hook_warnings(&self.emitter, &outcome.warnings);
        let reason = outcome.blocked?;
        if status != TaskStatus::Completed || outcome.stop.is_some() || self.cancel.is_cancelled() {
            return None;
        }
        self.emitter.say(
            SayKind::Info,
            format!("{event} hook: keep working: {reason}"),
            None,
        );
        Some(vec![ContentBlock::text(format!(
            "[{event} hook]\n{reason}"
        ))])
    }

    /// The end of a task: hooks, the report of background work still
    /// running after an abort, the record, and the outcome with its final
    /// event, which is not sent yet ([`FinalEvent`]).
    pub(super) async fn finish(
        &self,
        status: TaskStatus,
        result: Option<String>,
        started: Instant,
    ) -> (TaskOutcome, FinalEvent) {
        self.settle_checkpoints().await;
        if status == TaskStatus::Aborted {
            // Running hooks and the foreground command were killed by the
            // abort flag. Background work belongs to the session and keeps
            // running: say what is still going. Then the TaskCancel hook
            // runs, if it was due when the abort came.
            self.emitter
                .say(SayKind::Error, "The task was aborted.", None);
            self.say_background_still_running();
            if self.cancel_hook.due.load(Ordering::SeqCst) {
                self.run_task_hook(HookEvent::TaskCancel).await;
            }
        } else if self.config.agent == "main" {
            // Every ending but an abort, limits included (`status` says
            // which).
            let payload = self.hook_payload().with_field("status", status.as_str());
            self.run_hook_with(HookEvent::TaskComplete, payload).await;
        }
        let state = std::mem::take(&mut *self.lock());
        self.config
            .recorder
            .record_synced(SessionRecord::TaskEnded {
                task_id: self.task_id.clone(),
                status: status.as_str().to_string(),
                at: now_millis(),
            });
        let outcome = TaskOutcome {
            status,
            turns: state.turns,
            usage: state.usage,
            result,
            history: Arc::unwrap_or_clone(state.history),
            duration: started.elapsed(),
            mode: state.mode,
            mode_before_plan: state.mode_before_plan,
            cwd: state.cwd,
            stop_reason: state.stop_reason,
            cost_usd: state.cost_usd,
        };
        let event = TaskEvent::Finished {
            status,
            turns: outcome.turns,
            usage: outcome.usage,
            result: outcome.result.clone(),
        };
        let final_event = FinalEvent {
            emitter: self.emitter.clone(),
            event,
        };
        (outcome, final_event)
    }

    /// After an abort: the background tasks that go on running.
    pub(super) fn say_background_still_running(&self) {
        let Some(runtime) = &self.config.tool_services.runtime else {
            return;
        };
        let tasks: Vec<BackgroundTask> = runtime
            .list()
            .into_iter()
            .filter(|t| !t.status.is_terminal())
            .map(|t| BackgroundTask {
                id: t.id.as_str().to_string(),
                description: t.description.clone(),
                status: t.status.as_str().to_string(),
            })
            .collect();
        if tasks.is_empty() {
            return;
        }
        let lines: Vec<String> = tasks
            .iter()
            .map(|t| format!("  {} {}", t.id, t.description))
            .collect();
        self.emitter.say(
            SayKind::Info,
            format!(
                "Still running in the background (stop with TaskStop or `kaji ps`):\n{}",
                lines.join("\n")
            ),
            Some(SayPayload::Background { tasks }),
        );
    }

    /// The text of the last assistant message (Stop's
    /// `last_assistant_message`; empty when there is none).
    fn last_assistant_text(&self) -> String {
        let st = self.lock();
        st.history
            .iter()
            .rev()
            .find(|m| m.role == kaji_protocol::Role::Assistant)
            .map(|m| m.text())
            .unwrap_or_default()
    }

    pub(super) fn hook_payload(&self) -> HookPayload {
        let st = self.lock();
        HookPayload {
            cwd: st.cwd.clone(),
            permission_mode: st.mode,
            ..hook_base(&self.config, &self.task_id)
        }
    }

    /// Runs a hook that can block nothing (TaskComplete, TaskCancel).
    pub(super) async fn run_task_hook(&self, event: HookEvent) {
        self.run_hook_with(event, self.hook_payload()).await;
    }

    /// Runs the hooks of `event` with `payload`, showing their warnings;
    /// nothing they answer is acted on.
    pub(super) async fn run_hook_with(&self, event: HookEvent, payload: HookPayload) {
        let Some(hooks) = self.config.hooks.as_ref() else {
            return;
        };
        if !hooks.has_hooks(event) {
            return;
        }
        // A fresh token: the task's own may already be cancelled.
        let outcome = hooks.run(event, payload, &CancellationToken::new()).await;
        report_hook_warnings(&self.emitter, &outcome.warnings);
    }
}

/// The payload fields of every hook a Task runs: its id, the session's id
/// and file, the starting directory and mode (callers put in the current
/// ones).
pub(super) fn hook_base(config: &TaskConfig, task_id: &str) -> HookPayload {
    HookPayload::task(task_id, config.cwd.clone(), config.permission_mode)
        .with_session(config.session_id.clone(), config.transcript_path.clone())
        .with_agent(&config.agent, task_id)
}
