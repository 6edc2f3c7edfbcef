//! The `TaskFrontend` of one ACP session: events go out as
//! `session/update` notifications, tool approvals as
//! `session/request_permission` requests to the client.
//!
//! Where the client offers `fs/read_text_file` and `fs/write_text_file`, it
//! is also the session's [`FileAccess`]: the file tools read and write the
//! editor's buffers.
//!
//! `emit` only queues a notification (it never blocks); `answer` and the
//! file requests wait for the client, and must therefore only run outside
//! the connection's dispatch loop (request handlers run in their own
//! tasks). It never writes to stdout itself: everything goes through the
//! connection's [`Peer`].

use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use kaji_core::{AskRequest, TaskFrontend};
use kaji_protocol::{AskKind, AskPayload, AskResponse, SessionEvent};
use kaji_tools::{FileAccess, FileAccessError};

use super::convert::{self, Converter};
use super::rpc::{Peer, RpcError};
use super::schema::{
    ContentBlock, ContentChunk, PermissionOption, PermissionOptionKind, ReadTextFileRequest,
    ReadTextFileResponse, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SessionNotification, SessionUpdate, ToolCallContent, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, ToolKind, WriteTextFileRequest,
};

/// The option ids kaji offers in a permission request.
pub const ALLOW_ONCE: &str = "allow_once";
/// Allow, and remember it for the session (the same rule as the UI's).
pub const ALLOW_ALWAYS: &str = "allow_always";
/// Reject this call.
pub const REJECT_ONCE: &str = "reject_once";

/// The option id that trusts the project for the session.
pub const TRUST: &str = "trust";
/// The option id that leaves the project untrusted.
pub const DONT_TRUST: &str = "dont_trust";

/// Which of the client's file methods kaji uses.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientFs {
    /// `fs/read_text_file`.
    pub read: bool,
    /// `fs/write_text_file`.
    pub write: bool,
}

/// One ACP session's front end.
pub struct AcpFrontend {
    peer: Arc<Peer>,
    /// The ACP session id (the kaji session's), known once the session is
    /// built.
    session_id: OnceLock<String>,
    converter: Mutex<Converter>,
    fs: ClientFs,
}

impl std::fmt::Debug for AcpFrontend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpFrontend")
            .field("session_id", &self.session_id.get())
            .field("fs", &self.fs)
            .finish_non_exhaustive()
    }
}

impl AcpFrontend {
    /// A front end sending through `peer`, for a session working in
    /// `cwd`, using the client's file methods `fs` offers.
    pub fn new(peer: Arc<Peer>, cwd: std::path::PathBuf, fs: ClientFs) -> Self {
        Self {
            peer,
            session_id: OnceLock::new(),
            converter: Mutex::new(Converter::new(cwd)),
            fs,
        }
    }

    /// Whether the client offers a file method kaji uses.
    pub fn delegates_files(&self) -> bool {
        self.fs.read || self.fs.write
    }

    /// Sends `text` as an agent message chunk (a notice of kaji's).
    pub fn notice(&self, text: &str) {
        if let Some(id) = self.session_id.get() {
            let c = ContentChunk {
                content: ContentBlock::text(text),
            };
            self.send(id, SessionUpdate::AgentMessageChunk(c));
        }
    }

    /// Asks the client, through a permission request, whether to trust the
    /// project for this session; `what` lists the settings at stake.
    pub async fn ask_trust(&self, what: &str) -> bool {
        let Some(session_id) = self.session_id.get() else {
            return false;
        };
        let request = trust_request(session_id, what);
        match self.request_permission(&request).await {
            Ok(r) => matches!(
                r.outcome,
                RequestPermissionOutcome::Selected { option_id } if option_id == TRUST
            ),
            Err(e) => {
                eprintln!("kaji acp: the trust request failed: {e}");
                false
            }
        }
    }

    async fn request_permission(
        &self,
        request: &RequestPermissionRequest,
    ) -> Result<RequestPermissionResponse, RpcError> {
        self.peer
            .request("session/request_permission", request)
            .await
    }

