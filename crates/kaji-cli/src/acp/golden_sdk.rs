//! TEMPORARY: writes the SDK's wire format of every message kaji sends or
//! reads to tests/golden/acp/, before the SDK is replaced.

use std::path::{Path, PathBuf};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::*;
use agent_client_protocol::{Error, ErrorCode};
use kaji_protocol::{SayKind, SayPayload, StateUpdate, TaskEvent, TodoItem, TodoStatus};
use serde_json::{Value, json};

use super::convert::{self, Converter};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/acp")
}

fn write(name: &str, v: &impl serde::Serialize) {
    let s = serde_json::to_string(v).unwrap();
    std::fs::write(dir().join(format!("{name}.json")), format!("{s}\n")).unwrap();
}

fn write_value(name: &str, v: &Value) {
    write(name, v)
}

fn modes() -> SessionModeState {
    let modes = vec![
        SessionMode::new("default", "Default").description("Read-only tools run; edits ask; x"),
        SessionMode::new("plan", "Plan").description("Only read-only tools run"),
    ];
    SessionModeState::new("default", modes)
}

fn say(id: u64, kind: SayKind, text: &str) -> TaskEvent {
    TaskEvent::Say {
        id,
        kind,
        text: text.into(),
        partial: false,
        payload: None,
    }
}

fn notify(name: &str, updates: Vec<SessionUpdate>) {
    assert_eq!(updates.len(), 1, "{name}");
    let n = SessionNotification::new("sess-1", updates.into_iter().next().unwrap());
    write(name, &n);
}

