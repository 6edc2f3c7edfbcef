//! The session store: session files under `$KAJI_HOME/sessions/`, one
//! append-only `<id>.jsonl` per session, written through a
//! [`SessionWriter`] that holds the session's lock, and read back
//! tolerantly ([`SessionStore::load`]).
//!
//! Loading never loses a session to a bad line: a torn last line, a
//! corrupt line or a record type from a newer kaji is skipped with a
//! [`LoadWarning`] naming the file and line; only a missing or unreadable
//! header is an error. This module must never read a file that is not a
//! regular file (a FIFO, a device), never write a record in more than one
//! `write`, and never decide on its own when to fsync: the caller does.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use super::index::IndexEntry;
use super::lock::SessionLock;
use super::record::{LoadedSession, SessionHeader, SessionRecord, UnixMillis};
use super::store_error::{LoadWarning, LoadWarningKind, StoreError};

/// The index file's name inside the sessions directory (not a session).
pub const INDEX_FILE: &str = "index.jsonl";

/// Every record `type` this kaji knows; any other is from a newer one.
const KNOWN_TYPES: &[&str] = &[
    "header",
    "task_started",
    "message",
    "partial_reply",
    "tool_result",
    "history_replaced",
    "mode",
    "model",
    "cwd",
    "approval",
    "todo",
    "task_list",
    "checkpoint",
    "usage",
    "task_ended",
];

/// The session files of one `$KAJI_HOME`.
#[derive(Debug, Clone)]
pub struct SessionStore {
    dir: PathBuf,
}

/// Appends records to one session file while holding its lock. Dropping
/// it closes the file and releases the lock.
#[derive(Debug)]
pub struct SessionWriter {
    id: String,
    path: PathBuf,
    file: File,
    _lock: SessionLock,
}

impl SessionStore {
    /// The store of `kaji_home` (its `sessions/` directory, created when
    /// the first session is).
    pub fn new(kaji_home: &Path) -> Self {
        Self {
            dir: kaji_home.join("sessions"),
        }
    }

    /// A fresh random session id (a UUID v4, so short prefixes are
    /// unique in practice).
    pub fn new_session_id() -> String {
        uuid::Uuid::new_v4().to_string()
    }

