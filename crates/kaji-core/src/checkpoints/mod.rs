//! Checkpoints: snapshots of a working directory that can be listed, diffed
//! and restored, kept in a shadow git repository.
//!
//! Each working directory gets its own bare repository under
//! `$KAJI_HOME/checkpoints/<hash of the canonical path>/`, driven with
//! `git --git-dir=<shadow> --work-tree=<dir>`. A checkpoint is a commit on
//! the shadow's `refs/heads/checkpoints` whose message is its label.
//!
//! What this module must never do:
//! - write to, lock or run hooks of the user's own repositories: the shadow
//!   has its own index and object store, git's environment is scrubbed
//!   (no `GIT_*` variables, no system or global config, `HOME` pointing into
//!   the shadow), and git never treats a `.git` entry of the work tree as a
//!   file. Nested repositories are read as plain directories: their files
//!   are checkpointed one by one instead of as a gitlink.
//! - destroy what it did not save: before a restore changes anything, every
//!   path it would overwrite or remove is in the "before" checkpoint — the
//!   present state, plus any ignored, too large or otherwise
//!   uncheckpointed file in the way (see [`capture`]) — or the restore
//!   refuses and names the path. Restoring "before" brings everything back.
//! - leave a shadow unusable: stale git lock files with no live owner are
//!   removed (see [`stale`]), a file that cannot be read is skipped with a
//!   note instead of failing the checkpoint, and a checkpoint cut off by
//!   its timeout kills its git and cleans up after it.
//!
//! What a checkpoint contains: every file git would see as tracked or
//! untracked-but-not-ignored in the directory (the work tree's
//! `.gitignore` files apply, the user's global excludes do not), except
//! files larger than [`CheckpointConfig::max_file_size`] and anything under
//! `.kaji/worktrees/` (kaji's own worktrees, see the kaji-tools worktree
//! tools). File contents are stored byte for byte: the shadow's
//! `info/attributes` turns off end-of-line conversion and filters.
//!
//! Operations that change the shadow take an exclusive file lock
//! (`<shadow>/kaji.lock`), so several kaji processes in one directory take
//! turns instead of colliding on git's `index.lock`. git runs through
//! [`kaji_tasks::process::spawn_in_group`], in a process group of its own.

mod borrow;
mod capture;
mod ignored;
mod preimage;
mod refs;
mod snapshot;
mod stale;
mod watch;

pub use borrow::BorrowStep;
pub use preimage::{GATE_PATIENCE, PreImages};
pub use snapshot::Snapshot;
pub use stale::{DEFAULT_STALE_LOCK_AGE, STALE_LOCK_AGE_ENV, stale_lock_age};
pub use watch::{
    Changes, DEFAULT_MAX_WATCHES, MAX_WATCHES_ENV, TreeWatcher, WatchError, max_watches,
};

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// Files larger than this (10 MiB) are left out of checkpoints by default.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 10 * 1024 * 1024;

/// How long the initial checkpoint of a task may take by default (15 s, as
/// Cline): see [`CheckpointStore::commit_within`].
pub const DEFAULT_INITIAL_CHECKPOINT_TIMEOUT: Duration = Duration::from_secs(15);

/// The environment variable that overrides
/// [`DEFAULT_INITIAL_CHECKPOINT_TIMEOUT`], in milliseconds.
pub const CHECKPOINT_TIMEOUT_ENV: &str = "KAJI_CHECKPOINT_TIMEOUT_MS";

/// The timeout of a task's initial checkpoint:
/// `$KAJI_CHECKPOINT_TIMEOUT_MS` milliseconds, else
/// [`DEFAULT_INITIAL_CHECKPOINT_TIMEOUT`]. An unparsable value is warned
/// about and ignored.
pub fn initial_checkpoint_timeout() -> Duration {
    crate::env::duration_from_env(CHECKPOINT_TIMEOUT_ENV, DEFAULT_INITIAL_CHECKPOINT_TIMEOUT)
}

/// At most this many skipped files are recorded in a checkpoint's message.
const MAX_NOTES: usize = 1000;

/// The line prefix of a skipped file's note in a checkpoint's message.
const SKIPPED_PREFIX: &str = "skipped: ";

/// The shadow repository's branch that holds the checkpoints.
const CHECKPOINT_REF: &str = "refs/heads/checkpoints";

/// The file in the shadow that records which directory it belongs to. Its
/// presence also marks a finished initialisation.
const WORKDIR_MARKER: &str = "kaji-workdir";

/// The lock file that serialises changes to one shadow.
const LOCK_FILE: &str = "kaji.lock";

/// The lock file that serialises [`CheckpointStore::finish_borrowing`].
const BORROW_LOCK_FILE: &str = "kaji-borrow.lock";

/// The shadow's list of borrowed object directories.
const ALTERNATES: &str = "objects/info/alternates";

/// The object id of the empty blob (SHA-1 repositories), used for the
/// temporary index entries that make git descend into nested repositories.
const EMPTY_BLOB: &str = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391";

/// Name of the temporary index entry placed inside a nested repository.
const NESTED_PLACEHOLDER: &str = ".kaji-checkpoint-placeholder";

/// Above this many paths to stage, blobs go into a pack (see
/// [`CheckpointStore::commit`]).
const PACK_THRESHOLD_PATHS: usize = 1000;

/// How deep nested repositories inside nested repositories are followed.
const MAX_NESTING: usize = 32;

/// Config set on every git invocation: no hooks, no signing, no fsmonitor
/// daemons, ownership checks off for the shadow (it is kaji's own).
const GIT_CONFIG_ARGS: &[&str] = &[
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "commit.gpgSign=false",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "safe.directory=*",
    "-c",
    "core.quotePath=false",
    "-c",
    "advice.addEmbeddedRepo=false",
];

/// Persistent config of the shadow repository.
const SHADOW_CONFIG: &[(&str, &str)] = &[
    ("core.bare", "false"),
    ("core.autocrlf", "false"),
    ("core.safecrlf", "false"),
    ("core.untrackedCache", "true"),
    ("feature.manyFiles", "true"),
    ("core.fsmonitor", "false"),
    ("commit.gpgSign", "false"),
    ("gc.auto", "0"),
    ("user.name", "kaji"),
    ("user.email", "kaji@localhost"),
];

/// The shadow's `config` file: [`SHADOW_CONFIG`] and `core.worktree`.
fn shadow_config(work_tree: &Path) -> Vec<u8> {
    let mut text = String::from("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n");
    let mut section = "core";
    for (key, value) in SHADOW_CONFIG {
        let (sect, name) = key.split_once('.').unwrap_or(("core", key));
        if sect != section {
            text.push_str(&format!("[{sect}]\n"));
            section = sect;
        }
        text.push_str(&format!("\t{name} = {value}\n"));
    }
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(b"[core]\n\tworktree = \"");
    for &b in path_bytes(work_tree).as_ref() {
        match b {
            b'"' | b'\\' => bytes.extend_from_slice(&[b'\\', b]),
            b'\n' => bytes.extend_from_slice(b"\\n"),
            _ => bytes.push(b),
        }
    }
    bytes.extend_from_slice(b"\"\n");
    bytes
}

/// Tuning of a [`CheckpointStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointConfig {
    /// Files larger than this many bytes are not checkpointed (a restore
    /// saves one before overwriting it). Default [`DEFAULT_MAX_FILE_SIZE`].
    pub max_file_size: u64,
    /// The git program to run (default: `git` on `PATH`, looked up once
    /// in its absolute directories, [`kaji_tasks::git::program`]).
    pub git_program: PathBuf,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        Self {
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            git_program: kaji_tasks::git::program().to_path_buf(),
        }
    }
}

