//! [`TaskListStore::repair`]: puts a list's bookkeeping files back in
//! order after crashes, hand edits or mischief — `kaji tasks repair`.
//!
//! It rebuilds a missing, unreadable or too low `.highwatermark` (never
//! lower than any id seen: task files, task lock files, and the old mark
//! when it is readable), clears the holder records of locks whose holder
//! died, removes lock files that are not regular files (nobody can hold
//! those), and reports every task file it cannot read.
//!
//! It must never delete or rewrite a task file, nor lower the high-water
//! mark: a task it cannot read is reported for a person to look at.

use std::fs;
use std::path::{Path, PathBuf};

use super::fsio;
use super::lock::{self, LockHolder, LockState};
use super::store::{HIGHWATERMARK, JOURNAL, LIST_LOCK, problem_of};
use super::{CorruptFile, TaskListError, TaskListStore};

/// What [`TaskListStore::repair`] found and did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RepairReport {
    /// The mark as it was, when it was readable (`None`: missing or bad).
    pub highwatermark_before: Option<u64>,
    /// Why the old mark could not be used, if it could not.
    pub highwatermark_problem: Option<String>,
    /// The mark afterwards.
    pub highwatermark_after: u64,
    /// Whether `.highwatermark` was rewritten.
    pub highwatermark_rewritten: bool,
    /// The highest id named by a task file or task lock file.
    pub max_seen_id: u64,
    /// Lock files whose holder had died; their records were cleared.
    pub stale_locks_cleared: Vec<LockNote>,
    /// Locks held right now (by a live process, or by one that inherited
    /// the lock from a dead holder).
    pub held_locks: Vec<LockNote>,
    /// Files removed because they were not regular files.
    pub removed: Vec<CorruptFile>,
    /// Files left as they are that cannot be read (a person must look).
    pub bad_files: Vec<CorruptFile>,
}

/// One lock file and the holder it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockNote {
    /// The lock file.
    pub path: PathBuf,
    /// The holder its record names, if readable.
    pub holder: Option<LockHolder>,
    /// Whether that holder still runs.
    pub holder_alive: bool,
}

impl RepairReport {
    /// Whether the list is sound: every file readable, and no lock held on
    /// behalf of a process that is gone.
    pub fn is_sound(&self) -> bool {
        self.bad_files.is_empty() && self.held_locks.iter().all(|l| l.holder_alive)
    }
}

impl TaskListStore {
    /// Repairs the list's bookkeeping files; see the module docs and
    /// `docs/task-list.md`. Takes the list lock (with the usual timeout)
    /// for the high-water mark; locks of tasks are only tried, never
    /// waited for.
    pub fn repair(&self) -> Result<RepairReport, TaskListError> {
        let mut report = RepairReport::default();
        for path in self.lock_files()? {
            self.repair_lock_file(&path, &mut report)?;
        }
        let _guard = self.lock_for_repair(&mut report)?;
        self.repair_highwatermark(&mut report)?;
        Ok(report)
    }

    /// `.lock` and every `<id>.lock`, with the highest id among the latter
    /// noted by [`Self::repair_highwatermark`] through the file names.
    fn lock_files(&self) -> Result<Vec<PathBuf>, TaskListError> {
        let entries = fs::read_dir(self.dir()).map_err(|e| TaskListError::io(self.dir(), e))?;
        let mut paths = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| TaskListError::io(self.dir(), e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name == LIST_LOCK || lock_id_of(name).is_some() {
                paths.push(entry.path());
            }
        }
        paths.sort();
        Ok(paths)
    }