    /// The sessions directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of session `id`.
    pub fn path_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.jsonl"))
    }

    fn lock_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.lock"))
    }

    /// Creates the file of a new session, takes its lock, writes and
    /// fsyncs the header, and adds the session to the index.
    pub fn create(&self, header: &SessionHeader) -> Result<SessionWriter, StoreError> {
        let id = header.session_id.as_str();
        validate_id(id)?;
        fs::create_dir_all(&self.dir).map_err(|e| StoreError::io(&self.dir, e))?;
        let lock = SessionLock::acquire(&self.lock_path(id), id)?;
        let path = self.path_of(id);
        let file = match OpenOptions::new().append(true).create_new(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(StoreError::Exists { path });
            }
            Err(e) => return Err(StoreError::io(&path, e)),
        };
        let writer = SessionWriter {
            id: id.to_string(),
            path,
            file,
            _lock: lock,
        };
        writer.append(&SessionRecord::Header(header.clone()))?;
        writer.sync()?;
        sync_dir(&self.dir)?;
        self.upsert(&IndexEntry::new(header))?;
        Ok(writer)
    }

    /// Opens an existing session for appending (to resume it): takes its
    /// lock at once or fails with [`StoreError::Locked`] naming the
    /// process that holds it. A torn last line (a crash mid-write) is cut
    /// off first, so the next record starts on a line of its own.
    pub fn open_for_append(&self, id: &str) -> Result<SessionWriter, StoreError> {
        validate_id(id)?;
        let path = self.path_of(id);
        check_regular(&path)?;
        let lock = SessionLock::acquire(&self.lock_path(id), id)?;
        // Checked again under the lock: `remove` may have won the race.
        check_regular(&path)?;
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|e| StoreError::io(&path, e))?;
        repair_tail(&file, &path)?;
        Ok(SessionWriter {
            id: id.to_string(),
            path,
            file,
            _lock: lock,
        })
    }

    /// Reads session `id` (see [`load_session_file`]).
    pub fn load(&self, id: &str) -> Result<LoadedSession, StoreError> {
        validate_id(id)?;
        load_session_file(&self.path_of(id))
    }

    /// The id of the one session whose id starts with `prefix` (an exact
    /// id always wins).
    pub fn resolve(&self, prefix: &str) -> Result<String, StoreError> {
        let not_found = || StoreError::NotFound {
            prefix: prefix.to_string(),
            dir: self.dir.clone(),
        };
        if prefix.is_empty() || validate_id(prefix).is_err() {
            return Err(not_found());
        }
        let mut candidates: Vec<String> = self
            .session_ids()?
            .into_iter()
            .filter(|id| id.starts_with(prefix))
            .collect();
        candidates.sort();
        if candidates.iter().any(|c| c == prefix) {
            return Ok(prefix.to_string());
        }
        match candidates.len() {
            0 => Err(not_found()),
            1 => Ok(candidates.remove(0)),
            _ => Err(StoreError::Ambiguous {
                prefix: prefix.to_string(),
                candidates,
            }),
        }
    }

    /// The ids of every session file in the directory (unsorted).
    pub fn session_ids(&self) -> Result<Vec<String>, StoreError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io(&self.dir, e)),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io(&self.dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name == INDEX_FILE {
                continue;
            }
            if let Some(id) = name.strip_suffix(".jsonl")
                && validate_id(id).is_ok()
            {
                ids.push(id.to_string());
            }
        }
        Ok(ids)
    }

    /// Deletes session `id`: refuses with [`StoreError::Locked`] while a
    /// process has it open, and drops it from the index.
    pub fn remove(&self, id: &str) -> Result<(), StoreError> {
        validate_id(id)?;
        let path = self.path_of(id);
        if fs::symlink_metadata(&path).is_err() {
            return Err(StoreError::NotFound {
                prefix: id.to_string(),
                dir: self.dir.clone(),
            });
        }
        let lock_path = self.lock_path(id);
        let lock = SessionLock::acquire(&lock_path, id)?;
        fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
        self.upsert(&IndexEntry::removed(id))?;
        let _ = fs::remove_file(&lock_path);
        drop(lock);
        sync_dir(&self.dir)
    }
}

