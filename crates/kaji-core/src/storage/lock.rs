//! The one-process-at-a-time lock of a session: an OS file lock (`flock`)
//! on `<id>.lock` beside the session file, held for a writer's life and
//! released by the OS when the file closes or the process dies. The lock
//! file says who holds it (pid and command) so a refusal can name the
//! process. Acquiring never waits. This module must never remove a lock
//! file it does not hold, and never trust the file's content to decide who
//! holds the lock: only the OS lock decides.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::store_error::{LockHolder, StoreError};

/// The longest command line a lock file records.
const COMMAND_MAX: usize = 160;

/// What a lock file holds.
#[derive(Debug, Serialize, Deserialize)]
struct LockInfo {
    pid: u32,
    #[serde(default)]
    command: String,
}

/// A held session lock. Dropping it releases the lock.
#[derive(Debug)]
pub struct SessionLock {
    file: File,
    path: PathBuf,
}

impl SessionLock {
    /// Takes the lock on `path` for session `id`, at once or not at all:
    /// [`StoreError::Locked`] names the holder.
    pub fn acquire(path: &Path, id: &str) -> Result<Self, StoreError> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| StoreError::io(path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(StoreError::Locked {
                    id: id.to_string(),
                    holder: read_holder(&mut file),
                    lock: path.to_path_buf(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(StoreError::io(path, e)),
        }
        let info = LockInfo {
            pid: std::process::id(),
            command: this_command(),
        };
        let line = serde_json::to_vec(&info).map_err(|e| StoreError::Encode {
            path: path.to_path_buf(),
            source: e,
        })?;
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)).map(|_| ()))
            .and_then(|()| file.write_all(&line))
            .map_err(|e| StoreError::io(path, e))?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
        })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        // Closing the file releases the lock; unlocking first keeps the
        // release independent of other handles to the same description.
        let _ = self.file.unlock();
    }
}

/// Reads who holds a lock from its file; unreadable content (a holder
/// that has not written it yet) gives an unnamed holder.
fn read_holder(file: &mut File) -> LockHolder {
    let mut buf = Vec::new();
    let read = file
        .seek(SeekFrom::Start(0))
        .and_then(|_| file.take(4096).read_to_end(&mut buf));
    match read
        .ok()
        .and_then(|_| serde_json::from_slice::<LockInfo>(&buf).ok())
    {
        Some(info) => LockHolder {
            pid: Some(info.pid),
            command: Some(info.command).filter(|c| !c.is_empty()),
        },
        None => LockHolder {
            pid: None,
            command: None,
        },
    }
}

/// This process's command line (passwords in URLs masked), shortened on a
/// char boundary.
fn this_command() -> String {
    let mut args = std::env::args();
    let program = args
        .next()
        .map(|p| {
            Path::new(&p)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or(p)
        })
        .unwrap_or_default();
    let line = std::iter::once(program)
        .chain(args)
        .collect::<Vec<_>>()
        .join(" ");
    cut(
        &kaji_protocol::redact::redact_url_passwords(&line),
        COMMAND_MAX,
    )
}

/// `text` cut to at most `max` chars, with `…` when cut.
pub(crate) fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}
