//! kaji's ACP messages against the protocol SDK's wire format, which
//! `tests/golden/acp/` holds (written with the SDK's own types before kaji
//! replaced it): what kaji sends must be byte-identical, what it reads must
//! parse. `KAJI_BLESS=1` rewrites the `out_*` files (review their diff).

use std::path::{Path, PathBuf};

use kaji_core::AskRequest;
use kaji_protocol::{
    AskKind, AskPayload, SayKind, SayPayload, StateUpdate, TaskEvent, TodoItem, TodoStatus,
};
use serde::Serialize;
use serde_json::{Value, json};

use super::convert::Converter;
use super::frontend::{permission_request, trust_request};
use super::rpc::RpcError;
use super::schema::*;

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/acp")
        .join(format!("{name}.json"))
}

fn read(name: &str) -> String {
    std::fs::read_to_string(golden(name))
        .unwrap_or_else(|e| panic!("cannot read the golden {name}.json: {e}"))
}

/// Collects the goldens kaji's output differs from.
#[derive(Default)]
struct Check {
    differs: Vec<String>,
}

impl Check {
    fn out(&mut self, name: &str, value: &impl Serialize) {
        let now = format!("{}\n", serde_json::to_string(value).unwrap());
        if std::env::var_os("KAJI_BLESS").is_some_and(|v| v == "1") {
            std::fs::write(golden(name), &now).unwrap();
            return;
        }
        let was = read(name);
        if was != now {
            self.differs.push(format!("{name}:\n- {was}+ {now}"));
        }
    }

    fn update(&mut self, name: &str, updates: Vec<SessionUpdate>) {
        assert_eq!(updates.len(), 1, "{name}: {updates:?}");
        let update = updates.into_iter().next().unwrap();
        self.out(
            name,
            &SessionNotification {
                session_id: "sess-1".into(),
                update,
            },
        );
    }

    fn done(self) {
        assert!(
            self.differs.is_empty(),
            "kaji's ACP messages differ from the goldens (- golden, + now):\n{}\nIf the change is intended, rerun with KAJI_BLESS=1 and review the diff.",
            self.differs.join("\n")
        );
    }
}