/// The id of a checkpoint: the full hex object id of its shadow commit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct CheckpointId(String);

impl CheckpointId {
    /// The full id.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 12 hex digits, for display (still accepted by
    /// [`CheckpointStore::resolve`] unless ambiguous).
    pub fn short(&self) -> &str {
        self.0.get(..12).unwrap_or(&self.0)
    }
}

impl fmt::Display for CheckpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Checkpoint {
    /// Its id.
    pub id: CheckpointId,
    /// What it marks, e.g. `task start` or `turn 3: Write` (one line).
    pub label: String,
    /// When it was taken, seconds since the Unix epoch.
    pub time: u64,
    /// Files of the directory this checkpoint left out because they could
    /// not be read (at most 1000 are recorded). Not serialised when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<PathNote>,
}

/// A path of the working directory and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathNote {
    /// The path, relative to the working directory.
    pub path: String,
    /// Why it was skipped or cannot be saved.
    pub reason: String,
}

impl fmt::Display for PathNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.path, self.reason)
    }
}

/// The result of [`CheckpointStore::restore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreOutcome {
    /// The checkpoint of the state just before the restore: restoring it
    /// undoes the restore. When nothing had changed since the latest
    /// checkpoint, this is that checkpoint.
    pub before: CheckpointId,
    /// The checkpoint recording the restored state (a new one labelled
    /// `restored <id>`, or `before` when the restore changed nothing).
    pub after: CheckpointId,
}

/// Why a checkpoint operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The working directory does not exist or is not a directory.
    #[error("{}: cannot checkpoint this directory: {reason}", path.display())]
    BadWorkDir {
        /// The directory given.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A file of the shadow repository could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// git could not be started (is it installed?).
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        /// The git command line (without the shadow's boilerplate options).
        command: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// git ran and failed.
    #[error("`{command}` failed ({status}) in shadow repository {}: {stderr}", git_dir.display())]
    Git {
        /// The git command line (without the shadow's boilerplate options).
        command: String,
        /// How it exited.
        status: String,
        /// What it said on stderr.
        stderr: String,
        /// The shadow repository.
        git_dir: PathBuf,
    },
    /// git's output was not what this module expects.
    #[error("`{command}` gave unexpected output: {message}")]
    UnexpectedOutput {
        /// The git command line.
        command: String,
        /// What was wrong.
        message: String,
    },
    /// No checkpoint (or more than one) matches the id given.
    #[error("no checkpoint {id:?} for {}: give a full id or an unambiguous prefix of one from `kaji checkpoints list`", work_tree.display())]
    UnknownCheckpoint {
        /// The id as given.
        id: String,
        /// The working directory.
        work_tree: PathBuf,
    },
    /// The shadow repository at this path belongs to another directory
    /// (a hash collision or a moved `$KAJI_HOME`).
    #[error("shadow repository {} belongs to {}, not {}", git_dir.display(), owner.display(), work_tree.display())]
    WrongOwner {
        /// The shadow repository.
        git_dir: PathBuf,
        /// The directory it records as its owner.
        owner: PathBuf,
        /// The directory asked for.
        work_tree: PathBuf,
    },
    /// A git lock file in the shadow may still be owned by a running
    /// process, so it was not removed.
    #[error("{} is held{}: another git is working on this shadow repository; try again when it has finished", lock.display(), pid.map(|p| format!(" by process {p}")).unwrap_or_default())]
    ShadowBusy {
        /// The lock file.
        lock: PathBuf,
        /// The process that may own it, when known.
        pid: Option<i32>,
    },
    /// The restore would overwrite or remove these paths, which it cannot
    /// save first; nothing was changed.
    #[error("restore refused, nothing was changed: it would overwrite or remove {} in {}, which it cannot save first: {}", if paths.len() == 1 { "this path" } else { "these paths" }, work_tree.display(), list_notes(paths))]
    RestoreWouldLose {
        /// The working directory.
        work_tree: PathBuf,
        /// The paths, with why each cannot be saved.
        paths: Vec<PathNote>,
    },
    /// [`CheckpointStore::commit_within`] ran out of time; its git was
    /// killed and its lock files removed.
    #[error("the checkpoint took longer than {} ms and was stopped", after.as_millis())]
    Timeout {
        /// The time limit.
        after: Duration,
    },
    /// The operation was cancelled; its git was killed.
    #[error("the checkpoint operation was cancelled")]
    Cancelled,
    /// Nested repositories go deeper than this module follows.
    #[error("{}: nested git repositories deeper than {MAX_NESTING} levels", path.display())]
    TooDeep {
        /// The deepest nested repository reached.
        path: PathBuf,
    },
}

/// The checkpoints of one working directory.
///
/// Cheap to create; the shadow repository is made on the first change.
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    work_tree: PathBuf,
    git_dir: PathBuf,
    config: CheckpointConfig,
    /// Cancels the git commands of this handle (never cancelled on a
    /// handle made by `open`; see `commit_cancellable`).
    cancel: CancellationToken,
    /// Pre-images of writes that did not wait for this checkpoint (see
    /// [`CheckpointStore::with_preimages`]).
    preimages: Option<PreImages>,
    /// The watcher of the working directory, shared by every clone of
    /// this handle once [`start_watching`](Self::start_watching) ran
    /// (`None` inside: it could not start).
    watcher: std::sync::Arc<std::sync::OnceLock<Option<TreeWatcher>>>,
}

/// The shadow's index brought to the present state.
struct Staged {
    /// The tree id of the present state.
    tree: String,
    /// The files left out because they cannot be read.
    skipped: Vec<PathNote>,
}

/// Output of a git run that may fail on purpose.
struct GitRun {
    success: bool,
    stdout: Vec<u8>,
}

impl CheckpointStore {
    /// The store of `work_dir` under `kaji_home`, with the default config.
    pub fn open(kaji_home: &Path, work_dir: &Path) -> Result<Self, CheckpointError> {
        Self::open_with(kaji_home, work_dir, CheckpointConfig::default())
    }

    /// The store of `work_dir` under `kaji_home`. Resolves `work_dir` to
    /// its canonical path; does not touch the shadow repository yet.
    pub fn open_with(
        kaji_home: &Path,
        work_dir: &Path,
        config: CheckpointConfig,
    ) -> Result<Self, CheckpointError> {
        let work_tree =
            std::fs::canonicalize(work_dir).map_err(|e| CheckpointError::BadWorkDir {
                path: work_dir.to_path_buf(),
                reason: e.to_string(),
            })?;
        if !work_tree.is_dir() {
            return Err(CheckpointError::BadWorkDir {
                path: work_dir.to_path_buf(),
                reason: "not a directory".to_string(),
            });
        }
        // git runs in the work tree: a relative home would point elsewhere.
        let kaji_home = std::path::absolute(kaji_home).map_err(|e| CheckpointError::Io {
            path: kaji_home.to_path_buf(),
            source: e,
        })?;
        let git_dir = shadow_dir(&kaji_home, &work_tree);
        Ok(Self {
            work_tree,
            git_dir,
            config,
            cancel: CancellationToken::new(),
            preimages: None,
            watcher: std::sync::Arc::default(),
        })
    }

    /// The working directory (canonical).
    pub fn work_tree(&self) -> &Path {
        &self.work_tree
    }

