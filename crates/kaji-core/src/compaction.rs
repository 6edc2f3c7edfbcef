//! Compaction: keeping a long conversation inside the model's context
//! window without losing what matters.
//!
//! Cheap steps come first and call no model: repeated reads of the same
//! file collapse to the latest, and old, long tool outputs are elided with
//! a note (the session file keeps them whole). When that is not enough the
//! model writes a summary, and the history becomes one user message: the
//! summary, the open tasks and the todo as they stand, the files changed,
//! and the user's latest prompt word for word. The system prompt and the
//! rule files are never part of the history (they go in front of it for
//! every request), so compaction cannot drop the project's instructions.
//! Every step keeps the history valid: a tool call and its result go
//! together. Pure functions over messages; the Task drives them.

use std::collections::HashMap;

use kaji_llm::LlmError;
use kaji_protocol::{ContentBlock, Message, Role};
use kaji_tools::{ToolFiles, ToolKind};

/// The instruction of the summary request.
pub const SUMMARY_INSTRUCTIONS: &str = "[COMPACTION] The conversation above is about to be replaced by your summary, because it no longer fits the context window. Write that summary now, as plain text with these headings:\n\
Goal — what the user asked for, in their words where possible.\n\
Decisions — what was decided and why.\n\
Files — the files read, created or changed, and what changed in each.\n\
Done — what is finished and verified.\n\
Left — what is still to do, in order.\n\
Errors to avoid — approaches that failed and why.\n\
Be complete and specific (paths, names, commands); do not call any tool.";

/// Tool results older than this many assistant turns may be elided.
const KEEP_RECENT_TURNS: usize = 2;
/// Tool results longer than this are elided when old.
const ELIDE_OVER_CHARS: usize = 2_000;

/// About four bytes a token.
pub fn estimate_tokens(messages: &[Message]) -> u64 {
    let bytes = serde_json::to_vec(messages).map_or(0, |v| v.len());
    (bytes as u64).div_ceil(4)
}

/// What compaction asks of a call's tool: its kind and the files the call
/// reads and writes (`None` for a tool the session does not have).
pub type CallFiles<'a> = &'a dyn Fn(&str, &serde_json::Value) -> Option<(ToolKind, ToolFiles)>;

/// The key of a call that reads files and nothing else: a later call with
/// the same tool and the same input reads the same again. Reads of other
/// parts (another offset) are other reads.
fn read_key(name: &str, input: &serde_json::Value, files: CallFiles<'_>) -> Option<String> {
    match files(name, input)? {
        (ToolKind::Read, f) if !f.reads.is_empty() && f.writes.is_empty() => {
            Some(format!("{name}\u{0}{input}"))
        }
        _ => None,
    }
}

/// Cheap step 1: of several reads of the same file, only the latest keeps
/// its result; earlier ones say they were superseded. Returns how many
/// results were collapsed.
pub fn collapse_repeated_reads(history: &mut [Message], files: CallFiles<'_>) -> usize {
    // call id -> read key, in order.
    let mut keys: HashMap<String, String> = HashMap::new();
    let mut latest: HashMap<String, String> = HashMap::new();
    for message in history.iter().filter(|m| m.role == Role::Assistant) {
        for (id, name, input) in message.tool_uses() {
            if let Some(key) = read_key(name, input, files) {
                keys.insert(id.to_string(), key.clone());
                latest.insert(key, id.to_string());
            }
        }
    }
    let mut collapsed = 0;
    for message in history.iter_mut().filter(|m| m.role == Role::User) {
        for block in &mut message.content {
            if let ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error: false,
            } = block
                && let Some(key) = keys.get(tool_use_id.as_str())
                && latest.get(key) != Some(tool_use_id)
                && !content.starts_with("[superseded")
            {
                *content = "[superseded: the same file was read again later in the conversation; see the later result]".into();
                collapsed += 1;
            }
        }
    }
    collapsed
}

