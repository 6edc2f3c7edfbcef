//! The front end of a headless SDK run: turns the session's events into
//! [`SdkMessage`]s and writes them, asks the program (`can_use_tool`) when
//! it answers permission prompts and denies every other ask, and keeps
//! each prompt's API time (the run's budget is the core's `RunBudget`).
//! It must never print anything but whole messages to standard output.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use kaji_core::{AskRequest, Session, TaskFrontend};
use kaji_protocol::{
    AskKind, AskPayload, AskResponse, SayKind, SayPayload, SessionEvent, TaskEvent,
};
use serde_json::{Value, json};

use super::control::Control;
use super::output::Output;
use super::permission;
use crate::sdk_messages::{self as msg, SdkMessage};

/// Per agent: the model message being produced and its streaming state.
#[derive(Default)]
struct AgentState {
    /// The id of the current model message (`msg_kaji_N`).
    message: Option<String>,
    /// Whether its `message_start` went out (partial messages).
    started: bool,
    /// The content block being streamed.
    block: Option<OpenBlock>,
    /// The next content block index.
    next_index: u32,
}

/// A content block being streamed.
#[derive(Clone, Copy)]
struct OpenBlock {
    /// kaji's say id.
    say: u64,
    /// Its index in the message.
    index: u32,
    /// The bytes of its text streamed so far.
    streamed: usize,
    /// A thinking block (else text).
    thinking: bool,
}

impl OpenBlock {
    fn delta(&self, text: &str) -> Value {
        let (delta_type, field) = if self.thinking {
            ("thinking_delta", "thinking")
        } else {
            ("text_delta", "text")
        };
        json!({"type": "content_block_delta", "index": self.index,
            "delta": {"type": delta_type, field: text}})
    }
}

/// Turns events into messages; see the module docs.
pub struct SdkFrontend {
    out: Arc<Output>,
    partial: bool,
    session_id: OnceLock<String>,
    model: OnceLock<String>,
    /// The session, once built: a program's deny with `interrupt` stops it.
    session: OnceLock<Weak<Session>>,
    counter: AtomicU64,
    messages: AtomicU64,
    salt: u64,
    agents: Mutex<HashMap<String, AgentState>>,
    tally: Mutex<Tally>,
    background: Mutex<HashMap<String, String>>,
    /// With `--permission-prompt-tool stdio`: the program answers asks.
    asker: OnceLock<Arc<Control>>,
    /// The main agent's context after its last round: tokens, window.
    context: Mutex<(u64, Option<u64>)>,
}

/// What a prompt used so far.
#[derive(Default)]
struct Tally {
    cost_usd: f64,
    api: Duration,
    request_started: Option<Instant>,
    last_text: Option<String>,
}

impl SdkFrontend {
    /// A front end writing to `out`; `partial`: `stream_event`s too.
    pub fn new(out: Arc<Output>, partial: bool) -> Self {
        let salt = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Self {
            out,
            partial,
            session_id: OnceLock::new(),
            model: OnceLock::new(),
            session: OnceLock::new(),
            counter: AtomicU64::new(0),
            messages: AtomicU64::new(0),
            salt,
            agents: Mutex::new(HashMap::new()),
            tally: Mutex::new(Tally::default()),
            background: Mutex::new(HashMap::new()),
            asker: OnceLock::new(),
            context: Mutex::new((0, None)),
        }
    }

