//! What can go wrong with the session store, and the warnings a tolerant
//! load gives. Every message names the file (and the line, when there is
//! one). Nothing here does I/O.

use std::fmt;
use std::path::PathBuf;

/// Who holds a session's lock, as its lock file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHolder {
    /// The holder's process id, when its lock file could be read.
    pub pid: Option<u32>,
    /// The holder's command line (shortened), when known.
    pub command: Option<String>,
}

impl fmt::Display for LockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.pid, &self.command) {
            (Some(pid), Some(cmd)) => write!(f, "process {pid} ({cmd})"),
            (Some(pid), None) => write!(f, "process {pid}"),
            _ => write!(f, "another process"),
        }
    }
}

/// A session store operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The session is open (its lock is held) in another process or by
    /// another writer of this one.
    #[error("session {id} is open in {holder}")]
    Locked {
        /// The session id.
        id: String,
        /// Who holds it.
        holder: LockHolder,
        /// The lock file.
        lock: PathBuf,
    },
    /// `--continue` found no saved session of this directory.
    #[error("no saved session to continue in {} (see `kaji sessions list --all`)", dir.display())]
    NothingToContinue {
        /// The directory.
        dir: PathBuf,
    },
    /// No session id starts with the given prefix.
    #[error("no session matches {prefix:?} (in {})", dir.display())]
    NotFound {
        /// What was asked for.
        prefix: String,
        /// The sessions directory searched.
        dir: PathBuf,
    },
    /// More than one session id starts with the given prefix.
    #[error("{prefix:?} matches {} sessions: {}", candidates.len(), candidates.join(", "))]
    Ambiguous {
        /// What was asked for.
        prefix: String,
        /// Every matching id, sorted.
        candidates: Vec<String>,
    },
    /// A session id that cannot be a file name (empty, a path, odd bytes).
    #[error("{id:?} is not a valid session id (letters, digits, '-' and '_' only)")]
    InvalidId {
        /// The id.
        id: String,
    },
    /// A path that is not a regular file (a directory, a device, a FIFO).
    #[error("{}: not a regular file", path.display())]
    NotRegularFile {
        /// The path.
        path: PathBuf,
    },
    /// The session file's first line is missing or is not a header.
    #[error("{}:{line}: {message}", path.display())]
    BadHeader {
        /// The session file.
        path: PathBuf,
        /// The line (1-based).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A session file already exists under the new session's id.
    #[error("{}: a session with this id exists already", path.display())]
    Exists {
        /// The session file.
        path: PathBuf,
    },
    /// A record could not be turned into JSON.
    #[error("{}: cannot encode a record: {source}", path.display())]
    Encode {
        /// The session file.
        path: PathBuf,
        /// The serde error.
        source: serde_json::Error,
    },
}

impl StoreError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

/// Why a line of a session file was skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadWarningKind {
    /// The last line has no newline and does not parse: a write cut off
    /// by a crash.
    TornLastLine,
    /// A line that is not a valid record.
    Corrupt {
        /// The parser's message.
        message: String,
    },
    /// A record type this kaji does not know (written by a newer one).
    UnknownType {
        /// The record's `type`.
        record_type: String,
    },
}

/// A line of a session file that loading skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadWarning {
    /// The session file.
    pub path: PathBuf,
    /// The line (1-based).
    pub line: usize,
    /// Why it was skipped.
    pub kind: LoadWarningKind,
}

impl fmt::Display for LoadWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: ", self.path.display(), self.line)?;
        match &self.kind {
            LoadWarningKind::TornLastLine => {
                write!(
                    f,
                    "the last line is cut off (a write interrupted by a crash); skipped"
                )
            }
            LoadWarningKind::Corrupt { message } => {
                write!(f, "not a valid session record ({message}); skipped")
            }
            LoadWarningKind::UnknownType { record_type } => write!(
                f,
                "unknown record type {record_type:?} (written by a newer kaji?); skipped"
            ),
        }
    }
}
