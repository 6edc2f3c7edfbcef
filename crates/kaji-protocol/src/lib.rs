//! The shared vocabulary of kaji: conversation messages and their content
//! blocks, the chunks a model stream yields, tool specifications, the
//! `ask`/`say` events a task emits to its front ends, and ids; and the
//! pure text functions every front end needs: secret redaction
//! ([`redact`]), terminal sanitising ([`terminal`]) and an error's
//! causes in one line ([`error_chain`]).
//!
//! Every other kaji crate speaks these types, so they stay plain data: this
//! crate must never do I/O, spawn tasks, read the environment or depend on
//! another kaji crate. Everything here is `serde`-serialisable so that front
//! ends (the `exec --json` stream, an editor protocol) can forward it as is.

pub mod error_text;
pub mod events;
pub mod message;
pub mod payload;
pub mod redact;
pub mod stream;
pub mod terminal;
pub mod tool;
pub mod utc;

pub use error_text::error_chain;
pub use events::{AskKind, AskResponse, SayKind, SessionEvent, TaskEvent, TaskStatus, UsageReport};
pub use message::{ContentBlock, Message, Role, TextOrigin};
pub use payload::{
    AskPayload, BackgroundTask, SayPayload, StateUpdate, TaskListItem, TodoItem, TodoStatus,
};
pub use stream::{StopReason, StreamEvent, Usage};
pub use tool::{FileChange, ToolKind, ToolSpec, ToolView};
pub use utc::UtcDateTime;
