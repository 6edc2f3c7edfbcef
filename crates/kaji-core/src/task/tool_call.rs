//! One tool call of a reply: its context, its run through the executor,
//! loop detection, and what its effect changes in the task. It never
//! matches on a tool's name.

use std::sync::Arc;

use kaji_protocol::{StateUpdate, TaskEvent};
use kaji_tools::ToolContext;
use serde_json::Value;

use super::Task;
use crate::checkpoints::CheckpointStore;
use crate::executor::{CallEnv, Effect, Ran, ToolRun};
use crate::parser::ToolCall;
use crate::permissions::PermissionMode;
use crate::storage::record::SessionRecord;

impl Task {
    /// Runs one call; its `tool` say takes the id `announce` (the partial
    /// ask of its arguments) or a new one, so every call run takes one id.
    pub(super) async fn run_tool(&self, call: &ToolCall, announce: Option<u64>) -> ToolRun {
        let announce_id = announce.unwrap_or_else(|| self.emitter.next());
        let input = call.input.clone().unwrap_or(Value::Null);
        let mut ctx = self.tool_context();
        ctx.call_id = Some(call.id.clone());
        let (view, preview) = self.executor.presentation(&call.name, &input, &ctx).unzip();
        self.emitter.emit(TaskEvent::ToolUse {
            id: call.id.clone(),
            name: call.name.clone(),
            input,
            view,
            preview: preview.flatten(),
        });
        let (mode, mode_before_plan) = {
            let st = self.lock();
            (st.mode, st.mode_before_plan)
        };
        let env = CallEnv {
            mode,
            mode_before_plan,
            ctx: &ctx,
            emitter: &self.emitter,
            task_id: &self.task_id,
            kaji_home: &self.config.kaji_home,
            recorder: &self.config.recorder,
            transcript_path: self.config.transcript_path.as_deref(),
            announce_id,
        };
        let mut run = self.executor.execute(call, &env).await;
        self.detect_loop(call, &mut run);
        if let ToolRun::Ran(ran) = &run {
            self.apply(ran);
            if ran.changed_files && !self.cancel.is_cancelled() {
                let written = self.executor.written_by(call, &ctx);
                self.checkpoint_after(call, written.as_deref()).await;
            }
        }
        let input = call.input.as_ref().unwrap_or(&Value::Null);
        let summary =
            self.executor
                .result_summary(&call.name, input, run.content(), run.is_error());
        self.emitter.emit(TaskEvent::ToolResult {
            id: call.id.clone(),
            name: call.name.clone(),
            is_error: run.is_error(),
            output: run.content().to_string(),
            summary: Some(summary),
        });
        run
    }

    pub(super) fn tool_context(&self) -> ToolContext {
        let (cwd, mode) = {
            let st = self.lock();
            (st.cwd.clone(), st.mode)
        };
        let hidden =
            crate::permissions::read_filter(&self.config.approvals, &self.config.cwd, &cwd);
        ToolContext {
            services: Arc::clone(&self.config.tool_services),
            sandbox: crate::permissions::sandbox_for(&self.config.approvals, mode, &cwd),
            cwd,
            project_dir: self.config.cwd.clone(),
            cancel: self.cancel.child_token(),
            session_id: self.config.session_id.clone(),
            agent: self.config.agent.clone(),
            owner: self.config.owner.clone(),
            role: self.config.role,
            agents: self.config.agents.clone(),
            web_search: self.config.web_search.clone(),
            output: self
                .config
                .live_output
                .then(|| crate::live_output::sink(self.emitter.clone())),
            call_id: None,
            hidden,
        }
    }

    /// Loop detection (as Cline has): the same call with the same input and
    /// the same result three times in a row gets a warning in its result;
    /// five times reaches the mistake limit. Polling `TaskOutput`, and
    /// calls whose results differ, never count.
    pub(super) fn detect_loop(&self, call: &ToolCall, run: &mut ToolRun) {
        if run.ran().is_some_and(|r| r.polls) {
            return;
        }
        let key = match &call.input {
            Ok(input) => format!("{}\u{0}{input}", call.name),
            Err(_) => return,
        };
        let mut st = self.lock();
        let repeats = match &mut st.last_call {
            Some((k, out, n)) if *k == key && out == run.content() => {
                *n += 1;
                *n
            }
            _ => {
                st.last_call = Some((key, run.content().to_string(), 1));
                1
            }
        };
        if repeats >= LOOP_LIMIT {
            st.force_mistake_limit = true;
            run.content_mut().push_str(&format!(
                "\n\n[kaji: this exact call has now returned the same result {repeats} times in a row; the task counts this as reaching the mistake limit.]"
            ));
        } else if repeats >= LOOP_WARNING {
            run.content_mut().push_str(&format!(
                "\n\n[kaji: this exact call has returned the same result {repeats} times in a row. Repeating it will not change the result: try something else.]"
            ));
        }
    }

    /// What a call that ran changes in the task: its mode, its working
    /// directory, the recorded todo, the checklist reminder.
    pub(super) fn apply(&self, ran: &Ran) {
        let mut st = self.lock();
        match &ran.effect {
            Some(Effect::Mode(new_mode)) => {
                if *new_mode == PermissionMode::Plan {
                    st.mode_before_plan = st.mode;
                }
                st.mode = *new_mode;
                self.config.recorder.record(SessionRecord::Mode {
                    mode: new_mode.as_str().to_string(),
                });
            }
            Some(Effect::Cwd(cwd)) => {
                st.cwd = cwd.clone();
                self.config
                    .recorder
                    .record(SessionRecord::Cwd { cwd: cwd.clone() });
                // Entering or leaving a worktree: checkpoints follow the
                // working directory.
                if self.config.checkpoints.is_some() {
                    st.checkpoints = CheckpointStore::open(&self.config.kaji_home, cwd).ok();
                }
            }
            Some(Effect::Complete(_)) | None => {}
        }
        if let Some(StateUpdate::Todo { items }) = &ran.update {
            self.config.recorder.record(SessionRecord::Todo {
                items: items.clone(),
            });
        }
        // Touching the checklist or the task list resets the reminder.
        if ran.update.is_some() {
            st.rounds_since_todo = 0;
        }
    }
}

/// Identical calls with identical results in a row before a warning, and
/// before the mistake limit.
pub(super) const LOOP_WARNING: u32 = 3;

pub(super) const LOOP_LIMIT: u32 = 5;
