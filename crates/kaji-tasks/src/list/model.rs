//! The task record and the values passed to and returned from the store.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::TaskListError;

/// Where a task of the list stands in its plan: not a process state
/// ([`crate::runtime::RuntimeTaskStatus`]), nor how a prompt's run ended
/// (`kaji_protocol::TaskStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListTaskStatus {
    /// Not started.
    Pending,
    /// Someone is working on it.
    InProgress,
    /// Done.
    Completed,
}

impl ListTaskStatus {
    /// The stored spelling: `pending`, `in_progress` or `completed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::InProgress => "in_progress",
            Self::Completed => "completed",
        }
    }
}

impl fmt::Display for ListTaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ListTaskStatus {
    type Err = TaskListError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pending" => Ok(Self::Pending),
            "in_progress" => Ok(Self::InProgress),
            "completed" => Ok(Self::Completed),
            other => Err(TaskListError::InvalidInput(format!(
                "unknown status {other:?}; expected pending, in_progress or completed"
            ))),
        }
    }
}

/// One task, exactly as stored in `<id>.json` (see `docs/task-list.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTask {
    /// Decimal id, unique in its list and never reused.
    pub id: u64,
    /// One-line title in the imperative ("Run the tests").
    pub subject: String,
    /// What has to be done, in full.
    #[serde(default)]
    pub description: String,
    /// How the task reads while in progress ("Running the tests").
    #[serde(default)]
    pub active_form: Option<String>,
    /// Who holds the task (an agent or person name), if anyone.
    #[serde(default)]
    pub owner: Option<String>,
    /// Plan state.
    pub status: ListTaskStatus,
    /// Tasks that cannot start before this one is completed.
    #[serde(default)]
    pub blocks: BTreeSet<u64>,
    /// Tasks that must be completed before this one can start.
    #[serde(default)]
    pub blocked_by: BTreeSet<u64>,
    /// Free-form extra context.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Creation time, milliseconds since the Unix epoch (UTC).
    #[serde(default)]
    pub created_at: u64,
    /// Time of the last change, milliseconds since the Unix epoch (UTC).
    #[serde(default)]
    pub updated_at: u64,
}

/// The input of [`TaskListStore::create`](super::TaskListStore::create).
/// A new task is always `pending` with no owner.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewListTask {
    /// One-line title; must not be blank.
    pub subject: String,
    /// Full description.
    pub description: String,
    /// Present-continuous form shown while in progress.
    pub active_form: Option<String>,
    /// Initial metadata; `null` values are dropped.
    pub metadata: Map<String, Value>,
    /// Existing tasks the new task waits for.
    pub blocked_by: Vec<u64>,
    /// Existing tasks that wait for the new task.
    pub blocks: Vec<u64>,
}

impl NewListTask {
    /// A task with only a subject.
    pub fn new(subject: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            ..Self::default()
        }
    }
}

/// A change to one task for
/// [`TaskListStore::update`](super::TaskListStore::update). `None` (or an
/// empty list) leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListTaskPatch {
    /// New subject; must not be blank.
    pub subject: Option<String>,
    /// New description.
    pub description: Option<String>,
    /// New active form; `Some(None)` clears it.
    pub active_form: Option<Option<String>>,
    /// New owner; `Some(None)` (or a blank name) clears it. This assigns
    /// without the availability checks of a claim.
    pub owner: Option<Option<String>>,
    /// New status.
    pub status: Option<ListTaskStatus>,
    /// Keys merged into the metadata; a `null` value removes the key.
    pub metadata: Option<Map<String, Value>>,
    /// Tasks this task should block.
    pub add_blocks: Vec<u64>,
    /// Tasks this task should wait for.
    pub add_blocked_by: Vec<u64>,
    /// Tasks this task should no longer block.
    pub remove_blocks: Vec<u64>,
    /// Tasks this task should no longer wait for.
    pub remove_blocked_by: Vec<u64>,
}

impl ListTaskPatch {
    /// Whether the patch changes dependencies (and so touches other tasks).
    pub fn changes_edges(&self) -> bool {
        !(self.add_blocks.is_empty()
            && self.add_blocked_by.is_empty()
            && self.remove_blocks.is_empty()
            && self.remove_blocked_by.is_empty())
    }

    /// Whether the patch changes nothing at all.
    pub fn is_empty(&self) -> bool {
        !self.changes_edges()
            && self.subject.is_none()
            && self.description.is_none()
            && self.active_form.is_none()
            && self.owner.is_none()
            && self.status.is_none()
            && self.metadata.is_none()
    }

    /// Checks the patch on its own, before any file is touched.
    pub(crate) fn validate(&self) -> Result<(), TaskListError> {
        if let Some(subject) = &self.subject {
            validate_subject(subject)?;
        }
        Ok(())
    }

    /// Applies the field changes (not the edges) to `task`.
    pub(crate) fn apply_fields(&self, task: &mut ListTask) {
        if let Some(subject) = &self.subject {
            task.subject = subject.clone();
        }
        if let Some(description) = &self.description {
            task.description = description.clone();
        }
        if let Some(active_form) = &self.active_form {
            task.active_form = active_form.clone();
        }
        if let Some(owner) = &self.owner {
            task.owner = normalize_owner(owner.as_deref());
        }
        if let Some(status) = self.status {
            task.status = status;
        }
        if let Some(metadata) = &self.metadata {
            merge_metadata(&mut task.metadata, metadata);
        }
    }
}