impl SessionWriter {
    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The session file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record as one JSON line in a single `write` (the file
    /// is opened with `O_APPEND`). Does not fsync: see [`Self::sync`].
    pub fn append(&self, record: &SessionRecord) -> Result<(), StoreError> {
        let mut line = serde_json::to_vec(record).map_err(|e| StoreError::Encode {
            path: self.path.clone(),
            source: e,
        })?;
        line.push(b'\n');
        // One write of the whole line; `write_all` only loops if the OS
        // wrote less (a full disk), and then the reader sees a torn line.
        (&self.file)
            .write_all(&line)
            .map_err(|e| StoreError::io(&self.path, e))
    }

    /// Makes everything appended so far durable (fsync of the data).
    pub fn sync(&self) -> Result<(), StoreError> {
        self.file
            .sync_data()
            .map_err(|e| StoreError::io(&self.path, e))
    }

    /// [`Self::append`], then [`Self::sync`].
    pub fn append_synced(&self, record: &SessionRecord) -> Result<(), StoreError> {
        self.append(record)?;
        self.sync()
    }
}

/// Reads a session file tolerantly: one read of the whole file, then one
/// record per line. Fails only when the path is not a regular file, cannot
/// be read, or its first line is not a header.
pub fn load_session_file(path: &Path) -> Result<LoadedSession, StoreError> {
    let (bytes, modified) = read_regular(path)?;
    let mut lines = split_lines(&bytes);
    let header = match lines.next() {
        None => {
            return Err(StoreError::BadHeader {
                path: path.to_path_buf(),
                line: 1,
                message: "the file is empty: no session header".into(),
            });
        }
        Some((_, line, _)) => parse_header(path, line)?,
    };
    let mut records = Vec::new();
    let mut warnings = Vec::new();
    for (number, line, terminated) in lines {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse_record(line) {
            Ok(record) => records.push(record),
            Err(kind) => {
                let kind = match kind {
                    LoadWarningKind::Corrupt { .. } if !terminated => LoadWarningKind::TornLastLine,
                    other => other,
                };
                warnings.push(LoadWarning {
                    path: path.to_path_buf(),
                    line: number,
                    kind,
                });
            }
        }
    }
    Ok(LoadedSession {
        path: path.to_path_buf(),
        header,
        records,
        warnings,
        modified,
    })
}

fn parse_header(path: &Path, line: &[u8]) -> Result<SessionHeader, StoreError> {
    let bad = |message: String| StoreError::BadHeader {
        path: path.to_path_buf(),
        line: 1,
        message,
    };
    match serde_json::from_slice::<SessionRecord>(line) {
        Ok(SessionRecord::Header(h)) => Ok(h),
        Ok(_) => Err(bad("the first line is not a session header".into())),
        Err(e) => Err(bad(format!("the session header cannot be read: {e}"))),
    }
}

/// One record, or why the line is skipped.
fn parse_record(line: &[u8]) -> Result<SessionRecord, LoadWarningKind> {
    match serde_json::from_slice::<SessionRecord>(line) {
        Ok(r) => Ok(r),
        Err(e) => {
            #[derive(serde::Deserialize)]
            struct Tagged {
                #[serde(rename = "type")]
                record_type: String,
            }
            match serde_json::from_slice::<Tagged>(line) {
                Ok(t) if !KNOWN_TYPES.contains(&t.record_type.as_str()) => {
                    Err(LoadWarningKind::UnknownType {
                        record_type: t.record_type,
                    })
                }
                _ => Err(LoadWarningKind::Corrupt {
                    message: e.to_string(),
                }),
            }
        }
    }
}

/// Lines as (1-based number, bytes without the newline, ended by a newline).
fn split_lines(bytes: &[u8]) -> impl Iterator<Item = (usize, &[u8], bool)> {
    let mut rest = bytes;
    let mut number = 0;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        number += 1;
        match memchr::memchr(b'\n', rest) {
            Some(i) => {
                let line = &rest[..i];
                rest = &rest[i + 1..];
                Some((number, line, true))
            }
            None => {
                let line = rest;
                rest = &[];
                Some((number, line, false))
            }
        }
    })
}

/// Reads a whole regular file in one go; anything else is refused before
/// it is opened (and checked again on the open file).
pub(crate) fn read_regular(path: &Path) -> Result<(Vec<u8>, Option<UnixMillis>), StoreError> {
    check_regular(path)?;
    let mut file = File::open(path).map_err(|e| StoreError::io(path, e))?;
    let meta = file.metadata().map_err(|e| StoreError::io(path, e))?;
    if !meta.is_file() {
        return Err(StoreError::NotRegularFile {
            path: path.to_path_buf(),
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0) + 1);
    file.read_to_end(&mut bytes)
        .map_err(|e| StoreError::io(path, e))?;
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as UnixMillis);
    Ok((bytes, modified))
}

/// Fails unless `path` is (or links to) a regular file.
fn check_regular(path: &Path) -> Result<(), StoreError> {
    match fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(StoreError::NotRegularFile {
            path: path.to_path_buf(),
        }),
        Err(e) => Err(StoreError::io(path, e)),
    }
}

/// Cuts a torn last line (no newline, not a valid record) off the file,
/// or ends a complete last line that lacks its newline.
fn repair_tail(file: &File, path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::FileExt;
    let io = |e| StoreError::io(path, e);
    let len = file.metadata().map_err(io)?.len();
    let mut last = [0u8; 1];
    if len == 0 {
        return Ok(());
    }
    file.read_exact_at(&mut last, len - 1).map_err(io)?;
    if last[0] == b'\n' {
        return Ok(());
    }
    let (bytes, _) = read_regular(path)?;
    let start = memchr::memrchr(b'\n', &bytes).map_or(0, |i| i + 1);
    if start > 0 && parse_record(&bytes[start..]).is_err() {
        file.set_len(start as u64).map_err(io)?;
    } else {
        let mut f = file;
        f.write_all(b"\n").map_err(io)?;
    }
    file.sync_data().map_err(io)
}

