//! `--input-format stream-json`: reads standard input line by line,
//! answers the SDK's control requests at once (`interrupt`,
//! `set_permission_mode`, `set_model`, `mcp_status`, …), hands the
//! `initialize` request and user messages on, and the program's answers
//! to kaji's own requests to [`Control`]. A bad line is reported on
//! standard error with its number and skipped; it never ends the run, and
//! no control request goes unanswered.

use std::sync::{Arc, Mutex, OnceLock};

use kaji_core::{PermissionMode, Session};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

use super::control::Control;
use super::frontend::SdkFrontend;
use super::output::Output;
use crate::sdk_messages as msg;

/// What the reader hands on.
pub enum Incoming {
    /// The `initialize` control request (its id, the request).
    Initialize { id: String, request: Value },
    /// A user message's text.
    Prompt(String),
    /// A control request that came before the session was ready: the run
    /// answers it after `initialize`'s answer, in order.
    Control { id: String, request: Value },
}

/// What the reader shares with the run.
pub struct Shared {
    /// kaji's requests to the program.
    pub control: Arc<Control>,
    /// Where answers go.
    pub out: Arc<Output>,
    /// The session, once built.
    pub session: OnceLock<Arc<Session>>,
    /// The model `set_model` chose (`None`: the session's).
    pub model: Mutex<Option<String>>,
    /// The front end (what the last round reported).
    pub frontend: Arc<SdkFrontend>,
}

impl Shared {
    /// Nothing built yet.
    pub fn new(out: Arc<Output>, control: Arc<Control>, frontend: Arc<SdkFrontend>) -> Self {
        Self {
            control,
            out,
            session: OnceLock::new(),
            model: Mutex::new(None),
            frontend,
        }
    }

    /// The model of the next prompt, when `set_model` chose one.
    pub fn model(&self) -> Option<String> {
        self.model.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Starts the reader; the receiver ends at end of input.
pub fn spawn(shared: Arc<Shared>) -> mpsc::UnboundedReceiver<Incoming> {
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
                    if let Some(incoming) = handle(&value, &shared, number)
                        && tx.send(incoming).is_err()
                    {
                        break;
                    }
                }
                Err(e) => eprintln!("kaji: standard input, line {number}: not JSON ({e}); skipped"),
            }
        }
        shared.control.close();
    });
    rx
}

