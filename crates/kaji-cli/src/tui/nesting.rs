//! A sub-agent's run as the transcript shows it: one folded block under
//! the `Agent` call that started it (its name, live activity, tool uses,
//! tokens, how it ended), its whole log behind Ctrl-O. Never the flat
//! lines of the main agent: a sub-agent's prompt is not the user's, its
//! `[completed]` is not the task's.
//!
//! Pure text from events; it never draws and never talks to a task.

use kaji_protocol::{SayKind, SayPayload, TaskEvent};

/// What the transcript keeps of one sub-agent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SubagentView {
    /// Its name (`general-purpose-3f2a`).
    pub agent: String,
    /// What it did, one line each, for Ctrl-O.
    log: Vec<String>,
    tool_uses: u32,
    tokens: u64,
    /// What it does now (`Bash: cargo test`), or how it ended.
    activity: String,
    done: bool,
    /// The text it is writing now (streamed), for its live activity.
    streaming: String,
}

impl SubagentView {
    /// A view of the sub-agent `agent`.
    pub fn new(agent: &str) -> Self {
        Self {
            agent: agent.to_string(),
            activity: "starting".into(),
            ..Self::default()
        }
    }

    /// Takes one of its events in.
    pub fn on_event(&mut self, event: &TaskEvent) {
        match event {
            TaskEvent::Say {
                kind: SayKind::Text,
                text,
                partial: true,
                ..
            } => {
                self.streaming = text.clone();
                self.writing();
            }
            TaskEvent::Delta { text, .. } => {
                self.streaming.push_str(text);
                self.writing();
            }
            TaskEvent::Say {
                kind,
                text,
                partial: false,
                payload,
                ..
            } => self.on_say(*kind, text, payload.as_ref()),
            TaskEvent::ToolResult {
                is_error,
                output,
                summary,
                ..
            } => {
                let summary = summary
                    .clone()
                    .unwrap_or_else(|| kaji_tools::first_line_summary(output));
                let first = summary.lines().next().unwrap_or("");
                let mark = if *is_error { "⎿ error: " } else { "⎿ " };
                self.log.push(format!("  {mark}{first}"));
            }
            TaskEvent::Usage(report) => {
                self.tokens += report.usage.input_tokens + report.usage.output_tokens;
            }
            TaskEvent::Finished {
                status,
                turns,
                result,
                ..
            } => {
                self.done = true;
                self.activity = format!("{} after {turns} turn(s)", status.as_str());
                if let Some(r) = result {
                    self.log.push(format!("result: {r}"));
                }
            }
            _ => {}
        }
    }

    /// Its activity while it writes: the last line of the text so far.
    fn writing(&mut self) {
        let last = self.streaming.lines().last().unwrap_or("").trim();
        let cut: String = last.chars().take(60).collect();
        self.activity = if cut.is_empty() {
            "writing".into()
        } else {
            format!("writing: {cut}")
        };
    }

    fn on_say(&mut self, kind: SayKind, text: &str, payload: Option<&SayPayload>) {
        self.streaming.clear();
        let first = text.lines().next().unwrap_or("");
        match kind {
            SayKind::Tool if matches!(payload, Some(SayPayload::Tool { .. })) => {
                self.tool_uses += 1;
                self.activity = first.to_string();
                self.log.push(format!("⏺ {text}"));
            }
            SayKind::UserFeedback => self.log.push(format!("prompt: {text}")),
            SayKind::Text | SayKind::CompletionResult => {
                self.activity = "writing".into();
                self.log.push(text.to_string());
            }
            SayKind::Error => self.log.push(format!("! {text}")),
            _ => {}
        }
    }

    /// The folded line: `  ⎿ agent NAME · 3 tool uses · 1.2k tokens · ACTIVITY`.
    pub fn line(&self) -> String {
        let mark = if self.done { "⎿" } else { "⎿ …" };
        let mut line = format!(
            "  {mark} agent {} · {} tool use(s) · {} tokens · {}",
            self.agent, self.tool_uses, self.tokens, self.activity
        );
        if !self.log.is_empty() {
            line.push_str(&format!(" (+{} lines, Ctrl-O)", self.log.len()));
        }
        line
    }

    /// One line for `/agents`: `agent NAME · 3 tool use(s) · … · completed
    /// after 2 turn(s)`.
    pub fn summary(&self) -> String {
        format!(
            "agent {} · {} tool use(s) · {} tokens · {}",
            self.agent, self.tool_uses, self.tokens, self.activity
        )
    }

    /// What Ctrl-O shows: the folded line's head, then the log.
    pub fn detail(&self) -> String {
        let mut out = self.line();
        for l in &self.log {
            out.push('\n');
            out.push_str(&l.replace('\t', "  "));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kaji_protocol::TaskStatus;

    fn say(kind: SayKind, text: &str) -> TaskEvent {
        TaskEvent::Say {
            id: 1,
            kind,
            text: text.into(),
            partial: false,
            payload: None,
        }
    }

    #[test]
    fn a_run_folds_into_one_line_with_its_log_behind_it() {
        let mut v = SubagentView::new("helper-1");
        v.on_event(&say(SayKind::UserFeedback, "echo something"));
        v.on_event(&TaskEvent::Say {
            id: 2,
            kind: SayKind::Tool,
            text: "Bash: echo hi".into(),
            partial: false,
            payload: Some(SayPayload::Tool {
                id: "c1".into(),
                tool: "Bash".into(),
                input: serde_json::json!({}),
                view: None,
            }),
        });
        assert!(v.line().contains("1 tool use(s)"), "{}", v.line());
        assert!(v.line().contains("Bash: echo hi"), "{}", v.line());
        v.on_event(&TaskEvent::Finished {
            status: TaskStatus::Completed,
            turns: 2,
            usage: Default::default(),
            result: Some("done".into()),
        });
        assert!(v.line().contains("completed after 2 turn(s)"));
        assert!(v.detail().contains("prompt: echo something"));
        assert!(v.detail().ends_with("result: done"));
    }
}