/// Cheap step 2: tool results older than the last few turns and longer
/// than a threshold are cut to their start, with a note. Returns how many
/// were elided.
pub fn elide_old_outputs(history: &mut [Message]) -> usize {
    let assistant_turns = history.iter().filter(|m| m.role == Role::Assistant).count();
    let mut seen_turns = 0;
    let mut elided = 0;
    for message in history.iter_mut() {
        if message.role == Role::Assistant {
            seen_turns += 1;
            continue;
        }
        if seen_turns + KEEP_RECENT_TURNS > assistant_turns {
            break;
        }
        for block in &mut message.content {
            if let ContentBlock::ToolResult { content, .. } = block
                && content.chars().count() > ELIDE_OVER_CHARS
            {
                let total = content.chars().count();
                let head: String = content.chars().take(ELIDE_OVER_CHARS / 4).collect();
                *content = format!(
                    "{head}\n[… {} more characters elided by compaction; the session file keeps the whole output]",
                    total - ELIDE_OVER_CHARS / 4
                );
                elided += 1;
            }
        }
    }
    elided
}

/// Drops the oldest `rounds` rounds (an assistant message and the user
/// message that answers it, so every tool call keeps its result), always
/// keeping the first user message. Returns how many were dropped.
pub fn drop_oldest_rounds(history: &mut Vec<Message>, rounds: usize) -> usize {
    let mut dropped = 0;
    while dropped < rounds && history.len() > 3 {
        // history[0] is the first user message; [1] assistant, [2] its answer.
        if history[1].role != Role::Assistant || history[2].role != Role::User {
            break;
        }
        history.drain(1..3);
        dropped += 1;
    }
    dropped
}

/// What the compacted history is made of besides the summary.
#[derive(Debug, Default, Clone)]
pub struct CompactionContext {
    /// The open tasks of the task list, one line each.
    pub open_tasks: Vec<String>,
    /// The open todo items, one line each.
    pub todo: Vec<String>,
    /// The files changed since the session began.
    pub files_changed: Vec<String>,
    /// The user's latest typed prompt, word for word.
    pub latest_prompt: String,
}

/// The history after a summary: one user message holding, in order, the
/// summary, the open tasks and the todo, the files changed, and the user's
/// latest prompt verbatim.
pub fn compacted_history(summary: &str, ctx: &CompactionContext) -> Vec<Message> {
    let mut text = format!(
        "[CONVERSATION SUMMARY] The earlier conversation was compacted to stay within the context window. Its summary:\n\n{}\n",
        summary.trim()
    );
    if !ctx.open_tasks.is_empty() {
        text.push_str("\n[OPEN TASKS] The task list as it stands:\n");
        for t in &ctx.open_tasks {
            text.push_str(&format!("- {t}\n"));
        }
    }
    if !ctx.todo.is_empty() {
        text.push_str("\n[TODO] The checklist as it stands:\n");
        for t in &ctx.todo {
            text.push_str(&format!("- {t}\n"));
        }
    }
    if !ctx.files_changed.is_empty() {
        text.push_str("\n[FILES CHANGED] in this session so far:\n");
        for f in &ctx.files_changed {
            text.push_str(&format!("- {f}\n"));
        }
    }
    // `/compact` between prompts has no request to go on with.
    if !ctx.latest_prompt.trim().is_empty() {
        text.push_str(
            "\n[LATEST REQUEST] The user's latest request, word for word (go on with it):\n",
        );
        text.push_str(&ctx.latest_prompt);
    }
    vec![Message {
        role: Role::User,
        content: vec![ContentBlock::text(text)],
    }]
}

/// The files the calls wrote, as they named them, in first-change order.
pub fn files_changed_in(history: &[Message], files: CallFiles<'_>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for message in history.iter().filter(|m| m.role == Role::Assistant) {
        for (_, name, input) in message.tool_uses() {
            let Some((_, f)) = files(name, input) else {
                continue;
            };
            for path in f.writes {
                if !out.contains(&path) {
                    out.push(path);
                }
            }
        }
    }
    out
}

