//! What a session file holds: one JSON object per line, in the order things
//! happened. The file is append-only; replaying its records in order gives
//! back the conversation ([`SessionRecord`]).
//!
//! Records are the on-disk contract: a field may be added (with a serde
//! default), never renamed. A record type this version does not know is
//! skipped with a warning naming the file and line, so a session written by
//! a newer kaji still opens. Nothing here does I/O.

use std::path::PathBuf;

use kaji_protocol::{ContentBlock, Message, Usage};
use kaji_tools::todo::TodoItem;
use serde::{Deserialize, Serialize};

use super::store_error::LoadWarning;

/// The version written in every header. Raised only when a record's meaning
/// changes; new record types and fields do not raise it.
pub const SESSION_FORMAT_VERSION: u32 = 1;

/// Milliseconds since the Unix epoch.
pub type UnixMillis = u64;

/// What a session is to the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionKind {
    /// A conversation the user started.
    Main,
    /// A copy of another session's history that went its own way.
    Fork,
    /// A sub-agent's or teammate's conversation, a child of its parent's.
    Subagent,
}

impl SessionKind {
    /// `main`, `fork` or `subagent`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Main => "main",
            Self::Fork => "fork",
            Self::Subagent => "subagent",
        }
    }
}

/// The first record of every session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionHeader {
    /// [`SESSION_FORMAT_VERSION`] of the kaji that created the file.
    pub format: u32,
    /// The session id (also the file's name).
    pub session_id: String,
    /// Main, fork or sub-agent.
    pub kind: SessionKind,
    /// The session this one was forked from or is a sub-agent of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The project directory the session started in (canonical).
    pub cwd: PathBuf,
    /// When the session was created.
    pub created: UnixMillis,
    /// The kaji version that created it.
    pub kaji_version: String,
}

/// One line of a session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SessionRecord {
    /// Always the first line.
    Header(SessionHeader),
    /// A prompt's main-agent Task started (the prompt is the user's text as
    /// typed, before hooks added context).
    TaskStarted {
        /// The Task's id.
        task_id: String,
        /// The prompt as the user typed it.
        prompt: String,
        /// When.
        at: UnixMillis,
    },
    /// A whole message joined the history. User messages are recorded with
    /// the assistant reply that answered them (a request that failed as a
    /// whole leaves no trace), so the history on disk alternates roles.
    Message {
        /// The message.
        message: Message,
    },
    /// The assistant reply so far, written (and fsynced) before one of its
    /// tool calls runs: its text and every call up to the one about to
    /// run. A later `partial_reply` or the reply's `message` replaces it;
    /// one left at the end of the file is a reply cut off mid-tool.
    PartialReply {
        /// The reply so far (role `assistant`).
        message: Message,
    },
    /// A tool result of the latest assistant message, written (and
    /// fsynced) as soon as the tool returned. The next recorded user
    /// message repeats it and supersedes every pending result; results left
    /// pending at the end of the file belong to a round that was cut off.
    ToolResult {
        /// A `tool_result` block (native protocol) or a text block (xml).
        block: ContentBlock,
        /// The call it answers.
        tool_use_id: String,
    },
    /// The history was replaced as a whole (compaction, a rewind): what
    /// follows continues from `history`.
    HistoryReplaced {
        /// The new history.
        history: Vec<Message>,
        /// Why: `compaction`, `rewind`, …
        reason: String,
        /// Context tokens before, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens_before: Option<u64>,
        /// Context tokens after, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens_after: Option<u64>,
    },
    /// The permission mode changed (its name as on the command line).
    Mode {
        /// `default`, `accept-edits`, `yolo` or `plan`.
        mode: String,
    },
    /// The model the conversation goes on with, chosen by `--model` or
    /// `/model` (a session without one uses the settings' model). A
    /// resume keeps it unless `--model` says otherwise.
    Model {
        /// The model's name, as requests send it.
        model: String,
    },
    /// The working directory changed (a worktree entered or left).
    Cwd {
        /// The new working directory.
        cwd: PathBuf,
    },
    /// The user granted an approval for the rest of the session.
    Approval {
        /// The rule, in the syntax of the permission rules
        /// (`Bash(cargo test:*)`, `Edit(src/**)`, a tool name).
        rule: String,
    },
    /// The todo checklist, as it stands after a change.
    Todo {
        /// Every item.
        items: Vec<TodoItem>,
    },
    /// The task list the session works on.
    TaskList {
        /// Its id.
        id: String,
    },
    /// A checkpoint was taken.
    Checkpoint {
        /// The checkpoint's commit id.
        id: String,
        /// Its label.
        label: String,
    },
    /// Usage of one model request.
    Usage {
        /// The Task's turn number.
        turn: u32,
        /// Tokens.
        usage: Usage,
        /// Cost in USD, when the model's price is known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
    },
    /// A prompt's Task ended.
    TaskEnded {
        /// The Task's id.
        task_id: String,
        /// `completed`, `failed`, `aborted`, `mistake_limit`, `max_turns`.
        status: String,
        /// When.
        at: UnixMillis,
    },
}

/// A session file as read back: its header, every record after it that
/// could be read, and what was skipped.
#[derive(Debug, Clone)]
pub struct LoadedSession {
    /// The session file.
    pub path: PathBuf,
    /// Its first line.
    pub header: SessionHeader,
    /// The records after the header, in file order.
    pub records: Vec<SessionRecord>,
    /// Lines that were skipped, in file order.
    pub warnings: Vec<LoadWarning>,
    /// When the file was last written (its modification time).
    pub modified: Option<UnixMillis>,
}
