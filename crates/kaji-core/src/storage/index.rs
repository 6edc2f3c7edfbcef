//! The session index, `$KAJI_HOME/sessions/index.jsonl`: one JSON line per
//! change of a session's summary (id, kind, parent, directory, title,
//! times, status, turns, tokens, cost), so that listing never reads a
//! transcript. The last line of an id wins; a removed session leaves a
//! `removed` line. Appends and rewrites happen under an OS file lock
//! (`index.lock`); a rewrite (compaction or rebuild) is a temp file renamed
//! over the index. The index is a cache: a torn, corrupt or missing one is
//! rebuilt from the session files. This module must never read a
//! transcript except to rebuild, and never rewrite the index without the
//! lock.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::lock::cut;
use super::record::{SessionHeader, SessionKind, UnixMillis};
use super::replay::{RestoredSession, replay};
use super::store::{INDEX_FILE, SessionStore, load_session_file, read_regular, sync_dir};
use super::store_error::StoreError;

/// How many chars of the first prompt make a title.
pub const TITLE_CHARS: usize = 80;

/// The index is rewritten when it has more lines than this many times its
/// entries (plus [`COMPACT_SLACK`]).
const COMPACT_FACTOR: usize = 4;
const COMPACT_SLACK: usize = 64;

/// One session's summary, one line of the index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IndexEntry {
    /// The session id.
    pub id: String,
    /// Main, fork or sub-agent.
    pub kind: SessionKind,
    /// The session it was forked from or is a sub-agent of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Its working directory (where it was started).
    pub cwd: PathBuf,
    /// The first prompt, cut to [`TITLE_CHARS`] chars on one line.
    pub title: String,
    /// When it was created.
    pub created: UnixMillis,
    /// When it was last written.
    pub updated: UnixMillis,
    /// `new` (no prompt finished yet), the last prompt's status
    /// (`completed`, `failed`, `aborted`, …) or `interrupted` (its last
    /// prompt never ended: a crash or a kill).
    pub status: String,
    /// Model requests so far.
    pub turns: u32,
    /// Input tokens so far.
    pub input_tokens: u64,
    /// Output tokens so far.
    pub output_tokens: u64,
    /// Cost so far in USD (0 when no price is known).
    pub cost_usd: f64,
    /// The session was removed (the entry is a tombstone).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub removed: bool,
}

impl Default for IndexEntry {
    fn default() -> Self {
        Self {
            id: String::new(),
            kind: SessionKind::Main,
            parent: None,
            cwd: PathBuf::new(),
            title: String::new(),
            created: 0,
            updated: 0,
            status: "new".into(),
            turns: 0,
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: 0.0,
            removed: false,
        }
    }
}

impl IndexEntry {
    /// The entry of a session just created from `header`.
    pub fn new(header: &SessionHeader) -> Self {
        Self {
            id: header.session_id.clone(),
            kind: header.kind,
            parent: header.parent.clone(),
            cwd: header.cwd.clone(),
            created: header.created,
            updated: header.created,
            ..Self::default()
        }
    }

    /// The entry of a session as replayed from its file.
    pub fn from_restored(header: &SessionHeader, restored: &RestoredSession) -> Self {
        let status = match (&restored.last_status, restored.task_open) {
            (_, true) => "interrupted".to_string(),
            (Some(s), false) => s.clone(),
            (None, false) => "new".to_string(),
        };
        Self {
            title: restored
                .prompts
                .first()
                .map(|p| title_of(p))
                .unwrap_or_default(),
            updated: restored.last_written.max(header.created),
            status,
            turns: restored.turns,
            input_tokens: restored.usage.input_tokens,
            output_tokens: restored.usage.output_tokens,
            cost_usd: restored.cost_usd,
            ..Self::new(header)
        }
    }

    /// A tombstone: session `id` is gone.
    pub fn removed(id: &str) -> Self {
        Self {
            id: id.to_string(),
            removed: true,
            ..Self::default()
        }
    }
}

/// A prompt as a title: whitespace runs become one space, cut to
/// [`TITLE_CHARS`] chars on a char boundary.
pub fn title_of(prompt: &str) -> String {
    let one_line = prompt.split_whitespace().collect::<Vec<_>>().join(" ");
    cut(&one_line, TITLE_CHARS)
}

/// What [`SessionStore::list`] found.
#[derive(Debug, Default)]
pub struct SessionList {
    /// Every session, newest `updated` first.
    pub entries: Vec<IndexEntry>,
    /// The index was missing or damaged and was rebuilt from the files.
    pub rebuilt: bool,
    /// Session files left out of a rebuild, and why.
    pub skipped: Vec<StoreError>,
}

/// The index as read: the last entry per id, and how many lines it had.
struct IndexRead {
    entries: HashMap<String, IndexEntry>,
    lines: usize,
}

impl SessionStore {
    fn index_path(&self) -> PathBuf {
        self.dir().join(INDEX_FILE)
    }

