//! What became of one tool call: an enum of outcomes, built by the
//! executor's steps through a few constructors, read by the Task through
//! accessors. It never runs or decides anything.

use std::path::PathBuf;

use kaji_protocol::{ContentBlock, StateUpdate};

use crate::permissions::PermissionMode;

/// What became of one tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolRun {
    /// The tool ran and succeeded (or its control was carried out).
    Ran(Ran),
    /// The call failed, or was refused before it ran: an error result.
    Failed {
        /// The result text for the model.
        content: String,
        /// Whether it counts as a mistake of the model (unknown tool, bad
        /// arguments, a failing call).
        mistake: bool,
    },
    /// The user (or nobody, headless) rejected the call: an error result,
    /// and the rest of the reply is skipped.
    Rejected {
        /// The result text for the model.
        content: String,
        /// Nobody could approve it: a mistake, so a model that keeps
        /// trying reaches the mistake limit.
        mistake: bool,
    },
}

/// A call that ran.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Ran {
    /// The result text for the model.
    pub content: String,
    /// What the call changes in the task, if anything.
    pub effect: Option<Effect>,
    /// The call changed files.
    pub changed_files: bool,
    /// Session state the call changed (task list, todo).
    pub update: Option<StateUpdate>,
    /// The tool polls (the same result again is no loop).
    pub polls: bool,
    /// Images the result carries (a Read of a PNG), sent after it.
    pub images: Vec<ContentBlock>,
}

/// What a call that ran changes in its task.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// The task ends with this result (AttemptCompletion, a plan nobody
    /// could approve).
    Complete(String),
    /// The task's permission mode changes (plan mode).
    Mode(PermissionMode),
    /// The task's working directory changes (worktrees).
    Cwd(PathBuf),
}

impl ToolRun {
    /// A call that ran with this result and nothing else.
    pub fn ok(content: impl Into<String>) -> Self {
        Self::Ran(Ran {
            content: content.into(),
            ..Ran::default()
        })
    }

    /// A call that ran with this result and effect.
    pub fn with_effect(content: impl Into<String>, effect: Effect) -> Self {
        Self::Ran(Ran {
            content: content.into(),
            effect: Some(effect),
            ..Ran::default()
        })
    }

    /// An error result; `mistake` when it is the model's.
    pub fn failed(content: impl Into<String>, mistake: bool) -> Self {
        Self::Failed {
            content: content.into(),
            mistake,
        }
    }

    /// The result text for the model.
    pub fn content(&self) -> &str {
        match self {
            Self::Ran(r) => &r.content,
            Self::Failed { content, .. } | Self::Rejected { content, .. } => content,
        }
    }

    /// The result text, to add to it (hook context, loop warnings, a cap).
    pub fn content_mut(&mut self) -> &mut String {
        match self {
            Self::Ran(r) => &mut r.content,
            Self::Failed { content, .. } | Self::Rejected { content, .. } => content,
        }
    }

    /// Whether it is an error result.
    pub fn is_error(&self) -> bool {
        !matches!(self, Self::Ran(_))
    }

    /// Whether it counts as a mistake of the model.
    pub fn is_mistake(&self) -> bool {
        match self {
            Self::Ran(_) => false,
            Self::Failed { mistake, .. } | Self::Rejected { mistake, .. } => *mistake,
        }
    }

    /// Whether the call was rejected: the rest of the reply is skipped.
    pub fn is_rejected(&self) -> bool {
        matches!(self, Self::Rejected { .. })
    }

    /// The call that ran, if it did.
    pub fn ran(&self) -> Option<&Ran> {
        match self {
            Self::Ran(r) => Some(r),
            _ => None,
        }
    }

    /// The task's result, when the call ended it.
    pub fn completion(&self) -> Option<&str> {
        match self.ran()?.effect.as_ref()? {
            Effect::Complete(result) => Some(result),
            _ => None,
        }
    }

    /// The images sent after the result.
    pub fn images(&self) -> &[ContentBlock] {
        self.ran().map_or(&[], |r| &r.images)
    }
}