    /// The shadow repository.
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// Creates the shadow repository unless it exists. Every changing
    /// operation does this itself; calling it early only moves the cost.
    pub async fn init(&self) -> Result<(), CheckpointError> {
        let _lock = self.lock().await?;
        self.ensure_init().await
    }

    /// Takes a checkpoint of the present state of the directory, labelled
    /// `label` (newlines become spaces). Returns `None` when nothing
    /// changed since the latest checkpoint: no empty checkpoints are made.
    ///
    /// Files that cannot be read (no permission, a FIFO where a tracked
    /// file was) are left out and listed in [`Checkpoint::skipped`]; stale
    /// git lock files are removed first (see [`CheckpointError::ShadowBusy`]
    /// for live ones).
    pub async fn commit(&self, label: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        let lock = self.lock().await?;
        let result = self.commit_locked(label).await;
        if result.is_err() {
            // A killed or failed git may have left its lock files.
            let _ = stale::clear(&self.git_dir);
        }
        drop(lock);
        result
    }

    /// [`commit`](Self::commit), stopped when `cancel` is cancelled: the
    /// running git is killed (its whole process group) and waited for,
    /// the lock files it leaves are removed, and the result is
    /// [`CheckpointError::Cancelled`] — unless the checkpoint was already
    /// complete.
    pub async fn commit_cancellable(
        &self,
        label: &str,
        cancel: &CancellationToken,
    ) -> Result<Option<Checkpoint>, CheckpointError> {
        let store = Self {
            cancel: cancel.child_token(),
            ..self.clone()
        };
        store.commit(label).await
    }

    /// [`commit`](Self::commit) with a time limit, for a task's initial
    /// checkpoint (use [`initial_checkpoint_timeout`]): past `timeout`
    /// the git is killed, no lock file is left behind, and the result is
    /// [`CheckpointError::Timeout`]. A huge tree then costs the task its
    /// checkpoints, never a long wait.
    pub async fn commit_within(
        &self,
        label: &str,
        timeout: Duration,
    ) -> Result<Option<Checkpoint>, CheckpointError> {
        let token = CancellationToken::new();
        let work = self.commit_cancellable(label, &token);
        tokio::pin!(work);
        tokio::select! {
            result = &mut work => result,
            () = tokio::time::sleep(timeout) => {
                token.cancel();
                match work.await {
                    Err(CheckpointError::Cancelled) => Err(CheckpointError::Timeout { after: timeout }),
                    finished => finished,
                }
            }
        }
    }

    /// Starts watching the working directory (blocking: it walks every
    /// directory once), so that [`commit_changed`](Self::commit_changed)
    /// stages only what changed. Call it before the first checkpoint of a
    /// task. A tree with more directories than [`max_watches`] (or where
    /// inotify fails) is not watched: its checkpoints scan the tree.
    pub fn start_watching(&self) {
        self.watcher.get_or_init(|| {
            let mut excluded = vec![self.work_tree.join(".kaji").join("worktrees")];
            // The shadow lives in $KAJI_HOME/checkpoints/<hash>.
            if let Some(home) = self.git_dir.parent().and_then(Path::parent)
                && home.starts_with(&self.work_tree)
            {
                excluded.push(home.to_path_buf());
            }
            match TreeWatcher::start(&self.work_tree, excluded, max_watches()) {
                Ok(watcher) => Some(watcher),
                Err(e) => {
                    tracing::info!(error = %e, "checkpoints after commands scan the tree");
                    None
                }
            }
        });
    }

    /// Tells the watcher, if any, that the tree was just read from disk.
    fn scanned(&self) {
        if let Some(Some(watcher)) = self.watcher.get() {
            watcher.scanned();
        }
    }

    /// Whether a watcher serves this store's checkpoints.
    pub fn is_watching(&self) -> bool {
        matches!(self.watcher.get(), Some(Some(_)))
    }

    /// A checkpoint after a call that may have changed any file (a
    /// command): with a watcher, only the paths it saw change are staged
    /// and nothing is done when it saw none; without one (or when it lost
    /// track), [`commit`](Self::commit).
    pub async fn commit_changed(&self, label: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        let Some(Some(watcher)) = self.watcher.get() else {
            return self.commit(label).await;
        };
        let result = match watcher.take() {
            Changes::Nothing => return Ok(None),
            Changes::Unknown => self.commit(label).await,
            Changes::Paths(paths) => {
                let lock = self.lock().await?;
                let result = self.commit_pathspecs_locked(label, &paths).await;
                if result.is_err() {
                    let _ = stale::clear(&self.git_dir);
                }
                drop(lock);
                result
            }
        };
        if result.is_err() {
            // What it took is not in a checkpoint: scan next time.
            watcher.forget();
        }
        result
    }

    async fn commit_pathspecs_locked(
        &self,
        label: &str,
        paths: &[PathBuf],
    ) -> Result<Option<Checkpoint>, CheckpointError> {
        self.ensure_init().await?;
        let specs: Option<Vec<String>> = paths
            .iter()
            .map(|p| p.to_str().map(|s| format!(":(literal){s}")))
            .collect();
        let (Some(specs), Some(_)) = (specs, self.head().await?) else {
            return self.commit_locked(label).await;
        };
        let staged = self.stage_changed(Some(&specs)).await?;
        self.commit_tree(&staged.tree, label, &staged.skipped).await
    }

    /// A checkpoint after a call that changed exactly the files `written`
    /// (absolute, or relative to the working directory) and nothing else:
    /// only those paths are staged, so it costs what changed, not the size
    /// of the tree. Paths outside the directory or inside a `.git` are not
    /// checkpointed; ignored and too large files are left out as
    /// [`commit`](Self::commit) leaves them out. Before the first
    /// checkpoint of the directory this is [`commit`](Self::commit).
    pub async fn commit_paths(
        &self,
        label: &str,
        written: &[PathBuf],
    ) -> Result<Option<Checkpoint>, CheckpointError> {
        let snapshot = self.snapshot(written);
        self.commit_snapshot(label, snapshot).await
    }

    /// Puts the saved pre-images into the index in place of what is on
    /// disk and returns the new tree (`tree` when there are none).
    async fn stage_preimages(
        &self,
        images: Vec<preimage::PreImage>,
        tree: String,
    ) -> Result<String, CheckpointError> {
        let mut info = Vec::new();
        for image in images {
            let Some(rel) = self
                .relative_paths(std::slice::from_ref(&image.path))
                .and_then(|mut r| r.pop())
            else {
                continue;
            };
            let line = match image.content {
                Some((mode, bytes)) => {
                    let out = self
                        .git(&["hash-object", "-w", "--stdin"], Some(bytes))
                        .await?;
                    format!("{mode} {}\t", parse_oid(&out, "git hash-object")?)
                }
                None => format!("0 {}\t", "0".repeat(40)),
            };
            info.extend_from_slice(line.as_bytes());
            push_z(&mut info, &rel);
        }
        if info.is_empty() {
            return Ok(tree);
        }
        self.git(&["update-index", "-z", "--index-info"], Some(info))
            .await?;
        let tree = self.git(&["write-tree"], None).await?;
        parse_oid(&tree, "git write-tree")
    }

