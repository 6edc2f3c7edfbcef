//! Why a session could not be built, resumed or run: one variant per
//! failure a caller can tell apart, each with the message the user sees.
//! A front end maps [`SessionError::kind`] to its exit code or error code.
//! Nothing here does I/O.

use std::path::PathBuf;

use crate::storage::store_error::StoreError;

/// A session-level failure.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The working directory (`-C`) cannot be resolved.
    #[error("working directory {}: {source}", dir.display())]
    WorkingDir {
        /// The directory as given.
        dir: PathBuf,
        /// Why it cannot be resolved.
        source: std::io::Error,
    },
    /// The working directory is a file or something else.
    #[error("working directory {} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// A session was resumed with `-C` naming another project than its own.
    #[error(
        "session {session_id} belongs to {}, not {}: resume it from its own directory (or leave out -C)",
        project_dir.display(),
        cwd.display()
    )]
    OtherProject {
        /// The saved session.
        session_id: String,
        /// Where it worked.
        project_dir: PathBuf,
        /// The directory asked for.
        cwd: PathBuf,
    },
    /// The trust file cannot be used.
    #[error(transparent)]
    Trust(#[from] crate::trust::TrustError),
    /// A settings file is wrong.
    #[error(transparent)]
    Settings(Box<crate::config::ConfigError>),
    /// No provider, model or key could be chosen from the flags, settings
    /// and environment.
    #[error(transparent)]
    ProviderSelection(Box<kaji_llm::selection::SelectionError>),
    /// The chosen provider cannot be built with this configuration.
    #[error(transparent)]
    Provider(Box<kaji_llm::LlmError>),
    /// An `--allow` or `--deny` rule does not parse.
    #[error("{flag} {text:?}: {source}")]
    Rule {
        /// `--allow` or `--deny`.
        flag: &'static str,
        /// The rule as given.
        text: String,
        /// What is wrong with it.
        source: kaji_policy::RuleParseError,
    },
    /// A custom command's `allowed-tools` rule does not parse.
    #[error("allowed-tools: {0}")]
    AllowedTools(kaji_policy::RuleParseError),
    /// The task list's name or URL is wrong (`--task-list`,
    /// `KAJI_TASK_LIST_ID`, `KAJI_TASK_LIST_URL`, `task_list_url`).
    #[error("--task-list: {0}")]
    TaskListName(kaji_tasks::list::TaskListError),
    /// `--worktree` cannot be created or entered.
    #[error("--worktree {name}: {source}")]
    Worktree {
        /// The worktree's name.
        name: String,
        /// Why not.
        source: kaji_tools::ToolError,
    },
    /// `max_budget_usd` is not a positive number.
    #[error("max_budget_usd must be a positive number of dollars, not {0}")]
    BudgetUsd(f64),
    /// `max_requests` is 0.
    #[error("max_requests must be at least 1")]
    ZeroMaxRequests,
    /// A rewind named a user message the conversation does not have.
    #[error("no user message {0} to rewind to")]
    NoUserMessage(usize),
    /// A shell command was run in a session without a shell tool.
    #[error("this session has no tool that runs shell commands")]
    NoShellTool,
    /// The process's current directory cannot be read.
    #[error("cannot read the current directory: {0}")]
    CurrentDir(std::io::Error),
    /// The runtime task registry cannot be set up.
    #[error("cannot set up the session's runtime tasks: {0}")]
    RuntimeTasks(kaji_tasks::runtime::RuntimeError),
    /// The sandbox probe did not finish.
    #[error("the sandbox probe failed: {0}")]
    SandboxProbe(tokio::task::JoinError),
    /// The task list's store cannot be used (a database that refuses, a
    /// directory that cannot be written).
    #[error("cannot open the task list: {0}")]
    TaskList(kaji_tasks::list::TaskListError),
    /// The session store failed: a session unknown, ambiguous, unreadable,
    /// open in another process, or none to continue.
    #[error(transparent)]
    Store(Box<StoreError>),
    /// The saved session's project directory no longer exists.
    #[error(
        "session {session_id} worked in {}, which no longer exists; nothing was changed (`kaji sessions show {session_id}` still shows it)",
        project_dir.display()
    )]
    ProjectGone {
        /// The saved session.
        session_id: String,
        /// Where it worked.
        project_dir: PathBuf,
    },
    /// `/compact` failed; the history is as it was.
    #[error(transparent)]
    Compaction(Box<crate::compaction::CompactionError>),
    /// A prompt was submitted while another one runs.
    #[error("a prompt is already running in this session")]
    Busy,
}

