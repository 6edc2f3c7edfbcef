//! The list's OS file locks with a bounded wait, and the holder record
//! each lock file carries while it is held.
//!
//! A lock is an exclusive `flock` on a regular file (`.lock` for the list,
//! `<id>.lock` for a task). While a process holds it, the file holds one
//! JSON line naming that process (`{"pid":…,"command":…,"sinceMs":…}`), so
//! that a process that waits too long can say who is in its way; the record
//! is cleared just before the lock is released. A record left in a file
//! whose lock nobody holds was written by a process that died: it is stale
//! and `kaji tasks repair` clears it.
//!
//! This module must never wait for a lock without a bound, open a lock
//! file in a way that can block (FIFOs, devices), or trust a record it
//! reads (it is bounded, and only used for messages).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::TaskListError;
use super::fsio::check_regular;

/// How long a lock is waited for unless configured otherwise: 30 s.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(30);
/// The environment variable that overrides [`DEFAULT_LOCK_TIMEOUT`]
/// (milliseconds).
pub const LOCK_TIMEOUT_ENV: &str = "KAJI_LOCK_TIMEOUT_MS";
/// The longest wait before the wait is reported (see [`LockWait`]); a wait
/// is also reported once half of the timeout has passed, if that is sooner.
pub const LOCK_NOTICE_AFTER: Duration = Duration::from_secs(1);
/// The most bytes read from a lock file's holder record.
const MAX_RECORD_BYTES: u64 = 4096;
/// The longest pause between two attempts to take a busy lock.
const MAX_BACKOFF: Duration = Duration::from_millis(50);

/// The lock timeout from `KAJI_LOCK_TIMEOUT_MS`, else the default. A value
/// that is not a whole number of milliseconds is ignored.
pub fn lock_timeout_from_env() -> Duration {
    std::env::var(LOCK_TIMEOUT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(DEFAULT_LOCK_TIMEOUT, Duration::from_millis)
}

/// Who holds (or held) a lock, as its lock file says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockHolder {
    /// The holder's pid.
    pub pid: u32,
    /// Its command line (cut to 200 characters).
    pub command: String,
    /// When it took the lock, milliseconds since the Unix epoch.
    #[serde(default)]
    pub since_ms: u64,
}

impl LockHolder {
    /// Whether the process named by the record still runs.
    pub fn is_alive(&self) -> bool {
        let Ok(pid) = libc::pid_t::try_from(self.pid) else {
            return false;
        };
        pid > 0 && !crate::process::is_gone(pid)
    }
}

/// A wait for a busy lock that has lasted a while, given to the store's
/// wait observer once per wait (see `TaskListStore::with_lock_observer`).
#[derive(Debug, Clone)]
pub struct LockWait {
    /// What the lock guards, e.g. `the list lock` or `the lock of task #7`.
    pub what: String,
    /// The lock file.
    pub path: PathBuf,
    /// The holder, if its record could be read.
    pub holder: Option<LockHolder>,
    /// How long the wait will last at most.
    pub timeout: Duration,
}

impl std::fmt::Display for LockWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "waiting for {} held by {}",
            self.what,
            holder_text(&self.holder)
        )?;
        write!(
            f,
            " … (gives up after {} ms; {} sets the limit)",
            self.timeout.as_millis(),
            LOCK_TIMEOUT_ENV
        )
    }
}

/// `pid N (command)` or `an unknown process`.
pub(crate) fn holder_text(holder: &Option<LockHolder>) -> String {
    match holder {
        Some(h) => format!("pid {} ({})", h.pid, h.command),
        None => "an unknown process".to_string(),
    }
}

/// Called when a wait for a lock has lasted a while.
pub type LockObserver = Arc<dyn Fn(&LockWait) + Send + Sync>;

/// An exclusive OS lock on a lock file, held until dropped. Closing the
/// file releases the lock, and so does the death of the process.
#[derive(Debug)]
pub(crate) struct LockGuard {
    file: File,
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        // Clear the holder record while the lock is still held; a failure
        // only leaves a record that repair calls stale.
        let _ = self.file.set_len(0);
    }
}

/// Opens (creating it if needed) a lock file without blocking on its type,
/// and refuses anything but a regular file.
pub(crate) fn open_lock_file(path: &Path) -> Result<File, TaskListError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| open_error(path, e))?;
    check_regular(path, &file, None)?;
    Ok(file)
}

/// Maps `ELOOP` from `O_NOFOLLOW` to a clear "symbolic link" refusal, and
/// any other failure to open something that is not a regular file (a
/// directory: `EISDIR`; a socket: `ENXIO`) to a refusal naming what it is.
fn open_error(path: &Path, e: io::Error) -> TaskListError {
    if e.raw_os_error() == Some(libc::ELOOP) {
        return TaskListError::NotRegularFile {
            path: path.to_path_buf(),
            kind: "a symbolic link".to_string(),
        };
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_file() => TaskListError::NotRegularFile {
            path: path.to_path_buf(),
            kind: super::fsio::file_kind(&meta).to_string(),
        },
        _ => TaskListError::io(path, e),
    }
}

