//! File-level primitives of the list: bounded reads, atomic durable
//! writes, and parsing of the files. Nothing here knows list semantics.
//!
//! Reading must never block on a file's type or read without bound: every
//! file is judged from its metadata (regular file, at most the size cap)
//! before it is opened, opened with `O_NONBLOCK` so a FIFO swapped in
//! meanwhile cannot block, judged again with `fstat`, and read through a
//! bounded reader.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{ListTask, TaskListError};

/// Prefix of the temporary files written next to their target; readers
/// ignore every name that starts with `.`.
pub(crate) const TEMP_PREFIX: &str = ".tmp-";

/// Writes `bytes` to `path` so that readers and crashes see either the old
/// or the new content: temp file in the same directory, fsync, rename
/// over, fsync the directory.
pub(crate) fn write_atomic(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), TaskListError> {
    replace_file(dir, path, bytes)?;
    sync_dir(dir)
}

/// Like [`write_atomic`] without the final fsync of the directory: the
/// caller syncs the directory once after several replacements. Until then
/// a kill still leaves old or new content; only a power loss may undo the
/// rename.
pub(crate) fn replace_file(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), TaskListError> {
    let mut tmp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(dir)
        .map_err(|e| TaskListError::io(dir, e))?;
    tmp.write_all(bytes)
        .map_err(|e| TaskListError::io(tmp.path(), e))?;
    tmp.as_file()
        .sync_data()
        .map_err(|e| TaskListError::io(tmp.path(), e))?;
    tmp.persist(path)
        .map_err(|e| TaskListError::io(path, e.error))?;
    Ok(())
}

/// Makes renames and removals in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), TaskListError> {
    #[cfg(unix)]
    {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| TaskListError::io(dir, e))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Removes `path`; a file that is already gone is fine.
pub(crate) fn remove_if_exists(path: &Path) -> Result<(), TaskListError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(TaskListError::io(path, e)),
    }
}

/// The default cap of one file of the list: 4 MiB (a task is a few KB).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// The environment variable that overrides [`DEFAULT_MAX_FILE_BYTES`].
pub const MAX_FILE_BYTES_ENV: &str = "KAJI_TASK_FILE_MAX_BYTES";

/// The file cap from `KAJI_TASK_FILE_MAX_BYTES`, else the default.
pub fn max_file_bytes_from_env() -> u64 {
    std::env::var(MAX_FILE_BYTES_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_MAX_FILE_BYTES)
}

/// What kind of file `meta` describes, in words.
pub(crate) fn file_kind(meta: &fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_file() {
        "a regular file"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Refuses an open file that is not regular, or (with `cap`) larger than
/// `cap` bytes, judged with `fstat`.
pub(crate) fn check_regular(
    path: &Path,
    file: &File,
    cap: Option<u64>,
) -> Result<(), TaskListError> {
    let meta = file.metadata().map_err(|e| TaskListError::io(path, e))?;
    check_meta(path, &meta, cap)
}

fn check_meta(path: &Path, meta: &fs::Metadata, cap: Option<u64>) -> Result<(), TaskListError> {
    if !meta.file_type().is_file() {
        return Err(TaskListError::NotRegularFile {
            path: path.to_path_buf(),
            kind: file_kind(meta).to_string(),
        });
    }
    match cap {
        Some(limit) if meta.len() > limit => Err(TaskListError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
            limit,
        }),
        _ => Ok(()),
    }
}

/// Reads a file of at most `cap` bytes; `Ok(None)` when it does not
/// exist. Anything but a regular file is refused before it is opened and
/// again after (a file swapped in between cannot block: the open does not
/// wait), and the read stops past `cap` whatever the file does meanwhile.
pub(crate) fn read_optional(path: &Path, cap: u64) -> Result<Option<Vec<u8>>, TaskListError> {
    match fs::metadata(path) {
        Ok(meta) => check_meta(path, &meta, Some(cap))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(TaskListError::io(path, e)),
    }
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(TaskListError::io(path, e)),
    };
    check_regular(path, &file, Some(cap))?;
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| TaskListError::io(path, e))?;
    if bytes.len() as u64 > cap {
        return Err(TaskListError::TooLarge {
            path: path.to_path_buf(),
            size: bytes.len() as u64,
            limit: cap,
        });
    }
    Ok(Some(bytes))
}

/// Parses and checks the content of `<id>.json`.
pub(crate) fn parse_task(path: &Path, id: u64, bytes: &[u8]) -> Result<ListTask, TaskListError> {
    let corrupt = |problem: String| TaskListError::Corrupt {
        path: path.to_path_buf(),
        problem,
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(corrupt("the file is empty".to_string()));
    }
    let task: ListTask =
        serde_json::from_slice(bytes).map_err(|e| corrupt(format!("not a valid task: {e}")))?;
    if task.id != id {
        return Err(corrupt(format!(
            "the file holds id {} but its name says {id}",
            task.id
        )));
    }
    if task.blocks.contains(&id) || task.blocked_by.contains(&id) {
        return Err(corrupt(format!("task #{id} lists itself as a dependency")));
    }
    Ok(task)
}

/// Serialises a task the way it is stored: pretty JSON and a newline.
pub(crate) fn encode_task(task: &ListTask) -> Vec<u8> {
    // Serialising a Task cannot fail: every key is a string.
    let mut bytes = serde_json::to_vec_pretty(task).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// Parses `.highwatermark`: a decimal integer, surrounding whitespace allowed.
pub(crate) fn parse_highwatermark(path: &Path, bytes: &[u8]) -> Result<u64, TaskListError> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .ok_or_else(|| TaskListError::Corrupt {
            path: path.to_path_buf(),
            problem: format!(
                "expected a decimal integer, found {:?}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(40)])
            ),
        })
}

/// The task id a directory entry names, if it is `<id>.json` with a
/// canonical decimal id (no sign, no leading zero).
pub(crate) fn task_id_of(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".json")?;
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    digits.parse().ok()
}

/// Ids of every `<id>.json` in `dir`, readable or not, ascending.
pub(crate) fn task_ids_in(dir: &Path) -> Result<Vec<(u64, PathBuf)>, TaskListError> {
    let mut ids = Vec::new();
    let entries = fs::read_dir(dir).map_err(|e| TaskListError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| TaskListError::io(dir, e))?;
        if let Some(id) = entry.file_name().to_str().and_then(task_id_of) {
            ids.push((id, entry.path()));
        }
    }
    ids.sort_unstable_by_key(|(id, _)| *id);
    Ok(ids)
}