    fn repair_lock_file(
        &self,
        path: &Path,
        report: &mut RepairReport,
    ) -> Result<(), TaskListError> {
        match lock::inspect(path, true) {
            Ok(LockState::Free) => {}
            Ok(LockState::Stale(holder)) => report.stale_locks_cleared.push(LockNote {
                path: path.to_path_buf(),
                holder: Some(holder),
                holder_alive: false,
            }),
            Ok(LockState::Held(holder)) => {
                let holder_alive = holder.as_ref().is_some_and(LockHolder::is_alive);
                report.held_locks.push(LockNote {
                    path: path.to_path_buf(),
                    holder,
                    holder_alive,
                });
            }
            Err(e @ TaskListError::NotRegularFile { .. }) => {
                // Nobody can hold a lock on it: every opener refuses it.
                remove_entry(path)?;
                report.removed.push(CorruptFile {
                    id: None,
                    path: path.to_path_buf(),
                    problem: problem_of(&e),
                });
            }
            Err(TaskListError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// The list lock; a journal that cannot be replayed is reported, and
    /// the lock taken without it.
    fn lock_for_repair(&self, report: &mut RepairReport) -> Result<lock::LockGuard, TaskListError> {
        let journal = self.dir().join(JOURNAL);
        match self.lock_list() {
            Ok(guard) => Ok(guard),
            Err(e) if is_file_problem(&e, &journal) => {
                report.bad_files.push(CorruptFile {
                    id: None,
                    path: journal,
                    problem: problem_of(&e),
                });
                lock::lock_exclusive(
                    &self.dir().join(LIST_LOCK),
                    "the list lock",
                    self.lock_timeout,
                    self.observer.as_ref(),
                )
            }
            Err(e) => Err(e),
        }
    }

    /// Checks every task file and rebuilds `.highwatermark` if needed.
    /// The caller holds the list lock.
    fn repair_highwatermark(&self, report: &mut RepairReport) -> Result<(), TaskListError> {
        let mut max_seen = 0;
        for (id, _) in fsio::task_ids_in(self.dir())? {
            max_seen = max_seen.max(id);
            match self.get(id) {
                Ok(_) | Err(TaskListError::TaskNotFound { .. }) => {}
                Err(e) => report.bad_files.push(CorruptFile {
                    id: Some(id),
                    path: self.task_path(id),
                    problem: problem_of(&e),
                }),
            }
        }
        for path in self.lock_files()? {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if let Some(id) = lock_id_of(name) {
                max_seen = max_seen.max(id);
            }
        }
        report.max_seen_id = max_seen;
        let path = self.dir().join(HIGHWATERMARK);
        let old = fsio::read_optional(&path, self.max_file_bytes)
            .and_then(|b| b.map(|b| fsio::parse_highwatermark(&path, &b)).transpose());
        let (before, broken) = match old {
            Ok(before) => (before, false),
            Err(e) => {
                report.highwatermark_problem = Some(problem_of(&e));
                if path.is_dir() {
                    remove_entry(&path)?;
                }
                (None, true)
            }
        };
        report.highwatermark_before = before;
        let after = before.unwrap_or(0).max(max_seen);
        report.highwatermark_after = after;
        if broken || before.is_some_and(|b| b < after) || (before.is_none() && after > 0) {
            self.write_highwatermark(after)?;
            fsio::sync_dir(self.dir())?;
            report.highwatermark_rewritten = true;
        }
        Ok(())
    }
}

/// Whether `e` is about the file `path` being unreadable.
fn is_file_problem(e: &TaskListError, path: &Path) -> bool {
    match e {
        TaskListError::Corrupt { path: p, .. }
        | TaskListError::NotRegularFile { path: p, .. }
        | TaskListError::TooLarge { path: p, .. } => p == path,
        _ => false,
    }
}

/// Removes a file or an empty directory.
/// Removes a file that is not a regular one (a FIFO, a socket, a symbolic
/// link — never what it points to); an empty directory is removed, one
/// with entries is moved aside to `<name>.not-a-lock-<pid>` so nothing in
/// it is lost.
fn remove_entry(path: &Path) -> Result<(), TaskListError> {
    let is_dir = fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
    let result = if is_dir {
        fs::remove_dir(path).or_else(|e| {
            if e.kind() == std::io::ErrorKind::DirectoryNotEmpty {
                let mut aside = path.as_os_str().to_os_string();
                aside.push(format!(".not-a-lock-{}", std::process::id()));
                fs::rename(path, aside)
            } else {
                Err(e)
            }
        })
    } else {
        fs::remove_file(path)
    };
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(TaskListError::io(path, e)),
    }
}

/// The task id a lock file name `<id>.lock` names.
fn lock_id_of(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".lock")?;
    fsio::task_id_of(&format!("{digits}.json"))
}
