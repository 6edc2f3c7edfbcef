//! The seam between a task and whoever watches it.
//!
//! Every interaction goes through two exits, as in the seed: `say`
//! (one-way, [`TaskFrontend::emit`]) and `ask` ([`TaskFrontend::answer`],
//! which the task awaits). A front end must never block in `emit`; it may
//! take as long as a person needs in `answer`.

use async_trait::async_trait;
use kaji_protocol::{AskKind, AskResponse, TaskEvent};
use serde_json::Value;

/// A question the task waits on. The matching [`TaskEvent::Ask`] has
/// already been emitted when [`TaskFrontend::answer`] is called.
#[derive(Debug, Clone, PartialEq)]
pub struct AskRequest {
    /// Message id of the ask.
    pub id: u64,
    /// What is asked.
    pub kind: AskKind,
    /// The question as text.
    pub text: String,
    /// Structured detail (tool name and input, options, …).
    pub data: Option<Value>,
}

/// A front end of a task: a TUI, `kaji exec`, an editor bridge, a test.
#[async_trait]
pub trait TaskFrontend: Send + Sync {
    /// Receives every event of the task, in order. Must not block.
    fn emit(&self, event: TaskEvent);

    /// Answers an ask. Front ends that nobody can answer (`kaji exec`)
    /// deny, saying why in the feedback.
    async fn answer(&self, ask: &AskRequest) -> AskResponse;
}