    fn lock_index(&self) -> Result<File, StoreError> {
        fs::create_dir_all(self.dir()).map_err(|e| StoreError::io(self.dir(), e))?;
        let path = self.dir().join("index.lock");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| StoreError::io(&path, e))?;
        file.lock().map_err(|e| StoreError::io(&path, e))?;
        Ok(file)
    }

    /// Records `entry` as the session's current summary: one appended
    /// line, under the index lock.
    pub fn upsert(&self, entry: &IndexEntry) -> Result<(), StoreError> {
        let path = self.index_path();
        let mut line = serde_json::to_vec(entry).map_err(|e| StoreError::Encode {
            path: path.clone(),
            source: e,
        })?;
        line.push(b'\n');
        let _lock = self.lock_index()?;
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| StoreError::io(&path, e))?;
        file.write_all(&line).map_err(|e| StoreError::io(&path, e))
    }

    /// Every session's summary from the index, newest first; never reads
    /// a transcript unless the index has to be rebuilt. An index with many
    /// more lines than sessions is compacted.
    pub fn list(&self) -> Result<SessionList, StoreError> {
        let read = match self.read_index()? {
            Some(read) => read,
            None => return self.rebuild_index(),
        };
        let live = read.entries.len();
        if read.lines > live * COMPACT_FACTOR + COMPACT_SLACK {
            self.compact_index()?;
        }
        Ok(SessionList {
            entries: sorted(read.entries),
            rebuilt: false,
            skipped: Vec::new(),
        })
    }

    /// Reads the index; `None` when it is missing, torn or corrupt (any
    /// line that is not an entry).
    fn read_index(&self) -> Result<Option<IndexRead>, StoreError> {
        let path = self.index_path();
        let bytes = match read_regular(&path) {
            Ok((bytes, _)) => bytes,
            Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if !bytes.is_empty() && !bytes.ends_with(b"\n") {
            return Ok(None);
        }
        let mut entries: HashMap<String, IndexEntry> = HashMap::new();
        let mut lines = 0;
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            lines += 1;
            let Ok(entry) = serde_json::from_slice::<IndexEntry>(line) else {
                return Ok(None);
            };
            if entry.id.is_empty() {
                return Ok(None);
            }
            if entry.removed {
                entries.remove(&entry.id);
            } else {
                entries.insert(entry.id.clone(), entry);
            }
        }
        Ok(Some(IndexRead { entries, lines }))
    }

    /// Rewrites the index with one line per live session, under the lock.
    fn compact_index(&self) -> Result<(), StoreError> {
        let _lock = self.lock_index()?;
        // Read again under the lock: appends since the first read stay.
        let Some(read) = self.read_index()? else {
            return Ok(());
        };
        self.write_index(&sorted(read.entries))
    }

    /// Rebuilds the index from the session files, under the lock (unless
    /// another process has rebuilt it meanwhile).
    pub fn rebuild_index(&self) -> Result<SessionList, StoreError> {
        let ids = self.session_ids()?;
        if ids.is_empty() && !self.index_path().exists() {
            return Ok(SessionList::default());
        }
        let _lock = self.lock_index()?;
        if let Some(read) = self.read_index()? {
            return Ok(SessionList {
                entries: sorted(read.entries),
                rebuilt: false,
                skipped: Vec::new(),
            });
        }
        let mut entries = Vec::new();
        let mut skipped = Vec::new();
        for id in self.session_ids()? {
            match load_session_file(&self.path_of(&id)) {
                Ok(loaded) => {
                    let restored = replay(&loaded);
                    entries.push(IndexEntry::from_restored(&loaded.header, &restored));
                }
                Err(e) => skipped.push(e),
            }
        }
        let entries = sorted(entries.into_iter().map(|e| (e.id.clone(), e)).collect());
        self.write_index(&entries)?;
        Ok(SessionList {
            entries,
            rebuilt: true,
            skipped,
        })
    }

    /// Replaces the index with `entries` (temp file, fsync, rename). The
    /// caller holds the lock.
    fn write_index(&self, entries: &[IndexEntry]) -> Result<(), StoreError> {
        let path = self.index_path();
        let mut bytes = Vec::with_capacity(entries.len() * 256);
        for entry in entries {
            serde_json::to_writer(&mut bytes, entry).map_err(|e| StoreError::Encode {
                path: path.clone(),
                source: e,
            })?;
            bytes.push(b'\n');
        }
        let dir = self.dir();
        let mut tmp = tempfile::Builder::new()
            .prefix(".index-")
            .tempfile_in(dir)
            .map_err(|e| StoreError::io(dir, e))?;
        tmp.write_all(&bytes)
            .and_then(|()| tmp.as_file().sync_data())
            .map_err(|e| StoreError::io(tmp.path(), e))?;
        tmp.persist(&path)
            .map_err(|e| StoreError::io(&path, e.error))?;
        sync_dir(dir)
    }
}

/// Entries newest `updated` first (then by id, for a stable order).
fn sorted(entries: HashMap<String, IndexEntry>) -> Vec<IndexEntry> {
    let mut v: Vec<IndexEntry> = entries.into_values().collect();
    v.sort_by(|a, b| b.updated.cmp(&a.updated).then_with(|| a.id.cmp(&b.id)));
    v
}
