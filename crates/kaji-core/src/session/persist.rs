//! The Session's side of its files: create a session file and its index
//! entry, or find, lock, load and replay a saved one for resume. The file
//! format and the store live in [`super::record`] and the store modules;
//! this module only decides what a Session needs from them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use kaji_protocol::{Message, Usage};
use kaji_tools::todo::TodoItem;

use crate::permissions::PermissionMode;

use super::error::SessionError;
use super::options::ResumeFrom;
use super::record::{SESSION_FORMAT_VERSION, SessionHeader, SessionKind, SessionRecord};
use super::recorder::{RecordSink, Recorder, now_millis};

/// A new session id.
pub fn new_session_id() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    let bytes: [u8; 16] = rng.random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The files of an open session: where records go, and its index entry.
#[derive(Clone, Debug)]
pub struct SessionFiles {
    /// The session file's recorder.
    pub recorder: Recorder,
    /// The session file.
    pub path: PathBuf,
}

/// The state a saved session had when it stopped.
#[derive(Debug, Clone, Default)]
pub struct RestoredState {
    /// The history, valid for the API (every tool use answered).
    pub history: Vec<Message>,
    /// The permission mode.
    pub mode: Option<PermissionMode>,
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

/// Creates the session file with its header.
pub fn create(
    kaji_home: &Path,
    session_id: &str,
    kind: SessionKind,
    parent: Option<&str>,
    project_dir: &Path,
) -> Result<SessionFiles, SessionError> {
    let dir = sessions_dir(kaji_home);
    std::fs::create_dir_all(&dir)
        .map_err(|e| SessionError::Store(format!("cannot create {}: {e}", dir.display())))?;
    let path = dir.join(format!("{session_id}.jsonl"));
    let sink = FileSink::create(&path)?;
    let recorder = Recorder::new(Arc::new(sink));
    recorder.record_synced(SessionRecord::Header(SessionHeader {
        format: SESSION_FORMAT_VERSION,
        session_id: session_id.to_string(),
        kind,
        parent: parent.map(str::to_string),
        cwd: project_dir.to_path_buf(),
        created: now_millis(),
        kaji_version: env!("CARGO_PKG_VERSION").to_string(),
    }));
    Ok(SessionFiles { recorder, path })
}

/// Finds, locks, loads and replays a saved session.
pub fn open_for_resume(
    _kaji_home: &Path,
    from: &ResumeFrom,
    _cwd: &Path,
) -> Result<Restored, SessionError> {
    Err(SessionError::Store(format!(
        "cannot resume {from:?}: the session store is not available in this build"
    )))
}

/// Appends records to a session file: one write per record.
struct FileSink {
    file: Mutex<std::fs::File>,
}

impl FileSink {
    fn create(path: &Path) -> Result<Self, SessionError> {
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(path)
            .map_err(|e| SessionError::Store(format!("cannot create {}: {e}", path.display())))?;
        Ok(Self {
            file: Mutex::new(file),
        })
    }
}

impl RecordSink for FileSink {
    fn append(&self, record: &SessionRecord) -> std::io::Result<()> {
        use std::io::Write;
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        self.file
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .write_all(&line)
    }

    fn sync(&self) -> std::io::Result<()> {
        self.file
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .sync_data()
    }
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
pub fn list_for_dir(_kaji_home: &Path, _dir: &Path) -> Result<Vec<SessionSummary>, SessionError> {
    Ok(Vec::new())
}
