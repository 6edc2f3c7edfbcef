//! A front end's `!command`: the user runs a shell command directly, and
//! it and its output join the conversation, so the model sees them in the
//! next request (Claude Code's bash mode).
//!
//! The command goes through the session's one path for tool calls: a
//! call of the tool that runs shell commands (`Bash`, by
//! [`kaji_tools::Tool::shell_input`]) of a Task made for it, with the same approvals, sandbox,
//! hooks and checkpoints as the model's (so it is asked about exactly
//! when the model's would be, and spawned by `kaji_tasks::process`). It
//! never starts a model request. What it adds is recorded as a
//! `history_replaced` record with reason `shell`, so a resume sees it.

use std::sync::atomic::Ordering;

use kaji_protocol::{ContentBlock, Message, Role};

use super::{Session, SessionError};
use crate::parser::ToolCall;
use crate::storage::record::SessionRecord;

/// What a `!command` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellOutcome {
    /// The output (as Bash returns it to the model: exit code, capped).
    pub output: String,
    /// It failed or was refused.
    pub is_error: bool,
    /// The user denied it at the approval: nothing joined the history.
    pub denied: bool,
}

/// The text the conversation gets for a command and its output.
pub fn shell_message(command: &str, output: &str) -> String {
    format!("I ran this shell command myself:\n$ {command}\n<output>\n{output}\n</output>")
}

/// The command of a [`shell_message`] (`None` if `message` is not one).
pub fn shell_command_of(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("I ran this shell command myself:\n$ ")?;
    rest.split_once("\n<output>\n").map(|(command, _)| command)
}

impl Session {
    /// Runs `command` as the user's own `Bash` call and adds it, with its
    /// output, to the conversation (unless it was denied). Refused while a
    /// prompt runs; [`Session::abort`] stops it.
    pub async fn run_shell(&self, command: &str) -> Result<ShellOutcome, SessionError> {
        let Some((tool, input)) = self.services.tools.shell_call(command) else {
            return Err(SessionError::NoShellTool);
        };
        if self.busy.swap(true, Ordering::SeqCst) {
            return Err(SessionError::Busy);
        }
        let index = super::transcript::user_texts(&self.history()).len();
        let slot = self.new_start_slot(index);
        let task = self.new_task(crate::task::new_task_id(), Some(slot));
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) = Some(task.abort_handle());
        let id = format!(
            "user_shell_{}",
            self.services.message_ids.fetch_add(1, Ordering::SeqCst)
        );
        let call = ToolCall {
            id,
            name: tool.into(),
            input: Ok(input),
        };
        let (run, mut history) = task.run_user_call(call).await;
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let outcome = ShellOutcome {
            output: run.content().to_string(),
            is_error: run.is_error(),
            denied: run.is_rejected(),
        };
        if !run.is_rejected() {
            let block = ContentBlock::Text {
                text: shell_message(command, run.content()),
                origin: kaji_protocol::TextOrigin::Shell,
            };
            match history.last_mut() {
                Some(last) if last.role == Role::User => last.content.push(block),
                _ => history.push(Message {
                    role: Role::User,
                    content: vec![block],
                }),
            }
            self.lock().history = history.clone();
            self.recorder.record_synced(SessionRecord::HistoryReplaced {
                history,
                reason: "shell".into(),
                tokens_before: None,
                tokens_after: None,
            });
        }
        self.busy.store(false, Ordering::SeqCst);
        Ok(outcome)
    }
}