/// Which side a [`SessionError`] is on, for a front end's exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionErrorKind {
    /// The flags or settings are wrong (a front end's usage error).
    Usage,
    /// A service the session needs could not be set up.
    Setup,
    /// The saved session cannot be opened.
    Store,
    /// `/compact` failed.
    Compaction,
    /// Another prompt runs.
    Busy,
}

impl SessionError {
    /// Which side the failure is on.
    pub fn kind(&self) -> SessionErrorKind {
        use SessionErrorKind as K;
        match self {
            Self::WorkingDir { .. }
            | Self::NotADirectory(_)
            | Self::OtherProject { .. }
            | Self::Trust(_)
            | Self::Settings(_)
            | Self::ProviderSelection(_)
            | Self::Provider(_)
            | Self::Rule { .. }
            | Self::AllowedTools(_)
            | Self::TaskListName(_)
            | Self::Worktree { .. }
            | Self::BudgetUsd(_)
            | Self::ZeroMaxRequests
            | Self::NoUserMessage(_)
            | Self::NoShellTool => K::Usage,
            Self::CurrentDir(_)
            | Self::RuntimeTasks(_)
            | Self::SandboxProbe(_)
            | Self::TaskList(_) => K::Setup,
            Self::Store(_) | Self::ProjectGone { .. } => K::Store,
            Self::Compaction(_) => K::Compaction,
            Self::Busy => K::Busy,
        }
    }

    /// Whether the caller got something wrong (exit code 2 in the CLI).
    pub fn is_usage(&self) -> bool {
        self.kind() == SessionErrorKind::Usage
    }

    /// A task list that could not be opened: a usage error when its name
    /// or URL is wrong, a setup error otherwise.
    pub(crate) fn task_list(e: kaji_tasks::list::TaskListError) -> Self {
        match e.kind() {
            kaji_tasks::list::TaskListErrorKind::InvalidInput => Self::TaskListName(e),
            _ => Self::TaskList(e),
        }
    }
}

impl From<crate::compaction::CompactionError> for SessionError {
    fn from(e: crate::compaction::CompactionError) -> Self {
        Self::Compaction(Box::new(e))
    }
}

impl From<StoreError> for SessionError {
    fn from(e: StoreError) -> Self {
        Self::Store(Box::new(e))
    }
}

impl From<crate::config::ConfigError> for SessionError {
    fn from(e: crate::config::ConfigError) -> Self {
        Self::Settings(Box::new(e))
    }
}

impl From<kaji_llm::selection::SelectionError> for SessionError {
    fn from(e: kaji_llm::selection::SelectionError) -> Self {
        Self::ProviderSelection(Box::new(e))
    }
}

impl From<kaji_llm::LlmError> for SessionError {
    fn from(e: kaji_llm::LlmError) -> Self {
        Self::Provider(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages users saw before the variants were typed.
    #[test]
    fn messages_are_unchanged() {
        assert_eq!(
            SessionError::NoUserMessage(3).to_string(),
            "no user message 3 to rewind to"
        );
        assert_eq!(
            SessionError::ZeroMaxRequests.to_string(),
            "max_requests must be at least 1"
        );
        assert_eq!(
            SessionError::NotADirectory("/x".into()).to_string(),
            "working directory /x is not a directory"
        );
        let gone = SessionError::ProjectGone {
            session_id: "s1".into(),
            project_dir: "/gone".into(),
        };
        assert_eq!(
            gone.to_string(),
            "session s1 worked in /gone, which no longer exists; nothing was changed (`kaji sessions show s1` still shows it)"
        );
        assert_eq!(gone.kind(), SessionErrorKind::Store);
        assert!(SessionError::BudgetUsd(-1.0).is_usage());
        assert!(!SessionError::Busy.is_usage());
    }
}
