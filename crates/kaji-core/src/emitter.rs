//! Numbers a Task's messages and sends them, stamped with whose they are,
//! to the session's front end. Shared by the Task and the tool executor, so
//! neither needs the other to talk to the user. Every ask runs the
//! Notification hooks first (when set), as the one place asks go out. It
//! never decides anything.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kaji_protocol::{
    AskKind, AskPayload, AskResponse, SayKind, SayPayload, SessionEvent, TaskEvent,
};

use crate::frontend::{AskRequest, TaskFrontend};
use crate::hooks::{HookEvent, HookPayload, HookRunner};

/// The Notification hooks and how to build their payload at the moment of
/// an ask.
#[derive(Clone)]
struct Notifier {
    hooks: HookRunner,
    payload: Arc<dyn Fn() -> HookPayload + Send + Sync>,
}

/// Sends one Task's events and asks to its front end.
#[derive(Clone)]
pub struct Emitter {
    frontend: Arc<dyn TaskFrontend>,
    next_id: Arc<AtomicU64>,
    session_id: Arc<str>,
    task_id: Arc<str>,
    agent: Arc<str>,
    notifier: Option<Notifier>,
}

impl Emitter {
    /// An emitter for one Task of a session. Message ids continue from
    /// `next_id`, which the session shares between its Tasks so that ids
    /// never repeat within a session.
    pub fn new(
        frontend: Arc<dyn TaskFrontend>,
        next_id: Arc<AtomicU64>,
        session_id: &str,
        task_id: &str,
        agent: &str,
    ) -> Self {
        Self {
            frontend,
            next_id,
            session_id: session_id.into(),
            task_id: task_id.into(),
            agent: agent.into(),
            notifier: None,
        }
    }

    /// Runs the Notification hooks of `hooks` before every ask, with the
    /// payload `payload` builds then (plus `message` and
    /// `notification_type`).
    pub(crate) fn set_notifier(
        &mut self,
        hooks: HookRunner,
        payload: impl Fn() -> HookPayload + Send + Sync + 'static,
    ) {
        self.notifier = Some(Notifier {
            hooks,
            payload: Arc::new(payload),
        });
    }

    /// The next message id.
    pub(crate) fn next(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Sends an event as it is.
    pub(crate) fn emit(&self, event: TaskEvent) {
        self.frontend.emit(SessionEvent {
            session_id: self.session_id.to_string(),
            task_id: self.task_id.to_string(),
            agent: self.agent.to_string(),
            parent_tool_use_id: None,
            event,
        });
    }

    /// A complete `say`; returns its id.
    pub(crate) fn say(
        &self,
        kind: SayKind,
        text: impl Into<String>,
        payload: Option<SayPayload>,
    ) -> u64 {
        let id = self.next();
        self.emit(TaskEvent::Say {
            id,
            kind,
            text: text.into(),
            partial: false,
            payload,
        });
        id
    }

    /// A complete `say` with an id taken before (it ends the partial
    /// message of that id).
    pub(crate) fn say_as(
        &self,
        id: u64,
        kind: SayKind,
        text: impl Into<String>,
        payload: Option<SayPayload>,
    ) {
        self.emit(TaskEvent::Say {
            id,
            kind,
            text: text.into(),
            partial: false,
            payload,
        });
    }

    /// An `ask`, awaited until the front end answers.
    pub(crate) async fn ask(
        &self,
        kind: AskKind,
        text: impl Into<String>,
        payload: Option<AskPayload>,
    ) -> AskResponse {
        let id = self.next();
        let text = text.into();
        // A sub-agent's result is judged by its parent, never the user.
        let for_user = kind != AskKind::CompletionResult || &*self.agent == "main";
        if let Some(n) = self.notifier.as_ref().filter(|_| for_user) {
            let payload = (n.payload)()
                .with_field("message", text.clone())
                .with_field(
                    "notification_type",
                    serde_json::to_value(kind).unwrap_or_default(),
                );
            let outcome = n
                .hooks
                .run(
                    HookEvent::Notification,
                    payload,
                    &tokio_util::sync::CancellationToken::new(),
                )
                .await;
            for w in &outcome.warnings {
                self.say(SayKind::Info, format!("hook warning: {w}"), None);
            }
        }
        self.emit(TaskEvent::Ask {
            id,
            kind,
            text: text.clone(),
            partial: false,
            payload: payload.clone(),
        });
        self.frontend
            .answer(&AskRequest {
                id,
                kind,
                text,
                payload,
                agent: self.agent.to_string(),
            })
            .await
    }
}
