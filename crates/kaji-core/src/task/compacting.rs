//! Driving compaction from the loop: when to compact, the summary request,
//! and the history swap. The steps themselves live in
//! [`crate::compaction`]; this never changes the history except by
//! replacing it whole, recorded.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kaji_llm::{LlmError, ModelRequest};
use kaji_protocol::{ContentBlock, Message, Role, SayKind, SayPayload, TaskStatus, Usage};
use serde_json::Value;

use super::state::Next;
use super::{Task, TaskOutcome};
use crate::compaction;
use crate::compaction::CompactionError;
use crate::config::Compaction;
use crate::hooks::HookEvent;
use crate::storage::record::SessionRecord;

impl Task {
    /// Whether the next request would pass the compaction threshold: the
    /// context the last round filled plus what this round adds.
    pub(super) fn needs_compaction(&self, user_content: &[ContentBlock]) -> bool {
        if self.config.compaction != Compaction::Auto {
            return false;
        }
        let Some(window) = self.config.context_window else {
            return false;
        };
        let adding = serde_json::to_vec(user_content).map_or(0, |v| v.len() as u64) / 4;
        let context = self.lock().context_tokens + adding;
        context as f64 > self.config.compact_threshold * window as f64
    }

    /// The request did not fit: compact and send it again (once), unless
    /// compaction is off.
    pub(super) async fn after_overflow(
        &self,
        err: LlmError,
        user_content: &mut Vec<ContentBlock>,
    ) -> Next {
        if self.config.compaction == Compaction::Off {
            let msg = format!(
                "The conversation no longer fits the model's context window ({err}), and compaction is off (`compaction = \"off\"` in the settings). Start a new conversation, or set `compaction = \"auto\"`."
            );
            self.emitter.say(SayKind::Error, msg.clone(), None);
            return Next::End(TaskStatus::Failed, Some(msg));
        }
        if std::mem::replace(&mut self.lock().compacted_for_overflow, true) {
            let msg = format!(
                "The request still does not fit the context window after compaction: {err}"
            );
            self.emitter.say(SayKind::Error, msg.clone(), None);
            return Next::End(TaskStatus::Failed, Some(msg));
        }
        self.lock().push_user_content(std::mem::take(user_content));
        match self.compact(None, "auto").await {
            Ok(()) => Next::Content(Vec::new()),
            Err(e) => {
                let e = e.to_string();
                self.emitter.say(SayKind::Error, e.clone(), None);
                Next::End(TaskStatus::Failed, Some(e))
            }
        }
    }

    /// Compacts the history (see [`crate::compaction`]): the PreCompact
    /// hook (`trigger`: `manual` for `/compact`, else `auto`), the cheap
    /// steps, then a summary when they are not enough.
    pub(super) async fn compact(
        &self,
        instructions: Option<&str>,
        trigger: &str,
    ) -> Result<(), CompactionError> {
        let payload = self
            .hook_payload()
            .with_field("trigger", trigger)
            .with_field("custom_instructions", instructions.unwrap_or_default());
        self.run_hook_with(HookEvent::PreCompact, payload).await;
        let mut history = Vec::clone(&self.lock().history);
        let before = compaction::estimate_tokens(&history);
        let files = |name: &str, input: &Value| self.executor.files_of(name, input);
        let collapsed = compaction::collapse_repeated_reads(&mut history, &files);
        let elided = compaction::elide_old_outputs(&mut history);
        let after_cheap = compaction::estimate_tokens(&history);
        let target = self
            .config
            .context_window
            .map(|w| (self.config.compact_threshold * w as f64 * 0.8) as u64);
        let cheap_enough = instructions.is_none()
            && target.is_some_and(|t| after_cheap <= t)
            && (collapsed + elided) > 0;
        let (history, dropped) = if cheap_enough {
            (history, 0)
        } else {
            let (summary, dropped) = self.summarize(history.clone(), instructions).await?;
            let summarized =
                compaction::compacted_history(&summary, &self.compaction_context().await);
            // Compaction only shrinks: a summary that does not bring the
            // context below what it replaces (and, when automatic, below
            // the threshold) is rejected; the oldest rounds go instead.
            let summarized_tokens = compaction::estimate_tokens(&summarized);
            let limit = match target {
                Some(t) if instructions.is_none() => t.min(before),
                _ => before,
            };
            if summarized_tokens < limit {
                (summarized, dropped)
            } else {
                self.emitter.say(
                    SayKind::Info,
                    format!(
                        "The summary (about {summarized_tokens} tokens) would not shrink the context (about {before} tokens): it is rejected, and the oldest rounds are dropped instead"
                    ),
                    None,
                );
                shrink_by_dropping(history, limit)?
            }
        };
        let after = compaction::estimate_tokens(&history);
        self.lock().set_history(history.clone());
        self.lock().context_tokens = after;
        self.config
            .recorder
            .record_synced(SessionRecord::HistoryReplaced {
                history,
                reason: "compaction".into(),
                tokens_before: Some(before),
                tokens_after: Some(after),
            });
        let mut text = format!("Context compacted: about {before} → {after} tokens");
        if dropped > 0 {
            text.push_str(&format!(" ({dropped} oldest rounds were dropped to fit)"));
        }
        self.emitter.say(
            SayKind::ContextCompacted,
            text,
            Some(SayPayload::Compacted {
                tokens_before: before,
                tokens_after: after,
                dropped_rounds: dropped as u32,
            }),
        );
        Ok(())
    }

