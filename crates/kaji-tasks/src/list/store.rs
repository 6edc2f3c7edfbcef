//! [`TaskListStore`]: the operations on one list directory and their
//! locking and crash-safety protocol (described in `docs/task-list.md`).
//!
//! Locking rules, which keep the store deadlock-free: a thread holds at
//! most the list lock and one task lock, always taken in that order.
//! Field-only updates take just the task lock; everything that reads other
//! tasks to decide or writes more than one task (create, dependency
//! changes, delete, claim, release, reset) takes the list lock first.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::fsio;
use super::graph::BlocksGraph;
use super::lock::{self, LockGuard, LockObserver};
use super::model::{merge_metadata, normalize_owner, now_ms, validate_subject};
use super::{
    ClaimRefusal, CorruptFile, ListSnapshot, ListTask, ListTaskPatch, ListTaskStatus, NewListTask,
    TaskListError, UpdateOutcome,
};

/// Name of the list lock file.
pub(super) const LIST_LOCK: &str = ".lock";
/// Name of the file holding the highest id ever assigned.
pub(super) const HIGHWATERMARK: &str = ".highwatermark";
/// Name of the journal of an unfinished multi-task change.
pub(super) const JOURNAL: &str = ".journal.json";
/// Longest list id accepted (file systems allow 255 bytes per name).
const MAX_LIST_ID_LEN: usize = 128;

/// The list id that is used when none is given to `kaji tasks`.
pub const DEFAULT_LIST_ID: &str = "default";

/// Turns `raw` into a safe directory name: ASCII letters, digits, `_` and
/// `-` are kept, every other character becomes `-`. Surrounding white
/// space is ignored. Fails for an empty id or one longer than 128 bytes.
pub fn sanitize_list_id(raw: &str) -> Result<String, TaskListError> {
    let trimmed = raw.trim();
    let invalid = |problem: &str| TaskListError::InvalidListId {
        raw: raw.to_string(),
        problem: problem.to_string(),
    };
    if trimmed.is_empty() {
        return Err(invalid("the id is empty"));
    }
    let id: String = trimmed
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if id.len() > MAX_LIST_ID_LEN {
        return Err(invalid("the id is longer than 128 characters"));
    }
    Ok(id)
}

/// The directory holding every list: `$KAJI_HOME/tasks`.
pub fn lists_root(kaji_home: &Path) -> PathBuf {
    kaji_home.join("tasks")
}

/// One task list on the file system, shared with every other store,
/// thread and process that opens the same directory.
///
/// Cheap to clone; every operation goes to the files, so there is no cache
/// to go stale. All methods block on file I/O and locks: call them from
/// `spawn_blocking` in async code.
#[derive(Clone)]
pub struct TaskListStore {
    list_id: String,
    dir: PathBuf,
    /// Longest wait for a lock.
    pub(super) lock_timeout: Duration,
    /// Largest file read.
    pub(super) max_file_bytes: u64,
    /// Told about long lock waits.
    pub(super) observer: Option<LockObserver>,
}

impl std::fmt::Debug for TaskListStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskListStore")
            .field("list_id", &self.list_id)
            .field("dir", &self.dir)
            .field("lock_timeout", &self.lock_timeout)
            .field("max_file_bytes", &self.max_file_bytes)
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

/// The list lock, held until dropped ([`TaskListStore::lock`]).
#[derive(Debug)]
pub struct ListLock {
    _guard: LockGuard,
}