/// Takes the exclusive lock on `path`, waiting at most `timeout`; after a
/// short while the wait is reported to `observer`, once.
///
/// An uncontended lock is taken with one `try_lock`. A busy one is waited
/// for by a helper thread in a blocking `flock`, so the lock is taken the
/// moment it is released; this thread waits for the helper's answer with a
/// timeout. A helper that gets the lock after the timeout finds nobody to
/// hand it to and drops it at once (the lock is released); one whose lock
/// is never released stays blocked until the process ends.
pub(crate) fn lock_exclusive(
    path: &Path,
    what: &str,
    timeout: Duration,
    observer: Option<&LockObserver>,
) -> Result<LockGuard, TaskListError> {
    let file = open_lock_file(path)?;
    match file.try_lock() {
        Ok(()) => return Ok(held(file)),
        Err(std::fs::TryLockError::WouldBlock) => {}
        Err(std::fs::TryLockError::Error(e)) => return Err(TaskListError::io(path, e)),
    }
    let wait = Wait {
        path,
        what,
        timeout,
        observer,
        started: Instant::now(),
    };
    // A second descriptor of the same open file, to read the holder's
    // record while the helper waits; closed before returning.
    let Ok(reader) = file.try_clone() else {
        return wait.by_polling(file);
    };
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let waiter = std::thread::Builder::new()
        .name("kaji-lock-wait".to_string())
        .spawn(move || {
            let locked = file.lock().map(|()| file);
            // Nobody listening (timed out): dropping the file unlocks it.
            let _ = tx.send(locked);
        });
    if waiter.is_err() {
        drop(reader);
        return wait.by_polling(open_lock_file(path)?);
    }
    let notice_at = LOCK_NOTICE_AFTER.min(timeout / 2);
    let answer = match rx.recv_timeout(notice_at) {
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            wait.notice(&reader);
            rx.recv_timeout(timeout.saturating_sub(notice_at))
        }
        other => other,
    };
    match answer {
        Ok(Ok(file)) => Ok(held(file)),
        Ok(Err(e)) => Err(TaskListError::io(path, e)),
        Err(_) => Err(wait.timed_out(&reader)),
    }
}

/// One wait for a busy lock.
struct Wait<'a> {
    path: &'a Path,
    what: &'a str,
    timeout: Duration,
    observer: Option<&'a LockObserver>,
    started: Instant,
}

impl Wait<'_> {
    fn notice(&self, file: &File) {
        if let Some(observer) = self.observer {
            observer(&LockWait {
                what: self.what.to_string(),
                path: self.path.to_path_buf(),
                holder: read_holder(file),
                timeout: self.timeout,
            });
        }
    }

    fn timed_out(&self, file: &File) -> TaskListError {
        TaskListError::LockTimeout {
            what: self.what.to_string(),
            path: self.path.to_path_buf(),
            waited_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            holder: read_holder(file),
        }
    }

    /// The fallback when no helper thread can be had: `try_lock` again and
    /// again with a growing pause (1 ms doubling up to 50 ms).
    fn by_polling(&self, file: File) -> Result<LockGuard, TaskListError> {
        let notice_at = LOCK_NOTICE_AFTER.min(self.timeout / 2);
        let mut noticed = false;
        let mut pause = Duration::from_millis(1);
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(held(file)),
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(TaskListError::io(self.path, e));
                }
            }
            let waited = self.started.elapsed();
            if waited >= self.timeout {
                return Err(self.timed_out(&file));
            }
            if !noticed && waited >= notice_at {
                noticed = true;
                self.notice(&file);
            }
            std::thread::sleep(pause.min(self.timeout.saturating_sub(waited)));
            pause = (pause * 2).min(MAX_BACKOFF);
        }
    }
}

/// A lock just taken: writes the holder record.
fn held(file: File) -> LockGuard {
    write_holder(&file);
    LockGuard { file }
}

/// Writes this process's record into a lock file it holds. Best effort:
/// the record only feeds messages.
fn write_holder(file: &File) {
    let record = LockHolder {
        pid: std::process::id(),
        command: own_command().to_string(),
        since_ms: super::model::now_ms(),
    };
    let mut line = serde_json::to_vec(&record).unwrap_or_default();
    line.push(b'\n');
    if file.write_all_at(&line, 0).is_ok() {
        let _ = file.set_len(line.len() as u64);
    }
}

/// The holder record in an open lock file, if there is a readable one.
pub(crate) fn read_holder(file: &File) -> Option<LockHolder> {
    let mut buf = vec![0u8; MAX_RECORD_BYTES as usize];
    let n = file.read_at(&mut buf, 0).ok()?;
    serde_json::from_slice(buf[..n].trim_ascii()).ok()
}

/// The state of one lock file, for `repair`.
#[derive(Debug, Clone)]
pub(crate) enum LockState {
    /// Nobody holds it and it names no holder.
    Free,
    /// Nobody holds it but it names a holder, which died holding it.
    Stale(LockHolder),
    /// Somebody holds it.
    Held(Option<LockHolder>),
}

/// Looks at a lock file without waiting; a free lock with a stale record
/// has the record cleared (under the lock) when `clear` is set.
pub(crate) fn inspect(path: &Path, clear: bool) -> Result<LockState, TaskListError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| open_error(path, e))?;
    check_regular(path, &file, None)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Ok(LockState::Held(read_holder(&file))),
        Err(std::fs::TryLockError::Error(e)) => return Err(TaskListError::io(path, e)),
    }
    let empty = file.metadata().map(|m| m.len() == 0).unwrap_or(false);
    if empty {
        return Ok(LockState::Free);
    }
    let holder = read_holder(&file).unwrap_or(LockHolder {
        pid: 0,
        command: "an unreadable record".to_string(),
        since_ms: 0,
    });
    if clear {
        file.set_len(0).map_err(|e| TaskListError::io(path, e))?;
    }
    Ok(LockState::Stale(holder))
}

/// This process's command line, cut to 200 characters.
fn own_command() -> &'static str {
    static COMMAND: OnceLock<String> = OnceLock::new();
    COMMAND.get_or_init(|| {
        let args: Vec<String> = std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let mut text = args.join(" ");
        if let Some((cut, _)) = text.char_indices().nth(200) {
            text.truncate(cut);
            text.push('…');
        }
        text
    })
}
