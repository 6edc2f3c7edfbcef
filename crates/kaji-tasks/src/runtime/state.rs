//! The session state file, `$KAJI_HOME/runs/<session-id>/session.json`,
//! and the machine-wide view built from all of them (`kaji ps`).
//!
//! Each running session rewrites its file atomically (write to a temporary
//! file in the same directory, then rename) whenever one of its runtime
//! tasks starts or ends. A file whose process is gone — or whose pid now
//! belongs to another process — describes a dead session and is skipped.
//! Reading never trusts the files: a corrupt or foreign one is reported
//! with its path and skipped.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::RuntimeTaskInfo;

/// The version of `session.json` this code writes and reads.
pub const SESSION_STATE_SCHEMA_VERSION: u32 = 1;

/// The name of the state file inside a session's run directory.
pub const SESSION_STATE_FILE: &str = "session.json";

/// What `session.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SessionState {
    /// Always [`SESSION_STATE_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The session id (also the directory name).
    pub session_id: String,
    /// The pid of the kaji process that owns the session.
    pub pid: u32,
    /// That process's start time in clock ticks after boot (from
    /// `/proc/<pid>/stat`), to tell it from a later process that got the
    /// same pid. Absent where `/proc` is not available.
    #[serde(default)]
    pub pid_start_ticks: Option<u64>,
    /// When the session's registry was created, in milliseconds since the
    /// Unix epoch.
    pub started_at_ms: u64,
    /// The session's runtime tasks, oldest first.
    pub tasks: Vec<RuntimeTaskInfo>,
}

impl SessionState {
    /// Whether the process that wrote this file is still running.
    pub fn is_alive(&self) -> bool {
        let Ok(pid) = libc::pid_t::try_from(self.pid) else {
            return false;
        };
        if pid <= 0 {
            return false;
        }
        // SAFETY: kill with signal 0 only checks for existence.
        let rc = unsafe { libc::kill(pid, 0) };
        let exists = rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !exists {
            return false;
        }
        match (self.pid_start_ticks, crate::procfs::read_stat(pid)) {
            (Some(expected), Some(stat)) => stat.start_ticks == expected && stat.state != 'Z',
            (_, Some(stat)) => stat.state != 'Z',
            _ => true,
        }
    }
}

/// A state file that could not be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedStateFile {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub reason: String,
}

/// The sessions found under `$KAJI_HOME/runs/`.
#[derive(Debug, Default)]
pub struct SessionScan {
    /// Sessions whose process is alive, ordered by start time.
    pub live: Vec<SessionState>,
    /// Sessions whose process is gone (their files may still say
    /// `running`: see [`super::orphans`] for what they left behind),
    /// ordered by start time.
    pub dead: Vec<SessionState>,
    /// State files that could not be read or parsed.
    pub skipped: Vec<SkippedStateFile>,
}

/// Reads every `runs/<session-id>/session.json` under `kaji_home` and keeps
/// the sessions whose process is still running. A missing `runs/`
/// directory means no sessions.
pub fn scan_sessions(kaji_home: &Path) -> SessionScan {
    let runs = kaji_home.join("runs");
    let mut scan = SessionScan::default();
    let Ok(entries) = std::fs::read_dir(&runs) else {
        return scan;
    };
    for entry in entries.flatten() {
        let path = entry.path().join(SESSION_STATE_FILE);
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                scan.skipped.push(SkippedStateFile {
                    path,
                    reason: e.to_string(),
                });
                continue;
            }
        };
        match serde_json::from_slice::<SessionState>(&text) {
            Ok(state) if state.schema_version != SESSION_STATE_SCHEMA_VERSION => {
                scan.skipped.push(SkippedStateFile {
                    path,
                    reason: format!(
                        "schema_version {} is not supported (this kaji reads {})",
                        state.schema_version, SESSION_STATE_SCHEMA_VERSION
                    ),
                });
            }
            Ok(state) => {
                if state.is_alive() {
                    scan.live.push(state);
                } else {
                    scan.dead.push(state);
                }
            }
            Err(e) => scan.skipped.push(SkippedStateFile {
                path,
                reason: format!("not a kaji session state file: {e}"),
            }),
        }
    }
    scan.live
        .sort_by_key(|s| (s.started_at_ms, s.session_id.clone()));
    scan.dead
        .sort_by_key(|s| (s.started_at_ms, s.session_id.clone()));
    scan
}

/// Writes `state` to `path` atomically.
pub(crate) fn write_state(path: &Path, state: &SessionState) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    let json = serde_json::to_vec_pretty(state).map_err(std::io::Error::other)?;
    tmp.write_all(&json)?;
    tmp.write_all(b"\n")?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