    /// The tokens the main agent's context held after its last round,
    /// and the model's window when the round reported it.
    pub fn context(&self) -> (u64, Option<u64>) {
        *self.context.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The program answers permission asks through `control`
    /// (`can_use_tool`).
    pub fn ask_program(&self, control: Arc<Control>) {
        let _ = self.asker.set(control);
    }

    /// Asks the program (`can_use_tool`) about a tool call.
    async fn ask_via_program(&self, control: &Control, ask: &AskRequest) -> AskResponse {
        let Some(AskPayload::ToolApproval {
            tool,
            input,
            always,
            tool_use_id,
            ..
        }) = &ask.payload
        else {
            return AskResponse::Deny {
                feedback: Some("This headless run has nobody to answer questions.".to_string()),
            };
        };
        let mut request = json!({
            "subtype": "can_use_tool",
            "tool_name": tool,
            "input": input,
            "permission_suggestions": permission::suggestions(always),
            "title": ask.text,
        });
        if let Some(id) = tool_use_id {
            request["tool_use_id"] = json!(id);
        }
        if ask.agent != "main" {
            request["agent_id"] = json!(ask.agent);
        }
        // An interrupt ends the wait from outside: the executor drops this
        // future, and the request is cancelled then.
        let cancel = tokio_util::sync::CancellationToken::new();
        let limit = super::control::ask_timeout();
        match control.request(request, limit, &cancel).await {
            Ok(answer) => {
                let (response, interrupt) = permission::response(&answer, input);
                if interrupt && let Some(s) = self.session.get().and_then(Weak::upgrade) {
                    s.abort();
                }
                response
            }
            Err(e) => AskResponse::Deny {
                feedback: Some(format!("{tool} was not approved: {e}.")),
            },
        }
    }

    /// The session, once built (its id and model; an interrupting deny).
    pub fn attach(&self, session: &Arc<Session>) {
        let _ = self.session_id.set(session.id().to_string());
        let _ = self.model.set(session.provider_config().model.clone());
        let _ = self.session.set(Arc::downgrade(session));
    }

    /// A new message uuid.
    pub fn uuid(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        format!(
            "{:08x}-{:04x}-4000-8000-{n:012x}",
            (self.salt >> 32) as u32,
            (self.salt & 0xffff) as u16
        )
    }

    /// The session id (empty before [`Self::attach`]).
    pub fn session_id(&self) -> &str {
        self.session_id.get().map(String::as_str).unwrap_or("")
    }

    /// Where messages go.
    pub fn output(&self) -> &Arc<Output> {
        &self.out
    }

    /// Starts the tally of a prompt.
    pub fn begin_prompt(&self) {
        *self.lock_tally() = Tally::default();
    }

    /// The prompt's API time and the last text the main agent said.
    pub fn prompt_facts(&self) -> (Duration, Option<String>) {
        let t = self.lock_tally();
        (t.api, t.last_text.clone())
    }

    fn lock_tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn model(&self) -> &str {
        self.model.get().map(String::as_str).unwrap_or("")
    }

    /// The id of `agent`'s current model message, made when it has none.
    fn message_id(&self, agent: &str) -> String {
        let mut agents = self.agents.lock().unwrap_or_else(|e| e.into_inner());
        let state = agents.entry(agent.to_string()).or_default();
        state
            .message
            .get_or_insert_with(|| {
                format!(
                    "msg_kaji_{}",
                    self.messages.fetch_add(1, Ordering::Relaxed) + 1
                )
            })
            .clone()
    }

    fn assistant(&self, event: &SessionEvent, block: Value) {
        let id = self.message_id(&event.agent);
        self.out.send(&msg::assistant(
            block,
            self.model(),
            &id,
            event.parent_tool_use_id.clone(),
            self.session_id(),
            self.uuid(),
        ));
    }

    fn stream(&self, event: &SessionEvent, raw: Value) {
        self.out
            .send(&SdkMessage::StreamEvent(msg::StreamEventMessage {
                uuid: self.uuid(),
                session_id: self.session_id().to_string(),
                event: raw,
                parent_tool_use_id: event.parent_tool_use_id.clone(),
            }));
    }

    /// Partial messages: `message_start`, then a text block opened on the
    /// first partial say and fed by its deltas.
    fn partial_text(&self, event: &SessionEvent, id: u64, kind: SayKind, text: &str) {
        let (block_type, field) = match kind {
            SayKind::Text => ("text", "text"),
            SayKind::Reasoning => ("thinking", "thinking"),
            _ => return,
        };
        let message = self.message_id(&event.agent);
        let (start, open) = {
            let mut agents = self.agents.lock().unwrap_or_else(|e| e.into_inner());
            let state = agents.entry(event.agent.clone()).or_default();
            let start = !std::mem::replace(&mut state.started, true);
            let open = match &mut state.block {
                Some(b) if b.say == id => {
                    b.streamed += text.len();
                    (*b, false)
                }
                _ => {
                    let b = OpenBlock {
                        say: id,
                        index: state.next_index,
                        streamed: text.len(),
                        thinking: kind == SayKind::Reasoning,
                    };
                    state.next_index += 1;
                    state.block = Some(b);
                    (b, true)
                }
            };
            (start, open)
        };
        if start {
            self.stream(
                event,
                json!({"type": "message_start", "message": {"id": message, "type": "message",
                    "role": "assistant", "model": self.model(), "content": []}}),
            );
        }
        let (block, new_block) = open;
        if new_block {
            self.stream(
                event,
                json!({"type": "content_block_start", "index": block.index,
                    "content_block": {"type": block_type, field: ""}}),
            );
        }
        if !text.is_empty() {
            self.stream(event, block.delta(text));
        }
    }

    fn delta(&self, event: &SessionEvent, id: u64, text: &str) {
        let index = {
            let mut agents = self.agents.lock().unwrap_or_else(|e| e.into_inner());
            match agents.get_mut(&event.agent).and_then(|s| s.block.as_mut()) {
                Some(b) if b.say == id => {
                    b.streamed += text.len();
                    Some(*b)
                }
                _ => None,
            }
        };
        if let Some(block) = index {
            self.stream(event, block.delta(text));
        }
    }

    /// Closes the streamed block of say `id`, if one is open: the text
    /// its deltas lacked (the last chunks may arrive only in the final
    /// say), then `content_block_stop`.
    fn close_block(&self, event: &SessionEvent, id: u64, text: &str) {
        let open = {
            let mut agents = self.agents.lock().unwrap_or_else(|e| e.into_inner());
            let state = agents.entry(event.agent.clone()).or_default();
            match state.block {
                Some(b) if b.say == id => {
                    state.block = None;
                    Some(b)
                }
                _ => None,
            }
        };
        let Some(block) = open else {
            return;
        };
        if !self.partial {
            return;
        }
        let rest = text.get(block.streamed..).unwrap_or("");
        if !rest.is_empty() {
            self.stream(event, block.delta(rest));
        }
        self.stream(
            event,
            json!({"type": "content_block_stop", "index": block.index}),
        );
    }

    /// A model round ended: its message is complete.
    fn end_message(&self, event: &SessionEvent, report: &kaji_protocol::UsageReport) {
        let started = {
            let mut agents = self.agents.lock().unwrap_or_else(|e| e.into_inner());
            let state = agents.remove(&event.agent).unwrap_or_default();
            state.started
        };
        if self.partial && started {
            self.stream(
                event,
                json!({"type": "message_delta", "delta": {"stop_reason": null, "stop_sequence": null},
                    "usage": msg::usage(&report.usage)}),
            );
            self.stream(event, json!({"type": "message_stop"}));
        }
        if event.agent == "main" {
            *self.context.lock().unwrap_or_else(|e| e.into_inner()) =
                (report.context_tokens, report.context_window);
        }
        let mut t = self.lock_tally();
        t.cost_usd += report.cost_usd.unwrap_or(0.0);
        if event.agent == "main"
            && let Some(start) = t.request_started.take()
        {
            t.api += start.elapsed();
        }
    }

    fn say(&self, event: &SessionEvent, kind: SayKind, text: &str, payload: Option<&SayPayload>) {
        match kind {
            SayKind::Text => {
                if event.agent == "main" {
                    self.lock_tally().last_text = Some(text.to_string());
                }
                self.assistant(event, json!({"type": "text", "text": text}));
            }
            SayKind::Reasoning => self.assistant(
                event,
                json!({"type": "thinking", "thinking": text, "signature": ""}),
            ),
            SayKind::ApiReqStarted if event.agent == "main" => {
                self.lock_tally().request_started = Some(Instant::now());
            }
            SayKind::ContextCompacted => {
                let pre = match payload {
                    Some(SayPayload::Compacted { tokens_before, .. }) => *tokens_before,
                    _ => 0,
                };
                self.system(
                    "compact_boundary",
                    json!({"compact_metadata": {"trigger": "auto", "pre_tokens": pre}, "kaji_text": text}),
                );
            }
            SayKind::Error | SayKind::ApiReqRetried | SayKind::Info => {
                self.system(
                    "kaji_notice",
                    json!({"kind": notice_kind(kind), "text": text, "agent": event.agent}),
                );
            }
            _ => {}
        }
        if let Some(SayPayload::Background { tasks }) = payload {
            self.background(tasks);
        }
    }

    fn system(&self, subtype: &str, fields: Value) {
        self.out.send(&msg::system(
            subtype,
            self.session_id(),
            self.uuid(),
            fields,
        ));
    }

    /// Runtime tasks: `task_started` the first time one is seen,
    /// `task_notification` when it ends.
    fn background(&self, tasks: &[kaji_protocol::BackgroundTask]) {
        for t in tasks {
            let before = self
                .background
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(t.id.clone(), t.status.clone());
            if before.is_none() {
                self.system(
                    "task_started",
                    json!({"task_id": t.id, "description": t.description, "task_type": "kaji_runtime"}),
                );
            }
            let ended = !matches!(t.status.as_str(), "running" | "pending");
            if ended && before.as_deref() != Some(t.status.as_str()) {
                self.system(
                    "task_notification",
                    json!({"task_id": t.id, "status": t.status, "output_file": "", "summary": t.description}),
                );
            }
        }
    }
}

fn notice_kind(kind: SayKind) -> &'static str {
    match kind {
        SayKind::Error => "error",
        SayKind::ApiReqRetried => "api_retry",
        _ => "info",
    }
}

