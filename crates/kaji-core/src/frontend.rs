//! The seam between a task and whoever watches it.
//!
//! Every interaction goes through two exits, as in the seed: `say`
//! (one-way, [`TaskFrontend::emit`]) and `ask` ([`TaskFrontend::answer`],
//! which the task awaits). A front end must never block in `emit`; it may
//! take as long as a person needs in `answer`.

use async_trait::async_trait;
use kaji_protocol::{AskKind, AskPayload, AskResponse, SessionEvent};

/// A question the task waits on. The matching [`kaji_protocol::TaskEvent::Ask`]
/// has already been emitted when [`TaskFrontend::answer`] is called.
#[derive(Debug, Clone, PartialEq)]
pub struct AskRequest {
    /// Message id of the ask.
    pub id: u64,
    /// What is asked.
    pub kind: AskKind,
    /// The question as text.
    pub text: String,
    /// Typed detail (the tool and its input, the options, …).
    pub payload: Option<AskPayload>,
    /// The agent asking: `main` or a sub-agent's name.
    pub agent: String,
}

/// A front end of a session: a TUI, `kaji exec`, an editor bridge, a test.
#[async_trait]
pub trait TaskFrontend: Send + Sync {
    /// Receives every event of the session, in order. Must not block.
    fn emit(&self, event: SessionEvent);

    /// Answers an ask. Front ends that nobody can answer (`kaji exec`)
    /// deny, saying why in the feedback.
    async fn answer(&self, ask: &AskRequest) -> AskResponse;
}
