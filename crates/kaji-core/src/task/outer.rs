//! The outer loop: rounds until the task ends — limits, notices, and what
//! follows each kind of round outcome (a nudge, a retry, the user's
//! answer to a completion). It never talks to the model itself.

use std::time::Duration;

use kaji_protocol::{
    AskKind, AskPayload, AskResponse, ContentBlock, Message, Role, SayKind, TaskStatus,
};

use super::Task;
use super::state::{Next, RoundError, RoundOutcome};
use crate::config::TextReply;
use crate::permissions::PermissionMode;
use crate::storage::record::SessionRecord;

impl Task {
    /// Rounds until the task ends.
    pub(super) async fn outer_loop(
        &self,
        mut user_content: Vec<ContentBlock>,
    ) -> (TaskStatus, Option<String>) {
        let mut empty_retries = 0u32;
        let mut stop_hook_active = false;
        loop {
            if self.cancel.is_cancelled() {
                return (TaskStatus::Aborted, None);
            }
            if let Some(end) = self.check_limits(&mut user_content).await {
                // Stop fires on every ending, limits included.
                self.stop_hooks(end.0, stop_hook_active).await;
                return end;
            }
            self.add_notices(&mut user_content).await;
            if self.needs_compaction(&user_content) {
                self.lock()
                    .push_user_content(std::mem::take(&mut user_content));
                if let Err(e) = self.compact(None, "auto").await {
                    let e = e.to_string();
                    self.emitter.say(SayKind::Error, e.clone(), None);
                    self.stop_hooks(TaskStatus::Failed, stop_hook_active).await;
                    return (TaskStatus::Failed, Some(e));
                }
                // The summary was a request too: the budget is asked again.
                if let Err(spent) = self.config.budget.check_cost() {
                    let end = self.budget_spent(spent);
                    self.stop_hooks(end.0, stop_hook_active).await;
                    return end;
                }
            }
            let outcome = self.round(user_content.clone()).await;
            let step = self
                .after_round(outcome, &mut user_content, &mut empty_retries)
                .await;
            match step {
                Next::Content(next) => user_content = next,
                Next::Retry => {}
                Next::End(status, result) => {
                    match self.stop_hooks(status, stop_hook_active).await {
                        Some(next) => {
                            stop_hook_active = true;
                            user_content = next;
                        }
                        None => return (status, result),
                    }
                }
            }
        }
    }

    /// What follows one round's outcome: the next user content, a retry of
    /// the same request, or the end of the task (before the Stop hooks).
    async fn after_round(
        &self,
        outcome: RoundOutcome,
        user_content: &mut Vec<ContentBlock>,
        empty_retries: &mut u32,
    ) -> Next {
        match outcome {
            RoundOutcome::Continue(next) => {
                *empty_retries = 0;
                Next::Content(next)
            }
            // A reply with text and no tool: where a person is there to
            // answer (the UI, an editor, a sub-agent's parent) it ends
            // the turn; headless, the seed's nudge asks for a tool.
            RoundOutcome::NoToolUsed(text) => match self.config.on_text_reply {
                TextReply::Finish => Next::End(TaskStatus::Completed, Some(text)),
                TextReply::Nudge => {
                    *empty_retries = 0;
                    self.lock().consecutive_mistakes += 1;
                    Next::Content(vec![ContentBlock::text(NO_TOOL_NUDGE)])
                }
            },
            RoundOutcome::Empty => self.after_empty_reply(empty_retries).await,
            RoundOutcome::ApiFailed(err) => self.after_failed_request(err, user_content).await,
            RoundOutcome::Completed {
                result,
                tool_use_id,
                tool,
                other_results,
            } => {
                self.after_completion(result, &tool_use_id, &tool, other_results)
                    .await
            }
            RoundOutcome::Aborted => Next::End(TaskStatus::Aborted, None),
            RoundOutcome::HookStopped(reason) => {
                self.fail_with(format!("A hook stopped the task: {reason}"), "hook")
            }
            RoundOutcome::Overflow(err) => self.after_overflow(err, user_content).await,
            RoundOutcome::SearchRejected => Next::Retry,
            RoundOutcome::Refused(why) => {
                let why = why.as_deref().unwrap_or("the provider gave no explanation");
                self.fail_with(format!("The model refused to continue: {why}"), "refusal")
            }
        }
    }

    /// Ends the task as failed with `msg`, shown as an error, and the
    /// stop reason `reason`.
    fn fail_with(&self, msg: String, reason: &str) -> Next {
        self.emitter.say(SayKind::Error, msg.clone(), None);
        self.lock().stop_reason = Some(reason.into());
        Next::End(TaskStatus::Failed, Some(msg))
    }

