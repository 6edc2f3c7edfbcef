//! Stale git lock files in a shadow repository: finding them, deciding
//! whether anyone still owns them, and removing the ones nobody does.
//!
//! git marks work in progress with `<file>.lock` (the index, a ref, the
//! config) and deletes it when done. A git that is killed (`SIGKILL`, the
//! OOM killer, a checkpoint cut off by its timeout) leaves it behind, and
//! every later git refuses to start: without this module one killed
//! checkpoint disabled checkpoints for its directory for good.
//!
//! Liveness is decided while holding the shadow's `kaji.lock`, so no kaji
//! operation of any process is running on the shadow. A lock is *live*
//! when a process whose command line names this shadow
//! (`--git-dir=<shadow>`, as every git kaji runs does) is still running —
//! for instance a git left running by a kaji that was itself killed. On
//! Linux that is read from `/proc`; where `/proc` cannot be read, a lock
//! counts as live until it is older than [`stale_lock_age`].
//!
//! This module must never remove a lock file while a process that may own
//! it is running, and never touch anything but the fixed list of git lock
//! files in the shadow.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The lock files git may leave in a shadow: the index, the checkpoint
/// branch, `HEAD`, the config and the packed refs.
const GIT_LOCKS: &[&str] = &[
    "index.lock",
    "refs/heads/checkpoints.lock",
    "HEAD.lock",
    "config.lock",
    "packed-refs.lock",
];

/// The environment variable that overrides [`DEFAULT_STALE_LOCK_AGE`], in
/// milliseconds.
pub const STALE_LOCK_AGE_ENV: &str = "KAJI_CHECKPOINT_STALE_LOCK_MS";

/// Where liveness cannot be read from `/proc`: a lock file older than this
/// (10 minutes) is taken for stale.
pub const DEFAULT_STALE_LOCK_AGE: Duration = Duration::from_secs(600);

/// [`DEFAULT_STALE_LOCK_AGE`], or `$KAJI_CHECKPOINT_STALE_LOCK_MS`.
pub fn stale_lock_age() -> Duration {
    crate::env::duration_from_env(STALE_LOCK_AGE_ENV, DEFAULT_STALE_LOCK_AGE)
}

/// Why a lock file stays.
#[derive(Debug)]
pub(super) struct Busy {
    /// The lock file.
    pub lock: PathBuf,
    /// The process that may own it, when known.
    pub pid: Option<i32>,
}

/// What [`clear`] did.
#[derive(Debug, Default)]
pub(super) struct Cleared {
    /// The stale lock files it removed.
    pub removed: Vec<PathBuf>,
}

/// Removes the git lock files in `git_dir` that nobody owns. Fails with
/// the first lock that may still be owned; removal errors other than
/// "already gone" count as owned too (the lock stays, git will say so).
pub(super) fn clear(git_dir: &Path) -> Result<Cleared, Busy> {
    let mut cleared = Cleared::default();
    let mut owner: Option<Owner> = None;
    for name in GIT_LOCKS {
        let lock = git_dir.join(name);
        let Ok(meta) = std::fs::symlink_metadata(&lock) else {
            continue;
        };
        let who = *owner.get_or_insert_with(|| find_owner(git_dir));
        let stale = match who {
            Owner::Running(pid) => {
                return Err(Busy {
                    lock,
                    pid: Some(pid),
                });
            }
            Owner::Nobody => true,
            Owner::Unknown => meta
                .modified()
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age >= stale_lock_age()),
        };
        if !stale {
            return Err(Busy { lock, pid: None });
        }
        match std::fs::remove_file(&lock) {
            Ok(()) => {
                tracing::warn!(lock = %lock.display(), "removed a stale git lock file left by a killed git");
                cleared.removed.push(lock);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => return Err(Busy { lock, pid: None }),
        }
    }
    Ok(cleared)
}

#[derive(Debug, Clone, Copy)]
enum Owner {
    /// A process naming the shadow is running.
    Running(i32),
    /// No such process.
    Nobody,
    /// Cannot tell (no `/proc`).
    Unknown,
}

/// A running (not zombie) process whose arguments include
/// `--git-dir=<git_dir>`.
#[cfg(target_os = "linux")]
fn find_owner(git_dir: &Path) -> Owner {
    use std::os::unix::ffi::OsStrExt;
    let mut wanted = b"--git-dir=".to_vec();
    wanted.extend_from_slice(git_dir.as_os_str().as_bytes());
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Owner::Unknown;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.split(|&b| b == 0).any(|arg| arg == wanted) && !kaji_tasks::process::is_gone(pid)
        {
            return Owner::Running(pid);
        }
    }
    Owner::Nobody
}

#[cfg(not(target_os = "linux"))]
fn find_owner(_git_dir: &Path) -> Owner {
    Owner::Unknown
}
