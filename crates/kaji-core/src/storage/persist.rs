//! The Session's side of its files: create a session file and its index
//! entry, or find, lock, load and replay a saved one for resume. The file
//! format and the store live in [`super::record`] and the store modules;
//! this module only decides what a Session needs from them, and must never
//! know the Session itself.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use kaji_protocol::{Message, Usage};
use kaji_tools::todo::TodoItem;

use crate::permissions::PermissionMode;

use super::index::{IndexEntry, title_of};
use super::record::{SESSION_FORMAT_VERSION, SessionHeader, SessionKind, SessionRecord};
use super::recorder::{RecordSink, Recorder, now_millis};
use super::replay::replay;
use super::store::{SessionStore, SessionWriter};
use super::store_error::StoreError;

/// Which saved session to continue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResumeFrom {
    /// The session with this id or unique id prefix.
    Id(String),
    /// The most recently updated main session (or fork) of the working
    /// directory.
    Latest,
}

/// A new session id.
pub fn new_session_id() -> String {
    SessionStore::new_session_id()
}

/// The files of an open session: where records go, and its index entry.
#[derive(Clone, Debug)]
pub struct SessionFiles {
    /// The session file's recorder.
    pub recorder: Recorder,
    /// The session file.
    pub path: PathBuf,
    store: SessionStore,
    entry: Arc<Mutex<IndexEntry>>,
}

impl SessionFiles {
    fn new(store: SessionStore, writer: SessionWriter, entry: IndexEntry) -> Self {
        let path = writer.path().to_path_buf();
        Self {
            recorder: Recorder::new(Arc::new(WriterSink(writer))),
            path,
            store,
            entry: Arc::new(Mutex::new(entry)),
        }
    }

    /// A prompt starts: the index gets its title (the first prompt) and
    /// the time.
    pub fn prompt_started(&self, prompt: &str) {
        self.update(|e| {
            if e.title.is_empty() {
                e.title = title_of(prompt);
            }
        });
    }

    /// A prompt ended: the index gets its status and the totals.
    pub fn prompt_ended(&self, status: &str, turns: u32, usage: &Usage) {
        self.update(|e| {
            e.status = status.to_string();
            e.turns = e.turns.saturating_add(turns);
            e.input_tokens = e.input_tokens.saturating_add(usage.input_tokens);
            e.output_tokens = e.output_tokens.saturating_add(usage.output_tokens);
        });
    }

    fn update(&self, change: impl FnOnce(&mut IndexEntry)) {
        let entry = {
            let mut e = self.entry.lock().unwrap_or_else(|e| e.into_inner());
            change(&mut e);
            e.updated = now_millis();
            e.clone()
        };
        // A lost index line is rebuilt from the session files; the
        // conversation itself is never at stake here.
        if let Err(e) = self.store.upsert(&entry) {
            tracing::warn!("cannot update the session index: {e}");
        }
    }
}

/// The recorder's sink: the session file, written while its lock is held.
struct WriterSink(SessionWriter);

impl RecordSink for WriterSink {
    fn append(&self, record: &SessionRecord) -> std::io::Result<()> {
        self.0.append(record).map_err(std::io::Error::other)
    }

    fn sync(&self) -> std::io::Result<()> {
        self.0.sync().map_err(std::io::Error::other)
    }
}

/// The state a saved session had when it stopped.
#[derive(Debug, Clone, Default)]
pub struct RestoredState {
    /// The history, valid for the API (every tool use answered).
    pub history: Vec<Message>,
    /// The permission mode.
    pub mode: Option<PermissionMode>,
    /// The model chosen with `--model` or `/model`, when one was.
    pub model: Option<String>,
    /// The working directory (a worktree, maybe).
    pub cwd: Option<PathBuf>,
    /// The todo checklist.
    pub todo: Vec<TodoItem>,
    /// Approvals granted for the session.
    pub approvals: Vec<String>,
    /// The task list id.
    pub task_list: Option<String>,
    /// Usage so far.
    pub usage: Usage,
    /// Turns so far.
    pub turns: u32,
    /// The last round was cut off (a crash, a kill).
    pub last_round_interrupted: bool,
    /// The history's last message was built by the replay and must be
    /// recorded before the session goes on.
    pub answer_built: bool,
    /// When the session was last written to.
    pub stopped_at: u64,
}

/// A saved session, opened for resume.
#[derive(Debug)]
pub struct Restored {
    /// Its id.
    pub session_id: String,
    /// Its project directory.
    pub project_dir: PathBuf,
    /// What it had.
    pub state: RestoredState,
    /// Its files, locked by this process.
    pub files: Option<SessionFiles>,
    /// What loading it found wrong (file and line).
    pub warnings: Vec<String>,
}

/// `$KAJI_HOME/sessions`.
pub fn sessions_dir(kaji_home: &Path) -> PathBuf {
    kaji_home.join("sessions")
}