#[test]
fn capture_sdk_goldens() {
    std::fs::create_dir_all(dir()).unwrap();
    // Outgoing: responses.
    let prompt = PromptCapabilities::new().image(true).embedded_context(true);
    let init = InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(
            AgentCapabilities::new()
                .load_session(true)
                .session_capabilities(SessionCapabilities::new().list(SessionListCapabilities::new()))
                .prompt_capabilities(prompt)
                .mcp_capabilities(McpCapabilities::new().http(true)),
        )
        .agent_info(Implementation::new("kaji", "0.1.0"));
    write("out_initialize_response", &init);
    write("out_new_session_response", &NewSessionResponse::new("sess-1").modes(modes()));
    write("out_load_session_response", &LoadSessionResponse::new().modes(modes()));
    write("out_load_session_response_bare", &LoadSessionResponse::new());
    let sessions = vec![
        SessionInfo::new("s2", PathBuf::from("/w"))
            .title(Some("Fix the bug".to_string()))
            .updated_at(Some("2026-01-02T03:04:05.006Z".to_string())),
        SessionInfo::new("s1", PathBuf::from("/w"))
            .title(None::<String>)
            .updated_at(None::<String>),
    ];
    write("out_list_sessions_response", &ListSessionsResponse::new(sessions));
    write("out_list_sessions_response_empty", &ListSessionsResponse::new(vec![]));
    for (name, r) in [
        ("end_turn", StopReason::EndTurn),
        ("cancelled", StopReason::Cancelled),
        ("max_turn_requests", StopReason::MaxTurnRequests),
    ] {
        write(&format!("out_prompt_response_{name}"), &PromptResponse::new(r));
    }
    write("out_set_session_mode_response", &SetSessionModeResponse::new());

    // Outgoing: session/update, through the converter.
    let mut c = Converter::new("/w".into());
    notify("out_update_agent_message_chunk", c.convert(&say(1, SayKind::Text, "Hello")));
    notify("out_update_agent_message_chunk_second", c.convert(&say(2, SayKind::Text, "Again")));
    notify("out_update_agent_thought_chunk", c.convert(&say(3, SayKind::Reasoning, "hmm")));
    notify("out_update_user_message_chunk", c.convert(&say(4, SayKind::UserFeedback, "do it")));
    let input = json!({"file_path": "a.txt", "old_string": "x", "new_string": "y"});
    let tool = |id: &str, tool: &str, input: &Value| TaskEvent::Say {
        id: 9,
        kind: SayKind::Tool,
        text: String::new(),
        partial: false,
        payload: Some(SayPayload::Tool {
            id: id.into(),
            tool: tool.into(),
            input: input.clone(),
            view: kaji_core::executor::recorded_view(tool, input),
        }),
    };
    notify("out_update_tool_call_edit", c.convert(&tool("t1", "Edit", &input)));
    let read = json!({"file_path": "src/a.rs"});
    notify("out_update_tool_call_read", c.convert(&tool("t2", "Read", &read)));
    let bash = json!({"command": "ls -la"});
    notify("out_update_tool_call_execute", c.convert(&tool("t3", "Bash", &bash)));
    let nope = TaskEvent::Say {
        id: 10,
        kind: SayKind::Tool,
        text: String::new(),
        partial: false,
        payload: Some(SayPayload::Tool {
            id: "t4".into(),
            tool: "Mystery".into(),
            input: json!({"q": 1}),
            view: None,
        }),
    };
    notify("out_update_tool_call_unknown_tool", c.convert(&nope));
    let done = TaskEvent::ToolResult {
        id: "t2".into(),
        name: "Read".into(),
        is_error: false,
        output: "line 1\nline 2".into(),
        summary: Some("Read 2 lines".into()),
    };
    notify("out_update_tool_call_update_completed", c.convert(&done));
    let failed = TaskEvent::ToolResult {
        id: "t3".into(),
        name: "Bash".into(),
        is_error: true,
        output: "boom".into(),
        summary: None,
    };
    notify("out_update_tool_call_update_failed", c.convert(&failed));
    let running = SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        "t1".to_string(),
        ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
    ));
    notify("out_update_tool_call_update_in_progress", vec![running]);
    let todo = TaskEvent::Say {
        id: 11,
        kind: SayKind::Todo,
        text: String::new(),
        partial: false,
        payload: Some(SayPayload::Update(StateUpdate::Todo {
            items: vec![
                TodoItem { content: "One".into(), status: TodoStatus::Pending, active_form: "x".into() },
                TodoItem { content: "Two".into(), status: TodoStatus::InProgress, active_form: "x".into() },
                TodoItem { content: "Three".into(), status: TodoStatus::Completed, active_form: "x".into() },
            ],
        })),
    };
    notify("out_update_plan", c.convert(&todo));
    let stopped = TaskEvent::Finished {
        status: kaji_protocol::TaskStatus::MaxTurns,
        result: Some("the turn limit".into()),
        usage: Default::default(),
        turns: 0,
    };
    notify("out_update_agent_message_chunk_stopped", c.convert(&stopped));

    // Outgoing: requests to the client, as frontend.rs builds them.
    let call = convert::tool_call(Path::new("/w"), "t1", "Edit", &input, kaji_core::executor::recorded_view("Edit", &input).as_ref());
    let update = ToolCallUpdate::from(call);
    let options = vec![
        PermissionOption::new("allow_once", "Allow once (nothing is remembered)", PermissionOptionKind::AllowOnce),
        PermissionOption::new("allow_always", "Always allow Edit in this session", PermissionOptionKind::AllowAlways),
        PermissionOption::new("reject_once", "Reject (nothing is remembered)", PermissionOptionKind::RejectOnce),
    ];
    write("out_request_permission_edit", &RequestPermissionRequest::new("sess-1", update, options));
    let call = convert::tool_call(Path::new("/w"), "ask-3", "Bash", &bash, None);
    let mut update = ToolCallUpdate::from(call);
    update.fields.title = Some("Run ls -la?".into());
    update.fields.content = Some(vec![ToolCallContent::from(ContentBlock::Text(TextContent::new("ls -la")))]);
    let options = vec![
        PermissionOption::new("allow_once", "Allow once (nothing is remembered)", PermissionOptionKind::AllowOnce),
        PermissionOption::new("reject_once", "Reject (nothing is remembered)", PermissionOptionKind::RejectOnce),
    ];
    write("out_request_permission_command", &RequestPermissionRequest::new("sess-1", update, options));
    let fields = ToolCallUpdateFields::new()
        .title("Trust this project's settings?".to_string())
        .kind(ToolKind::Other)
        .content(vec![ToolCallContent::from(ContentBlock::Text(TextContent::new("hooks in /w/.kaji/settings.toml")))]);
    let call = ToolCallUpdate::new("trust-sess-1".to_string(), fields);
    let options = vec![
        PermissionOption::new("trust", "Trust for this session", PermissionOptionKind::AllowOnce),
        PermissionOption::new("dont_trust", "Don't trust", PermissionOptionKind::RejectOnce),
    ];
    write("out_request_permission_trust", &RequestPermissionRequest::new("sess-1", call, options));
    write("out_read_text_file_request", &ReadTextFileRequest::new("sess-1", PathBuf::from("/w/a.txt")));
    write("out_write_text_file_request", &WriteTextFileRequest::new("sess-1", PathBuf::from("/w/a.txt"), "new\ntext"));

    // Outgoing: error objects.
    write("out_error_unknown_session", &Error::new(ErrorCode::INVALID_PARAMS, "unknown session \"nope\": create it with session/new or load it with session/load"));
    write("out_error_invalid_params_data", &Error::invalid_params().data("unknown permission mode \"warp\""));
    write("out_error_internal_data", &Error::internal_error().data("disk full"));
    write("out_error_busy", &Error::new(ErrorCode::INVALID_REQUEST, "a prompt is already running in this session"));
    write("out_error_method_not_found", &Error::method_not_found().data("session/fly"));
    write("out_error_initialization_required", &Error::invalid_request().data("ACP initialization must complete before `session/new` can be used"));

    // Incoming: what clients send, as the SDK writes it.
    let caps = ClientCapabilities::new().fs(FileSystemCapabilities::new().read_text_file(true).write_text_file(true)).terminal(true);
    let init = InitializeRequest::new(ProtocolVersion::V1).client_capabilities(caps).client_info(Implementation::new("zed", "1.0"));
    write("in_initialize_request", &init);
    write("in_initialize_request_bare", &InitializeRequest::new(ProtocolVersion::V1));
    let servers = vec![
        McpServer::Stdio(McpServerStdio::new("files", PathBuf::from("/bin/mcp")).args(vec!["--root".into(), "/w".into()]).env(vec![EnvVariable::new("TOKEN", "t")])),
        McpServer::Http(McpServerHttp::new("web", "https://example.com/mcp").headers(vec![HttpHeader::new("Authorization", "Bearer x")])),
        McpServer::Sse(McpServerSse::new("old", "https://example.com/sse").headers(vec![])),
    ];
    write("in_new_session_request", &NewSessionRequest::new(PathBuf::from("/w")).mcp_servers(servers.clone()));
    write("in_load_session_request", &LoadSessionRequest::new("sess-1", PathBuf::from("/w")).mcp_servers(servers));
    write("in_list_sessions_request", &ListSessionsRequest::new().cwd(PathBuf::from("/w")));
    write("in_list_sessions_request_bare", &ListSessionsRequest::new());
    let blocks = vec![
        ContentBlock::Text(TextContent::new("look at this")),
        ContentBlock::Image(ImageContent::new("iVBORw0KGgo=", "image/png")),
        ContentBlock::Audio(AudioContent::new("AAAA", "audio/wav")),
        ContentBlock::ResourceLink(ResourceLink::new("a.rs", "file:///w/a.rs")),
        ContentBlock::Resource(EmbeddedResource::new(EmbeddedResourceResource::TextResourceContents(TextResourceContents::new("fn main() {}", "file:///w/main.rs")))),
        ContentBlock::Resource(EmbeddedResource::new(EmbeddedResourceResource::BlobResourceContents(BlobResourceContents::new("iVBORw0KGgo=", "file:///w/p.png").mime_type(Some("image/png".to_string()))))),
    ];
    write("in_prompt_request", &PromptRequest::new("sess-1", blocks));
    write("in_set_session_mode_request", &SetSessionModeRequest::new("sess-1", "plan"));
    write("in_cancel_notification", &CancelNotification::new("sess-1"));
    write("in_request_permission_response_selected", &RequestPermissionResponse::new(RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new("allow_once"))));
    write("in_request_permission_response_cancelled", &RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled));
    write("in_read_text_file_response", &ReadTextFileResponse::new("old\ntext"));
    write("in_write_text_file_response", &WriteTextFileResponse::new());
    write_value("in_error_from_client", &serde_json::to_value(Error::new(ErrorCode::RESOURCE_NOT_FOUND, "no such file")).unwrap());
}