    /// Names the session once it is built (a rebuilt one keeps its name).
    pub fn set_session_id(&self, id: &str) {
        let _ = self.session_id.set(id.to_string());
    }

    /// The ACP session id, once known.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.get().map(String::as_str)
    }

    /// Sends the updates `event` makes for session `session_id`.
    pub fn send_event(&self, session_id: &str, event: &kaji_protocol::TaskEvent) {
        let updates = self
            .converter
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .convert(event);
        for update in updates {
            self.send(session_id, update);
        }
    }

    fn send(&self, session_id: &str, update: SessionUpdate) {
        let n = SessionNotification {
            session_id: session_id.to_string(),
            update,
        };
        if let Err(e) = self.peer.notify("session/update", &n) {
            eprintln!("kaji acp: cannot send session/update: {e}");
        }
    }

    async fn ask_permission(&self, ask: &AskRequest) -> AskResponse {
        let Some(session_id) = self.session_id.get() else {
            return deny("the session is not ready yet");
        };
        let (request, call_id) = {
            let c = self.converter.lock().unwrap_or_else(|e| e.into_inner());
            permission_request(&c, session_id, ask)
        };
        let running = || {
            self.send(
                session_id,
                SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                    tool_call_id: call_id.clone(),
                    fields: ToolCallUpdateFields {
                        status: Some(ToolCallStatus::InProgress),
                        ..ToolCallUpdateFields::default()
                    },
                }),
            )
        };
        match self.request_permission(&request).await {
            Ok(r) => match r.outcome {
                RequestPermissionOutcome::Selected { option_id } => match option_id.as_str() {
                    ALLOW_ONCE => {
                        running();
                        AskResponse::Approve
                    }
                    ALLOW_ALWAYS => {
                        running();
                        AskResponse::ApproveAlways
                    }
                    _ => AskResponse::Deny { feedback: None },
                },
                // Cancelled: the prompt is being cancelled too.
                RequestPermissionOutcome::Cancelled => AskResponse::Deny { feedback: None },
            },
            Err(e) => {
                eprintln!("kaji acp: session/request_permission failed: {e}");
                deny("the editor did not answer the permission request")
            }
        }
    }
}

/// The permission request for a tool approval: the call's title,
/// kind, locations and diff (or whole command), and options that each
/// say what they store. Returns the call's id too.
pub fn permission_request(
    c: &Converter,
    session_id: &str,
    ask: &AskRequest,
) -> (RequestPermissionRequest, String) {
    let (tool, input, preview, always, call) = match &ask.payload {
        Some(AskPayload::ToolApproval {
            tool,
            input,
            preview,
            always,
            tool_use_id,
        }) => (
            tool.clone(),
            input.clone(),
            preview.clone(),
            always.clone(),
            tool_use_id.clone(),
        ),
        _ => (
            String::new(),
            serde_json::Value::Null,
            None,
            Vec::new(),
            None,
        ),
    };
    // The ask names its call: the permission request is about that
    // call, announced or not (never another call of the same tool).
    let view = call.as_deref().and_then(|id| c.pending_call(id)).flatten();
    let id = call.unwrap_or_else(|| format!("ask-{}", ask.id));
    let cwd = c.cwd();
    let titled = view.is_some();
    let call = convert::tool_call(cwd, &id, &tool, &input, view.as_ref());
    let mut update = ToolCallUpdate::from(call);
    if !titled {
        update.fields.title = Some(ask.text.clone());
    }
    let has_diff = update
        .fields
        .content
        .as_ref()
        .is_some_and(|c| !c.is_empty());
    if let (false, Some(preview)) = (has_diff, preview) {
        update.fields.content = Some(vec![ToolCallContent::text(preview)]);
    }
    let mut options = vec![PermissionOption::new(
        ALLOW_ONCE,
        "Allow once (nothing is remembered)",
        PermissionOptionKind::AllowOnce,
    )];
    // "Always" only where there is a rule to remember.
    if !always.is_empty() {
        options.push(PermissionOption::new(
            ALLOW_ALWAYS,
            format!("Always allow {} in this session", always.join(", ")),
            PermissionOptionKind::AllowAlways,
        ));
    }
    options.push(PermissionOption::new(
        REJECT_ONCE,
        "Reject (nothing is remembered)",
        PermissionOptionKind::RejectOnce,
    ));
    let request = RequestPermissionRequest {
        session_id: session_id.to_string(),
        tool_call: update,
        options,
    };
    (request, id)
}