    /// The summary request: the history plus the instruction, no tools. A
    /// request that does not fit drops the oldest rounds (a call with its
    /// result) until it does. Returns the summary and the rounds dropped.
    pub(super) async fn summarize(
        &self,
        mut history: Vec<Message>,
        instructions: Option<&str>,
    ) -> Result<(String, usize), CompactionError> {
        let mut dropped = 0;
        for _ in 0..8 {
            let mut messages = history.clone();
            let mut ask = compaction::SUMMARY_INSTRUCTIONS.to_string();
            if let Some(extra) = instructions.filter(|i| !i.trim().is_empty()) {
                ask.push_str(&format!("\nThe user asks the summary to focus on: {extra}"));
            }
            match messages.last_mut() {
                Some(last) if last.role == Role::User => last.content.push(ContentBlock::text(ask)),
                _ => messages.push(Message::user_text(ask)),
            }
            let request = ModelRequest {
                model: self.config.model.clone(),
                system: "You write precise summaries of coding sessions, so that the work can go on from the summary alone.".into(),
                messages: messages.into(),
                tools: Vec::new(),
                max_tokens: self.config.max_tokens,
                temperature: None,
                web_search: None,
                wire_cache: None,
            };
            match self.collect_text(request).await {
                Ok(text) if !text.trim().is_empty() => return Ok((text, dropped)),
                Ok(_) => return Err(CompactionError::EmptySummary),
                Err(e) if e.is_context_overflow() => {
                    let rounds = history.iter().filter(|m| m.role == Role::Assistant).count();
                    let n = compaction::drop_oldest_rounds(&mut history, rounds.div_ceil(4).max(1));
                    if n == 0 {
                        return Err(CompactionError::NeverFits(e));
                    }
                    dropped += n;
                }
                Err(e) => {
                    return Err(CompactionError::Request(e));
                }
            }
        }
        Err(CompactionError::TooManyTries)
    }

    /// Runs a request without tools and returns its text. The request is
    /// one of the run's: its cost is charged to the run's budget.
    pub(super) async fn collect_text(&self, request: ModelRequest) -> Result<String, LlmError> {
        let mut stream = self.config.provider.stream(request);
        let mut text = String::new();
        let mut usage = Usage::default();
        let end = loop {
            let item = tokio::select! {
                item = stream.next() => item,
                _ = self.cancel.cancelled() => break Ok(()),
            };
            match item {
                None => break Ok(()),
                Some(Err(e)) => break Err(e),
                Some(Ok(kaji_protocol::StreamEvent::TextDelta { text: t })) => text.push_str(&t),
                Some(Ok(kaji_protocol::StreamEvent::Usage(u))) => {
                    usage = crate::parser::merge_usage(usage, u);
                }
                Some(Ok(_)) => {}
            }
        };
        if usage != Usage::default() {
            let cost = self.config.pricing.as_ref().map(|p| p(&usage));
            self.config.budget.charge(cost, &usage);
        }
        end.map(|()| text)
    }

    /// What survives a summary besides it: open tasks, the todo, the files
    /// changed, the user's latest prompt.
    pub(super) async fn compaction_context(&self) -> compaction::CompactionContext {
        let snapshot = match &self.config.tool_services.task_list {
            Some(list) => list.list().await.ok(),
            None => None,
        };
        let open_tasks = snapshot
            .map(|snap| {
                snap.tasks
                    .iter()
                    .filter(|t| t.status.as_str() != "completed")
                    .map(|t| format!("#{} [{}] {}", t.id, t.status.as_str(), t.subject))
                    .collect()
            })
            .unwrap_or_default();
        let todo = self
            .config
            .todo
            .as_ref()
            .map(|t| {
                t.open_items()
                    .iter()
                    .map(|i| format!("[{}] {}", i.status.as_str(), i.content))
                    .collect()
            })
            .unwrap_or_default();
        let (history, prompt) = {
            let st = self.lock();
            (st.history.clone(), st.prompt.clone())
        };
        let files = |name: &str, input: &Value| self.executor.files_of(name, input);
        compaction::CompactionContext {
            open_tasks,
            todo,
            files_changed: compaction::files_changed_in(&history, &files),
            latest_prompt: prompt,
        }
    }

    /// `/compact [instructions]`: compacts the conversation now, outside
    /// any prompt, and hands the history back.
    pub async fn compact_now(
        self,
        instructions: Option<String>,
    ) -> Result<TaskOutcome, CompactionError> {
        let started = Instant::now();
        self.compact(instructions.as_deref(), "manual").await?;
        let state = std::mem::take(&mut *self.lock());
        Ok(TaskOutcome {
            status: TaskStatus::Completed,
            turns: 0,
            usage: Usage::default(),
            result: None,
            history: Arc::unwrap_or_clone(state.history),
            duration: started.elapsed(),
            mode: state.mode,
            mode_before_plan: state.mode_before_plan,
            cwd: state.cwd,
            stop_reason: None,
            cost_usd: None,
        })
    }
}

/// Drops the oldest rounds of `history` until it is under `limit`
/// tokens; fails clearly when even the last round is too large.
pub(super) fn shrink_by_dropping(
    mut history: Vec<Message>,
    limit: u64,
) -> Result<(Vec<Message>, usize), CompactionError> {
    let mut dropped = 0;
    while compaction::estimate_tokens(&history) >= limit {
        let rounds = history.iter().filter(|m| m.role == Role::Assistant).count();
        let n = compaction::drop_oldest_rounds(&mut history, rounds.div_ceil(4).max(1));
        if n == 0 {
            return Err(CompactionError::CannotShrink { limit });
        }
        dropped += n;
    }
    // The model is told, where it reads next: the last user message.
    if dropped > 0
        && let Some(last) = history.last_mut().filter(|m| m.role == Role::User)
    {
        last.content.push(ContentBlock::text(format!(
            "[EARLIER ROUNDS DROPPED] The {dropped} oldest rounds of this conversation were dropped to keep it within the context window."
        )));
    }
    Ok((history, dropped))
}
