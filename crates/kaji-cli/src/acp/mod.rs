//! `kaji acp`: kaji as an Agent Client Protocol agent over stdio, for
//! editors (Zed, JetBrains IDEs, Neovim).
//!
//! A thin front end: each ACP session is one kaji [`Session`] built with
//! the same flags as `kaji exec` ([`AgentArgs`]); prompts are `submit`ted,
//! `session/cancel` aborts, events go out through [`frontend::AcpFrontend`],
//! which is also the file tools' [`kaji_tools::FileAccess`] where the client
//! offers `fs/*`. The MCP servers a client passes join the configured ones;
//! an untrusted project's gated settings are put to the client once, at the
//! session's first prompt. The protocol is kaji's own: a JSON-RPC peer
//! ([`rpc`]) over checked lines ([`wire`]) with ACP's messages as serde
//! types ([`schema`]); each request is answered from its own task.
//! stdout carries protocol messages only, so nothing here may print to it:
//! logs and warnings go to stderr.

mod convert;
mod frontend;
#[cfg(test)]
mod golden;
mod rpc;
mod schema;
mod wire;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use kaji_core::session::error::SessionErrorKind;
use kaji_core::{PermissionMode, ResumeFrom, Session, SessionBuilder, SessionError};
use kaji_mcp::{McpServerConfig, McpTransportConfig};
use kaji_protocol::TaskStatus;
use rpc::{Reply, RpcError, ready, to_result};
use schema::{
    AgentCapabilities, CancelNotification, ContentBlock, EmbeddedResourceResource, Empty,
    Implementation, InitializeRequest, InitializeResponse, ListSessionsRequest,
    ListSessionsResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer,
    NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
    SessionCapabilities, SessionInfo, SessionMode, SessionModeState, SetSessionModeRequest,
    StopReason,
};
use serde_json::Value;

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

/// Where the handshake is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Init {
    /// No `initialize` yet: nothing else is served.
    Waiting,
    /// Initialized; `repeatable` until the client sends another request
    /// (a repeated `initialize` replaces the first till then).
    Ready { repeatable: bool },
}

/// The protocol version kaji speaks.
const PROTOCOL_VERSION: u16 = 1;

/// The agent's state: its flags, the connection, the handshake, the
/// client's file methods, the open sessions.
struct Acp {
    args: AcpArgs,
    peer: Arc<rpc::Peer>,
    init: Mutex<Init>,
    fs: Mutex<ClientFs>,
    sessions: Mutex<HashMap<String, Open>>,
}

/// Runs `kaji acp` until the client closes stdin; returns the exit code.
pub async fn run(args: AcpArgs) -> i32 {
    if let Err(e) = args.agent.session_options() {
        eprintln!("kaji acp: {e}");
        return 2;
    }
    let wire = wire::Wire::stdio();
    let peer = Arc::new(rpc::Peer::new(wire.outgoing.clone()));
    let acp = Arc::new(Acp {
        args,
        peer: Arc::clone(&peer),
        init: Mutex::new(Init::Waiting),
        fs: Mutex::new(ClientFs::default()),
        sessions: Mutex::new(HashMap::new()),
    });
    let (incoming, finish) = wire.split();
    let served = rpc::serve(Arc::clone(&peer), Arc::clone(&acp), incoming).await;
    let failed = served.read_error().map(str::to_string);
    acp.close(served).await;
    peer.shutdown();
    finish.done().await;
    match failed {
        None => 0,
        Some(e) => {
            eprintln!("kaji acp: the connection failed: {e}");
            1
        }
    }
}

/// `params` as the `T` of `method`, then `then` with it.
fn with_params<T: serde::de::DeserializeOwned>(
    method: &str,
    params: Value,
    then: impl FnOnce(T) -> Reply,
) -> Reply {
    match rpc::params(method, params) {
        Ok(p) => then(p),
        Err(e) => ready(Err(e)),
    }
}

