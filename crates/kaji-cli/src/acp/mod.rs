//! `kaji acp`: kaji as an Agent Client Protocol agent over stdio, for
//! editors (Zed, JetBrains IDEs, Neovim).
//!
//! A thin front end: each ACP session is one kaji [`Session`] built with
//! the same flags as `kaji exec` ([`AgentArgs`]); prompts are `submit`ted,
//! `session/cancel` aborts, events go out through [`frontend::AcpFrontend`].
//! stdout carries protocol messages only, so nothing here may print to it:
//! logs and warnings go to stderr.

mod convert;
mod frontend;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, EmbeddedResourceResource, Implementation,
    InitializeRequest, InitializeResponse, LoadSessionRequest, LoadSessionResponse,
    NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
    SessionMode, SessionModeState, SetSessionModeRequest, SetSessionModeResponse, StopReason,
};
use agent_client_protocol::{Agent, Client, Error, ErrorCode, Responder, Stdio, V1};
use kaji_core::{PermissionMode, ResumeFrom, Session, SessionBuilder, SessionError};
use kaji_protocol::TaskStatus;
use tokio::task::JoinHandle;

use crate::agent::AgentArgs;
use frontend::AcpFrontend;

/// Arguments of `kaji acp`.
#[derive(Debug, Clone, clap::Args)]
pub struct AcpArgs {
    /// The agent flags; `--trust` trusts each session's project for the
    /// session, so its settings that run code or widen permissions apply.
    #[command(flatten)]
    pub agent: AgentArgs,
}

/// One open ACP session.
struct Open {
    session: Arc<Session>,
    frontend: Arc<AcpFrontend>,
}

/// The agent's state: its flags, the open sessions, the running turns.
struct Acp {
    args: AcpArgs,
    sessions: Mutex<HashMap<String, Open>>,
    turns: Mutex<Vec<JoinHandle<()>>>,
}

/// Runs `kaji acp` until the client closes stdin; returns the exit code.
pub async fn run(args: AcpArgs) -> i32 {
    if let Err(e) = args.agent.session_options() {
        eprintln!("kaji acp: {e}");
        return 2;
    }
    let acp = Arc::new(Acp {
        args,
        sessions: Mutex::new(HashMap::new()),
        turns: Mutex::new(Vec::new()),
    });
    let served = serve(Arc::clone(&acp)).await;
    acp.close().await;
    match served {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("kaji acp: the connection failed: {e:?}");
            1
        }
    }
}