/// What [`TaskListStore::update`](super::TaskListStore::update) did.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateOutcome {
    /// The task as written.
    pub task: ListTask,
    /// Tasks that became unblocked because this update completed the task:
    /// not completed themselves, and all their blockers now completed.
    pub unblocked: Vec<u64>,
}

/// A file of the list that could not be read as what it should be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CorruptFile {
    /// The task id from the file name, when it is a task file.
    pub id: Option<u64>,
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub problem: String,
}

/// Everything readable in a list at one moment, plus what was not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListSnapshot {
    /// Readable tasks, sorted by id.
    pub tasks: Vec<ListTask>,
    /// Files that could not be read; the rest of the list is unaffected.
    pub errors: Vec<CorruptFile>,
    /// The highest id ever assigned in this list (0 if none yet, or if
    /// `.highwatermark` is unreadable — then it is also in `errors`).
    pub highwatermark: u64,
}

impl ListSnapshot {
    /// The task with this id, if readable.
    pub fn get(&self, id: u64) -> Option<&ListTask> {
        self.tasks
            .binary_search_by_key(&id, |t| t.id)
            .ok()
            .map(|i| &self.tasks[i])
    }

    /// Blockers of `task` that are not completed. A blocker whose file is
    /// unreadable counts as open; one that no longer exists does not.
    pub fn open_blockers(&self, task: &ListTask) -> Vec<u64> {
        task.blocked_by
            .iter()
            .copied()
            .filter(|b| match self.get(*b) {
                Some(blocker) => blocker.status != ListTaskStatus::Completed,
                None => self.errors.iter().any(|e| e.id == Some(*b)),
            })
            .collect()
    }

    /// Whether `task` can be claimed: pending, no owner, no open blockers.
    pub fn is_available(&self, task: &ListTask) -> bool {
        task.status == ListTaskStatus::Pending
            && task.owner.is_none()
            && self.open_blockers(task).is_empty()
    }

    /// The tasks that can be claimed now, by id.
    pub fn available(&self) -> Vec<&ListTask> {
        self.tasks.iter().filter(|t| self.is_available(t)).collect()
    }

    /// The tasks that completing `task` would unblock: not completed, and
    /// `task` is their only open blocker.
    pub fn would_unblock(&self, task: &ListTask) -> Vec<u64> {
        if task.status == ListTaskStatus::Completed {
            return Vec::new();
        }
        task.blocks
            .iter()
            .filter_map(|id| self.get(*id))
            .filter(|t| t.status != ListTaskStatus::Completed)
            .filter(|t| self.open_blockers(t).iter().all(|b| *b == task.id))
            .map(|t| t.id)
            .collect()
    }

    /// The tasks that pass `filter`, by id.
    pub fn filtered(&self, filter: &ListTaskFilter) -> Vec<&ListTask> {
        self.tasks
            .iter()
            .filter(|t| filter.accepts(self, t))
            .collect()
    }

    /// Ids per owner of the unfinished tasks each owner holds.
    pub fn held_by_owner(&self) -> BTreeMap<&str, Vec<u64>> {
        let mut held: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        for task in &self.tasks {
            if let (Some(owner), false) = (&task.owner, task.status == ListTaskStatus::Completed) {
                held.entry(owner.as_str()).or_default().push(task.id);
            }
        }
        held
    }
}

/// Which tasks a listing shows; every condition given must hold. The
/// default shows every task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListTaskFilter {
    /// Only tasks in this status.
    pub status: Option<ListTaskStatus>,
    /// Only tasks held by this owner; `Some("")` (or blank) means tasks
    /// with no owner.
    pub owner: Option<String>,
    /// Only tasks that can be claimed now: pending, unowned, unblocked.
    pub available: bool,
    /// Only tasks that still wait for an open blocker.
    pub blocked: bool,
}

impl ListTaskFilter {
    /// Whether `task` of `snapshot` passes.
    pub fn accepts(&self, snapshot: &ListSnapshot, task: &ListTask) -> bool {
        if self.status.is_some_and(|s| s != task.status) {
            return false;
        }
        if let Some(owner) = &self.owner
            && normalize_owner(Some(owner)).as_deref() != task.owner.as_deref()
        {
            return false;
        }
        if self.available && !snapshot.is_available(task) {
            return false;
        }
        !(self.blocked && snapshot.open_blockers(task).is_empty())
    }

    /// Whether the filter lets every task through.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

pub(crate) fn validate_subject(subject: &str) -> Result<(), TaskListError> {
    if subject.trim().is_empty() {
        return Err(TaskListError::InvalidInput(
            "the subject must not be empty".to_string(),
        ));
    }
    Ok(())
}

/// A blank owner name means "no owner".
pub(crate) fn normalize_owner(owner: Option<&str>) -> Option<String> {
    owner
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(str::to_string)
}

/// Merges `changes` into `metadata`; a `null` value removes the key.
pub(crate) fn merge_metadata(metadata: &mut Map<String, Value>, changes: &Map<String, Value>) {
    for (key, value) in changes {
        if value.is_null() {
            metadata.remove(key);
        } else {
            metadata.insert(key.clone(), value.clone());
        }
    }
}

/// Milliseconds since the Unix epoch, never less than 0.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis().min(u128::from(u64::MAX)) as u64)
        .unwrap_or(0)
}
