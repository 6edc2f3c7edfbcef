//! The `TaskFrontend` of one ACP session: events go out as
//! `session/update` notifications, tool approvals as
//! `session/request_permission` requests to the client.
//!
//! `emit` only queues a notification (it never blocks); `answer` waits for
//! the client, and must therefore only run outside the connection's
//! dispatch loop (prompts run in their own tokio task). It never writes to
//! stdout itself: the SDK owns it.

use std::sync::{Mutex, OnceLock};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    SessionNotification, SessionUpdate, ToolCallUpdate, ToolCallUpdateFields,
};
use async_trait::async_trait;
use kaji_core::{AskRequest, TaskFrontend};
use kaji_protocol::{AskKind, AskPayload, AskResponse, SessionEvent};

use super::convert::{self, Converter};

/// The option ids kaji offers in a permission request.
pub const ALLOW_ONCE: &str = "allow_once";
/// Allow, and remember it for the session (the same rule as the UI's).
pub const ALLOW_ALWAYS: &str = "allow_always";
/// Reject this call.
pub const REJECT_ONCE: &str = "reject_once";

/// One ACP session's front end.
pub struct AcpFrontend {
    cx: ConnectionTo<Client>,
    /// The ACP (= kaji) session id, known once the session is built.
    session_id: OnceLock<String>,
    converter: Mutex<Converter>,
}

impl AcpFrontend {
    /// A front end sending to `cx`, for a session working in `cwd`.
    pub fn new(cx: ConnectionTo<Client>, cwd: std::path::PathBuf) -> Self {
        Self {
            cx,
            session_id: OnceLock::new(),
            converter: Mutex::new(Converter::new(cwd)),
        }
    }

    /// Names the session once it is built.
    pub fn set_session_id(&self, id: &str) {
        let _ = self.session_id.set(id.to_string());
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
        let n = SessionNotification::new(session_id.to_string(), update);
        if let Err(e) = self.cx.send_notification(n) {
            eprintln!("kaji acp: cannot send session/update: {e:?}");
        }
    }

    /// The permission request for a tool approval.
    fn permission_request(&self, session_id: &str, ask: &AskRequest) -> RequestPermissionRequest {
        let (tool, input) = match &ask.payload {
            Some(AskPayload::ToolApproval { tool, input, .. }) => (tool.clone(), input.clone()),
            _ => (String::new(), serde_json::Value::Null),
        };
        let pending = self
            .converter
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pending_call(&tool);
        let tool_call = match pending {
            Some(id) => ToolCallUpdate::new(id, ToolCallUpdateFields::new()),
            None => {
                let cwd = std::path::PathBuf::new();
                let call = convert::tool_call(&cwd, &format!("ask-{}", ask.id), &tool, &input);
                let mut update = ToolCallUpdate::from(call);
                update.fields.title = Some(ask.text.clone());
                update
            }
        };
        let options = vec![
            PermissionOption::new(ALLOW_ONCE, "Allow", PermissionOptionKind::AllowOnce),
            PermissionOption::new(
                ALLOW_ALWAYS,
                "Always allow",
                PermissionOptionKind::AllowAlways,
            ),
            PermissionOption::new(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
        ];
        RequestPermissionRequest::new(session_id.to_string(), tool_call, options)
    }

    async fn ask_permission(&self, ask: &AskRequest) -> AskResponse {
        let Some(session_id) = self.session_id.get() else {
            return deny("the session is not ready yet");
        };
        let request = self.permission_request(session_id, ask);
        match self.cx.send_request(request).block_task().await {
            Ok(r) => match r.outcome {
                RequestPermissionOutcome::Selected(s) => match &*s.option_id.0 {
                    ALLOW_ONCE => AskResponse::Approve,
                    ALLOW_ALWAYS => AskResponse::ApproveAlways,
                    _ => AskResponse::Deny { feedback: None },
                },
                // Cancelled: the prompt is being cancelled too.
                _ => AskResponse::Deny { feedback: None },
            },
            Err(e) => {
                eprintln!("kaji acp: session/request_permission failed: {e:?}");
                deny("the editor did not answer the permission request")
            }
        }
    }
}

fn deny(why: &str) -> AskResponse {
    AskResponse::Deny {
        feedback: Some(why.to_string()),
    }
}

#[async_trait]
impl TaskFrontend for AcpFrontend {
    fn emit(&self, event: SessionEvent) {
        self.send_event(&event.session_id, &event.event);
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
