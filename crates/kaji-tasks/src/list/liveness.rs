//! Liveness locks of the agents that work a task list from their own
//! processes (`kaji worker`): `<list dir>/owners/<name>.lock`, held with an
//! exclusive `flock` for as long as the agent lives. The OS drops the lock
//! when the process dies, however it dies (kill -9 included), so a free
//! lock whose file exists means its owner is gone and its unfinished tasks
//! can be released. Owners without a lock file (in-process agents, names
//! given by hand) are never released from here. This module never waits
//! for a lock: every attempt is non-blocking.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use super::TaskListError;
use super::model::ListTaskStatus;
use super::store::TaskListStore;

/// Held while an agent is alive; dropping it (or dying) frees it.
#[derive(Debug)]
pub struct LivenessLock {
    _file: File,
    name: String,
}

impl LivenessLock {
    /// The owner name it is held for.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Tries an exclusive, non-blocking `flock`; `Ok(false)` when it is held.
fn try_flock(file: &File) -> std::io::Result<bool> {
    // SAFETY: flock on a file descriptor we own.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

fn lock_name(name: &str) -> String {
    let mut out = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out.push_str(".lock");
    out
}

impl TaskListStore {
    fn liveness_path(&self, name: &str) -> PathBuf {
        self.dir().join("owners").join(lock_name(name))
    }

    /// Takes `name`'s liveness lock; `Ok(None)` when another live process
    /// holds it (an agent of that name is running).
    pub fn hold_liveness(&self, name: &str) -> Result<Option<LivenessLock>, TaskListError> {
        let path = self.liveness_path(name);
        let io = |source| TaskListError::Io {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io)?;
        if try_flock(&file).map_err(io)? {
            Ok(Some(LivenessLock {
                _file: file,
                name: name.to_string(),
            }))
        } else {
            Ok(None)
        }
    }

    /// Whether `name` had a liveness lock and no live process holds it.
    pub fn owner_departed(&self, name: &str) -> bool {
        let Ok(file) = File::options().write(true).open(self.liveness_path(name)) else {
            return false;
        };
        // Taking it proves it was free; it is freed again when `file` drops.
        matches!(try_flock(&file), Ok(true))
    }

    /// Releases the unfinished tasks of every owner that departed (see
    /// [`Self::owner_departed`]), noting why in their metadata. Returns the
    /// owners and the task ids released.
    pub fn release_departed(&self) -> Result<Vec<(String, Vec<u64>)>, TaskListError> {
        let snapshot = self.list()?;
        let mut owners: Vec<String> = snapshot
            .tasks
            .iter()
            .filter(|t| t.status != ListTaskStatus::Completed)
            .filter_map(|t| t.owner.clone())
            .collect();
        owners.sort();
        owners.dedup();
        let mut released = Vec::new();
        for owner in owners {
            if self.owner_departed(&owner) {
                let ids = self.release_with_note(
                    &owner,
                    "its owner's process ended without finishing it (liveness lock free)",
                )?;
                if !ids.is_empty() {
                    released.push((owner, ids));
                }
            }
        }
        Ok(released)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::list::NewListTask;

    #[test]
    fn a_departed_owner_has_its_tasks_released_and_a_live_one_keeps_them() {
        let home = tempfile::tempdir().expect("tempdir");
        let store = TaskListStore::open(home.path(), "team").expect("store");
        let a = store.create(NewListTask::new("a")).expect("create");
        let b = store.create(NewListTask::new("b")).expect("create");
        let c = store.create(NewListTask::new("c")).expect("create");
        let alive = store.hold_liveness("alive").expect("lock").expect("free");
        let gone = store.hold_liveness("gone").expect("lock").expect("free");
        assert!(store.hold_liveness("alive").expect("lock").is_none());
        store.claim(a.id, "alive").expect("claim");
        store.claim(b.id, "gone").expect("claim");
        store.claim(c.id, "by-hand").expect("claim");
        drop(gone);
        let released = store.release_departed().expect("release");
        assert_eq!(released, vec![("gone".to_string(), vec![b.id])]);
        let task = store.get(b.id).expect("get");
        assert_eq!(task.owner, None);
        assert_eq!(task.status, ListTaskStatus::Pending);
        assert_eq!(task.metadata["released"]["owner"], "gone");
        assert_eq!(
            store.get(a.id).expect("get").owner.as_deref(),
            Some("alive")
        );
        assert_eq!(
            store.get(c.id).expect("get").owner.as_deref(),
            Some("by-hand")
        );
        drop(alive);
    }
}