/// The question whether to trust the project for the session; `what`
/// lists the settings at stake.
pub fn trust_request(session_id: &str, what: &str) -> RequestPermissionRequest {
    let fields = ToolCallUpdateFields {
        kind: Some(ToolKind::Other),
        title: Some("Trust this project's settings?".to_string()),
        content: Some(vec![ToolCallContent::text(what)]),
        ..ToolCallUpdateFields::default()
    };
    RequestPermissionRequest {
        session_id: session_id.to_string(),
        tool_call: ToolCallUpdate {
            tool_call_id: format!("trust-{session_id}"),
            fields,
        },
        options: vec![
            PermissionOption::new(
                TRUST,
                "Trust for this session",
                PermissionOptionKind::AllowOnce,
            ),
            PermissionOption::new(DONT_TRUST, "Don't trust", PermissionOptionKind::RejectOnce),
        ],
    }
}

fn deny(why: &str) -> AskResponse {
    AskResponse::Deny {
        feedback: Some(why.to_string()),
    }
}

fn editor_error(e: RpcError) -> FileAccessError {
    FileAccessError::Refused {
        owner: "the editor".into(),
        message: e.to_string(),
    }
}

#[async_trait]
impl FileAccess for AcpFrontend {
    fn reads_text(&self) -> bool {
        self.fs.read
    }

    fn writes_text(&self) -> bool {
        self.fs.write
    }

    async fn read_text(&self, path: &std::path::Path) -> Result<String, FileAccessError> {
        let Some(id) = self.session_id.get() else {
            return Err(not_ready());
        };
        let request = ReadTextFileRequest {
            session_id: id.to_string(),
            path: path.to_path_buf(),
        };
        let r: Result<ReadTextFileResponse, _> =
            self.peer.request("fs/read_text_file", &request).await;
        r.map(|r| r.content).map_err(editor_error)
    }

    async fn write_text(
        &self,
        path: &std::path::Path,
        content: &str,
    ) -> Result<(), FileAccessError> {
        let Some(id) = self.session_id.get() else {
            return Err(not_ready());
        };
        let request = WriteTextFileRequest {
            session_id: id.to_string(),
            path: path.to_path_buf(),
            content: content.to_string(),
        };
        // The result is an empty object (or null): nothing to read in it.
        let r: Result<serde::de::IgnoredAny, _> =
            self.peer.request("fs/write_text_file", &request).await;
        r.map(|_| ()).map_err(editor_error)
    }
}

fn not_ready() -> FileAccessError {
    FileAccessError::Unreachable {
        owner: "the editor".into(),
        message: "the session is not ready yet".into(),
    }
}

#[async_trait]
impl TaskFrontend for AcpFrontend {
    fn emit(&self, event: SessionEvent) {
        // The ACP id, which a session rebuilt for trust keeps.
        let id = self.session_id.get().unwrap_or(&event.session_id).clone();
        self.send_event(&id, &event.event);
    }

    async fn answer(&self, ask: &AskRequest) -> AskResponse {
        match ask.kind {
            AskKind::Tool | AskKind::Command => self.ask_permission(ask).await,
            AskKind::CompletionResult => AskResponse::Approve,
            AskKind::Plan => self.ask_permission(ask).await,
            _ => deny(
                "kaji runs in an editor over ACP, which cannot answer questions mid-turn: decide on your own, or finish with AttemptCompletion and ask there.",
            ),
        }
    }
}