    /// The mistake limit (checked before each request, as in the seed) and
    /// the turn limit. `Some` ends the task.
    pub(super) async fn check_limits(
        &self,
        user_content: &mut Vec<ContentBlock>,
    ) -> Option<(TaskStatus, Option<String>)> {
        let mistakes = self.lock().consecutive_mistakes;
        if mistakes >= self.config.max_mistakes {
            let msg = format!(
                "The model made {mistakes} consecutive mistakes (the limit is {}).",
                self.config.max_mistakes
            );
            if self.lock().mode == PermissionMode::Yolo {
                self.emitter.say(SayKind::Error, msg.clone(), None);
                return Some((TaskStatus::MistakeLimit, Some(msg)));
            }
            let ask = format!("{msg} Continue?");
            match self
                .ask_or_abort(AskKind::MistakeLimitReached, ask, None)
                .await
            {
                Some(
                    AskResponse::Approve
                    | AskResponse::ApproveEdited { .. }
                    | AskResponse::ApproveAlways
                    | AskResponse::ApproveAlwaysProject,
                ) => {
                    self.lock().consecutive_mistakes = 0;
                }
                Some(AskResponse::Reply { text }) => {
                    self.lock().consecutive_mistakes = 0;
                    user_content.push(crate::session::transcript::reply_block(&text));
                }
                Some(AskResponse::Deny { .. } | AskResponse::Refuse { .. }) => {
                    return Some((TaskStatus::MistakeLimit, Some(msg)));
                }
                None => return Some((TaskStatus::Aborted, None)),
            }
        }
        let turns = self.lock().turns;
        if let Some(max) = self.config.max_turns
            && turns >= max
        {
            let msg = format!("The turn limit of {max} was reached.");
            self.emitter.say(SayKind::Error, msg.clone(), None);
            return Some((TaskStatus::MaxTurns, Some(msg)));
        }
        // The run's budget, shared with every agent of the run: this
        // request is taken from it here.
        if let Err(spent) = self.config.budget.start_request() {
            return Some(self.budget_spent(spent));
        }
        None
    }

    /// The end of a task whose run budget is spent.
    fn budget_spent(&self, spent: crate::budget::BudgetSpent) -> (TaskStatus, Option<String>) {
        let msg = spent.to_string();
        self.emitter.say(SayKind::Error, msg.clone(), None);
        self.lock().stop_reason = Some(spent.stop_reason().to_string());
        (TaskStatus::MaxTurns, Some(msg))
    }

    /// What the model learns of without asking: an open checklist left
    /// alone for a while, and background tasks of this agent that ended.
    pub(super) async fn add_notices(&self, user_content: &mut Vec<ContentBlock>) {
        if let Some(reminder) = self.todo_reminder() {
            user_content.push(ContentBlock::text(reminder));
        }
        if let Some(runtime) = &self.config.tool_services.runtime {
            for notice in runtime.take_finished_notices_for(&self.config.agent) {
                user_content.push(ContentBlock::text(notice.to_prompt_text()));
            }
        }
        // Messages and completion notices from the team's mailbox: a
        // teammate's own (a `kaji worker`'s main agent is named `main`, but
        // the lead's mailbox, with the notices of its own completions, is
        // not its to read).
        let mailbox = match self.config.role {
            kaji_tools::AgentRole::Teammate => &self.config.owner,
            _ => &self.config.agent,
        };
        if let Some(list) = &self.config.tool_services.task_list
            && let Ok(messages) = list.take_messages(mailbox).await
        {
            for message in messages {
                user_content.push(ContentBlock::text(message.to_prompt_text()));
            }
        }
    }

    /// The checklist reminder, when the model has left open items alone
    /// for `todo_reminder_turns` rounds.
    pub(super) fn todo_reminder(&self) -> Option<String> {
        let todo = self.config.todo.as_ref()?;
        let mut st = self.lock();
        st.rounds_since_todo += 1;
        if st.rounds_since_todo <= self.config.todo_reminder_turns {
            return None;
        }
        let reminder = todo.reminder()?;
        st.rounds_since_todo = 0;
        Some(reminder)
    }

