//! Why a session could not be built, resumed or run. A front end maps
//! [`SessionError::is_usage`] to its usage exit code.

/// A session-level failure.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The flags or settings are wrong (a front end's usage error).
    #[error("{0}")]
    Usage(String),
    /// A service the session needs could not be set up.
    #[error("{0}")]
    Setup(String),
    /// The saved session cannot be opened: unknown, ambiguous, unreadable,
    /// or open in another process.
    #[error("{0}")]
    Store(String),
    /// `/compact` failed; the history is as it was.
    #[error(transparent)]
    Compaction(Box<crate::task::CompactionError>),
    /// A prompt was submitted while another one runs.
    #[error("a prompt is already running in this session")]
    Busy,
}

impl From<crate::task::CompactionError> for SessionError {
    fn from(e: crate::task::CompactionError) -> Self {
        Self::Compaction(Box::new(e))
    }
}

impl SessionError {
    /// Whether the caller got something wrong (exit code 2 in the CLI).
    pub fn is_usage(&self) -> bool {
        matches!(self, Self::Usage(_))
    }
}