/// Session ids become file names: letters, digits, `-` and `_` only.
pub(crate) fn validate_id(id: &str) -> Result<(), StoreError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok && id != "index" {
        Ok(())
    } else {
        Err(StoreError::InvalidId { id: id.to_string() })
    }
}

/// Makes file creations, renames and removals in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One record of every type (the match makes a new variant fail to
    /// compile here until it is added, and to KNOWN_TYPES).
    fn one_of_each() -> Vec<SessionRecord> {
        use kaji_protocol::{ContentBlock, Message, Usage};
        let samples = vec![
            SessionRecord::Header(crate::storage::record::SessionHeader {
                format: 1,
                session_id: "x".into(),
                kind: crate::storage::record::SessionKind::Main,
                parent: None,
                cwd: "/".into(),
                created: 0,
                kaji_version: "0".into(),
            }),
            SessionRecord::TaskStarted {
                task_id: "t".into(),
                prompt: "p".into(),
                at: 0,
            },
            SessionRecord::Message {
                message: Message::user_text("hi"),
            },
            SessionRecord::PartialReply {
                message: Message::user_text("so far"),
            },
            SessionRecord::ToolResult {
                block: ContentBlock::text("r"),
                tool_use_id: "1".into(),
            },
            SessionRecord::HistoryReplaced {
                history: vec![],
                reason: "rewind".into(),
                tokens_before: None,
                tokens_after: None,
            },
            SessionRecord::Mode {
                mode: "plan".into(),
            },
            SessionRecord::Model {
                model: "small".into(),
            },
            SessionRecord::Cwd { cwd: "/".into() },
            SessionRecord::Approval {
                rule: "Read".into(),
            },
            SessionRecord::Todo { items: vec![] },
            SessionRecord::TaskList { id: "l".into() },
            SessionRecord::Checkpoint {
                id: "c".into(),
                label: "l".into(),
            },
            SessionRecord::Usage {
                turn: 1,
                usage: Usage::default(),
                cost_usd: None,
            },
            SessionRecord::TaskEnded {
                task_id: "t".into(),
                status: "completed".into(),
                at: 0,
            },
        ];
        for s in &samples {
            match s {
                SessionRecord::Header(_)
                | SessionRecord::TaskStarted { .. }
                | SessionRecord::Message { .. }
                | SessionRecord::PartialReply { .. }
                | SessionRecord::ToolResult { .. }
                | SessionRecord::HistoryReplaced { .. }
                | SessionRecord::Mode { .. }
                | SessionRecord::Model { .. }
                | SessionRecord::Cwd { .. }
                | SessionRecord::Approval { .. }
                | SessionRecord::Todo { .. }
                | SessionRecord::TaskList { .. }
                | SessionRecord::Checkpoint { .. }
                | SessionRecord::Usage { .. }
                | SessionRecord::TaskEnded { .. } => {}
            }
        }
        samples
    }

    #[test]
    fn known_types_are_exactly_the_record_types() {
        let types: Vec<String> = one_of_each()
            .iter()
            .map(|r| {
                let v = serde_json::to_value(r).unwrap();
                v["type"].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(types, KNOWN_TYPES);
        for r in one_of_each() {
            let line = serde_json::to_vec(&r).unwrap();
            assert_eq!(parse_record(&line), Ok(r));
        }
        let line = br#"{"type":"from_the_future","x":1}"#;
        assert_eq!(
            parse_record(line),
            Err(LoadWarningKind::UnknownType {
                record_type: "from_the_future".into()
            })
        );
    }

    #[test]
    fn ids_are_file_names() {
        assert!(validate_id("3f2a-b_1").is_ok());
        for bad in ["", "../x", "a/b", "a.b", "index", "a b"] {
            assert!(validate_id(bad).is_err(), "{bad}");
        }
    }
}