/// Why compaction failed; the history is left as it was.
#[derive(Debug, thiserror::Error)]
pub enum CompactionError {
    /// The model's summary was empty.
    #[error("compaction failed: the model's summary was empty")]
    EmptySummary,
    /// Even the summary request without its oldest rounds was too large.
    #[error("compaction failed: even the smallest summary request does not fit: {0}")]
    NeverFits(LlmError),
    /// The summary request failed.
    #[error("compaction failed: the summary request failed: {0}")]
    Request(LlmError),
    /// The summary request was still too large after every retry.
    #[error("compaction failed: the summary request never fit the context window")]
    TooManyTries,
    /// Neither a summary nor dropping old rounds shrinks the context enough.
    #[error(
        "compaction failed: neither a summary nor dropping old rounds brings the context under about {limit} tokens; start a new conversation (its history is kept)"
    )]
    CannotShrink {
        /// The size the context had to go under, in tokens.
        limit: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str, name: &str, input: serde_json::Value) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: id.into(),
                name: name.into(),
                input,
            }],
        }
    }

    fn result(id: &str, text: &str) -> Message {
        Message {
            role: Role::User,
            content: vec![ContentBlock::tool_result(id, text, false)],
        }
    }

    #[test]
    fn repeated_reads_keep_only_the_latest_result() {
        let mut h = vec![
            Message::user_text("go"),
            call("a", "Read", json!({"file_path": "x.rs"})),
            result("a", "old x"),
            call("b", "Read", json!({"file_path": "x.rs", "offset": 5})),
            result("b", "part"),
            call("c", "Read", json!({"file_path": "x.rs"})),
            result("c", "new x"),
        ];
        let tools = kaji_tools::builtin_tools();
        let files = |name: &str, input: &serde_json::Value| {
            let tool = tools.get(name)?;
            Some((tool.kind(), tool.files(input)))
        };
        let n = collapse_repeated_reads(&mut h, &files);
        assert_eq!(n, 1);
        assert!(serde_json::to_string(&h[2]).unwrap().contains("superseded"));
        assert!(serde_json::to_string(&h[4]).unwrap().contains("part"));
        assert!(serde_json::to_string(&h[6]).unwrap().contains("new x"));
    }

    #[test]
    fn old_long_outputs_are_elided_recent_ones_kept() {
        let long = "z".repeat(5_000);
        let mut h = vec![Message::user_text("go")];
        for i in 0..4 {
            h.push(call(&format!("c{i}"), "Bash", json!({"command": "x"})));
            h.push(result(&format!("c{i}"), &long));
        }
        let n = elide_old_outputs(&mut h);
        assert_eq!(n, 2, "the two oldest of four");
        assert!(serde_json::to_string(&h[2]).unwrap().contains("elided"));
        assert!(!serde_json::to_string(&h[8]).unwrap().contains("elided"));
    }

    #[test]
    fn dropping_rounds_keeps_calls_with_their_results() {
        let mut h = vec![Message::user_text("go")];
        for i in 0..3 {
            h.push(call(&format!("c{i}"), "Bash", json!({})));
            h.push(result(&format!("c{i}"), "ok"));
        }
        assert_eq!(drop_oldest_rounds(&mut h, 2), 2);
        assert_eq!(h.len(), 3);
        assert!(serde_json::to_string(&h).unwrap().contains("c2"));
    }

    #[test]
    fn the_compacted_history_holds_everything_in_order() {
        let h = compacted_history(
            "SUMMARY",
            &CompactionContext {
                open_tasks: vec!["#2 [pending] ship".into()],
                todo: vec!["[in_progress] test".into()],
                files_changed: vec!["src/a.rs".into()],
                latest_prompt: "do  it\nexactly".into(),
            },
        );
        let text = h[0].text();
        let at = |s: &str| text.find(s).unwrap();
        assert!(at("SUMMARY") < at("#2 [pending] ship"));
        assert!(at("#2 [pending] ship") < at("[in_progress] test"));
        assert!(at("src/a.rs") < at("do  it\nexactly"));
        assert!(text.ends_with("do  it\nexactly"));
    }
}