fn modes() -> SessionModeState {
    let mode = |id: &str, name: &str, what: &str| SessionMode {
        id: id.into(),
        name: name.into(),
        description: Some(what.into()),
    };
    SessionModeState {
        current_mode_id: "default".into(),
        available_modes: vec![
            mode("default", "Default", "Read-only tools run; edits ask; x"),
            mode("plan", "Plan", "Only read-only tools run"),
        ],
    }
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

fn tool(id: &str, tool: &str, input: &Value, recorded: bool) -> TaskEvent {
    TaskEvent::Say {
        id: 9,
        kind: SayKind::Tool,
        text: String::new(),
        partial: false,
        payload: Some(SayPayload::Tool {
            id: id.into(),
            tool: tool.into(),
            input: input.clone(),
            view: recorded
                .then(|| kaji_core::executor::recorded_view(tool, input))
                .flatten(),
        }),
    }
}

fn approval(
    id: u64,
    text: &str,
    tool: &str,
    input: Value,
    preview: Option<&str>,
    always: &[&str],
    call: Option<&str>,
) -> AskRequest {
    AskRequest {
        id,
        kind: AskKind::Tool,
        text: text.into(),
        payload: Some(AskPayload::ToolApproval {
            tool: tool.into(),
            input,
            preview: preview.map(str::to_string),
            always: always.iter().map(|s| s.to_string()).collect(),
            tool_use_id: call.map(str::to_string),
        }),
        agent: "main".into(),
    }
}

#[test]
fn responses_match_the_sdks() {
    let mut check = Check::default();
    let mut init = super::initialize_response(1);
    init.agent_info.version = "0.1.0".into();
    check.out("out_initialize_response", &init);
    check.out(
        "out_new_session_response",
        &NewSessionResponse {
            session_id: "sess-1".into(),
            modes: modes(),
        },
    );
    check.out(
        "out_load_session_response",
        &LoadSessionResponse {
            modes: Some(modes()),
        },
    );
    check.out(
        "out_load_session_response_bare",
        &LoadSessionResponse { modes: None },
    );
    let sessions = vec![
        SessionInfo {
            session_id: "s2".into(),
            cwd: "/w".into(),
            title: Some("Fix the bug".into()),
            updated_at: super::iso_time(1_767_323_045_006),
        },
        SessionInfo {
            session_id: "s1".into(),
            cwd: "/w".into(),
            title: None,
            updated_at: None,
        },
    ];
    check.out(
        "out_list_sessions_response",
        &ListSessionsResponse { sessions },
    );
    check.out(
        "out_list_sessions_response_empty",
        &ListSessionsResponse { sessions: vec![] },
    );
    for (name, status) in [
        ("end_turn", kaji_protocol::TaskStatus::Completed),
        ("cancelled", kaji_protocol::TaskStatus::Aborted),
        ("max_turn_requests", kaji_protocol::TaskStatus::MaxTurns),
    ] {
        let r = PromptResponse {
            stop_reason: super::stop_reason(status),
        };
        check.out(&format!("out_prompt_response_{name}"), &r);
    }
    check.out("out_set_session_mode_response", &Empty {});
    check.done();
}

#[test]
fn session_updates_match_the_sdks() {
    let mut check = Check::default();
    let mut c = Converter::new("/w".into());
    check.update(
        "out_update_agent_message_chunk",
        c.convert(&say(1, SayKind::Text, "Hello")),
    );
    check.update(
        "out_update_agent_message_chunk_second",
        c.convert(&say(2, SayKind::Text, "Again")),
    );
    check.update(
        "out_update_agent_thought_chunk",
        c.convert(&say(3, SayKind::Reasoning, "hmm")),
    );
    check.update(
        "out_update_user_message_chunk",
        c.convert(&say(4, SayKind::UserFeedback, "do it")),
    );
    let edit = json!({"file_path": "a.txt", "old_string": "x", "new_string": "y"});
    check.update(
        "out_update_tool_call_edit",
        c.convert(&tool("t1", "Edit", &edit, true)),
    );
    let read = json!({"file_path": "src/a.rs"});
    check.update(
        "out_update_tool_call_read",
        c.convert(&tool("t2", "Read", &read, true)),
    );
    let bash = json!({"command": "ls -la"});
    check.update(
        "out_update_tool_call_execute",
        c.convert(&tool("t3", "Bash", &bash, true)),
    );
    let mystery = json!({"q": 1});
    check.update(
        "out_update_tool_call_unknown_tool",
        c.convert(&tool("t4", "Mystery", &mystery, false)),
    );
    let result = |id: &str, name: &str, is_error: bool, output: &str, summary: Option<&str>| {
        TaskEvent::ToolResult {
            id: id.into(),
            name: name.into(),
            is_error,
            output: output.into(),
            summary: summary.map(str::to_string),
        }
    };
    check.update(
        "out_update_tool_call_update_completed",
        c.convert(&result(
            "t2",
            "Read",
            false,
            "line 1\nline 2",
            Some("Read 2 lines"),
        )),
    );
    check.update(
        "out_update_tool_call_update_failed",
        c.convert(&result("t3", "Bash", true, "boom", None)),
    );
    let running = ToolCallUpdate {
        tool_call_id: "t1".into(),
        fields: ToolCallUpdateFields {
            status: Some(ToolCallStatus::InProgress),
            ..ToolCallUpdateFields::default()
        },
    };
    check.update(
        "out_update_tool_call_update_in_progress",
        vec![SessionUpdate::ToolCallUpdate(running)],
    );
    let item = |content: &str, status| TodoItem {
        content: content.into(),
        status,
        active_form: "x".into(),
    };
    let todo = TaskEvent::Say {
        id: 11,
        kind: SayKind::Todo,
        text: String::new(),
        partial: false,
        payload: Some(SayPayload::Update(StateUpdate::Todo {
            items: vec![
                item("One", TodoStatus::Pending),
                item("Two", TodoStatus::InProgress),
                item("Three", TodoStatus::Completed),
            ],
        })),
    };
    check.update("out_update_plan", c.convert(&todo));
    let stopped = TaskEvent::Finished {
        status: kaji_protocol::TaskStatus::MaxTurns,
        result: Some("the turn limit".into()),
        usage: Default::default(),
        turns: 0,
    };
    check.update(
        "out_update_agent_message_chunk_stopped",
        c.convert(&stopped),
    );
    check.done();
}

#[test]
fn requests_to_the_client_and_errors_match_the_sdks() {
    let mut check = Check::default();
    let mut c = Converter::new("/w".into());
    let edit = json!({"file_path": "a.txt", "old_string": "x", "new_string": "y"});
    c.convert(&tool("t1", "Edit", &edit, true));
    let ask = approval(2, "Edit a.txt?", "Edit", edit, None, &["Edit"], Some("t1"));
    let (request, id) = permission_request(&c, "sess-1", &ask);
    assert_eq!(id, "t1");
    check.out("out_request_permission_edit", &request);
    let bash = json!({"command": "ls -la"});
    let ask = approval(3, "Run ls -la?", "Bash", bash, Some("ls -la"), &[], None);
    let (request, id) = permission_request(&c, "sess-1", &ask);
    assert_eq!(id, "ask-3");
    check.out("out_request_permission_command", &request);
    check.out(
        "out_request_permission_trust",
        &trust_request("sess-1", "hooks in /w/.kaji/settings.toml"),
    );
    check.out(
        "out_read_text_file_request",
        &ReadTextFileRequest {
            session_id: "sess-1".into(),
            path: "/w/a.txt".into(),
        },
    );
    check.out(
        "out_write_text_file_request",
        &WriteTextFileRequest {
            session_id: "sess-1".into(),
            path: "/w/a.txt".into(),
            content: "new\ntext".into(),
        },
    );
    check.out("out_error_unknown_session", &super::unknown_session("nope"));
    check.out(
        "out_error_invalid_params_data",
        &RpcError::invalid_params().data("unknown permission mode \"warp\""),
    );
    check.out(
        "out_error_internal_data",
        &RpcError::internal_error().data("disk full"),
    );
    check.out("out_error_busy", &super::busy());
    check.out(
        "out_error_method_not_found",
        &RpcError::method_not_found("session/fly"),
    );
    check.out(
        "out_error_initialization_required",
        &super::initialization_required("session/new"),
    );
    check.done();
}

fn parse<T: serde::de::DeserializeOwned>(name: &str) -> T {
    serde_json::from_str(&read(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn what_clients_send_parses() {
    let init: InitializeRequest = parse("in_initialize_request");
    assert_eq!(init.protocol_version, 1);
    let fs = init.client_capabilities.fs;
    assert!(fs.read_text_file && fs.write_text_file);
    let bare: InitializeRequest = parse("in_initialize_request_bare");
    assert!(!bare.client_capabilities.fs.read_text_file);

    let new: NewSessionRequest = parse("in_new_session_request");
    assert_eq!(new.cwd, Path::new("/w"));
    let [
        McpServer::Stdio(stdio),
        McpServer::Http(http),
        McpServer::Sse(sse),
    ] = &new.mcp_servers[..]
    else {
        panic!("{:?}", new.mcp_servers);
    };
    assert_eq!(
        (stdio.name.as_str(), stdio.command.as_path()),
        ("files", Path::new("/bin/mcp"))
    );
    assert_eq!(stdio.args, ["--root", "/w"]);
    assert_eq!(
        (stdio.env[0].name.as_str(), stdio.env[0].value.as_str()),
        ("TOKEN", "t")
    );
    assert_eq!(
        (http.name.as_str(), http.url.as_str()),
        ("web", "https://example.com/mcp")
    );
    assert_eq!(http.headers[0].value, "Bearer x");
    assert_eq!(sse.name, "old");
    let load: LoadSessionRequest = parse("in_load_session_request");
    assert_eq!(
        (load.session_id.as_str(), load.mcp_servers.len()),
        ("sess-1", 3)
    );

    let list: ListSessionsRequest = parse("in_list_sessions_request");
    assert_eq!(list.cwd.as_deref(), Some(Path::new("/w")));
    let list: ListSessionsRequest = parse("in_list_sessions_request_bare");
    assert_eq!(list.cwd, None);

    let prompt: PromptRequest = parse("in_prompt_request");
    assert_eq!(prompt.session_id, "sess-1");
    let [
        ContentBlock::Text(text),
        ContentBlock::Image(image),
        ContentBlock::Other,
        ContentBlock::ResourceLink(link),
        ContentBlock::Resource(EmbeddedResource {
            resource: EmbeddedResourceResource::Text(embedded),
        }),
        ContentBlock::Resource(EmbeddedResource {
            resource: EmbeddedResourceResource::Blob(blob),
        }),
    ] = &prompt.prompt[..]
    else {
        panic!("{:?}", prompt.prompt);
    };
    assert_eq!(text.text, "look at this");
    assert_eq!(
        (image.mime_type.as_str(), image.data.as_str()),
        ("image/png", "iVBORw0KGgo=")
    );
    assert_eq!(link.uri, "file:///w/a.rs");
    assert_eq!(
        (embedded.uri.as_str(), embedded.text.as_str()),
        ("file:///w/main.rs", "fn main() {}")
    );
    assert_eq!(blob.mime_type.as_deref(), Some("image/png"));

    let mode: SetSessionModeRequest = parse("in_set_session_mode_request");
    assert_eq!(
        (mode.session_id.as_str(), mode.mode_id.as_str()),
        ("sess-1", "plan")
    );
    let cancel: CancelNotification = parse("in_cancel_notification");
    assert_eq!(cancel.session_id, "sess-1");
    let r: RequestPermissionResponse = parse("in_request_permission_response_selected");
    assert_eq!(
        r.outcome,
        RequestPermissionOutcome::Selected {
            option_id: "allow_once".into()
        }
    );
    let r: RequestPermissionResponse = parse("in_request_permission_response_cancelled");
    assert_eq!(r.outcome, RequestPermissionOutcome::Cancelled);
    let r: ReadTextFileResponse = parse("in_read_text_file_response");
    assert_eq!(r.content, "old\ntext");
    let _: serde::de::IgnoredAny = parse("in_write_text_file_response");
    let e: RpcError = parse("in_error_from_client");
    assert_eq!(
        (e.code, e.message.as_str(), e.data),
        (-32002, "no such file", None)
    );
}

/// Clients send more than kaji reads, and kinds newer than kaji: they
/// parse, the unknown kinds as `Other`.
#[test]
fn unknown_fields_and_kinds_parse() {
    let init: InitializeRequest = serde_json::from_value(json!({
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": "yes", "writeTextFile": true, "watch": true}, "terminal": true},
        "_meta": {"x": 1}, "extra": [1, 2]
    }))
    .unwrap();
    let fs = init.client_capabilities.fs;
    assert!(!fs.read_text_file && fs.write_text_file);
    let prompt: PromptRequest = serde_json::from_value(json!({
        "sessionId": "s", "_meta": {},
        "prompt": [
            {"type": "text", "text": "a", "annotations": {"priority": 1}, "_meta": {}},
            {"type": "hologram", "frames": 3},
            {"type": "resource", "resource": {"uri": "x:y", "json": {}}},
        ]
    }))
    .unwrap();
    assert!(
        matches!(prompt.prompt[1], ContentBlock::Other),
        "{:?}",
        prompt.prompt
    );
    assert!(matches!(
        prompt.prompt[2],
        ContentBlock::Resource(EmbeddedResource {
            resource: EmbeddedResourceResource::Other(_)
        })
    ));
    let new: NewSessionRequest = serde_json::from_value(json!({
        "cwd": "/w",
        "mcpServers": [{"type": "acp", "name": "tunnel", "id": "1"}, {"type": "stdio", "name": "s", "command": "c", "args": [], "env": []}]
    }))
    .unwrap();
    assert!(
        matches!(new.mcp_servers[..], [McpServer::Other, McpServer::Stdio(_)]),
        "{:?}",
        new.mcp_servers
    );
    let new: NewSessionRequest =
        serde_json::from_value(json!({"cwd": "/w", "mcpServers": null})).unwrap();
    assert!(new.mcp_servers.is_empty());
    let e = serde_json::from_value::<NewSessionRequest>(
        json!({"cwd": "/w", "mcpServers": [{"type": "http", "name": "h"}]}),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("http") && e.contains("url"), "{e}");
}