    /// `written` as paths of the work tree (resolving symlinks, so the
    /// file actually written is staged), leaving out those outside it or
    /// inside a `.git`; `None` when one cannot be resolved (then the
    /// whole tree is staged).
    fn relative_paths(&self, written: &[PathBuf]) -> Option<Vec<Vec<u8>>> {
        let mut rels = Vec::new();
        for path in written {
            let full = self.work_tree.join(path);
            let real = match std::fs::canonicalize(&full) {
                Ok(real) => real,
                Err(e) if capture::gone(&e) => {
                    let parent = std::fs::canonicalize(full.parent()?).ok()?;
                    parent.join(full.file_name()?)
                }
                Err(_) => return None,
            };
            let Ok(rel) = real.strip_prefix(&self.work_tree) else {
                continue;
            };
            if rel.as_os_str().is_empty() || rel.components().any(|c| c.as_os_str() == ".git") {
                continue;
            }
            rels.push(path_bytes(rel).into_owned());
        }
        rels.sort();
        rels.dedup();
        Some(rels)
    }

    /// Adds (or updates) the NUL-separated paths of `add` in the shadow
    /// index, removes those of `drop`, and writes the tree: the staging
    /// both a whole-tree and a named-paths checkpoint end with. `config`
    /// goes before `update-index` (`-c key=value` pairs).
    async fn write_tree(
        &self,
        add: Vec<u8>,
        drop: Vec<u8>,
        config: &[&str],
        skipped: Vec<PathNote>,
    ) -> Result<Staged, CheckpointError> {
        if add.is_empty()
            && drop.is_empty()
            && let Some(tree) = refs::index_tree(&self.git_dir)
        {
            // Nothing to stage, and the index is as `write-tree` left it.
            return Ok(Staged { tree, skipped });
        }
        if !add.is_empty() {
            let mut args = config.to_vec();
            args.extend([
                "update-index",
                "--add",
                "--remove",
                "--replace",
                "-z",
                "--stdin",
            ]);
            self.git(&args, Some(add)).await?;
        }
        if !drop.is_empty() {
            self.git(
                &["update-index", "--force-remove", "-z", "--stdin"],
                Some(drop),
            )
            .await?;
        }
        let tree = parse_oid(&self.git(&["write-tree"], None).await?, "git write-tree")?;
        refs::remember_index_tree(&self.git_dir, &tree);
        Ok(Staged { tree, skipped })
    }

    /// This store, whose checkpoints record the files saved in
    /// `preimages` as they were saved, not as they are (for a task's
    /// initial checkpoint; see [`PreImages`]).
    pub fn with_preimages(&self, preimages: PreImages) -> Self {
        Self {
            preimages: Some(preimages),
            ..self.clone()
        }
    }

    async fn commit_locked(&self, label: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        self.ensure_init().await?;
        let mut staged = self.stage_all().await?;
        if let Some(preimages) = &self.preimages {
            staged.tree = self.stage_preimages(preimages.take(), staged.tree).await?;
        }
        self.commit_tree(&staged.tree, label, &staged.skipped).await
    }

    /// The latest checkpoint, if any.
    pub async fn latest(&self) -> Result<Option<Checkpoint>, CheckpointError> {
        Ok(self.list_limited(Some(1)).await?.into_iter().next())
    }

    /// Every checkpoint, newest first. Empty when none was ever taken (the
    /// shadow repository is not created by listing).
    pub async fn list(&self) -> Result<Vec<Checkpoint>, CheckpointError> {
        self.list_limited(None).await
    }

    /// The checkpoint whose id is `id` or starts with `id` (at least 4 hex
    /// digits).
    pub async fn resolve(&self, id: &str) -> Result<CheckpointId, CheckpointError> {
        let unknown = || CheckpointError::UnknownCheckpoint {
            id: id.to_string(),
            work_tree: self.work_tree.clone(),
        };
        let valid = (4..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_hexdigit());
        if !valid || !self.is_initialised() {
            return Err(unknown());
        }
        let spec = format!("{id}^{{commit}}");
        let run = self
            .git_run(&["rev-parse", "--quiet", "--verify", &spec], None)
            .await?;
        if !run.success {
            return Err(unknown());
        }
        let full = String::from_utf8_lossy(&run.stdout).trim().to_string();
        // Only commits of the checkpoint history count.
        let ancestor = self
            .git_run(
                &["merge-base", "--is-ancestor", &full, CHECKPOINT_REF],
                None,
            )
            .await?;
        if !ancestor.success {
            return Err(unknown());
        }
        Ok(CheckpointId(full))
    }

