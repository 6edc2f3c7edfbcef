//! The agent runtime: the Task state machine of seed 000 and everything it
//! drives — the streaming reply parser, the presenter, the tool executor,
//! permissions.
//!
//! A [`Task`] is born when a prompt is submitted and dropped when it ends;
//! all of its state sits behind one lock, and it never has two model
//! requests in flight. The core never prints and never reads the terminal:
//! it emits [`kaji_protocol::TaskEvent`]s and asks questions through a
//! [`TaskFrontend`], and each front end (the TUI, `kaji exec`, tests)
//! renders and answers them.

pub mod budget;
pub mod checkpoints;
pub mod claude_settings;
pub mod commands;
pub mod compaction;
pub mod config;
pub mod emitter;
pub mod env;
pub mod executor;
pub mod front_matter;
pub mod frontend;
pub mod hooks;
pub mod live_output;
pub mod lsp;
pub mod parser;
pub mod permissions;
pub mod prompt;
pub mod rule_files;
pub mod rules;
pub mod session;
pub mod storage;
pub mod subagent;
pub mod task;
pub mod trust;
pub mod web_search;

pub use executor::{CheckpointGate, Effect, Ran, ToolExecutor, ToolRun};
pub use frontend::{AskRequest, TaskFrontend};
pub use parser::ToolProtocol;
pub use permissions::PermissionMode;
pub use session::{
    CustomPrompt, FrontendTools, PromptOptions, ResumeFrom, Session, SessionBuilder, SessionError,
    SessionOptions,
};
pub use task::new_task_id;
pub use task::{AbortHandle, FinalEvent, Task, TaskConfig, TaskOutcome};