impl rpc::Handler for Acp {
    fn request(self: &Arc<Self>, method: &str, params: Value) -> Reply {
        if let Err(e) = self.gate(method) {
            return ready(Err(e));
        }
        let acp = Arc::clone(self);
        match method {
            "initialize" => with_params(method, params, |r| ready(self.initialize(&r))),
            "session/new" => with_params(method, params, |r| {
                Box::pin(async move { acp.new_session(r).await })
            }),
            "session/load" => with_params(method, params, |r| {
                Box::pin(async move { acp.load_session(r).await })
            }),
            "session/list" => with_params(method, params, |r| {
                Box::pin(async move { acp.list_sessions(&r).and_then(|r| to_result(&r)) })
            }),
            "session/prompt" => with_params(method, params, |r| self.prompt(r)),
            "session/set_mode" => with_params(method, params, |r| ready(self.set_mode(r))),
            _ => ready(Err(RpcError::method_not_found(method))),
        }
    }

    fn notification(self: &Arc<Self>, method: &str, params: Value) {
        if *self.init.lock().unwrap_or_else(|e| e.into_inner()) == Init::Waiting {
            eprintln!("kaji acp: {method} before initialize was ignored");
            return;
        }
        // `$/cancel_request` needs nothing: every request is answered, a
        // cancelled turn through `session/cancel`. Others are ignored.
        if method != "session/cancel" {
            return;
        }
        match rpc::params::<CancelNotification>(method, params) {
            Ok(n) => {
                if let Some(s) = self.session(&n.session_id) {
                    s.session.abort();
                }
            }
            Err(e) => eprintln!("kaji acp: {e}"),
        }
    }
}

impl Acp {
    /// Lets `method` through the handshake: nothing before `initialize`,
    /// which may be repeated only until another request comes.
    fn gate(&self, method: &str) -> Result<(), RpcError> {
        let mut init = self.init.lock().unwrap_or_else(|e| e.into_inner());
        match (method, *init) {
            ("initialize", Init::Ready { repeatable: false }) => Err(RpcError::invalid_request()
                .data("ACP initialization cannot be repeated after any other request; reconnect to initialize again")),
            ("initialize", _) => Ok(()),
            (_, Init::Waiting) => Err(initialization_required(method)),
            (_, Init::Ready { .. }) => {
                *init = Init::Ready { repeatable: false };
                Ok(())
            }
        }
    }

    /// Notes the client's file methods; answers with kaji's capabilities
    /// and the version both speak (kaji's, or the client's if older).
    fn initialize(&self, req: &InitializeRequest) -> Result<Value, RpcError> {
        // A client asking for a newer version speaks that version's
        // initialize, whose capabilities v1 does not read (as the SDK did).
        let fs = if req.protocol_version > PROTOCOL_VERSION {
            Default::default()
        } else {
            req.client_capabilities.fs
        };
        *self.fs.lock().unwrap_or_else(|e| e.into_inner()) = ClientFs {
            read: fs.read_text_file,
            write: fs.write_text_file,
        };
        let response = initialize_response(req.protocol_version.min(PROTOCOL_VERSION));
        let result = to_result(&response)?;
        *self.init.lock().unwrap_or_else(|e| e.into_inner()) = Init::Ready { repeatable: true };
        Ok(result)
    }

    /// `session/list`: the saved main sessions and forks (of `cwd` when
    /// given), newest first, with their first prompt as title. One page.
    fn list_sessions(&self, req: &ListSessionsRequest) -> Result<ListSessionsResponse, RpcError> {
        let store = kaji_core::storage::store::SessionStore::new(&crate::paths::kaji_home());
        let listing = store
            .list()
            .map_err(|e| RpcError::internal_error().data(e.to_string()))?;
        let mut entries: Vec<_> = listing
            .entries
            .into_iter()
            .filter(|e| !e.removed && e.kind != kaji_core::storage::record::SessionKind::Subagent)
            .filter(|e| req.cwd.as_ref().is_none_or(|c| *c == e.cwd))
            .collect();
        entries.sort_by_key(|e| std::cmp::Reverse(e.updated));
        let sessions = entries
            .into_iter()
            .map(|e| SessionInfo {
                session_id: e.id,
                cwd: e.cwd,
                title: Some(e.title).filter(|t| !t.is_empty()),
                updated_at: iso_time(e.updated),
            })
            .collect();
        Ok(ListSessionsResponse { sessions })
    }