#[async_trait]
impl TaskFrontend for SdkFrontend {
    fn emit(&self, event: SessionEvent) {
        match &event.event {
            TaskEvent::Say {
                id,
                kind,
                text,
                partial: true,
                ..
            } => {
                if self.partial {
                    self.partial_text(&event, *id, *kind, text);
                }
            }
            TaskEvent::Say {
                id,
                kind,
                text,
                partial: false,
                payload,
            } => {
                // A reply that came whole (no partial say) still streams:
                // its block opens here and gets its text as one delta.
                if self.partial {
                    self.partial_text(&event, *id, *kind, "");
                }
                self.close_block(&event, *id, text);
                self.say(&event, *kind, text, payload.as_ref());
            }
            TaskEvent::Delta { id, text } if self.partial => self.delta(&event, *id, text),
            TaskEvent::ToolUse {
                id, name, input, ..
            } => self.assistant(
                &event,
                json!({"type": "tool_use", "id": id, "name": name, "input": input}),
            ),
            TaskEvent::ToolResult {
                id,
                is_error,
                output,
                ..
            } => self.out.send(&msg::tool_result(
                id,
                output,
                *is_error,
                event.parent_tool_use_id.clone(),
                self.session_id(),
                self.uuid(),
            )),
            TaskEvent::Usage(report) => self.end_message(&event, report),
            TaskEvent::Delta { .. } | TaskEvent::Ask { .. } | TaskEvent::Finished { .. } => {}
        }
    }

    async fn answer(&self, ask: &AskRequest) -> AskResponse {
        match ask.kind {
            AskKind::CompletionResult => AskResponse::Approve,
            AskKind::Tool | AskKind::Command if self.asker.get().is_some() => {
                let control = self.asker.get().map(Arc::clone);
                match control {
                    Some(c) => self.ask_via_program(&c, ask).await,
                    None => AskResponse::Deny { feedback: None },
                }
            }
            AskKind::Tool | AskKind::Command => AskResponse::Deny {
                feedback: Some(
                    "This headless run has nobody to approve this; it was denied. Use another approach that needs no approval, or finish and say what must be run.".to_string(),
                ),
            },
            _ => AskResponse::Deny {
                feedback: Some("This headless run has nobody to answer questions.".to_string()),
            },
        }
    }
}