    /// An empty reply: retried with backoff, then the user is asked.
    pub(super) async fn after_empty_reply(&self, empty_retries: &mut u32) -> Next {
        if *empty_retries < self.config.empty_reply_retries {
            *empty_retries += 1;
            let delay = self.config.empty_reply_backoff * 2u32.pow(*empty_retries - 1);
            self.emitter.say(
                SayKind::Error,
                format!(
                    "The model sent an empty reply (no text, no tool call); retrying ({}/{}) in {} ms.",
                    empty_retries,
                    self.config.empty_reply_retries,
                    delay.as_millis()
                ),
                None,
            );
            if !self.sleep_or_abort(delay).await {
                return Next::End(TaskStatus::Aborted, None);
            }
            return Next::Retry;
        }
        let msg = format!(
            "The model sent an empty reply {} times in a row.",
            *empty_retries + 1
        );
        match self
            .ask_or_abort(AskKind::ApiReqFailed, format!("{msg} Retry?"), None)
            .await
        {
            Some(
                AskResponse::Approve
                | AskResponse::ApproveEdited { .. }
                | AskResponse::ApproveAlways
                | AskResponse::ApproveAlwaysProject
                | AskResponse::Reply { .. },
            ) => {
                *empty_retries = 0;
                Next::Retry
            }
            Some(AskResponse::Deny { .. } | AskResponse::Refuse { .. }) => {
                Next::End(TaskStatus::Failed, Some(msg))
            }
            None => Next::End(TaskStatus::Aborted, None),
        }
    }

    /// A request that failed as a whole: the user decides whether to retry.
    pub(super) async fn after_failed_request(
        &self,
        err: RoundError,
        user_content: &[ContentBlock],
    ) -> Next {
        let retry_may_help = err.retry_may_help();
        let err = err.to_string();
        self.emitter.say(SayKind::Error, err.clone(), None);
        // A rejected key or a bad request fails the same way every time:
        // no retry is offered (#32).
        if !retry_may_help {
            return Next::End(TaskStatus::Failed, Some(err));
        }
        let ask = format!("The model request failed: {err}\nRetry?");
        match self.ask_or_abort(AskKind::ApiReqFailed, ask, None).await {
            Some(
                AskResponse::Approve
                | AskResponse::ApproveEdited { .. }
                | AskResponse::ApproveAlways
                | AskResponse::ApproveAlwaysProject,
            ) => Next::Retry,
            // What the user typed goes to the model with the retry.
            Some(AskResponse::Reply { text }) => {
                let mut next = user_content.to_vec();
                next.push(crate::session::transcript::reply_block(&text));
                Next::Content(next)
            }
            Some(AskResponse::Deny { .. } | AskResponse::Refuse { .. }) => {
                Next::End(TaskStatus::Failed, Some(err))
            }
            None => Next::End(TaskStatus::Aborted, None),
        }
    }

    /// The call `tool_use_id` of the tool that finishes the task
    /// (AttemptCompletion): the user accepts the result, or gives feedback
    /// and the task goes on.
    pub(super) async fn after_completion(
        &self,
        result: String,
        tool_use_id: &str,
        tool: &str,
        mut other_results: Vec<ContentBlock>,
    ) -> Next {
        self.emitter
            .say(SayKind::CompletionResult, result.clone(), None);
        let answer = self
            .ask_or_abort(AskKind::CompletionResult, result.clone(), None)
            .await;
        let (reply, end) = match answer {
            Some(AskResponse::Reply { text })
            | Some(AskResponse::Deny {
                feedback: Some(text),
            }) => (
                format!("The user has feedback on the result:\n{text}"),
                None,
            ),
            Some(_) => (
                "The user accepted the result.".to_string(),
                Some(TaskStatus::Completed),
            ),
            None => (
                "The task was aborted.".to_string(),
                Some(TaskStatus::Aborted),
            ),
        };
        other_results.push(self.result_block(tool_use_id, tool, &reply, false));
        match end {
            None => Next::Content(other_results),
            Some(status) => {
                // Keep the history resumable: every call answered.
                let message = Message {
                    role: Role::User,
                    content: other_results,
                };
                self.lock().push_message(message.clone());
                self.config
                    .recorder
                    .record_synced(SessionRecord::Message { message });
                let result = (status == TaskStatus::Completed).then_some(result);
                Next::End(status, result)
            }
        }
    }

    /// Asks, unless the task is aborted first (`None`).
    pub(super) async fn ask_or_abort(
        &self,
        kind: AskKind,
        text: String,
        payload: Option<AskPayload>,
    ) -> Option<AskResponse> {
        tokio::select! {
            r = self.emitter.ask(kind, text, payload) => Some(r),
            _ = self.cancel.cancelled() => None,
        }
    }

    /// Sleeps; false when aborted meanwhile.
    pub(super) async fn sleep_or_abort(&self, d: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(d) => true,
            _ = self.cancel.cancelled() => false,
        }
    }
}

pub(super) const NO_TOOL_NUDGE: &str = "[ERROR] You did not use a tool in your previous reply. Every reply must use a tool.\n\n- When the task is done, call AttemptCompletion with a summary of the result.\n- When you need information from the user, call AskUser with your question.\n- Otherwise, take the next step with the appropriate tool.";