    fn session(&self, id: &str) -> Option<Open> {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.get(id).cloned()
    }

    fn new_frontend(&self, cwd: &Path) -> Arc<AcpFrontend> {
        let fs = *self.fs.lock().unwrap_or_else(|e| e.into_inner());
        Arc::new(AcpFrontend::new(
            Arc::clone(&self.peer),
            cwd.to_path_buf(),
            fs,
        ))
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
    ) -> Result<Open, RpcError> {
        let mut options = self
            .args
            .agent
            .session_options()
            .map_err(|e| RpcError::invalid_params().data(e.0))?;
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
        // non-`Sync` closure), and a request's reply must be: build it on a
        // blocking thread of the same runtime.
        let runtime = tokio::runtime::Handle::current();
        let built =
            tokio::task::spawn_blocking(move || runtime.block_on(builder.build(dyn_frontend)))
                .await
                .map_err(|e| RpcError::internal_error().data(e.to_string()))?;
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
    async fn settle_trust(&self, open: Open) -> Result<Open, RpcError> {
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

    async fn new_session(&self, req: NewSessionRequest) -> Result<Value, RpcError> {
        let frontend = self.new_frontend(&req.cwd);
        let open = self
            .build(&req.cwd, None, &req.mcp_servers, false, frontend)
            .await?;
        to_result(&NewSessionResponse {
            session_id: open.session.id().to_string(),
            modes: modes(&open.session),
        })
    }

    /// Resumes a saved session and replays its conversation before
    /// answering.
    async fn load_session(&self, req: LoadSessionRequest) -> Result<Value, RpcError> {
        let id = req.session_id;
        let open = match self.session(&id) {
            Some(open) => open,
            None => {
                self.build(
                    &req.cwd,
                    Some(ResumeFrom::Id(id.clone())),
                    &req.mcp_servers,
                    false,
                    self.new_frontend(&req.cwd),
                )
                .await?
            }
        };
        let history = open.session.history();
        for event in kaji_core::session::transcript::history_events(&history) {
            open.frontend.send_event(open.session.id(), &event);
        }
        to_result(&LoadSessionResponse {
            modes: Some(modes(&open.session)),
        })
    }

    /// The prompt's turn, which its reply runs (in its own task: permission
    /// requests wait for the client, which the dispatch loop must stay
    /// free to read).
    fn prompt(self: &Arc<Self>, req: PromptRequest) -> Reply {
        let Some(open) = self.session(&req.session_id) else {
            return ready(Err(unknown_session(&req.session_id)));
        };
        // A broken image is this prompt's error: it never enters the
        // history, where the provider would refuse every later request.
        let (text, images) = match prompt_content(&req.prompt) {
            Ok(content) => content,
            Err(why) => {
                return ready(Err(RpcError::new(
                    RpcError::INVALID_PARAMS,
                    format!("the prompt was not run: {why}"),
                )));
            }
        };
        let acp = Arc::clone(self);
        Box::pin(async move {
            let open = acp.settle_trust(open).await?;
            let task_id = kaji_core::new_task_id();
            match open.session.submit_with(task_id, text, images).await {
                Ok(outcome) => to_result(&PromptResponse {
                    stop_reason: stop_reason(outcome.status),
                }),
                Err(SessionError::Busy) => Err(busy()),
                Err(e) => Err(session_error(e)),
            }
        })
    }

    fn set_mode(&self, req: SetSessionModeRequest) -> Result<Value, RpcError> {
        let Some(open) = self.session(&req.session_id) else {
            return Err(unknown_session(&req.session_id));
        };
        match req.mode_id.parse::<PermissionMode>() {
            Ok(mode) => {
                open.session.set_permission_mode(mode);
                to_result(&Empty {})
            }
            Err(e) => Err(RpcError::invalid_params().data(e)),
        }
    }

    /// The client is gone: abort what runs, let each request's handler
    /// end (a turn saves its end), then shut the sessions down.
    async fn close(&self, running: rpc::Running) {
        for s in self.open_sessions() {
            s.abort();
        }
        running.wait().await;
        // Sessions a handler built meanwhile are aborted too.
        for s in self.open_sessions() {
            s.abort();
            for task in s.shutdown().await {
                eprintln!("kaji acp: stopped {} ({})", task.id, task.description);
            }
        }
    }

    fn open_sessions(&self) -> Vec<Arc<Session>> {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.values().map(|o| Arc::clone(&o.session)).collect()
    }
}

/// A request other than `initialize` before it.
fn initialization_required(method: &str) -> RpcError {
    RpcError::invalid_request().data(format!(
        "ACP initialization must complete before `{method}` can be used"
    ))
}

/// `initialize`'s answer for protocol `version`: what kaji offers.
fn initialize_response(version: u16) -> InitializeResponse {
    InitializeResponse {
        protocol_version: version,
        agent_capabilities: agent_capabilities(),
        auth_methods: Vec::new(),
        agent_info: Implementation {
            name: "kaji".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
    }
}

/// What kaji offers a client.
fn agent_capabilities() -> AgentCapabilities {
    AgentCapabilities {
        load_session: true,
        prompt_capabilities: PromptCapabilities {
            image: true,
            audio: false,
            embedded_context: true,
        },
        mcp_capabilities: McpCapabilities {
            http: true,
            sse: false,
        },
        session_capabilities: SessionCapabilities {
            list: Some(Empty {}),
        },
        auth: Empty {},
    }
}

/// Milliseconds since the epoch as ISO 8601 (RFC 3339), UTC.
fn iso_time(millis: u64) -> Option<String> {
    kaji_protocol::UtcDateTime::from_unix_millis(millis).map(|t| t.rfc3339())
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
            SessionMode {
                id: m.as_str().to_string(),
                name: name.to_string(),
                description: Some(what),
            }
        })
        .collect();
    SessionModeState {
        current_mode_id: session.permission_mode().as_str().to_string(),
        available_modes: modes,
    }
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
                EmbeddedResourceResource::Text(c) => parts.push(format!(
                    "<context uri=\"{}\">\n{}\n</context>",
                    c.uri, c.text
                )),
                EmbeddedResourceResource::Blob(c)
                    if c.mime_type
                        .as_deref()
                        .is_some_and(|m| m.starts_with("image/")) =>
                {
                    image(c.mime_type.as_deref().unwrap_or(""), &c.blob, &mut parts)
                }
                _ => parts.push("[a binary resource was attached; kaji cannot read it]".into()),
            },
            ContentBlock::ResourceLink(l) => parts.push(format!("@{}", l.uri)),
            ContentBlock::Other => {
                parts.push("[an attachment kaji cannot read was left out]".into())
            }
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
            McpServer::Other => {
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

fn busy() -> RpcError {
    RpcError::new(
        RpcError::INVALID_REQUEST,
        "a prompt is already running in this session",
    )
}

fn unknown_session(id: &str) -> RpcError {
    RpcError::new(
        RpcError::INVALID_PARAMS,
        format!("unknown session {id:?}: create it with session/new or load it with session/load"),
    )
}

/// A session that cannot be built or opened: the request's parameters
/// (flags, an unknown or busy saved session) or kaji's own failure.
fn session_error(e: SessionError) -> RpcError {
    let code = match e.kind() {
        SessionErrorKind::Usage | SessionErrorKind::Store => RpcError::INVALID_PARAMS,
        _ => RpcError::INTERNAL_ERROR,
    };
    RpcError::new(code, e.to_string())
}
