//! Errors of the task list. Every variant names the task, list or file it
//! is about and says what is wrong, so a person or a model can act on it.

use std::fmt;
use std::path::PathBuf;

/// Why a [`TaskListStore`](super::TaskListStore) operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TaskListError {
    /// The list id is empty or has nothing usable after sanitising.
    #[error("invalid task list id {raw:?}: {problem}")]
    InvalidListId {
        /// The id as given.
        raw: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The list's directory does not exist (only from
    /// [`TaskListStore::open_existing`](super::TaskListStore::open_existing)).
    #[error("task list {list_id:?} does not exist (no {})", path.display())]
    ListNotFound {
        /// The sanitised list id.
        list_id: String,
        /// The directory that is missing.
        path: PathBuf,
    },
    /// No task with this id exists in the list.
    #[error("task #{id} does not exist in list {list_id:?} (no {})", path.display())]
    TaskNotFound {
        /// The list id.
        list_id: String,
        /// The task id asked for.
        id: u64,
        /// The file that is missing.
        path: PathBuf,
    },
    /// A dependency names a task that does not exist.
    #[error(
        "task #{to} does not exist (no {}), so task #{from} cannot depend on it or block it",
        path.display()
    )]
    EdgeToMissingTask {
        /// The task being created or changed.
        from: u64,
        /// The missing task it would be linked to.
        to: u64,
        /// The file that is missing.
        path: PathBuf,
    },
    /// A dependency change would close a cycle. `cycle` lists the ids along
    /// the `blocks` direction and ends with its first id again.
    #[error(
        "refused: this dependency would close the cycle {}",
        CycleDisplay(cycle)
    )]
    Cycle {
        /// The ids of the cycle, first id repeated at the end.
        cycle: Vec<u64>,
    },
    /// A claim was refused; `reason` says why.
    #[error("cannot claim task #{id}: {reason}")]
    ClaimRefused {
        /// The task asked for.
        id: u64,
        /// Why it cannot be claimed.
        reason: ClaimRefusal,
    },
    /// The input of an operation is not acceptable (e.g. an empty subject).
    #[error("invalid task change: {0}")]
    InvalidInput(String),
    /// A file of the list exists but cannot be understood: invalid JSON,
    /// an unknown status, an id that does not match the file name, …
    #[error("{}: {problem}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// A file of the list is not a regular file (a FIFO, a device, a
    /// directory, a symbolic link where none is allowed): it is never
    /// opened for reading, so it can neither block nor feed endless data.
    #[error("{}: refused: this is {kind}, not a regular file; remove or replace it", path.display())]
    NotRegularFile {
        /// The file.
        path: PathBuf,
        /// What it is, e.g. `a FIFO (named pipe)`.
        kind: String,
    },
    /// A file of the list is larger than the cap (`KAJI_TASK_FILE_MAX_BYTES`).
    #[error(
        "{}: refused: the file has at least {size} bytes, more than the limit of {limit} bytes \
         (KAJI_TASK_FILE_MAX_BYTES)",
        path.display()
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size (or how much was read before giving up).
        size: u64,
        /// The cap.
        limit: u64,
    },
    /// A lock could not be taken within the lock timeout
    /// (`KAJI_LOCK_TIMEOUT_MS`, default 30 s).
    #[error(
        "timed out after {waited_ms} ms waiting for {what} ({}) held by {}; if that process is \
         gone, `kaji tasks repair` clears stale locks",
        path.display(),
        super::lock::holder_text(holder)
    )]
    LockTimeout {
        /// What the lock guards, e.g. `the list lock`.
        what: String,
        /// The lock file.
        path: PathBuf,
        /// How long this process waited.
        waited_ms: u64,
        /// The holder its lock file names, if readable.
        holder: Option<super::LockHolder>,
    },
    /// The database of a PostgreSQL task list cannot be used: it is down,
    /// refuses the credentials, dropped the connection, or failed a
    /// statement. `server` never holds a password.
    #[error("task list {list_id:?} on {server}: {problem}")]
    Database {
        /// `host:port/database` (no password).
        server: String,
        /// The list id.
        list_id: String,
        /// What went wrong, with what to do.
        problem: String,
        /// Whether trying again later may succeed (the change was not made).
        retryable: bool,
    },
    /// The database holds a task-list schema from a newer kaji.
    #[error(
        "task list {list_id:?} on {server}: the task-list schema is version {found}, newer \
         than this kaji understands ({supported}); upgrade kaji (nothing was changed)"
    )]
    SchemaTooNew {
        /// `host:port/database` (no password).
        server: String,
        /// The list that was being opened.
        list_id: String,
        /// The version found.
        found: i32,
        /// The newest version this build knows.
        supported: i32,
    },
    /// A fenced change by a lease holder was refused: its lease lapsed or
    /// the task is no longer its own.
    #[error(
        "refused: {holder:?} cannot change task #{id} of list {list_id:?} on {server}: {problem}"
    )]
    LeaseLost {
        /// `host:port/database` (no password).
        server: String,
        /// The list id.
        list_id: String,
        /// The holder whose lease is gone.
        holder: String,
        /// The task (0 when the refusal is not about one task).
        id: u64,
        /// Why, e.g. `its lease expired and the task is now held by "b"`.
        problem: String,
    },
    /// A task-list URL that cannot be used (`KAJI_TASK_LIST_URL`,
    /// `task_list_url`, or a `--list` value containing `://`).
    #[error("invalid task list URL {url}: {problem}")]
    BadUrl {
        /// The URL with its password masked.
        url: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The operating system refused an operation on a file of the list.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// The broad class of a [`TaskListError`], for exit codes and tool results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskListErrorKind {
    /// A list or task (or a dependency's target) does not exist.
    NotFound,
    /// The operation was refused by the list's rules (cycle, claim refused).
    Refused,
    /// The request itself is malformed (bad list id, empty subject).
    InvalidInput,
    /// A file of the list cannot be understood.
    Corrupt,
    /// The operating system failed an operation.
    Io,
    /// A lock stayed busy for the whole lock timeout.
    Busy,
}

