//! `kaji acp`: kaji as an Agent Client Protocol agent over stdio, for
//! editors (Zed, JetBrains IDEs, Neovim).
//!
//! A thin front end: each ACP session is one kaji [`Session`] built with
//! the same flags as `kaji exec` ([`AgentArgs`]); prompts are `submit`ted,
//! `session/cancel` aborts, events go out through [`frontend::AcpFrontend`],
//! which is also the file tools' [`kaji_tools::FileAccess`] where the client
//! offers `fs/*`. The MCP servers a client passes join the configured ones;
//! an untrusted project's gated settings are put to the client once, at the
//! session's first prompt.
//! stdout carries protocol messages only, so nothing here may print to it:
//! logs and warnings go to stderr.

mod convert;
mod frontend;
mod wire;
#[cfg(test)]
mod golden_sdk;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, EmbeddedResourceResource, Implementation,
    InitializeRequest, InitializeResponse, ListSessionsRequest, ListSessionsResponse,
    LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer, NewSessionRequest,
    NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse, SessionCapabilities,
    SessionInfo, SessionListCapabilities, SessionMode, SessionModeState, SetSessionModeRequest,
    SetSessionModeResponse, StopReason,
};
use agent_client_protocol::{Agent, Client, Error, ErrorCode, Lines, Responder, V1};
use kaji_core::session::error::SessionErrorKind;
use kaji_core::{PermissionMode, ResumeFrom, Session, SessionBuilder, SessionError};
use kaji_mcp::{McpServerConfig, McpTransportConfig};
use kaji_protocol::TaskStatus;
use tokio::task::JoinHandle;

use crate::agent::AgentArgs;
use frontend::{AcpFrontend, ClientFs};

/// Arguments of `kaji acp`.
#[derive(Debug, Clone, clap::Args)]
pub struct AcpArgs {
    /// The agent flags; `--trust` trusts each session's project for the
    /// session, so its settings that run code or widen permissions apply.
    #[command(flatten)]
    pub agent: AgentArgs,
}

/// One open ACP session.
#[derive(Clone)]
struct Open {
    session: Arc<Session>,
    frontend: Arc<AcpFrontend>,
    /// What it was built from, to rebuild it trusted.
    cwd: PathBuf,
    mcp: Vec<McpServer>,
    /// Set while the client is still to be asked whether to trust the
    /// project: the gated settings, for the question.
    pending_trust: Arc<Mutex<Option<String>>>,
}

/// The agent's state: its flags, the client's file methods, the open
/// sessions, the running turns.
struct Acp {
    args: AcpArgs,
    fs: Mutex<ClientFs>,
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
        fs: Mutex::new(ClientFs::default()),
        sessions: Mutex::new(HashMap::new()),
        turns: Mutex::new(Vec::new()),
    });
    let (lines, finish) = wire::Wire::stdio().split();
    let served = serve(Arc::clone(&acp), lines).await;
    acp.close().await;
    finish.done().await;
    match served {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("kaji acp: the connection failed: {e:?}");
            1
        }
    }
}

