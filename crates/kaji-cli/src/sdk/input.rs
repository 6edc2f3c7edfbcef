//! `--input-format stream-json`: reads standard input line by line,
//! answers the SDK's control requests at once (`initialize`, `interrupt`,
//! `set_permission_mode`) and hands user messages on as prompts. A bad
//! line is reported on standard error with its number and skipped; it
//! never ends the run.

use std::sync::Arc;

use kaji_core::{PermissionMode, Session};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

use super::frontend::SdkFrontend;
use crate::sdk_messages as msg;

/// Starts the reader; the receiver yields prompts and ends at end of
/// input.
pub fn spawn(session: Arc<Session>, frontend: Arc<SdkFrontend>) -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        let mut number = 0u64;
        while let Ok(Some(line)) = lines.next_line().await {
            number += 1;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Value>(&line) {
                Ok(value) => {
                    if let Some(prompt) = handle(&value, &session, &frontend, number)
                        && tx.send(prompt).is_err()
                    {
                        break;
                    }
                }
                Err(e) => eprintln!("kaji: standard input, line {number}: not JSON ({e}); skipped"),
            }
        }
    });
    rx
}

/// Handles one message; returns the prompt of a user message.
fn handle(value: &Value, session: &Session, frontend: &SdkFrontend, number: u64) -> Option<String> {
    match value.get("type").and_then(Value::as_str) {
        Some("user") => {
            let prompt = user_text(value);
            if prompt.is_none() {
                eprintln!(
                    "kaji: standard input, line {number}: a user message without text content; skipped"
                );
            }
            prompt
        }
        Some("control_request") => {
            let id = value
                .get("request_id")
                .and_then(Value::as_str)
                .unwrap_or("");
            let request = value.get("request").cloned().unwrap_or(Value::Null);
            let answer = match control(&request, session) {
                Ok(response) => msg::control_success(id, response),
                Err(e) => msg::control_error(id, &e),
            };
            frontend.output().control(&answer);
            None
        }
        // Answers to requests kaji never sends, and cancellations of them.
        Some("control_response") | Some("control_cancel_request") => None,
        other => {
            eprintln!(
                "kaji: standard input, line {number}: unknown message type {}; skipped",
                other
                    .map(|t| format!("`{t}`"))
                    .unwrap_or_else(|| "(none)".into())
            );
            None
        }
    }
}

/// The text of a user message: a string, or its text blocks.
fn user_text(value: &Value) -> Option<String> {
    let content = value.get("message")?.get("content")?;
    let text = match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    (!text.trim().is_empty()).then_some(text)
}

/// Answers one control request.
fn control(request: &Value, session: &Session) -> Result<Value, String> {
    let subtype = request.get("subtype").and_then(Value::as_str).unwrap_or("");
    match subtype {
        "initialize" => {
            if request.get("agents").is_some_and(|a| !a.is_null()) {
                eprintln!(
                    "kaji: warning: agents defined in the SDK's options are not supported yet; kaji's agent types apply"
                );
            }
            if request.get("hooks").is_some_and(|h| !h.is_null()) {
                eprintln!(
                    "kaji: warning: SDK hook callbacks are not supported yet; kaji's hooks apply"
                );
            }
            Ok(json!({
                "commands": [],
                "output_style": "default",
                "available_output_styles": ["default"],
                "models": [],
                "account": {},
                "pid": std::process::id(),
            }))
        }
        "interrupt" => {
            session.abort();
            Ok(json!({}))
        }
        "set_permission_mode" => {
            let mode = request.get("mode").and_then(Value::as_str).unwrap_or("");
            let kaji = if mode == "dontAsk" { "default" } else { mode };
            let parsed: PermissionMode = kaji.parse()?;
            session.set_permission_mode(parsed);
            Ok(json!({}))
        }
        other => Err(format!(
            "kaji does not support the control request `{other}`"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_messages_give_their_text() {
        let s = json!({"type": "user", "message": {"role": "user", "content": "hi"}});
        assert_eq!(user_text(&s).as_deref(), Some("hi"));
        let blocks = json!({"type": "user", "message": {"role": "user",
            "content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]}});
        assert_eq!(user_text(&blocks).as_deref(), Some("a\nb"));
        assert_eq!(user_text(&json!({"type": "user"})), None);
    }
}