impl TaskListError {
    /// The broad class of this error.
    pub fn kind(&self) -> TaskListErrorKind {
        match self {
            Self::ListNotFound { .. }
            | Self::TaskNotFound { .. }
            | Self::EdgeToMissingTask { .. } => TaskListErrorKind::NotFound,
            Self::ClaimRefused {
                reason: ClaimRefusal::NotFound,
                ..
            } => TaskListErrorKind::NotFound,
            Self::Cycle { .. } | Self::ClaimRefused { .. } => TaskListErrorKind::Refused,
            Self::LeaseLost { .. } => TaskListErrorKind::Refused,
            Self::InvalidListId { .. } | Self::InvalidInput(_) | Self::BadUrl { .. } => {
                TaskListErrorKind::InvalidInput
            }
            Self::SchemaTooNew { .. } => TaskListErrorKind::Corrupt,
            Self::Database { .. } => TaskListErrorKind::Io,
            Self::Corrupt { .. } | Self::NotRegularFile { .. } | Self::TooLarge { .. } => {
                TaskListErrorKind::Corrupt
            }
            Self::LockTimeout { .. } => TaskListErrorKind::Busy,
            Self::Io { .. } => TaskListErrorKind::Io,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

/// Why a task could not be claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimRefusal {
    /// No task with this id exists.
    NotFound,
    /// The task already has an owner or is already in progress.
    AlreadyClaimed {
        /// The current owner, if the task has one.
        owner: Option<String>,
    },
    /// The task is completed.
    AlreadyCompleted,
    /// Some of the task's blockers are not completed.
    Blocked {
        /// The open blockers.
        by: Vec<u64>,
    },
}

impl ClaimRefusal {
    /// The stable machine-readable code: `not_found`, `already_claimed`,
    /// `already_completed` or `blocked`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound => "not_found",
            Self::AlreadyClaimed { .. } => "already_claimed",
            Self::AlreadyCompleted => "already_completed",
            Self::Blocked { .. } => "blocked",
        }
    }
}

impl fmt::Display for ClaimRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound => write!(f, "not_found: no such task"),
            Self::AlreadyClaimed { owner: Some(owner) } => {
                write!(f, "already_claimed: owned by {owner:?}")
            }
            Self::AlreadyClaimed { owner: None } => {
                write!(f, "already_claimed: already in progress")
            }
            Self::AlreadyCompleted => write!(f, "already_completed: the task is completed"),
            Self::Blocked { by } => {
                write!(f, "blocked: waiting for ")?;
                write_ids(f, by, ", ")
            }
        }
    }
}

struct CycleDisplay<'a>(&'a [u64]);

impl fmt::Display for CycleDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_ids(f, self.0, " blocks ")
    }
}

fn write_ids(f: &mut fmt::Formatter<'_>, ids: &[u64], sep: &str) -> fmt::Result {
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            f.write_str(sep)?;
        }
        write!(f, "#{id}")?;
    }
    Ok(())
}