/// Creates the session file with its header, and its index entry.
pub fn create(
    kaji_home: &Path,
    session_id: &str,
    kind: SessionKind,
    parent: Option<&str>,
    project_dir: &Path,
) -> Result<SessionFiles, StoreError> {
    let store = SessionStore::new(kaji_home);
    let header = SessionHeader {
        format: SESSION_FORMAT_VERSION,
        session_id: session_id.to_string(),
        kind,
        parent: parent.map(str::to_string),
        cwd: project_dir.to_path_buf(),
        created: now_millis(),
        kaji_version: env!("CARGO_PKG_VERSION").to_string(),
    };
    // `create` also adds the session's first index entry.
    let writer = store.create(&header)?;
    let entry = IndexEntry::new(&header);
    Ok(SessionFiles::new(store, writer, entry))
}

/// Finds, locks, loads and replays a saved session.
pub fn open_for_resume(
    kaji_home: &Path,
    from: &ResumeFrom,
    cwd: &Path,
) -> Result<Restored, StoreError> {
    let store = SessionStore::new(kaji_home);
    let id = match from {
        ResumeFrom::Id(prefix) => store.resolve(prefix)?,
        ResumeFrom::Latest => latest_of(&store, cwd)?,
    };
    let mut warnings = Vec::new();
    let path = store.path_of(&id);
    if torn_tail(&path) {
        warnings.push(format!(
            "{}: the last line was cut off (kaji stopped mid-write); it is skipped",
            path.display()
        ));
    }
    // The lock first: a session is open in one process at a time.
    let writer = store.open_for_append(&id)?;
    let loaded = store.load(&id)?;
    warnings.extend(loaded.warnings.iter().map(|w| w.to_string()));
    let restored = replay(&loaded);
    let entry = IndexEntry::from_restored(&loaded.header, &restored);
    let mode = match restored.permission_mode.as_deref().map(str::parse) {
        Some(Ok(mode)) => Some(mode),
        Some(Err(e)) => {
            warnings.push(format!("{}: {e}; the mode is not restored", path.display()));
            None
        }
        None => None,
    };
    let state = RestoredState {
        history: restored.history,
        mode,
        model: restored.model,
        cwd: Some(restored.cwd),
        todo: restored.todo,
        approvals: restored.approvals,
        task_list: restored.task_list_id,
        usage: restored.usage,
        turns: restored.turns,
        last_round_interrupted: restored.last_round_interrupted,
        answer_built: restored.answer_built,
        stopped_at: restored.last_written,
    };
    Ok(Restored {
        session_id: id,
        project_dir: loaded.header.cwd.clone(),
        state,
        files: Some(SessionFiles::new(store, writer, entry)),
        warnings,
    })
}

/// The conversation records of session `id` up to and including its last
/// compaction (messages, results, replaced histories): what a fork of a
/// compacted session copies, so that it too can show the conversation
/// from before the compaction. Empty when it was never compacted or
/// cannot be read; never fails.
pub fn records_through_last_compaction(kaji_home: &Path, id: &str) -> Vec<SessionRecord> {
    let Ok(loaded) = SessionStore::new(kaji_home).load(id) else {
        return Vec::new();
    };
    let Some(cut) = loaded.records.iter().rposition(
        |r| matches!(r, SessionRecord::HistoryReplaced { reason, .. } if reason == "compaction"),
    ) else {
        return Vec::new();
    };
    loaded
        .records
        .into_iter()
        .take(cut + 1)
        .filter(|r| {
            matches!(
                r,
                SessionRecord::Message { .. }
                    | SessionRecord::PartialReply { .. }
                    | SessionRecord::ToolResult { .. }
                    | SessionRecord::HistoryReplaced { .. }
            )
        })
        .collect()
}

/// The most recently updated main session or fork of `cwd`.
fn latest_of(store: &SessionStore, cwd: &Path) -> Result<String, StoreError> {
    let list = store.list()?;
    list.entries
        .iter()
        .find(|e| !e.removed && e.kind != SessionKind::Subagent && e.cwd == cwd)
        .map(|e| e.id.clone())
        .ok_or_else(|| StoreError::NothingToContinue {
            dir: cwd.to_path_buf(),
        })
}

/// Whether the file's last byte is not a newline (a write cut off). Only
/// a regular file is opened: opening a FIFO would block (the store refuses
/// it right after, with a clear error).
fn torn_tail(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let Ok(meta) = file.metadata() else {
        return false;
    };
    if !meta.is_file() || meta.len() == 0 {
        return false;
    }
    let mut last = [0u8; 1];
    file.seek(SeekFrom::End(-1)).is_ok() && file.read_exact(&mut last).is_ok() && last[0] != b'\n'
}

/// A saved session as listed.
#[derive(Debug, Clone)]
pub struct SessionSummary {
    /// Its id.
    pub id: String,
    /// Its first prompt, cut.
    pub title: String,
    /// Model turns so far.
    pub turns: u32,
    /// When it was last written.
    pub updated: u64,
}

/// The main sessions and forks of `dir`, newest first.
pub fn list_for_dir(kaji_home: &Path, dir: &Path) -> Result<Vec<SessionSummary>, StoreError> {
    let list = SessionStore::new(kaji_home).list()?;
    Ok(list
        .entries
        .into_iter()
        .filter(|e| !e.removed && e.kind != SessionKind::Subagent && e.cwd == dir)
        .map(|e| SessionSummary {
            id: e.id,
            title: e.title,
            turns: e.turns,
            updated: e.updated,
        })
        .collect())
}
