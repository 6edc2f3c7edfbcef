//! The Session: one conversation, and everything that lives as long as it.
//!
//! A session owns the services a conversation needs (provider, tools and
//! MCP servers, task list, runtime registry, todo, hooks, rules,
//! checkpoints), the permission mode, the working directory, the approvals
//! granted so far, the history and the usage. It runs one main-agent
//! [`crate::Task`] per prompt and writes itself to disk as it goes
//! ([`record`]: what a session file holds).

pub mod error;
pub mod index;
pub mod lock;
pub mod record;
pub mod replay;
pub mod store;