    /// A unified diff from checkpoint `from` to checkpoint `to`, or to the
    /// present state of the directory when `to` is `None`.
    pub async fn diff(
        &self,
        from: &CheckpointId,
        to: Option<&CheckpointId>,
    ) -> Result<String, CheckpointError> {
        let to_rev = match to {
            Some(id) => id.as_str().to_string(),
            None => {
                let _lock = self.lock().await?;
                self.ensure_init().await?;
                self.stage_all().await?.tree
            }
        };
        let out = self
            .git(
                &[
                    "diff",
                    "--no-color",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--find-renames",
                    from.as_str(),
                    &to_rev,
                    "--",
                ],
                None,
            )
            .await?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Brings the directory back to checkpoint `id` exactly: files created
    /// since are removed, deleted ones come back, changed and renamed ones
    /// get their old content and name. Files the checkpoints leave out
    /// (ignored, too large, `.git`) are left alone unless the target has a
    /// file at their place or in their way.
    ///
    /// First takes a checkpoint of the present state that also holds every
    /// such file the restore will overwrite or remove, whatever its size or
    /// ignore status, so restoring [`RestoreOutcome::before`] undoes the
    /// restore completely. When one of them cannot be saved (unreadable, a
    /// FIFO, a nested `.git`), nothing is changed and the result is
    /// [`CheckpointError::RestoreWouldLose`] naming each.
    pub async fn restore(&self, id: &CheckpointId) -> Result<RestoreOutcome, CheckpointError> {
        let _lock = self.lock().await?;
        self.ensure_init().await?;
        if let Err(e) = self.finish_borrowing_locked().await {
            // What the restore needs may still be there: read-tree says.
            tracing::warn!(error = %e, "the shadow could not copy the objects it borrows");
        }
        let target_tree = self.tree_of(id.as_str()).await?;
        let staged = self.stage_all().await?;
        let (before_tree, written) = self
            .save_what_restore_changes(&staged, &target_tree)
            .await?;
        let label = format!("before restoring {}", id.short());
        let before = match self
            .commit_tree(&before_tree, &label, &staged.skipped)
            .await?
        {
            Some(checkpoint) => checkpoint.id,
            None => self
                .head()
                .await?
                .map(|(commit, _)| commit)
                .ok_or_else(|| CheckpointError::UnexpectedOutput {
                    command: format!("git for-each-ref {CHECKPOINT_REF}"),
                    message: "no checkpoint after committing the present state".to_string(),
                })?,
        };
        // The index now equals `before`; a one-way merge to the target
        // updates exactly the paths that differ and removes the ones the
        // target lacks.
        self.git(&["read-tree", "--reset", "-u", &target_tree], None)
            .await?;
        let after_tree = self.drop_unkept(&written, &target_tree).await?;
        // What the restore wrote is in the index: the watcher may not
        // take a file it created for one no checkpoint holds.
        self.scanned();
        let label = format!("restored {}", id.short());
        let after = match self.commit_tree(&after_tree, &label, &[]).await? {
            Some(checkpoint) => checkpoint.id,
            None => before.clone(),
        };
        Ok(RestoreOutcome { before, after })
    }

    // ----- internals -------------------------------------------------------

    fn is_initialised(&self) -> bool {
        self.git_dir.join(WORKDIR_MARKER).is_file()
    }

    /// Adds to the index every file on disk that restoring `target_tree`
    /// over `staged` would overwrite or remove and that the present
    /// checkpoint lacks; returns the tree to record as "before" and the
    /// paths the restore will write or remove. Refuses when one cannot be
    /// saved. Caller holds the lock.
    async fn save_what_restore_changes(
        &self,
        staged: &Staged,
        target_tree: &str,
    ) -> Result<(String, Vec<Vec<u8>>), CheckpointError> {
        let out = self
            .git(
                &[
                    "diff-tree",
                    "-r",
                    "-z",
                    "--name-status",
                    "--no-renames",
                    &staged.tree,
                    target_tree,
                ],
                None,
            )
            .await?;
        let diff = capture::TreeDiff::parse(&out);
        let work_tree = self.work_tree.clone();
        let unsaved = tokio::task::spawn_blocking(move || capture::unsaved(&work_tree, &diff))
            .await
            .map_err(|e| self.join_error(e))?;
        if !unsaved.refused.is_empty() {
            return Err(CheckpointError::RestoreWouldLose {
                work_tree: self.work_tree.clone(),
                paths: unsaved.refused,
            });
        }
        // The restore writes or removes every path of the diff, and the
        // saved ones (overwritten, or removed when in the way).
        let mut written = unsaved.changed;
        written.extend(unsaved.capture.iter().cloned());
        if unsaved.capture.is_empty() {
            return Ok((staged.tree.clone(), written));
        }
        let mut paths = Vec::new();
        for path in &unsaved.capture {
            push_z(&mut paths, path);
        }
        // update-index adds what it is given, ignored or not.
        self.git(&["update-index", "--add", "-z", "--stdin"], Some(paths))
            .await?;
        let tree = self.git(&["write-tree"], None).await?;
        Ok((parse_oid(&tree, "git write-tree")?, written))
    }

    /// After a restore wrote `written`: drops from the index those that
    /// checkpoints leave out (over the size limit, or ignored — saved
    /// files brought back by an undo), so later checkpoints leave them out
    /// again, and returns the index's tree (`target_tree` when nothing is
    /// dropped). Caller holds the lock.
    async fn drop_unkept(
        &self,
        written: &[Vec<u8>],
        target_tree: &str,
    ) -> Result<String, CheckpointError> {
        let mut drop = Vec::new();
        let mut check = Vec::new();
        for path in written {
            if self.too_big(path) {
                push_z(&mut drop, path);
            } else {
                push_z(&mut check, path);
            }
        }
        if !check.is_empty() {
            let ignored = self
                .git_run(
                    &["check-ignore", "--no-index", "-z", "--stdin"],
                    Some(check),
                )
                .await?;
            drop.extend_from_slice(&ignored.stdout);
        }
        if drop.is_empty() {
            return Ok(target_tree.to_string());
        }
        self.git(
            &["update-index", "--force-remove", "-z", "--stdin"],
            Some(drop),
        )
        .await?;
        let tree = self.git(&["write-tree"], None).await?;
        parse_oid(&tree, "git write-tree")
    }

    /// Takes the shadow's exclusive lock (waiting for other processes, or
    /// until this handle is cancelled), then removes stale git lock files.
    async fn lock(&self) -> Result<std::fs::File, CheckpointError> {
        let file = self.lock_file(LOCK_FILE).await?;
        stale::clear(&self.git_dir).map_err(|busy| CheckpointError::ShadowBusy {
            lock: busy.lock,
            pid: busy.pid,
        })?;
        Ok(file)
    }

    /// Takes the exclusive lock `name` of the shadow, waiting for other
    /// processes or until this handle is cancelled.
    async fn lock_file(&self, name: &str) -> Result<std::fs::File, CheckpointError> {
        std::fs::create_dir_all(&self.git_dir).map_err(|source| CheckpointError::Io {
            path: self.git_dir.clone(),
            source,
        })?;
        let mut pause = Duration::from_millis(2);
        loop {
            if let Some(file) = self.try_lock_file(name)? {
                return Ok(file);
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = self.cancel.cancelled() => return Err(CheckpointError::Cancelled),
            }
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// Takes the exclusive lock `name` of the shadow if nobody holds it.
    fn try_lock_file(&self, name: &str) -> Result<Option<std::fs::File>, CheckpointError> {
        let path = self.git_dir.join(name);
        let io = |source| CheckpointError::Io {
            path: path.clone(),
            source,
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(io(e)),
        }
    }

    /// Creates and configures the shadow unless done. Caller holds the lock.
    async fn ensure_init(&self) -> Result<(), CheckpointError> {
        let marker = self.git_dir.join(WORKDIR_MARKER);
        match std::fs::read(&marker) {
            Ok(owner) => {
                let owner = path_from_bytes(&owner);
                if owner != self.work_tree {
                    return Err(CheckpointError::WrongOwner {
                        git_dir: self.git_dir.clone(),
                        owner,
                        work_tree: self.work_tree.clone(),
                    });
                }
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(CheckpointError::Io {
                    path: marker,
                    source,
                });
            }
        }
        // The repository is made by hand: a few files, no `git init` and
        // no `git config` processes.
        for dir in ["objects/info", "objects/pack", "refs/heads", "refs/tags"] {
            std::fs::create_dir_all(self.git_dir.join(dir)).map_err(|source| {
                CheckpointError::Io {
                    path: self.git_dir.join(dir),
                    source,
                }
            })?;
        }
        write_file(&self.git_dir.join("HEAD"), b"ref: refs/heads/checkpoints\n")?;
        write_file(
            &self.git_dir.join("config"),
            &shadow_config(&self.work_tree),
        )?;
        let info = self.git_dir.join("info");
        let mut exclude =
            String::from("# kaji's own worktrees are not checkpointed\n/.kaji/worktrees/\n");
        // When $KAJI_HOME lies inside the directory (kaji run in ~), the
        // shadow must not checkpoint itself.
        let kaji_home = std::fs::canonicalize(&self.git_dir)
            .ok()
            .and_then(|d| d.parent().and_then(Path::parent).map(Path::to_path_buf));
        if let Some(rel) = kaji_home
            .as_deref()
            .and_then(|h| h.strip_prefix(&self.work_tree).ok())
            && !rel.as_os_str().is_empty()
        {
            exclude.push_str("# $KAJI_HOME\n/");
            exclude.push_str(&escape_pattern(&rel.to_string_lossy()));
            exclude.push_str("/\n");
        }
        write_file(&info.join("exclude"), exclude.as_bytes())?;
        write_file(
            &info.join("attributes"),
            b"# store contents byte for byte\n* -text -eol -filter -ident -working-tree-encoding\n",
        )?;
        refs::forget_index_tree(&self.git_dir);
        self.borrow_from_user_repository().await;
        write_file(&marker, path_bytes(&self.work_tree).as_ref())?;
        Ok(())
    }

    /// Brings the shadow's index to the present state of the directory and
    /// returns the tree id, with the files left out because they cannot be
    /// read. Caller holds the lock.
    async fn stage_all(&self) -> Result<Staged, CheckpointError> {
        self.stage_changed(None).await
    }

    /// [`stage_all`](Self::stage_all) limited to `pathspecs` when given
    /// (the paths a watcher saw change): git looks at nothing else.
    async fn stage_changed(&self, pathspecs: Option<&[String]>) -> Result<Staged, CheckpointError> {
        let mut diff = vec!["diff-files", "--name-only", "-z", "--no-renames"];
        let mut others = vec!["ls-files", "--others", "--exclude-standard", "-z"];
        if let Some(specs) = pathspecs {
            for args in [&mut diff, &mut others] {
                args.push("--");
                args.extend(specs.iter().map(String::as_str));
            }
        }
        let (changed, others) = tokio::try_join!(self.git(&diff, None), self.git(&others, None))?;
        self.scanned();
        let mut add: Vec<u8> = Vec::new();
        let mut drop_big: Vec<u8> = Vec::new();
        for path in split_z(&changed) {
            if self.too_big(path) {
                push_z(&mut drop_big, path);
            } else {
                push_z(&mut add, path);
            }
        }
        let mut nested: Vec<&[u8]> = Vec::new();
        for path in split_z(&others) {
            if path.ends_with(b"/") {
                nested.push(path);
            } else if !self.too_big(path) {
                push_z(&mut add, path);
            }
        }
        if !nested.is_empty() {
            let owned: Vec<Vec<u8>> = nested.iter().map(|p| p.to_vec()).collect();
            self.expand_nested(owned, &mut add).await?;
        }
        let (add, skipped) = self.readable(add).await?;
        for note in &skipped {
            // A tracked file that can no longer be read leaves the
            // checkpoint, so a restore saves it or refuses, never trusts a
            // stale copy.
            push_z(&mut drop_big, path_bytes(Path::new(&note.path)).as_ref());
        }
        // Many new files (an initial checkpoint): stream their blobs into
        // one pack instead of one loose object file each.
        let threshold = if add.iter().filter(|&&b| b == 0).count() > PACK_THRESHOLD_PATHS {
            "core.bigFileThreshold=1"
        } else {
            "core.bigFileThreshold=512m"
        };
        self.write_tree(add, drop_big, &["-c", threshold], skipped)
            .await
    }

    /// Splits NUL-separated paths to stage into those git can read and
    /// notes on those it cannot (it would fail the whole checkpoint on
    /// them): files that cannot be opened, FIFOs, sockets, devices.
    /// Missing paths stay (git removes them from the index).
    async fn readable(&self, add: Vec<u8>) -> Result<(Vec<u8>, Vec<PathNote>), CheckpointError> {
        let work_tree = self.work_tree.clone();
        tokio::task::spawn_blocking(move || {
            let mut keep = Vec::with_capacity(add.len());
            let mut skipped = Vec::new();
            for path in split_z(&add) {
                match unreadable(&work_tree.join(path_from_bytes(path))) {
                    None => push_z(&mut keep, path),
                    Some(reason) => {
                        let path = path_from_bytes(path).to_string_lossy().into_owned();
                        tracing::warn!(%path, %reason, "left out of the checkpoint");
                        skipped.push(PathNote { path, reason });
                    }
                }
            }
            (keep, skipped)
        })
        .await
        .map_err(|e| self.join_error(e))
    }

    /// A blocking step that did not finish: cancelled when the runtime
    /// shuts down (the task ended first), or an I/O failure otherwise.
    fn join_error(&self, e: tokio::task::JoinError) -> CheckpointError {
        if e.is_cancelled() {
            CheckpointError::Cancelled
        } else {
            CheckpointError::Io {
                path: self.work_tree.clone(),
                source: std::io::Error::other(e.to_string()),
            }
        }
    }

    /// Lists the files inside nested repositories (directories git shows as
    /// `dir/` because they hold their own `.git`) so they are checkpointed
    /// as plain files. A temporary index entry inside each such directory
    /// makes git treat it as an ordinary tracked directory and descend.
    async fn expand_nested(
        &self,
        mut dirs: Vec<Vec<u8>>,
        add: &mut Vec<u8>,
    ) -> Result<(), CheckpointError> {
        let mut depth = 0;
        while !dirs.is_empty() {
            depth += 1;
            if depth > MAX_NESTING {
                return Err(CheckpointError::TooDeep {
                    path: self.work_tree.join(path_from_bytes(&dirs[0])),
                });
            }
            let mut info = Vec::new();
            let mut placeholders = Vec::new();
            for dir in &dirs {
                let mut placeholder = dir.clone();
                placeholder.extend_from_slice(NESTED_PLACEHOLDER.as_bytes());
                info.extend_from_slice(format!("100644 {EMPTY_BLOB}\t").as_bytes());
                info.extend_from_slice(&placeholder);
                info.push(0);
                push_z(&mut placeholders, &placeholder);
            }
            self.git(&["update-index", "-z", "--index-info"], Some(info))
                .await?;
            let mut ls = self.command();
            ls.env("GIT_LITERAL_PATHSPECS", "1")
                .args(["ls-files", "--others", "--exclude-standard", "-z", "--"])
                .args(dirs.iter().map(|d| path_from_bytes(d)));
            let listed = self
                .run_checked(ls, "git ls-files --others -- <nested repositories>", None)
                .await;
            // Remove the placeholders even when listing failed.
            let removed = self
                .git(
                    &["update-index", "--force-remove", "-z", "--stdin"],
                    Some(placeholders),
                )
                .await;
            let listed = listed?;
            removed?;
            let mut next = Vec::new();
            for path in split_z(&listed) {
                if path.ends_with(b"/") {
                    next.push(path.to_vec());
                } else if !self.too_big(path) {
                    push_z(add, path);
                }
            }
            dirs = next;
        }
        Ok(())
    }

    /// Commits `tree` on the checkpoint branch unless it equals the latest
    /// checkpoint's tree. Caller holds the lock.
    async fn commit_tree(
        &self,
        tree: &str,
        label: &str,
        skipped: &[PathNote],
    ) -> Result<Option<Checkpoint>, CheckpointError> {
        let head = self.head().await?;
        if let Some((_, head_tree)) = &head
            && head_tree == tree
        {
            return Ok(None);
        }
        let label = one_line(label);
        let time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let date = format!("{time} +0000");
        let mut cmd = self.command();
        cmd.env("GIT_AUTHOR_DATE", &date)
            .env("GIT_COMMITTER_DATE", &date)
            .args(["commit-tree", tree]);
        if let Some((parent, _)) = &head {
            cmd.args(["-p", parent.as_str()]);
        }
        let skipped = &skipped[..skipped.len().min(MAX_NOTES)];
        let out = self
            .run_checked(cmd, "git commit-tree", Some(message(&label, skipped)))
            .await?;
        let commit = parse_oid(&out, "git commit-tree")?;
        // The branch is a file: moved without an `update-ref` process.
        let parent = head.as_ref().map(|(parent, _)| parent.as_str());
        refs::update(&self.git_dir, &commit, parent).map_err(|e| match e {
            refs::RefError::Io(source) => CheckpointError::Io {
                path: self.git_dir.join(CHECKPOINT_REF),
                source,
            },
            other => CheckpointError::UnexpectedOutput {
                command: format!("update {CHECKPOINT_REF}"),
                message: other.to_string(),
            },
        })?;
        refs::remember(&self.git_dir, &commit, tree);
        Ok(Some(Checkpoint {
            id: CheckpointId(commit),
            label,
            time,
            skipped: skipped.to_vec(),
        }))
    }

    /// The latest checkpoint commit and its tree: read from the shadow's
    /// files when they say it (see [`refs`]), else from git.
    async fn head(&self) -> Result<Option<(CheckpointId, String)>, CheckpointError> {
        match refs::read(&self.git_dir) {
            Ok(None) => return Ok(None),
            Ok(Some(commit)) => {
                if let Some(tree) = refs::cached_tree(&self.git_dir, &commit) {
                    return Ok(Some((CheckpointId(commit), tree)));
                }
            }
            Err(e) => tracing::debug!(error = %e, "the checkpoint branch is read by git"),
        }
        let head = self.head_from_git().await?;
        if let Some((commit, tree)) = &head {
            refs::remember(&self.git_dir, commit.as_str(), tree);
        }
        Ok(head)
    }

    /// The id of the latest checkpoint, without its label (cheaper than
    /// [`latest`](Self::latest): no git process when the shadow's files
    /// say it).
    pub async fn latest_id(&self) -> Result<Option<CheckpointId>, CheckpointError> {
        if !self.is_initialised() {
            return Ok(None);
        }
        Ok(self.head().await?.map(|(commit, _)| commit))
    }

    async fn head_from_git(&self) -> Result<Option<(CheckpointId, String)>, CheckpointError> {
        let out = self
            .git(
                &[
                    "for-each-ref",
                    "--format=%(objectname) %(tree)",
                    CHECKPOINT_REF,
                ],
                None,
            )
            .await?;
        let text = String::from_utf8_lossy(&out);
        let line = text.trim();
        if line.is_empty() {
            return Ok(None);
        }
        match line.split_once(' ') {
            Some((commit, tree)) if is_oid(commit) && is_oid(tree) => {
                Ok(Some((CheckpointId(commit.to_string()), tree.to_string())))
            }
            _ => Err(CheckpointError::UnexpectedOutput {
                command: format!("git for-each-ref {CHECKPOINT_REF}"),
                message: format!("expected `<commit> <tree>`, got {line:?}"),
            }),
        }
    }

    async fn tree_of(&self, commit: &str) -> Result<String, CheckpointError> {
        let spec = format!("{commit}^{{tree}}");
        let out = self.git(&["rev-parse", "--verify", &spec], None).await?;
        parse_oid(&out, "git rev-parse")
    }

    async fn list_limited(&self, limit: Option<usize>) -> Result<Vec<Checkpoint>, CheckpointError> {
        if !self.is_initialised() || self.head().await?.is_none() {
            return Ok(Vec::new());
        }
        let max = limit.map(|n| format!("--max-count={n}"));
        let mut args = vec!["log", "--format=%H%x1f%ct%x1f%s%x1f%b%x1e"];
        if let Some(max) = &max {
            args.push(max);
        }
        args.extend([CHECKPOINT_REF, "--"]);
        let out = self.git(&args, None).await?;
        let text = String::from_utf8_lossy(&out);
        let mut checkpoints = Vec::new();
        for record in text.split('\x1e') {
            let record = record.trim_matches(['\n', '\r']);
            if record.is_empty() {
                continue;
            }
            let mut fields = record.splitn(4, '\x1f');
            let (Some(id), Some(time), Some(label)) = (fields.next(), fields.next(), fields.next())
            else {
                return Err(CheckpointError::UnexpectedOutput {
                    command: "git log".to_string(),
                    message: format!("malformed record {record:?}"),
                });
            };
            let time = time
                .parse::<u64>()
                .map_err(|_| CheckpointError::UnexpectedOutput {
                    command: "git log".to_string(),
                    message: format!("bad time {time:?}"),
                })?;
            checkpoints.push(Checkpoint {
                id: CheckpointId(id.to_string()),
                label: label.to_string(),
                time,
                skipped: parse_notes(fields.next().unwrap_or_default()),
            });
        }
        Ok(checkpoints)
    }

    fn too_big(&self, path: &[u8]) -> bool {
        let full = self.work_tree.join(path_from_bytes(path));
        match std::fs::symlink_metadata(&full) {
            Ok(meta) => meta.is_file() && meta.len() > self.config.max_file_size,
            Err(_) => false,
        }
    }

    /// A git command for the shadow: isolated environment, explicit git
    /// dir and work tree, run in the work tree, in its own process group,
    /// killed when dropped.
    fn command(&self) -> tokio::process::Command {
        let mut cmd = self.command_without_repo();
        let mut git_dir = OsString::from("--git-dir=");
        git_dir.push(&self.git_dir);
        let mut work_tree = OsString::from("--work-tree=");
        work_tree.push(&self.work_tree);
        // GIT_COMMON_DIR: a `commondir` file in the shadow is never read.
        cmd.env("GIT_COMMON_DIR", &self.git_dir)
            .arg(git_dir)
            .arg(work_tree)
            .args(GIT_CONFIG_ARGS);
        cmd
    }

    fn command_without_repo(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.config.git_program);
        kaji_tasks::git::harden(&mut cmd);
        cmd.env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", &self.git_dir)
            .env("XDG_CONFIG_HOME", &self.git_dir)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_AUTHOR_NAME", "kaji")
            .env("GIT_AUTHOR_EMAIL", "kaji@localhost")
            .env("GIT_COMMITTER_NAME", "kaji")
            .env("GIT_COMMITTER_EMAIL", "kaji@localhost")
            .env("LC_ALL", "C")
            .current_dir(&self.work_tree);
        cmd
    }

    /// Runs `git <args>` on the shadow; non-zero exit is an error.
    async fn git(&self, args: &[&str], stdin: Option<Vec<u8>>) -> Result<Vec<u8>, CheckpointError> {
        if args
            .iter()
            .any(|a| matches!(*a, "update-index" | "read-tree"))
        {
            refs::forget_index_tree(&self.git_dir);
        }
        let mut cmd = self.command();
        cmd.args(args);
        self.run_checked(cmd, &describe(args), stdin).await
    }

    /// Runs `cmd`; non-zero exit is an error.
    async fn run_checked(
        &self,
        cmd: tokio::process::Command,
        command: &str,
        stdin: Option<Vec<u8>>,
    ) -> Result<Vec<u8>, CheckpointError> {
        let output = run(cmd, command, stdin, &self.cancel).await?;
        if output.status.success() {
            Ok(output.stdout)
        } else {
            Err(git_error(command.to_string(), &output, &self.git_dir))
        }
    }

    /// Runs `git <args>` on the shadow; exit code 1 is an answer, not an
    /// error (`rev-parse --verify`, `merge-base --is-ancestor`).
    async fn git_run(
        &self,
        args: &[&str],
        stdin: Option<Vec<u8>>,
    ) -> Result<GitRun, CheckpointError> {
        let mut cmd = self.command();
        cmd.args(args);
        let command = describe(args);
        let output = run(cmd, &command, stdin, &self.cancel).await?;
        match output.status.code() {
            Some(0) => Ok(GitRun {
                success: true,
                stdout: output.stdout,
            }),
            Some(1) => Ok(GitRun {
                success: false,
                stdout: output.stdout,
            }),
            _ => Err(git_error(command, &output, &self.git_dir)),
        }
    }
}

/// `$KAJI_HOME/checkpoints/<16 hex digits>` for a canonical directory.
fn shadow_dir(kaji_home: &Path, work_tree: &Path) -> PathBuf {
    kaji_home
        .join("checkpoints")
        .join(format!("{:016x}", fnv1a64(path_bytes(work_tree).as_ref())))
}

/// 64-bit FNV-1a: stable across Rust versions and platforms, which
/// `std::hash` does not promise. Collisions are caught by the owner marker.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(unix)]
fn path_bytes(path: &Path) -> std::borrow::Cow<'_, [u8]> {
    use std::os::unix::ffi::OsStrExt;
    std::borrow::Cow::Borrowed(path.as_os_str().as_bytes())
}

#[cfg(not(unix))]
fn path_bytes(path: &Path) -> std::borrow::Cow<'_, [u8]> {
    std::borrow::Cow::Owned(path.to_string_lossy().into_owned().into_bytes())
}

