//! Shared pieces of the session store tests: headers and realistic
//! multi-round session files written through the real store.

#![allow(dead_code)]

use std::path::Path;

use kaji_core::storage::record::{
    SESSION_FORMAT_VERSION, SessionHeader, SessionKind, SessionRecord,
};
use kaji_core::storage::store::SessionWriter;
use kaji_protocol::{ContentBlock, Message, Role, Usage};
use serde_json::json;

/// A header for a main session in `cwd`.
pub fn header(id: &str, cwd: &Path) -> SessionHeader {
    SessionHeader {
        format: SESSION_FORMAT_VERSION,
        session_id: id.to_string(),
        kind: SessionKind::Main,
        parent: None,
        cwd: cwd.to_path_buf(),
        created: 1_700_000_000_000,
        kaji_version: "0.1.0".into(),
    }
}

/// The records of one prompt of `rounds` tool rounds and a final answer,
/// in the order a session writes them: the user message with the reply
/// that answered it, each tool result as it returns, usage per request.
pub fn prompt_records(prompt: &str, tag: &str, rounds: usize) -> Vec<SessionRecord> {
    let mut out = vec![SessionRecord::TaskStarted {
        task_id: format!("task-{tag}"),
        prompt: prompt.to_string(),
        at: 1_700_000_001_000,
    }];
    let mut user = Message::user_text(prompt);
    for round in 0..rounds {
        let a = format!("{tag}-{round}-a");
        let b = format!("{tag}-{round}-b");
        let assistant = Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Reasoning {
                    text: "Look at the files first.".into(),
                    signature: None,
                },
                ContentBlock::text("Let me look."),
                ContentBlock::ToolUse {
                    id: a.clone(),
                    name: "Bash".into(),
                    input: json!({"command": "ls -la src"}),
                },
                ContentBlock::ToolUse {
                    id: b.clone(),
                    name: "Read".into(),
                    input: json!({"file_path": "src/main.rs"}),
                },
            ],
        };
        out.push(SessionRecord::Message { message: user });
        out.push(SessionRecord::Message { message: assistant });
        out.push(usage(round as u32 + 1));
        let results = vec![
            ContentBlock::tool_result(&a, "main.rs\nlib.rs\n", false),
            ContentBlock::tool_result(&b, "fn main() { println!(\"hi\"); }", false),
        ];
        for (id, block) in [(&a, &results[0]), (&b, &results[1])] {
            out.push(SessionRecord::ToolResult {
                block: block.clone(),
                tool_use_id: id.clone(),
            });
        }
        user = Message {
            role: Role::User,
            content: results,
        };
    }
    out.push(SessionRecord::Message { message: user });
    out.push(SessionRecord::Message {
        message: Message::assistant_text(format!("Done with {tag}.")),
    });
    out.push(usage(rounds as u32 + 1));
    out.push(SessionRecord::TaskEnded {
        task_id: format!("task-{tag}"),
        status: "completed".into(),
        at: 1_700_000_002_000,
    });
    out
}

fn usage(turn: u32) -> SessionRecord {
    SessionRecord::Usage {
        turn,
        usage: Usage {
            input_tokens: 100,
            output_tokens: 20,
            ..Usage::default()
        },
        cost_usd: Some(0.001),
    }
}

/// Writes records through `writer`, fsyncing after each tool result and
/// at each round's end as a session does.
pub fn write_all(writer: &SessionWriter, records: &[SessionRecord]) {
    for r in records {
        writer.append(r).expect("append");
        if matches!(
            r,
            SessionRecord::ToolResult { .. } | SessionRecord::Usage { .. }
        ) {
            writer.sync().expect("sync");
        }
    }
}

/// Panics unless `history` is valid for the model APIs: it starts with a
/// user message, roles alternate, and every tool_use of an assistant
/// message is answered by a tool_result in the next message.
pub fn assert_valid_history(history: &[Message], context: &str) {
    for (i, m) in history.iter().enumerate() {
        let expected = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        assert_eq!(
            m.role, expected,
            "{context}: message {i} has the wrong role"
        );
        if m.role == Role::Assistant {
            let uses: Vec<&str> = m.tool_uses().map(|(id, _, _)| id).collect();
            if uses.is_empty() {
                continue;
            }
            let Some(next) = history.get(i + 1) else {
                panic!("{context}: message {i}'s tool calls have no answer");
            };
            let answered: Vec<&str> = next
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(answered, uses, "{context}: message {i}'s calls answered");
        }
    }
}