/// A multi-task change, written before it starts and removed when it is
/// done, so that a change cut short by a crash is finished by the next
/// holder of the list lock. Every operation is idempotent.
#[derive(Debug, Serialize, Deserialize)]
struct Journal {
    ops: Vec<JournalOp>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
enum JournalOp {
    /// Write this new task unless its file already exists. (Boxed: a task
    /// is large, the other operations are two numbers.)
    Create { task: Box<ListTask> },
    /// `blocker` blocks `blocked` (both sides).
    AddEdge { blocker: u64, blocked: u64 },
    /// `blocker` no longer blocks `blocked` (both sides).
    RemoveEdge { blocker: u64, blocked: u64 },
    /// Remove `id` from every task's edges, then delete its file.
    Delete { id: u64 },
    /// Delete every task file.
    Reset,
}

/// Edge changes for one task, gathered from journal operations.
#[derive(Debug, Default)]
struct EdgeDelta {
    add_blocks: BTreeSet<u64>,
    remove_blocks: BTreeSet<u64>,
    add_blocked_by: BTreeSet<u64>,
    remove_blocked_by: BTreeSet<u64>,
}

/// What a batch of journal operations does besides creating tasks.
#[derive(Debug, Default)]
struct JournalPlan {
    /// Edge changes per task.
    deltas: BTreeMap<u64, EdgeDelta>,
    /// Tasks to delete.
    deletes: Vec<u64>,
    /// Whether the list is reset.
    reset: bool,
}

impl JournalPlan {
    fn delta(&mut self, id: u64) -> &mut EdgeDelta {
        self.deltas.entry(id).or_default()
    }
}

impl EdgeDelta {
    fn apply(&self, task: &mut ListTask) {
        for id in &self.remove_blocks {
            task.blocks.remove(id);
        }
        for id in &self.remove_blocked_by {
            task.blocked_by.remove(id);
        }
        task.blocks.extend(&self.add_blocks);
        task.blocked_by.extend(&self.add_blocked_by);
    }
}

impl TaskListStore {
    /// Opens list `list_id` (sanitised with [`sanitize_list_id`]) under
    /// `$KAJI_HOME/tasks/`, creating its directory if needed, and finishes
    /// a multi-task change that a crashed process left unfinished.
    pub fn open(kaji_home: &Path, list_id: &str) -> Result<Self, TaskListError> {
        let store = Self::at(kaji_home, list_id)?;
        fs::create_dir_all(&store.dir).map_err(|e| TaskListError::io(&store.dir, e))?;
        store.recover()?;
        Ok(store)
    }

    /// Like [`open`](Self::open), but fails with
    /// [`TaskListError::ListNotFound`] instead of creating the list.
    pub fn open_existing(kaji_home: &Path, list_id: &str) -> Result<Self, TaskListError> {
        let store = Self::at(kaji_home, list_id)?;
        if !store.dir.is_dir() {
            return Err(TaskListError::ListNotFound {
                list_id: store.list_id,
                path: store.dir,
            });
        }
        store.recover()?;
        Ok(store)
    }

    /// The existing list `list_id`, neither created nor recovered: for
    /// [`repair`](Self::repair), which must work on a list whose journal or
    /// lock file is broken. Fails with [`TaskListError::ListNotFound`].
    pub fn locate(kaji_home: &Path, list_id: &str) -> Result<Self, TaskListError> {
        let store = Self::at(kaji_home, list_id)?;
        if !store.dir.is_dir() {
            return Err(TaskListError::ListNotFound {
                list_id: store.list_id,
                path: store.dir,
            });
        }
        Ok(store)
    }

    fn at(kaji_home: &Path, list_id: &str) -> Result<Self, TaskListError> {
        let list_id = sanitize_list_id(list_id)?;
        let dir = lists_root(kaji_home).join(&list_id);
        Ok(Self {
            list_id,
            dir,
            lock_timeout: lock::lock_timeout_from_env(),
            max_file_bytes: fsio::max_file_bytes_from_env(),
            observer: None,
        })
    }

    /// The same list with another lock timeout (the default comes from
    /// `KAJI_LOCK_TIMEOUT_MS`, else 30 s). A lock still busy after it
    /// fails with [`TaskListError::LockTimeout`].
    pub fn with_lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// The same list with another cap on the size of a file read (the
    /// default comes from `KAJI_TASK_FILE_MAX_BYTES`, else 4 MiB).
    pub fn with_max_file_bytes(mut self, cap: u64) -> Self {
        self.max_file_bytes = cap;
        self
    }

    /// The same list, telling `observer` once per wait when a lock has
    /// been busy for a while ([`LOCK_NOTICE_AFTER`](super::LOCK_NOTICE_AFTER)
    /// or half the timeout, whichever is sooner), e.g. to print
    /// "waiting for the list lock held by pid N …".
    pub fn with_lock_observer(mut self, observer: LockObserver) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The lock timeout in force.
    pub fn lock_timeout(&self) -> Duration {
        self.lock_timeout
    }

    /// The file size cap in force.
    pub fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }

    /// The sanitised list id.
    pub fn list_id(&self) -> &str {
        &self.list_id
    }

    /// The list's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes the list's directory if it holds nothing at all (a list
    /// opened but never written), and then `$KAJI_HOME/tasks` if that is
    /// left empty; `true` when the list's directory was removed. Only an
    /// empty directory is ever removed (`rmdir`), so no task can be lost;
    /// call it only for a list nobody else may be using (a session's own
    /// list, at its end), since `open` is what creates the directory.
    pub fn remove_if_empty(&self) -> bool {
        let removed = fs::remove_dir(&self.dir).is_ok();
        if removed && let Some(root) = self.dir.parent() {
            let _ = fs::remove_dir(root);
        }
        removed
    }