/// Serves the connection until it closes.
async fn serve<O, I>(acp: Arc<Acp>, lines: Lines<O, I>) -> Result<(), Error>
where
    O: futures::Sink<String, Error = std::io::Error> + Send + 'static,
    I: futures::Stream<Item = std::io::Result<String>> + Send + 'static,
{
    let (a0, a1, a2, a3, a4, a5, a6) = (
        Arc::clone(&acp),
        Arc::clone(&acp),
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
            async move |req: InitializeRequest, responder, _cx| {
                responder.respond(a0.initialize(&req))
            },
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
            async move |req: ListSessionsRequest, responder, _cx| match a6.list_sessions(&req) {
                Ok(r) => responder.respond(r),
                Err(e) => responder.respond_with_error(e),
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
        .connect_to(lines)
        .await
}

impl Acp {
    /// Notes the client's file methods; answers with kaji's capabilities.
    fn initialize(&self, req: &InitializeRequest) -> InitializeResponse {
        let fs = &req.client_capabilities.fs;
        *self.fs.lock().unwrap_or_else(|e| e.into_inner()) = ClientFs {
            read: fs.read_text_file,
            write: fs.write_text_file,
        };
        let version = std::cmp::min(req.protocol_version, ProtocolVersion::V1);
        let prompt = PromptCapabilities::new().image(true).embedded_context(true);
        InitializeResponse::new(version)
            .agent_capabilities(
                AgentCapabilities::new()
                    .load_session(true)
                    .session_capabilities(
                        SessionCapabilities::new().list(SessionListCapabilities::new()),
                    )
                    .prompt_capabilities(prompt)
                    .mcp_capabilities(McpCapabilities::new().http(true)),
            )
            .agent_info(Implementation::new("kaji", env!("CARGO_PKG_VERSION")))
    }

    /// `session/list`: the saved main sessions and forks (of `cwd` when
    /// given), newest first, with their first prompt as title. One page.
    fn list_sessions(&self, req: &ListSessionsRequest) -> Result<ListSessionsResponse, Error> {
        let store = kaji_core::storage::store::SessionStore::new(&crate::paths::kaji_home());
        let listing = store
            .list()
            .map_err(|e| Error::internal_error().data(e.to_string()))?;
        let mut entries: Vec<_> = listing
            .entries
            .into_iter()
            .filter(|e| !e.removed && e.kind != kaji_core::storage::record::SessionKind::Subagent)
            .filter(|e| req.cwd.as_ref().is_none_or(|c| *c == e.cwd))
            .collect();
        entries.sort_by_key(|e| std::cmp::Reverse(e.updated));
        let sessions = entries
            .into_iter()
            .map(|e| {
                SessionInfo::new(e.id, e.cwd)
                    .title(Some(e.title).filter(|t| !t.is_empty()))
                    .updated_at(iso_time(e.updated))
            })
            .collect();
        Ok(ListSessionsResponse::new(sessions))
    }

    fn session(&self, id: &str) -> Option<Open> {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.get(id).cloned()
    }

    fn new_frontend(&self, cx: ConnectionTo<Client>, cwd: &Path) -> Arc<AcpFrontend> {
        let fs = *self.fs.lock().unwrap_or_else(|e| e.into_inner());
        Arc::new(AcpFrontend::new(cx, cwd.to_path_buf(), fs))
    }

    /// Builds a kaji session in `cwd`, resuming `resume` if set, with the
    /// client's MCP servers; `trust` trusts the project for it. It is
    /// opened under the frontend's id (set already for a rebuilt session).
    async fn build(
        &self,
        cwd: &Path,
        resume: Option<ResumeFrom>,
        mcp: &[McpServer],
        trust: bool,
        frontend: Arc<AcpFrontend>,
    ) -> Result<Open, Error> {
        let mut options = self
            .args
            .agent
            .session_options()
            .map_err(|e| Error::invalid_params().data(e.0))?;
        options.cwd = Some(cwd.to_path_buf());
        options.resume = resume;
        options.trust |= trust;
        options.mcp_servers = mcp_servers(mcp);
        // An editor's user answers: a text-only reply ends the turn.
        options.text_reply_default = kaji_core::config::TextReply::Finish;
        let home = crate::paths::kaji_home();
        let pending_trust = if options.trust {
            None
        } else {
            untrusted_settings(&home, cwd)
        };
        let mut builder = SessionBuilder::new(home, options);
        if frontend.delegates_files() {
            builder = builder.file_access(frontend.clone());
        }
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
        let id = frontend.session_id().unwrap_or(session.id()).to_string();
        let open = Open {
            session,
            frontend,
            cwd: cwd.to_path_buf(),
            mcp: mcp.to_vec(),
            pending_trust: Arc::new(Mutex::new(pending_trust)),
        };
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, open.clone());
        Ok(open)
    }

    /// At a session's first prompt, when its project is untrusted and has
    /// gated settings: asks the client. Trusted, the session is rebuilt
    /// (resumed) with them; else a notice says they are ignored.
    async fn settle_trust(&self, open: Open) -> Result<Open, Error> {
        let pending = open
            .pending_trust
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some(what) = pending else {
            return Ok(open);
        };
        if !open.frontend.ask_trust(&what).await {
            open.frontend.notice(&format!(
                "kaji: the project is not trusted, so its settings that run code, widen permissions or redirect traffic are ignored ({what}). `kaji trust` or `kaji acp --trust` trusts it.\n\n"
            ));
            return Ok(open);
        }
        let Open {
            session,
            frontend,
            cwd,
            mcp,
            ..
        } = open;
        let id = frontend.session_id().unwrap_or(session.id()).to_string();
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        session.shutdown().await;
        let resume = (!self.args.agent.no_session_persistence)
            .then(|| ResumeFrom::Id(session.id().to_string()));
        let fresh = session.history().is_empty();
        // The session file's lock goes with the last reference.
        drop(session);
        let open = self.build(&cwd, resume, &mcp, true, frontend).await?;
        if fresh {
            open.session.forget_resumption();
        }
        Ok(open)
    }

    async fn new_session(
        &self,
        req: NewSessionRequest,
        responder: Responder<NewSessionResponse, V1>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let frontend = self.new_frontend(cx, &req.cwd);
        match self
            .build(&req.cwd, None, &req.mcp_servers, false, frontend)
            .await
        {
            Ok(open) => responder.respond(
                NewSessionResponse::new(open.session.id().to_string()).modes(modes(&open.session)),
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
        let id = req.session_id.0.to_string();
        let open = match self.session(&id) {
            Some(open) => open,
            None => match self
                .build(
                    &req.cwd,
                    Some(ResumeFrom::Id(id.clone())),
                    &req.mcp_servers,
                    false,
                    self.new_frontend(cx, &req.cwd),
                )
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
        responder.respond(LoadSessionResponse::new().modes(modes(&open.session)))
    }

    /// Starts the prompt's turn in its own task (permission requests wait
    /// for the client, which the dispatch loop must stay free to read).
    fn prompt(
        self: &Arc<Self>,
        req: PromptRequest,
        responder: Responder<PromptResponse, V1>,
    ) -> Result<(), Error> {
        let Some(open) = self.session(&req.session_id.0) else {
            return responder.respond_with_error(unknown_session(&req.session_id.0));
        };
        // A broken image is this prompt's error: it never enters the
        // history, where the provider would refuse every later request.
        let (text, images) = match prompt_content(&req.prompt) {
            Ok(content) => content,
            Err(why) => {
                return responder.respond_with_error(Error::new(
                    ErrorCode::INVALID_PARAMS,
                    format!("the prompt was not run: {why}"),
                ));
            }
        };
        let acp = Arc::clone(self);
        let turn = tokio::spawn(async move {
            let open = match acp.settle_trust(open).await {
                Ok(open) => open,
                Err(e) => {
                    if let Err(e) = responder.respond_with_error(e) {
                        eprintln!("kaji acp: cannot answer session/prompt: {e:?}");
                    }
                    return;
                }
            };
            let task_id = kaji_core::new_task_id();
            let answer = match open.session.submit_with(task_id, text, images).await {
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

/// Milliseconds since the epoch as ISO 8601 (RFC 3339), UTC.
fn iso_time(millis: u64) -> Option<String> {
    let nanos = i128::from(millis) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()?
        .format(&time::format_description::well_known::Rfc3339)
        .ok()
}

/// The session modes: kaji's permission modes, each described as this
/// session runs it (the sandbox included).
fn modes(session: &kaji_core::Session) -> SessionModeState {
    let all = [
        (
            PermissionMode::Default,
            "Default",
            "Read-only tools run; edits ask",
        ),
        (
            PermissionMode::AcceptEdits,
            "Accept edits",
            "Read-only tools and edits in the project run",
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
        .map(|(m, name, what)| {
            let what = match m {
                PermissionMode::Default | PermissionMode::AcceptEdits => format!(
                    "{what}; {}",
                    crate::policy_text::sandbox_line(*m, session.sandbox_mode_for(*m))
                ),
                _ => what.to_string(),
            };
            SessionMode::new(m.as_str(), *name).description(what)
        })
        .collect();
    SessionModeState::new(session.permission_mode().as_str(), modes)
}

/// The image types the providers take.
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The prompt as kaji's text (embedded context inlined, links named) and
/// its images, each checked ([`kaji_tools::validate_image`]); what is wrong
/// with the first bad image otherwise.
fn prompt_content(
    blocks: &[ContentBlock],
) -> Result<(String, Vec<kaji_protocol::ContentBlock>), String> {
    let mut parts = Vec::new();
    let mut images = Vec::new();
    let mut bad: Option<String> = None;
    let mut image = |mime: &str, data: &str, parts: &mut Vec<String>| {
        if IMAGE_TYPES.contains(&mime) {
            match kaji_tools::validate_image(mime, data) {
                Ok(_) => images.push(kaji_protocol::ContentBlock::image(mime, data)),
                Err(why) => {
                    bad.get_or_insert(format!("image {}: {why}", images.len() + 1));
                }
            }
        } else {
            parts.push(format!(
                "[an image of type {mime} was left out: kaji sends PNG, JPEG, GIF and WebP]"
            ));
        }
    };
    for b in blocks {
        match b {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::Image(i) => image(&i.mime_type, &i.data, &mut parts),
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(c) => parts.push(format!(
                    "<context uri=\"{}\">\n{}\n</context>",
                    c.uri, c.text
                )),
                EmbeddedResourceResource::BlobResourceContents(c)
                    if c.mime_type
                        .as_deref()
                        .is_some_and(|m| m.starts_with("image/")) =>
                {
                    image(c.mime_type.as_deref().unwrap_or(""), &c.blob, &mut parts)
                }
                _ => parts.push("[a binary resource was attached; kaji cannot read it]".into()),
            },
            ContentBlock::ResourceLink(l) => parts.push(format!("@{}", l.uri)),
            _ => parts.push("[an attachment kaji cannot read was left out]".into()),
        }
    }
    if let Some(why) = bad {
        return Err(why);
    }
    let mut text = parts.join("\n");
    if text.trim().is_empty() && !images.is_empty() {
        text = "(image attached)".into();
    }
    Ok((text, images))
}

/// The client's MCP servers as kaji's, by name. SSE servers (a transport
/// kaji does not speak) and ACP-tunnelled ones are left out, with a note.
fn mcp_servers(list: &[McpServer]) -> BTreeMap<String, McpServerConfig> {
    let mut out = BTreeMap::new();
    for server in list {
        let (name, config) = match server {
            McpServer::Stdio(s) => {
                let mut c = McpServerConfig::stdio(s.command.to_string_lossy(), s.args.clone());
                if let McpTransportConfig::Stdio { env, .. } = &mut c.transport {
                    env.extend(s.env.iter().map(|v| (v.name.clone(), v.value.clone())));
                }
                (&s.name, c)
            }
            McpServer::Http(h) => {
                let mut c = McpServerConfig::http(h.url.clone());
                if let McpTransportConfig::Http { headers, .. } = &mut c.transport {
                    headers.extend(h.headers.iter().map(|v| (v.name.clone(), v.value.clone())));
                }
                (&h.name, c)
            }
            McpServer::Sse(s) => {
                eprintln!(
                    "kaji acp: MCP server {:?} uses the SSE transport, which kaji does not speak; left out (use streamable HTTP)",
                    s.name
                );
                continue;
            }
            _ => {
                eprintln!("kaji acp: an MCP server of a kind kaji does not know was left out");
                continue;
            }
        };
        out.insert(name.clone(), config);
    }
    out
}

/// The note on a project's gated settings, when it is not trusted and has
/// some.
fn untrusted_settings(home: &Path, cwd: &Path) -> Option<String> {
    if kaji_core::trust::is_trusted(home, cwd).unwrap_or(false) {
        return None;
    }
    let (_, ignored) = kaji_core::config::KajiConfig::load_gated(home, cwd, false).ok()?;
    let mut files: Vec<(&Path, Vec<&str>)> = Vec::new();
    for i in &ignored {
        match files.iter_mut().find(|(p, _)| *p == i.path.as_path()) {
            Some((_, keys)) => keys.push(i.key),
            None => files.push((i.path.as_path(), vec![i.key])),
        }
    }
    let list: Vec<String> = files
        .iter()
        .map(|(p, keys)| format!("{} in {}", keys.join(", "), p.display()))
        .collect();
    (!list.is_empty()).then(|| list.join("; "))
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
        ErrorCode::INVALID_PARAMS,
        format!("unknown session {id:?}: create it with session/new or load it with session/load"),
    )
}

/// A session that cannot be built or opened: the request's parameters
/// (flags, an unknown or busy saved session) or kaji's own failure.
fn session_error(e: SessionError) -> Error {
    let code = match e.kind() {
        SessionErrorKind::Usage | SessionErrorKind::Store => ErrorCode::INVALID_PARAMS,
        _ => ErrorCode::INTERNAL_ERROR,
    };
    Error::new(code, e.to_string())
}