/// Handles one message; returns what the run must see.
fn handle(value: &Value, shared: &Shared, number: u64) -> Option<Incoming> {
    match value.get("type").and_then(Value::as_str) {
        Some("user") => {
            let prompt = user_text(value);
            if prompt.is_none() {
                eprintln!(
                    "kaji: standard input, line {number}: a user message without text content; skipped"
                );
            }
            prompt.map(Incoming::Prompt)
        }
        Some("control_request") => {
            let id = value
                .get("request_id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let request = value.get("request").cloned().unwrap_or(Value::Null);
            if request.get("subtype").and_then(Value::as_str) == Some("initialize") {
                return Some(Incoming::Initialize { id, request });
            }
            if shared.session.get().is_none() {
                return Some(Incoming::Control { id, request });
            }
            answer(id, &request, shared);
            None
        }
        Some("control_response") => {
            let response = value.get("response").cloned().unwrap_or(Value::Null);
            if !shared.control.resolve(&response) {
                eprintln!(
                    "kaji: standard input, line {number}: a control_response to no waiting request; skipped"
                );
            }
            None
        }
        // kaji answers every request at once: nothing to cancel.
        Some("control_cancel_request") => None,
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

/// Answers one control request other than `initialize`.
pub fn answer(id: String, request: &Value, shared: &Shared) {
    match request.get("subtype").and_then(Value::as_str) {
        Some("stop_task") => return stop_task(id, request, shared),
        Some(subtype @ ("mcp_reconnect" | "mcp_toggle")) => {
            return mcp_switch(id, subtype, request, shared);
        }
        _ => {}
    }
    let answer = match control(request, shared) {
        Ok(response) => msg::control_success(&id, response),
        Err(e) => msg::control_error(&id, &e),
    };
    shared.out.control(&answer);
}

/// `stop_task`: stops a runtime task (a background shell or agent) by
/// the `task_id` of its `task_started` message; answered once it stopped.
fn stop_task(id: String, request: &Value, shared: &Shared) {
    let task = request
        .get("task_id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let session = shared.session.get().cloned();
    let out = Arc::clone(&shared.out);
    tokio::spawn(async move {
        let answer = match session {
            None => msg::control_error(&id, "`stop_task` before `initialize`"),
            Some(s) => match s.runtime().stop(&task).await {
                Ok(_) => msg::control_success(&id, json!({})),
                Err(e) => msg::control_error(&id, &format!("stop_task {task:?}: {e}")),
            },
        };
        out.control(&answer);
    });
}

/// `mcp_reconnect` (`serverName`) restarts one of kaji's MCP servers;
/// `mcp_toggle` (`serverName`, `enabled`) turns one on or off. Answered
/// once the server is connected (or off), with an error saying why not.
fn mcp_switch(id: String, subtype: &str, request: &Value, shared: &Shared) {
    let name = request
        .get("serverName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let enabled = request.get("enabled").and_then(Value::as_bool);
    let toggle = subtype == "mcp_toggle";
    let session = shared.session.get().cloned();
    let out = Arc::clone(&shared.out);
    let subtype = subtype.to_string();
    tokio::spawn(async move {
        let done = match (session, toggle, enabled) {
            (None, ..) => Err(format!("`{subtype}` before `initialize`")),
            (Some(_), true, None) => Err("mcp_toggle: `enabled` is not a boolean".to_string()),
            (Some(s), ..) => match s.mcp() {
                None => Err(format!("no MCP server named `{name}` is configured")),
                Some(mcp) if toggle => mcp
                    .set_enabled(&name, enabled.unwrap_or(true))
                    .await
                    .map_err(|e| e.to_string()),
                Some(mcp) => mcp.reconnect(&name).await.map_err(|e| e.to_string()),
            },
        };
        let answer = match done {
            Ok(()) => msg::control_success(&id, json!({})),
            Err(e) => msg::control_error(&id, &format!("{subtype} {name:?}: {e}")),
        };
        out.control(&answer);
    });
}

/// Answers one control request (all but `initialize`).
fn control(request: &Value, shared: &Shared) -> Result<Value, String> {
    let subtype = request.get("subtype").and_then(Value::as_str).unwrap_or("");
    let session = || {
        shared.session.get().ok_or_else(|| {
            format!("`{subtype}` before `initialize`: the session is not started yet")
        })
    };
    match subtype {
        "interrupt" => {
            if let Some(s) = shared.session.get() {
                s.abort();
            }
            Ok(json!({}))
        }
        "set_permission_mode" => {
            let mode = request.get("mode").and_then(Value::as_str).unwrap_or("");
            let kaji = if mode == "dontAsk" { "default" } else { mode };
            let parsed: PermissionMode = kaji.parse()?;
            session()?.set_permission_mode(parsed);
            Ok(json!({}))
        }
        "set_model" => {
            let model = match request.get("model") {
                None | Some(Value::Null) => None,
                Some(Value::String(m)) if m == "default" || m.is_empty() => None,
                Some(Value::String(m)) => Some(m.clone()),
                Some(other) => return Err(format!("set_model: `model` is not a string: {other}")),
            };
            *shared.model.lock().unwrap_or_else(|e| e.into_inner()) = model;
            Ok(json!({}))
        }
        "set_max_thinking_tokens" => {
            let level = match request.get("max_thinking_tokens").and_then(Value::as_u64) {
                None | Some(0) => kaji_llm::Reasoning::Off,
                Some(1..=7_999) => kaji_llm::Reasoning::Low,
                Some(8_000..=23_999) => kaji_llm::Reasoning::Medium,
                Some(_) => kaji_llm::Reasoning::High,
            };
            session()?.set_reasoning(level).map_err(|e| e.to_string())?;
            Ok(json!({}))
        }
        "get_context_usage" => Ok(context_usage(session()?, shared)),
        "mcp_status" => Ok(json!({ "mcpServers": super::mcp_servers(session()?)
            .into_iter()
            .map(|(name, status)| json!({"name": name, "status": status}))
            .collect::<Vec<_>>() })),
        "rewind_files" => Err(
            "rewind_files is not supported yet: kaji's checkpoints are not tied to the program's user messages; restore one with `kaji checkpoints restore ID` (docs/checkpoints.md)"
                .to_string(),
        ),
        other => Err(format!(
            "kaji does not support the control request `{other}`"
        )),
    }
}

/// `get_context_usage`: what the main agent's last round reported, in
/// the window of the model the next prompt uses.
fn context_usage(session: &Session, shared: &Shared) -> Value {
    let (tokens, reported) = shared.frontend.context();
    let model = shared
        .model()
        .unwrap_or_else(|| session.provider_config().model.clone());
    let window = reported.unwrap_or_else(|| session.model_info().context_window);
    let agents: Vec<(String, String)> = session
        .agent_catalog()
        .agents
        .iter()
        .map(|a| (a.name.clone(), a.source.to_string()))
        .collect();
    super::context::usage(tokens, window, &model, &agents)
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