    /// The file of task `id` (which may not exist).
    pub fn task_path(&self, id: u64) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Finishes an interrupted multi-task change, if the journal says
    /// there is one. Called by [`open`](Self::open) and by every operation
    /// that takes the list lock.
    pub fn recover(&self) -> Result<(), TaskListError> {
        if self.dir.join(JOURNAL).exists() {
            drop(self.lock_list()?);
        }
        Ok(())
    }

    /// Holds the list lock until the returned guard is dropped: meanwhile
    /// no task is created, claimed, released or deleted and no dependency
    /// changes (field-only updates take only their task's lock and go on).
    /// Waits at most the lock timeout.
    pub fn lock(&self) -> Result<ListLock, TaskListError> {
        Ok(ListLock {
            _guard: self.lock_list()?,
        })
    }

    // ----- reading -------------------------------------------------------

    /// Task `id`.
    pub fn get(&self, id: u64) -> Result<ListTask, TaskListError> {
        let path = self.task_path(id);
        match fsio::read_optional(&path, self.max_file_bytes)? {
            Some(bytes) => fsio::parse_task(&path, id, &bytes),
            None => Err(self.not_found(id)),
        }
    }

    /// Every readable task, sorted by id, with the files that could not be
    /// read listed apart. Tasks changed while this runs may appear in their
    /// old or new state, never half-written.
    pub fn list(&self) -> Result<ListSnapshot, TaskListError> {
        let mut snapshot = ListSnapshot::default();
        let hwm_path = self.dir.join(HIGHWATERMARK);
        match fsio::read_optional(&hwm_path, self.max_file_bytes).and_then(|b| {
            b.map(|b| fsio::parse_highwatermark(&hwm_path, &b))
                .transpose()
        }) {
            Ok(hwm) => snapshot.highwatermark = hwm.unwrap_or(0),
            Err(e) => snapshot.errors.push(CorruptFile {
                id: None,
                path: hwm_path,
                problem: problem_of(&e),
            }),
        }
        for (id, path) in fsio::task_ids_in(&self.dir)? {
            // A file deleted since the directory was read is simply gone.
            let result = fsio::read_optional(&path, self.max_file_bytes)
                .and_then(|b| b.map(|b| fsio::parse_task(&path, id, &b)).transpose());
            match result {
                Ok(Some(task)) => snapshot.tasks.push(task),
                Ok(None) => {}
                Err(e) => snapshot.errors.push(CorruptFile {
                    id: Some(id),
                    path,
                    problem: problem_of(&e),
                }),
            }
        }
        Ok(snapshot)
    }

    /// The tasks that can be claimed now (pending, no owner, every blocker
    /// completed), by id.
    pub fn available(&self) -> Result<Vec<ListTask>, TaskListError> {
        let snapshot = self.list()?;
        Ok(snapshot.available().into_iter().cloned().collect())
    }

    /// The highest id ever assigned in this list (0 when none).
    pub fn highwatermark(&self) -> Result<u64, TaskListError> {
        let path = self.dir.join(HIGHWATERMARK);
        match fsio::read_optional(&path, self.max_file_bytes)? {
            Some(bytes) => fsio::parse_highwatermark(&path, &bytes),
            None => Ok(0),
        }
    }

    // ----- writing -------------------------------------------------------

    /// Creates a pending task with the next id and returns it. The id is
    /// recorded in `.highwatermark` before the task file is written, so it
    /// is never handed out again. Dependencies on missing tasks and cycles
    /// are refused.
    pub fn create(&self, new: NewListTask) -> Result<ListTask, TaskListError> {
        validate_subject(&new.subject)?;
        let _list = self.lock_list()?;
        let blocked_by: BTreeSet<u64> = new.blocked_by.iter().copied().collect();
        let blocks: BTreeSet<u64> = new.blocks.iter().copied().collect();

        let hwm = self.highwatermark()?;
        let max_file_id = fsio::task_ids_in(&self.dir)?
            .last()
            .map_or(0, |(id, _)| *id);
        let id = hwm.max(max_file_id).checked_add(1).ok_or_else(|| {
            TaskListError::InvalidInput("the list has used up every task id".to_string())
        })?;

        if !blocked_by.is_empty() || !blocks.is_empty() {
            let snapshot = self.list()?;
            for &peer in blocked_by.iter().chain(&blocks) {
                self.require_peer(&snapshot, id, peer)?;
            }
            let mut graph = graph_of(&snapshot);
            for &blocker in &blocked_by {
                graph.add(blocker, id);
            }
            for &blocked in &blocks {
                if let Some(cycle) = graph.cycle_if_added(id, blocked) {
                    return Err(TaskListError::Cycle { cycle });
                }
                graph.add(id, blocked);
            }
        }

        self.write_highwatermark(id)?;
        let now = now_ms();
        let mut metadata = serde_json::Map::new();
        merge_metadata(&mut metadata, &new.metadata);
        let task = ListTask {
            id,
            subject: new.subject,
            description: new.description,
            active_form: new.active_form,
            owner: None,
            status: ListTaskStatus::Pending,
            blocks,
            blocked_by,
            metadata,
            created_at: now,
            updated_at: now,
        };
        if task.blocks.is_empty() && task.blocked_by.is_empty() {
            self.write_task(&task)?;
        } else {
            let mut ops = vec![JournalOp::Create {
                task: Box::new(task.clone()),
            }];
            ops.extend(task.blocked_by.iter().map(|&b| JournalOp::AddEdge {
                blocker: b,
                blocked: id,
            }));
            ops.extend(task.blocks.iter().map(|&b| JournalOp::AddEdge {
                blocker: id,
                blocked: b,
            }));
            self.run_journaled(ops, None)?;
        }
        Ok(task)
    }

