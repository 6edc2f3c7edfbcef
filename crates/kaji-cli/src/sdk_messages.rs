//! The public schema of the headless protocol the Claude Agent SDK speaks
//! (`kaji --output-format stream-json|json`): one [`SdkMessage`] per line,
//! shaped exactly as the SDKs' message parsers read Claude Code's
//! (documented in docs/sdk.md).
//!
//! These types are a contract with the SDKs, separate from the internal
//! events ([`kaji_protocol::TaskEvent`]) and from `kaji exec --json`
//! (exec_events.rs): the only ways an internal event reaches a line are
//! the builders here. Where kaji has something Claude Code lacks, a field
//! is added (prefixed `kaji_` or documented as kaji's); a field the SDKs
//! read is never renamed or given another meaning. This module must never
//! serialise an internal type into a line. The golden transcripts in
//! `tests/golden/sdk_*.jsonl` hold it to today's bytes.

use serde::Serialize;
use serde_json::{Value, json};

/// One message of `--output-format stream-json`, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SdkMessage {
    /// `system` messages: `init` and the others, by `subtype`.
    System(SystemMessage),
    /// One content block the model produced.
    Assistant(ChatMessage),
    /// Tool results (and prompts) sent to the model.
    User(ChatMessage),
    /// A raw streaming event of the model's reply
    /// (`--include-partial-messages`).
    StreamEvent(StreamEventMessage),
    /// The last message of a prompt: how it ended.
    Result(Box<ResultMessage>),
    /// The answer to a control request of the SDK.
    ControlResponse(ControlResponse),
}

impl SdkMessage {
    /// The message as JSON (one object; keys in sorted order).
    pub fn to_json(&self) -> Value {
        // Serialising these types cannot fail: every key is a string and
        // every value plain data.
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        value.sort_all_objects();
        value
    }
}

/// `{"type":"system","subtype":…}`: the fields besides `type` and
/// `subtype` depend on the subtype.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemMessage {
    /// `init`, `compact_boundary`, `task_started`, `task_notification`,
    /// `kaji_notice`.
    pub subtype: String,
    /// The session the message belongs to.
    pub session_id: String,
    /// A unique id of this message.
    pub uuid: String,
    /// The subtype's own fields.
    #[serde(flatten)]
    pub fields: serde_json::Map<String, Value>,
}

/// The `init` message's facts, as Claude Code names them.
#[derive(Debug, Clone, PartialEq)]
pub struct InitFacts {
    /// The working directory, absolute.
    pub cwd: String,
    /// The names of the tools the model gets.
    pub tools: Vec<String>,
    /// The MCP servers and their status (`connected`, `failed`, …).
    pub mcp_servers: Vec<(String, String)>,
    /// The model name.
    pub model: String,
    /// The permission mode, in Claude Code's names.
    pub permission_mode: &'static str,
    /// The agent types the Agent tool offers.
    pub agents: Vec<String>,
    /// Flags kaji accepted but does not honour, each with why.
    pub warnings: Vec<String>,
}

/// The `system` `init` message: the first message of a run.
pub fn init(session_id: &str, uuid: String, facts: &InitFacts) -> SdkMessage {
    let servers: Vec<Value> = facts
        .mcp_servers
        .iter()
        .map(|(name, status)| json!({"name": name, "status": status}))
        .collect();
    let fields = json!({
        "cwd": facts.cwd,
        "tools": facts.tools,
        "mcp_servers": servers,
        "model": facts.model,
        "permissionMode": facts.permission_mode,
        "slash_commands": [],
        "agents": facts.agents,
        "skills": [],
        "plugins": [],
        "apiKeySource": "none",
        "output_style": "default",
        "kaji_version": env!("CARGO_PKG_VERSION"),
        "kaji_warnings": facts.warnings,
    });
    system("init", session_id, uuid, fields)
}

/// A `system` message of `subtype` with `fields` (an object).
pub fn system(subtype: &str, session_id: &str, uuid: String, fields: Value) -> SdkMessage {
    let fields = match fields {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    SdkMessage::System(SystemMessage {
        subtype: subtype.to_string(),
        session_id: session_id.to_string(),
        uuid,
        fields,
    })
}

/// An `assistant` or `user` message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatMessage {
    /// The message as the Messages API writes it (`role`, `content`, and
    /// for the assistant `id`, `model`, `type`, `stop_reason`, `usage`).
    pub message: Value,
    /// The `Agent` tool call whose sub-agent produced this message; null
    /// for the main agent.
    pub parent_tool_use_id: Option<String>,
    /// The session the message belongs to.
    pub session_id: String,
    /// A unique id of this message.
    pub uuid: String,
}