/// Serves the connection until it closes.
async fn serve(acp: Arc<Acp>) -> Result<(), Error> {
    let (a1, a2, a3, a4, a5) = (
        Arc::clone(&acp),
        Arc::clone(&acp),
        Arc::clone(&acp),
        Arc::clone(&acp),
        Arc::clone(&acp),
    );
    Agent
        .v1()
        .name("kaji")
        .on_receive_request(
            async move |req: InitializeRequest, responder, _cx| responder.respond(initialize(&req)),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: NewSessionRequest, responder, cx| {
                a1.new_session(req, responder, cx).await
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: LoadSessionRequest, responder, cx| {
                a2.load_session(req, responder, cx).await
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest, responder, _cx| a3.prompt(req, responder),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionModeRequest, responder, _cx| a4.set_mode(req, responder),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, _cx| {
                if let Some(s) = a5.session(&n.session_id.0) {
                    s.session.abort();
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(Stdio::new())
        .await
}

fn initialize(req: &InitializeRequest) -> InitializeResponse {
    let version = std::cmp::min(req.protocol_version, ProtocolVersion::V1);
    let prompt = PromptCapabilities::new().embedded_context(true);
    InitializeResponse::new(version)
        .agent_capabilities(
            AgentCapabilities::new()
                .load_session(true)
                .prompt_capabilities(prompt),
        )
        .agent_info(Implementation::new("kaji", env!("CARGO_PKG_VERSION")))
}

impl Acp {
    fn session(&self, id: &str) -> Option<Open> {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.get(id).map(|o| Open {
            session: Arc::clone(&o.session),
            frontend: Arc::clone(&o.frontend),
        })
    }

    /// Builds a kaji session in `cwd`, resuming `resume` if set.
    async fn build(
        &self,
        cwd: &Path,
        resume: Option<ResumeFrom>,
        cx: ConnectionTo<Client>,
    ) -> Result<Open, Error> {
        let mut options = self
            .args
            .agent
            .session_options()
            .map_err(|e| Error::invalid_params().data(e.0))?;
        options.cwd = Some(cwd.to_path_buf());
        options.resume = resume;
        // An editor's user answers: a text-only reply ends the turn.
        options.text_reply_default = kaji_core::config::TextReply::Finish;
        let frontend = Arc::new(AcpFrontend::new(cx, cwd.to_path_buf()));
        let builder = SessionBuilder::new(crate::paths::kaji_home(), options);
        let dyn_frontend: Arc<dyn kaji_core::TaskFrontend> = frontend.clone();
        // The builder's future is not `Send` (provider selection borrows a
        // non-`Sync` closure), and the SDK's handlers must be: build it on a
        // blocking thread of the same runtime.
        let runtime = tokio::runtime::Handle::current();
        let built =
            tokio::task::spawn_blocking(move || runtime.block_on(builder.build(dyn_frontend)))
                .await
                .map_err(|e| Error::internal_error().data(e.to_string()))?;
        let (session, warnings) = built.map_err(session_error)?;
        for w in warnings {
            eprintln!("kaji acp: {w}");
        }
        frontend.set_session_id(session.id());
        let open = Open {
            session: Arc::clone(&session),
            frontend: Arc::clone(&frontend),
        };
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session.id().to_string(), open);
        Ok(Open { session, frontend })
    }

    async fn new_session(
        &self,
        req: NewSessionRequest,
        responder: Responder<NewSessionResponse, V1>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        warn_mcp(req.mcp_servers.len());
        match self.build(&req.cwd, None, cx).await {
            Ok(open) => responder.respond(
                NewSessionResponse::new(open.session.id().to_string())
                    .modes(modes(open.session.permission_mode())),
            ),
            Err(e) => responder.respond_with_error(e),
        }
    }

    /// Resumes a saved session and replays its conversation before
    /// answering.
    async fn load_session(
        &self,
        req: LoadSessionRequest,
        responder: Responder<LoadSessionResponse, V1>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        warn_mcp(req.mcp_servers.len());
        let id = req.session_id.0.to_string();
        let open = match self.session(&id) {
            Some(open) => open,
            None => match self
                .build(&req.cwd, Some(ResumeFrom::Id(id.clone())), cx)
                .await
            {
                Ok(open) => open,
                Err(e) => return responder.respond_with_error(e),
            },
        };
        let history = open.session.history();
        for event in kaji_core::session::transcript::history_events(&history) {
            open.frontend.send_event(open.session.id(), &event);
        }
        responder.respond(LoadSessionResponse::new().modes(modes(open.session.permission_mode())))
    }

    /// Starts the prompt's turn in its own task (permission requests wait
    /// for the client, which the dispatch loop must stay free to read).
    fn prompt(
        &self,
        req: PromptRequest,
        responder: Responder<PromptResponse, V1>,
    ) -> Result<(), Error> {
        let Some(open) = self.session(&req.session_id.0) else {
            return responder.respond_with_error(unknown_session(&req.session_id.0));
        };
        let text = prompt_text(&req.prompt);
        let turn = tokio::spawn(async move {
            let answer = match open.session.submit(text).await {
                Ok(outcome) => responder.respond(PromptResponse::new(stop_reason(outcome.status))),
                Err(SessionError::Busy) => responder.respond_with_error(Error::new(
                    ErrorCode::INVALID_REQUEST,
                    "a prompt is already running in this session",
                )),
                Err(e) => responder.respond_with_error(session_error(e)),
            };
            if let Err(e) = answer {
                eprintln!("kaji acp: cannot answer session/prompt: {e:?}");
            }
        });
        let mut turns = self.turns.lock().unwrap_or_else(|e| e.into_inner());
        turns.retain(|t| !t.is_finished());
        turns.push(turn);
        Ok(())
    }

    fn set_mode(
        &self,
        req: SetSessionModeRequest,
        responder: Responder<SetSessionModeResponse, V1>,
    ) -> Result<(), Error> {
        let Some(open) = self.session(&req.session_id.0) else {
            return responder.respond_with_error(unknown_session(&req.session_id.0));
        };
        match req.mode_id.0.parse::<PermissionMode>() {
            Ok(mode) => {
                open.session.set_permission_mode(mode);
                responder.respond(SetSessionModeResponse::new())
            }
            Err(e) => responder.respond_with_error(Error::invalid_params().data(e)),
        }
    }

    /// The client is gone: abort what runs, let each turn save its end,
    /// then shut the sessions down.
    async fn close(&self) {
        let open: Vec<Arc<Session>> = {
            let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            sessions.values().map(|o| Arc::clone(&o.session)).collect()
        };
        for s in &open {
            s.abort();
        }
        let turns = std::mem::take(&mut *self.turns.lock().unwrap_or_else(|e| e.into_inner()));
        for t in turns {
            let _ = t.await;
        }
        for s in &open {
            for task in s.shutdown().await {
                eprintln!("kaji acp: stopped {} ({})", task.id, task.description);
            }
        }
    }
}

/// The session modes: kaji's permission modes.
fn modes(current: PermissionMode) -> SessionModeState {
    let all = [
        (
            PermissionMode::Default,
            "Default",
            "Read-only tools run; edits and commands ask",
        ),
        (
            PermissionMode::AcceptEdits,
            "Accept edits",
            "Edits in the project run; commands ask",
        ),
        (PermissionMode::Plan, "Plan", "Only read-only tools run"),
        (
            PermissionMode::Yolo,
            "Yolo",
            "Everything runs without asking",
        ),
    ];
    let modes = all
        .iter()
        .map(|(m, name, what)| SessionMode::new(m.as_str(), *name).description(what.to_string()))
        .collect();
    SessionModeState::new(current.as_str(), modes)
}

/// The prompt as kaji's text: embedded context inlined, links named.
fn prompt_text(blocks: &[ContentBlock]) -> String {
    let mut parts = Vec::new();
    for b in blocks {
        match b {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(c) => parts.push(format!(
                    "<context uri=\"{}\">\n{}\n</context>",
                    c.uri, c.text
                )),
                _ => parts.push("[a binary resource was attached; kaji cannot read it]".into()),
            },
            ContentBlock::ResourceLink(l) => parts.push(format!("@{}", l.uri)),
            _ => parts.push("[an attachment kaji cannot read was left out]".into()),
        }
    }
    parts.join("\n")
}

fn stop_reason(status: TaskStatus) -> StopReason {
    match status {
        TaskStatus::Aborted => StopReason::Cancelled,
        TaskStatus::MaxTurns => StopReason::MaxTurnRequests,
        TaskStatus::Completed | TaskStatus::Failed | TaskStatus::MistakeLimit => {
            StopReason::EndTurn
        }
    }
}

fn unknown_session(id: &str) -> Error {
    Error::new(
        ErrorCode::RESOURCE_NOT_FOUND,
        format!("unknown session {id:?}: create it with session/new or load it with session/load"),
    )
}

fn session_error(e: SessionError) -> Error {
    let code = if e.is_usage() {
        ErrorCode::INVALID_PARAMS
    } else {
        ErrorCode::INTERNAL_ERROR
    };
    Error::new(code, e.to_string())
}

fn warn_mcp(n: usize) {
    if n > 0 {
        eprintln!(
            "kaji acp: the client passed {n} MCP server(s); kaji uses only the ones configured in its settings (see docs/acp.md)"
        );
    }
}