    /// Changes task `id`. Field changes take only the task's lock, so
    /// concurrent changes of different fields all survive. Dependency
    /// changes take the list lock, keep `blocks`/`blockedBy` symmetric, and
    /// refuse missing tasks and cycles. If the update completes the task,
    /// the outcome lists the tasks it unblocked.
    pub fn update(&self, id: u64, patch: ListTaskPatch) -> Result<UpdateOutcome, TaskListError> {
        patch.validate()?;
        let (before, task) = if patch.changes_edges() {
            self.update_edges(id, &patch)?
        } else {
            let _task_lock = self.lock_existing_task(id)?;
            let mut task = self.get(id)?;
            let before = task.status;
            if !patch.is_empty() {
                patch.apply_fields(&mut task);
                task.updated_at = now_ms().max(task.updated_at);
                self.write_task(&task)?;
            }
            (before, task)
        };
        let unblocked =
            if before != ListTaskStatus::Completed && task.status == ListTaskStatus::Completed {
                self.unblocked_by(&task)
            } else {
                Vec::new()
            };
        Ok(UpdateOutcome { task, unblocked })
    }

    fn update_edges(
        &self,
        id: u64,
        patch: &ListTaskPatch,
    ) -> Result<(ListTaskStatus, ListTask), TaskListError> {
        let _list = self.lock_list()?;
        let snapshot = self.list()?;
        let current = match snapshot.get(id) {
            Some(task) => task,
            None => return Err(self.unreadable(&snapshot, id)),
        };
        let before = current.status;
        let mut graph = graph_of(&snapshot);
        let mut ops = Vec::new();
        for &blocked in &patch.remove_blocks {
            graph.remove(id, blocked);
            ops.push(JournalOp::RemoveEdge {
                blocker: id,
                blocked,
            });
        }
        for &blocker in &patch.remove_blocked_by {
            graph.remove(blocker, id);
            ops.push(JournalOp::RemoveEdge {
                blocker,
                blocked: id,
            });
        }
        let adds = patch
            .add_blocks
            .iter()
            .map(|&b| (id, b))
            .chain(patch.add_blocked_by.iter().map(|&b| (b, id)));
        for (blocker, blocked) in adds {
            let peer = if blocker == id { blocked } else { blocker };
            if peer != id {
                self.require_peer(&snapshot, id, peer)?;
            }
            if let Some(cycle) = graph.cycle_if_added(blocker, blocked) {
                return Err(TaskListError::Cycle { cycle });
            }
            graph.add(blocker, blocked);
            ops.push(JournalOp::AddEdge { blocker, blocked });
        }
        let task = self.run_journaled(ops, Some((id, patch)))?;
        let task = task.ok_or_else(|| self.not_found(id))?;
        Ok((before, task))
    }

    /// Deletes task `id` and removes it from every other task's
    /// dependencies; returns the task as it was. Its id is never reused. A
    /// task whose file cannot be read is not deleted (remove the file by
    /// hand after looking at it).
    pub fn delete(&self, id: u64) -> Result<ListTask, TaskListError> {
        let _list = self.lock_list()?;
        let task = self.get(id)?;
        self.run_journaled(vec![JournalOp::Delete { id }], None)?;
        Ok(task)
    }

