//! Numbers a Task's messages and sends them, stamped with whose they are,
//! to the session's front end. Shared by the Task and the tool executor, so
//! neither needs the other to talk to the user. It never decides anything.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kaji_protocol::{
    AskKind, AskPayload, AskResponse, SayKind, SayPayload, SessionEvent, TaskEvent,
};

use crate::frontend::{AskRequest, TaskFrontend};

/// Sends one Task's events and asks to its front end.
#[derive(Clone)]
pub struct Emitter {
    frontend: Arc<dyn TaskFrontend>,
    next_id: Arc<AtomicU64>,
    session_id: Arc<str>,
    task_id: Arc<str>,
    agent: Arc<str>,
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
        }
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