/// One content block of the assistant (`text`, `thinking` or `tool_use`).
pub fn assistant(
    block: Value,
    model: &str,
    message_id: &str,
    parent: Option<String>,
    session_id: &str,
    uuid: String,
) -> SdkMessage {
    SdkMessage::Assistant(ChatMessage {
        message: json!({
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [block],
            "stop_reason": null,
            "stop_sequence": null,
        }),
        parent_tool_use_id: parent,
        session_id: session_id.to_string(),
        uuid,
    })
}

/// The `user` message carrying a tool's result.
pub fn tool_result(
    tool_use_id: &str,
    output: &str,
    is_error: bool,
    parent: Option<String>,
    session_id: &str,
    uuid: String,
) -> SdkMessage {
    SdkMessage::User(ChatMessage {
        message: json!({
            "role": "user",
            "content": [{
                "type": "tool_result",
                "tool_use_id": tool_use_id,
                "content": output,
                "is_error": is_error,
            }],
        }),
        parent_tool_use_id: parent,
        session_id: session_id.to_string(),
        uuid,
    })
}

/// `{"type":"stream_event",…}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamEventMessage {
    /// A unique id of this message.
    pub uuid: String,
    /// The session the message belongs to.
    pub session_id: String,
    /// The raw event, as the Anthropic Messages API streams it
    /// (`message_start`, `content_block_delta`, …).
    pub event: Value,
    /// As for [`ChatMessage::parent_tool_use_id`].
    pub parent_tool_use_id: Option<String>,
}

/// `{"type":"result",…}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResultMessage {
    /// `success`, `error_max_turns`, `error_during_execution`,
    /// `error_max_budget_usd` or `error_max_structured_output_retries`.
    pub subtype: &'static str,
    /// Whether the prompt failed.
    pub is_error: bool,
    /// Wall time of the prompt, in milliseconds.
    pub duration_ms: u64,
    /// Time spent waiting for the model, in milliseconds.
    pub duration_api_ms: u64,
    /// Model turns taken.
    pub num_turns: u32,
    /// The final answer (absent when there is none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Why the model stopped, when known.
    pub stop_reason: Option<String>,
    /// The session the prompt ran in.
    pub session_id: String,
    /// The prompt's cost in USD (0 when the model's prices are unknown).
    pub total_cost_usd: f64,
    /// Token counts of the prompt, the main agent's and its sub-agents'.
    pub usage: Value,
    /// Per model usage (`modelUsage`).
    #[serde(rename = "modelUsage")]
    pub model_usage: Value,
    /// Calls denied because nobody could approve them.
    pub permission_denials: Vec<Value>,
    /// With `--json-schema`: the final answer as JSON, valid against it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_output: Option<Value>,
    /// What went wrong, for the error subtypes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// A unique id of this message.
    pub uuid: String,
    /// kaji's own status of the task (`completed`, `failed`, `aborted`,
    /// `mistake_limit`, `max_turns`).
    pub kaji_status: &'static str,
}

/// `{"type":"control_response","response":{…}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControlResponse {
    /// `{"subtype":"success","request_id":…,"response":{…}}` or
    /// `{"subtype":"error","request_id":…,"error":"…"}`.
    pub response: Value,
}

/// A successful answer to the control request `request_id`.
pub fn control_success(request_id: &str, response: Value) -> SdkMessage {
    SdkMessage::ControlResponse(ControlResponse {
        response: json!({"subtype": "success", "request_id": request_id, "response": response}),
    })
}

/// A failed answer to the control request `request_id`.
pub fn control_error(request_id: &str, error: &str) -> SdkMessage {
    SdkMessage::ControlResponse(ControlResponse {
        response: json!({"subtype": "error", "request_id": request_id, "error": error}),
    })
}

/// Claude Code's name of a kaji permission mode.
pub fn claude_mode(mode: kaji_core::PermissionMode) -> &'static str {
    use kaji_core::PermissionMode as M;
    match mode {
        M::Default => "default",
        M::AcceptEdits => "acceptEdits",
        M::Yolo => "bypassPermissions",
        M::Plan => "plan",
    }
}

/// The `usage` object of a result or an assistant message.
pub fn usage(u: &kaji_protocol::Usage) -> Value {
    json!({
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cache_read_input_tokens": u.cache_read_input_tokens,
        "cache_creation_input_tokens": u.cache_creation_input_tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_system_message_keeps_type_and_subtype_beside_its_fields() {
        let m = system("kaji_notice", "s", "u".into(), json!({"text": "hi"}));
        assert_eq!(
            m.to_json(),
            json!({"type": "system", "subtype": "kaji_notice", "session_id": "s", "uuid": "u", "text": "hi"})
        );
    }

    #[test]
    fn control_answers_carry_the_request_id() {
        let ok = control_success("req_1", json!({"commands": []}));
        assert_eq!(ok.to_json()["response"]["request_id"], "req_1");
        assert_eq!(ok.to_json()["type"], "control_response");
        let err = control_error("req_2", "no");
        assert_eq!(err.to_json()["response"]["subtype"], "error");
    }
}