    /// Deletes every task of the list, keeping `.highwatermark` so that no
    /// id is reused; returns the ids removed (readable or not).
    pub fn reset(&self) -> Result<Vec<u64>, TaskListError> {
        let _list = self.lock_list()?;
        let ids: Vec<u64> = fsio::task_ids_in(&self.dir)?
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        self.run_journaled(vec![JournalOp::Reset], None)?;
        Ok(ids)
    }

    /// Gives task `id` to `owner` and marks it `in_progress`, only if it is
    /// available (pending, no owner, every blocker completed). Two
    /// claimants never both succeed. Refusals are
    /// [`TaskListError::ClaimRefused`] with the reason.
    pub fn claim(&self, id: u64, owner: &str) -> Result<ListTask, TaskListError> {
        let owner = require_owner(owner)?;
        let _list = self.lock_list()?;
        if !self.task_path(id).exists() {
            return Err(refused(id, ClaimRefusal::NotFound));
        }
        let _task_lock = self.lock_task(id)?;
        let task = match self.get(id) {
            Ok(task) => task,
            Err(TaskListError::TaskNotFound { .. }) => {
                return Err(refused(id, ClaimRefusal::NotFound));
            }
            Err(e) => return Err(e),
        };
        self.claim_locked(task, &owner)
    }