#[cfg(unix)]
fn path_from_bytes(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(OsStr::from_bytes(bytes))
}

#[cfg(not(unix))]
fn path_from_bytes(bytes: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
}

/// Escapes the characters special in gitignore patterns.
fn escape_pattern(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\' | '!' | '#' | ' ') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn write_file(path: &Path, contents: &[u8]) -> Result<(), CheckpointError> {
    let io = |source| CheckpointError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    std::fs::write(path, contents).map_err(io)
}

fn split_z(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|&b| b == 0).filter(|p| !p.is_empty())
}

fn push_z(buf: &mut Vec<u8>, path: &[u8]) {
    buf.extend_from_slice(path);
    buf.push(0);
}

fn one_line(label: &str) -> String {
    let line: String = label
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let line = line.trim();
    if line.is_empty() {
        "checkpoint".to_string()
    } else {
        line.to_string()
    }
}

fn is_oid(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn parse_oid(out: &[u8], command: &str) -> Result<String, CheckpointError> {
    let text = String::from_utf8_lossy(out);
    let oid = text.trim();
    if is_oid(oid) {
        Ok(oid.to_string())
    } else {
        Err(CheckpointError::UnexpectedOutput {
            command: command.to_string(),
            message: format!("expected an object id, got {oid:?}"),
        })
    }
}

fn describe(args: &[&str]) -> String {
    let mut s = String::from("git");
    for a in args {
        s.push(' ');
        s.push_str(a);
    }
    s
}

/// Runs `cmd` in a process group of its own (see
/// [`kaji_tasks::process::spawn_in_group`]), feeding it `stdin`. When
/// `cancel` fires first, the whole group is killed and waited for, and the
/// result is [`CheckpointError::Cancelled`].
async fn run(
    mut cmd: tokio::process::Command,
    command: &str,
    stdin: Option<Vec<u8>>,
    cancel: &CancellationToken,
) -> Result<std::process::Output, CheckpointError> {
    let spawn_err = |source| CheckpointError::Spawn {
        command: command.to_string(),
        source,
    };
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if cancel.is_cancelled() {
        return Err(CheckpointError::Cancelled);
    }
    let mut child = kaji_tasks::process::spawn_in_group(cmd).map_err(spawn_err)?;
    let pipe_in = child.child_mut().stdin.take();
    let pipe_out = child.child_mut().stdout.take();
    let pipe_err = child.child_mut().stderr.take();
    let finished = {
        let work = async {
            let write = async {
                if let (Some(bytes), Some(mut pipe)) = (stdin, pipe_in) {
                    // A broken pipe means git exited early; its status says why.
                    let _ = pipe.write_all(&bytes).await;
                    let _ = pipe.shutdown().await;
                }
            };
            let ((), stdout, stderr) = tokio::join!(write, read_all(pipe_out), read_all(pipe_err));
            (child.wait().await, stdout, stderr)
        };
        tokio::select! {
            done = work => Some(done),
            () = cancel.cancelled() => None,
        }
    };
    let Some((status, stdout, stderr)) = finished else {
        // Killing a group we made; it may be gone already.
        let _ = child.kill_now().await;
        return Err(CheckpointError::Cancelled);
    };
    let status = status.map_err(spawn_err)?;
    // Dropping `child` sends SIGKILL to whatever git left in its group
    // (normally nothing: one syscall, no scan of the process table).
    drop(child);
    Ok(std::process::Output {
        status,
        stdout,
        stderr,
    })
}

async fn read_all<R: tokio::io::AsyncRead + Unpin>(pipe: Option<R>) -> Vec<u8> {
    let mut buf = Vec::new();
    if let Some(mut pipe) = pipe {
        // A read error ends the output; git's exit status tells the rest.
        let _ = pipe.read_to_end(&mut buf).await;
    }
    buf
}

/// Why a file to stage cannot be read by git, or `None` when it can (or
/// is gone, or a directory or symlink).
fn unreadable(full: &Path) -> Option<String> {
    match std::fs::symlink_metadata(full) {
        Err(e) if capture::gone(&e) => None,
        Err(e) => Some(format!("cannot be examined: {e}")),
        Ok(meta) if meta.is_file() => std::fs::File::open(full)
            .err()
            .map(|e| format!("cannot be read: {e}")),
        Ok(meta) if meta.is_dir() || meta.file_type().is_symlink() => None,
        Ok(meta) => Some(capture::special_kind(&meta).to_string()),
    }
}

/// A checkpoint's commit message: the label, then one line
/// `skipped: <path>\t<reason>` per skipped file (control characters of
/// either become spaces).
fn message(label: &str, skipped: &[PathNote]) -> Vec<u8> {
    let mut text = label.to_string();
    if !skipped.is_empty() {
        text.push('\n');
        for note in skipped {
            text.push('\n');
            text.push_str(SKIPPED_PREFIX);
            text.push_str(&one_line(&note.path));
            text.push('\t');
            text.push_str(&one_line(&note.reason));
        }
    }
    text.push('\n');
    text.into_bytes()
}

/// The skipped-file notes of a checkpoint's message body.
fn parse_notes(body: &str) -> Vec<PathNote> {
    body.lines()
        .filter_map(|line| line.strip_prefix(SKIPPED_PREFIX))
        .filter_map(|note| {
            let (path, reason) = note.split_once('\t')?;
            Some(PathNote {
                path: path.to_string(),
                reason: reason.to_string(),
            })
        })
        .collect()
}

fn list_notes(notes: &[PathNote]) -> String {
    notes
        .iter()
        .map(PathNote::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn git_error(command: String, output: &std::process::Output, git_dir: &Path) -> CheckpointError {
    CheckpointError::Git {
        command,
        status: output.status.to_string(),
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        git_dir: git_dir.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shadow_dir_is_stable_and_per_directory() {
        let home = Path::new("/home/u/.kaji");
        let a = shadow_dir(home, Path::new("/src/a"));
        assert_eq!(a, shadow_dir(home, Path::new("/src/a")));
        assert_ne!(a, shadow_dir(home, Path::new("/src/b")));
        assert!(a.starts_with("/home/u/.kaji/checkpoints"));
        // FNV-1a test vector.
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn skipped_notes_survive_the_commit_message() {
        let notes = vec![
            PathNote {
                path: "dir/a (copy).txt".into(),
                reason: "cannot be read: Permission denied (os error 13)".into(),
            },
            PathNote {
                path: "pipe".into(),
                reason: "a FIFO".into(),
            },
        ];
        let text = String::from_utf8(message("turn 1: Bash", &notes)).expect("utf-8");
        assert!(text.starts_with("turn 1: Bash\n\nskipped: "), "{text}");
        let body = text.split_once("\n\n").map(|(_, b)| b).unwrap_or_default();
        assert_eq!(parse_notes(body), notes);
        assert_eq!(message("x", &[]), b"x\n");
    }

    #[test]
    fn tree_diffs_split_added_and_deleted_paths() {
        let diff = capture::TreeDiff::parse(b"A\0new\0D\0old\0M\0both\0T\0link\0");
        assert_eq!(diff.added, vec![b"new".to_vec()]);
        assert!(diff.deleted.contains(b"old".as_slice()) && diff.deleted.len() == 1);
    }

    #[test]
    fn labels_are_one_line() {
        assert_eq!(one_line("turn 3:\nWrite\r"), "turn 3: Write");
        assert_eq!(one_line("  \n"), "checkpoint");
    }
}