    /// Claims the lowest-id available task for `owner`; `None` when no task
    /// is available.
    pub fn claim_next(&self, owner: &str) -> Result<Option<ListTask>, TaskListError> {
        let owner = require_owner(owner)?;
        let _list = self.lock_list()?;
        let snapshot = self.list()?;
        for candidate in snapshot.available() {
            let _task_lock = self.lock_task(candidate.id)?;
            // Field updates do not take the list lock: look again.
            let task = match self.get(candidate.id) {
                Ok(task) => task,
                Err(_) => continue,
            };
            match self.claim_locked(task, &owner) {
                Ok(task) => return Ok(Some(task)),
                Err(TaskListError::ClaimRefused { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Checks availability of `task` (whose lock the caller holds, under
    /// the list lock) and claims it.
    fn claim_locked(&self, mut task: ListTask, owner: &str) -> Result<ListTask, TaskListError> {
        let id = task.id;
        if task.status == ListTaskStatus::Completed {
            return Err(refused(id, ClaimRefusal::AlreadyCompleted));
        }
        if task.owner.is_some() || task.status == ListTaskStatus::InProgress {
            return Err(refused(
                id,
                ClaimRefusal::AlreadyClaimed { owner: task.owner },
            ));
        }
        let open: Vec<u64> = task
            .blocked_by
            .iter()
            .copied()
            .filter(|&b| match self.get(b) {
                Ok(blocker) => blocker.status != ListTaskStatus::Completed,
                Err(TaskListError::TaskNotFound { .. }) => false,
                Err(_) => true,
            })
            .collect();
        if !open.is_empty() {
            return Err(refused(id, ClaimRefusal::Blocked { by: open }));
        }
        task.owner = Some(owner.to_string());
        task.status = ListTaskStatus::InProgress;
        task.updated_at = now_ms().max(task.updated_at);
        self.write_task(&task)?;
        Ok(task)
    }

    /// Clears the owner of every unfinished task held by `owner` and sets
    /// it back to `pending` (for an agent that stops). Completed tasks keep
    /// their owner. Returns the ids released.
    pub fn release(&self, owner: &str) -> Result<Vec<u64>, TaskListError> {
        self.release_with_note(owner, "its owner released it")
    }

    /// [`Self::release`], recording in each released task's metadata, under
    /// `released`, who held it, when, and `why` (e.g. "the teammate
    /// crashed").
    pub fn release_with_note(&self, owner: &str, why: &str) -> Result<Vec<u64>, TaskListError> {
        let owner = require_owner(owner)?;
        let _list = self.lock_list()?;
        let snapshot = self.list()?;
        let mut released = Vec::new();
        for candidate in &snapshot.tasks {
            if candidate.owner.as_deref() != Some(owner.as_str()) {
                continue;
            }
            let _task_lock = self.lock_task(candidate.id)?;
            let mut task = match self.get(candidate.id) {
                Ok(task) => task,
                Err(_) => continue,
            };
            if task.owner.as_deref() != Some(owner.as_str())
                || task.status == ListTaskStatus::Completed
            {
                continue;
            }
            task.owner = None;
            task.status = ListTaskStatus::Pending;
            task.updated_at = now_ms().max(task.updated_at);
            task.metadata.insert(
                "released".to_string(),
                serde_json::json!({"owner": owner, "at": task.updated_at, "why": why}),
            );
            self.replace_task(&task)?;
            released.push(task.id);
        }
        if !released.is_empty() {
            fsio::sync_dir(&self.dir)?;
        }
        Ok(released)
    }

    /// Writes the tasks of an exported list (see
    /// [`normalize_import`](super::backend::normalize_import)) into this
    /// list, which must be empty; the high-water mark becomes at least the
    /// export's. Returns how many tasks were written.
    pub fn import(&self, snapshot: &ListSnapshot) -> Result<usize, TaskListError> {
        let _list = self.lock_list()?;
        if !fsio::task_ids_in(&self.dir)?.is_empty() {
            return Err(TaskListError::InvalidInput(format!(
                "list {:?} ({}) is not empty; import only into an empty list",
                self.list_id,
                self.dir.display()
            )));
        }
        let hwm = self.highwatermark()?.max(snapshot.highwatermark);
        self.write_highwatermark(hwm)?;
        for task in &snapshot.tasks {
            self.write_task(task)?;
        }
        Ok(snapshot.tasks.len())
    }

    // ----- internals -----------------------------------------------------

    fn not_found(&self, id: u64) -> TaskListError {
        TaskListError::TaskNotFound {
            list_id: self.list_id.clone(),
            id,
            path: self.task_path(id),
        }
    }

    /// The error for a task absent from `snapshot`: corrupt or missing.
    fn unreadable(&self, snapshot: &ListSnapshot, id: u64) -> TaskListError {
        match snapshot.errors.iter().find(|e| e.id == Some(id)) {
            Some(e) => TaskListError::Corrupt {
                path: e.path.clone(),
                problem: e.problem.clone(),
            },
            None => self.not_found(id),
        }
    }

    /// Checks that `peer`, to be linked with task `from`, is readable.
    fn require_peer(
        &self,
        snapshot: &ListSnapshot,
        from: u64,
        peer: u64,
    ) -> Result<(), TaskListError> {
        if snapshot.get(peer).is_some() {
            return Ok(());
        }
        match self.unreadable(snapshot, peer) {
            TaskListError::TaskNotFound { path, .. } => Err(TaskListError::EdgeToMissingTask {
                from,
                to: peer,
                path,
            }),
            other => Err(other),
        }
    }

    /// Takes the list lock and finishes any journaled change first.
    pub(super) fn lock_list(&self) -> Result<LockGuard, TaskListError> {
        let guard = lock::lock_exclusive(
            &self.dir.join(LIST_LOCK),
            "the list lock",
            self.lock_timeout,
            self.observer.as_ref(),
        )?;
        let journal_path = self.dir.join(JOURNAL);
        if let Some(bytes) = fsio::read_optional(&journal_path, self.max_file_bytes)? {
            let journal: Journal = serde_json::from_slice(&bytes).map_err(|e| TaskListError::Corrupt {
                path: journal_path.clone(),
                problem: format!(
                    "unfinished change that cannot be read ({e}); check the dependencies of the \
                     tasks by hand, then delete this file"
                ),
            })?;
            self.apply(&journal.ops, None)?;
            // Not synced: should a power loss bring the journal back, it is
            // replayed once more, which changes nothing (see `JournalOp`).
            fsio::remove_if_exists(&journal_path)?;
        }
        Ok(guard)
    }

    /// Takes the lock of task `id` (creating its lock file if needed).
    fn lock_task(&self, id: u64) -> Result<LockGuard, TaskListError> {
        lock::lock_exclusive(
            &self.task_lock_path(id),
            &format!("the lock of task #{id}"),
            self.lock_timeout,
            self.observer.as_ref(),
        )
    }

    fn task_lock_path(&self, id: u64) -> PathBuf {
        self.dir.join(format!("{id}.lock"))
    }

    /// Takes the lock of task `id`, failing without creating a lock file
    /// when the task does not exist.
    fn lock_existing_task(&self, id: u64) -> Result<LockGuard, TaskListError> {
        if !self.task_path(id).exists() {
            return Err(self.not_found(id));
        }
        self.lock_task(id)
    }

    fn write_task(&self, task: &ListTask) -> Result<(), TaskListError> {
        fsio::write_atomic(
            &self.dir,
            &self.task_path(task.id),
            &fsio::encode_task(task),
        )
    }

    /// Writes a task without syncing the directory (see
    /// [`fsio::replace_file`]); the caller syncs it afterwards.
    fn replace_task(&self, task: &ListTask) -> Result<(), TaskListError> {
        fsio::replace_file(
            &self.dir,
            &self.task_path(task.id),
            &fsio::encode_task(task),
        )
    }

    /// Replaces `.highwatermark`. The directory is synced by the write of
    /// the task or journal that always follows; should a power loss undo
    /// this rename but keep the task file, the next create still starts
    /// above the highest file id.
    pub(super) fn write_highwatermark(&self, id: u64) -> Result<(), TaskListError> {
        fsio::replace_file(
            &self.dir,
            &self.dir.join(HIGHWATERMARK),
            format!("{id}\n").as_bytes(),
        )
    }

    /// Writes the journal (when more than one task is touched), applies
    /// `ops` plus the field changes of `target`, and removes the journal.
    /// The caller holds the list lock. Returns the target as written.
    fn run_journaled(
        &self,
        ops: Vec<JournalOp>,
        target: Option<(u64, &ListTaskPatch)>,
    ) -> Result<Option<ListTask>, TaskListError> {
        let journal_path = self.dir.join(JOURNAL);
        let journaled = !ops.is_empty();
        if journaled {
            let journal = Journal { ops };
            let bytes = serde_json::to_vec(&journal).unwrap_or_default();
            fsio::write_atomic(&self.dir, &journal_path, &bytes)?;
            let target = self.apply(&journal.ops, target)?;
            fsio::remove_if_exists(&journal_path)?;
            Ok(target)
        } else {
            self.apply(&[], target)
        }
    }

    /// Carries out journal operations (idempotently) and the field changes
    /// of `target`, one task lock at a time. Tasks that vanished or became
    /// unreadable are skipped, except the target.
    fn apply(
        &self,
        ops: &[JournalOp],
        target: Option<(u64, &ListTaskPatch)>,
    ) -> Result<Option<ListTask>, TaskListError> {
        let mut plan = self.plan(ops)?;
        if let Some((id, _)) = target {
            plan.deltas.entry(id).or_default();
        }
        let mut written_target = None;
        for (&id, delta) in &plan.deltas {
            let patch = target.filter(|(t, _)| *t == id).map(|(_, p)| p);
            if let Some(task) = self.apply_one(id, delta, patch)?
                && patch.is_some()
            {
                written_target = Some(task);
            }
        }
        if !plan.deletes.is_empty() {
            self.apply_deletes(&plan.deletes)?;
        }
        if plan.reset {
            self.apply_reset()?;
        }
        // One directory sync makes every rename and removal above durable.
        fsio::sync_dir(&self.dir)?;
        Ok(written_target)
    }

    /// Writes the tasks `ops` create (unless already written) and gathers
    /// the rest: edge changes per task, deletions, a reset.
    fn plan(&self, ops: &[JournalOp]) -> Result<JournalPlan, TaskListError> {
        let mut plan = JournalPlan::default();
        for op in ops {
            match op {
                JournalOp::Create { task } => {
                    if !self.task_path(task.id).exists() {
                        self.replace_task(task)?;
                    }
                }
                JournalOp::AddEdge { blocker, blocked } => {
                    plan.delta(*blocker).add_blocks.insert(*blocked);
                    plan.delta(*blocked).add_blocked_by.insert(*blocker);
                }
                JournalOp::RemoveEdge { blocker, blocked } => {
                    plan.delta(*blocker).remove_blocks.insert(*blocked);
                    plan.delta(*blocked).remove_blocked_by.insert(*blocker);
                }
                JournalOp::Delete { id } => plan.deletes.push(*id),
                JournalOp::Reset => plan.reset = true,
            }
        }
        Ok(plan)
    }

    /// Applies `delta` and, for the target, `patch` to task `id` under its
    /// lock, writing it when it changed; the task as it stands after.
    /// A task that vanished or became unreadable is skipped (`None`),
    /// except the target, whose failure is returned.
    fn apply_one(
        &self,
        id: u64,
        delta: &EdgeDelta,
        patch: Option<&ListTaskPatch>,
    ) -> Result<Option<ListTask>, TaskListError> {
        let _task_lock = match self.lock_existing_task(id) {
            Ok(lock) => lock,
            Err(e) if patch.is_some() => return Err(e),
            Err(_) => return Ok(None),
        };
        let mut task = match self.get(id) {
            Ok(task) => task,
            Err(e) if patch.is_some() => return Err(e),
            Err(_) => return Ok(None),
        };
        let before = task.clone();
        delta.apply(&mut task);
        if let Some(patch) = patch {
            patch.apply_fields(&mut task);
        }
        if task != before || patch.is_some_and(|p| !p.is_empty()) {
            task.updated_at = now_ms().max(task.updated_at);
            self.replace_task(&task)?;
        }
        Ok(Some(task))
    }

    /// Removes `ids` from every task's edges, then deletes their files.
    fn apply_deletes(&self, ids: &[u64]) -> Result<(), TaskListError> {
        let gone: BTreeSet<u64> = ids.iter().copied().collect();
        for (id, _) in fsio::task_ids_in(&self.dir)? {
            if gone.contains(&id) {
                continue;
            }
            let refers = |t: &ListTask| {
                t.blocks
                    .iter()
                    .chain(&t.blocked_by)
                    .any(|x| gone.contains(x))
            };
            if !self.get(id).is_ok_and(|t| refers(&t)) {
                continue;
            }
            let Ok(_task_lock) = self.lock_existing_task(id) else {
                continue;
            };
            let Ok(mut task) = self.get(id) else { continue };
            if refers(&task) {
                task.blocks.retain(|x| !gone.contains(x));
                task.blocked_by.retain(|x| !gone.contains(x));
                task.updated_at = now_ms().max(task.updated_at);
                self.replace_task(&task)?;
            }
        }
        for &id in ids {
            self.remove_task_files(id)?;
        }
        Ok(())
    }

    /// Deletes every task file and leftover temporary file; makes sure
    /// `.highwatermark` covers every id first.
    fn apply_reset(&self) -> Result<(), TaskListError> {
        let ids = fsio::task_ids_in(&self.dir)?;
        if let Some((max, _)) = ids.last()
            && self.highwatermark().unwrap_or(0) < *max
        {
            self.write_highwatermark(*max)?;
            // Durable before any file goes, so no id can come back.
            fsio::sync_dir(&self.dir)?;
        }
        for (id, _) in ids {
            self.remove_task_files(id)?;
        }
        // Every writer of an existing task holds its lock, which the loop
        // above took in turn, and creators hold the list lock: no temporary
        // file still belongs to a live writer.
        let entries = fs::read_dir(&self.dir).map_err(|e| TaskListError::io(&self.dir, e))?;
        for entry in entries.flatten() {
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with(fsio::TEMP_PREFIX)
            {
                fsio::remove_if_exists(&entry.path())?;
            }
        }
        Ok(())
    }

    /// Deletes `<id>.json` and its lock file under the task lock. The lock
    /// file can go because the id is never used again: a process still
    /// waiting on the old lock finds no task once it gets it.
    fn remove_task_files(&self, id: u64) -> Result<(), TaskListError> {
        let lock_path = self.task_lock_path(id);
        let _task_lock = self.lock_task(id)?;
        fsio::remove_if_exists(&self.task_path(id))?;
        fsio::remove_if_exists(&lock_path)
    }

    /// Tasks blocked by `task` whose blockers are now all completed.
    fn unblocked_by(&self, task: &ListTask) -> Vec<u64> {
        task.blocks
            .iter()
            .copied()
            .filter(|&b| {
                let Ok(blocked) = self.get(b) else {
                    return false;
                };
                blocked.status != ListTaskStatus::Completed
                    && blocked.blocked_by.iter().all(|&x| {
                        x == task.id
                            || match self.get(x) {
                                Ok(t) => t.status == ListTaskStatus::Completed,
                                Err(TaskListError::TaskNotFound { .. }) => true,
                                Err(_) => false,
                            }
                    })
            })
            .collect()
    }
}

/// The `blocks` graph of a snapshot, from both sides of every edge.
fn graph_of(snapshot: &ListSnapshot) -> BlocksGraph {
    let mut graph = BlocksGraph::default();
    for task in &snapshot.tasks {
        for &b in &task.blocks {
            graph.add(task.id, b);
        }
        for &b in &task.blocked_by {
            graph.add(b, task.id);
        }
    }
    graph
}

fn refused(id: u64, reason: ClaimRefusal) -> TaskListError {
    TaskListError::ClaimRefused { id, reason }
}

fn require_owner(owner: &str) -> Result<String, TaskListError> {
    normalize_owner(Some(owner))
        .ok_or_else(|| TaskListError::InvalidInput("the owner name must not be empty".to_string()))
}

/// The problem text of an error about one file, without the path.
pub(super) fn problem_of(e: &TaskListError) -> String {
    match e {
        TaskListError::Corrupt { problem, .. } => problem.clone(),
        TaskListError::Io { source, .. } => source.to_string(),
        TaskListError::NotRegularFile { path, .. } | TaskListError::TooLarge { path, .. } => {
            let text = e.to_string();
            let prefix = format!("{}: ", path.display());
            text.strip_prefix(&prefix)
                .map_or(text.clone(), str::to_string)
        }
        other => other.to_string(),
    }
}
