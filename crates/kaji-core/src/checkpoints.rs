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
//! - delete a file the shadow does not track: restore only removes paths
//!   that the checkpoint of the present state contains, so ignored files,
//!   files over the size limit and every `.git` stay where they are.
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
//! turns instead of colliding on git's `index.lock`.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::io::AsyncWriteExt;

/// Files larger than this (10 MiB) are left out of checkpoints by default.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 10 * 1024 * 1024;

/// The shadow repository's branch that holds the checkpoints.
const CHECKPOINT_REF: &str = "refs/heads/checkpoints";

/// The file in the shadow that records which directory it belongs to. Its
/// presence also marks a finished initialisation.
const WORKDIR_MARKER: &str = "kaji-workdir";

/// The lock file that serialises changes to one shadow.
const LOCK_FILE: &str = "kaji.lock";

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

/// Tuning of a [`CheckpointStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointConfig {
    /// Files larger than this many bytes are not checkpointed (a restore
    /// leaves them alone). Default [`DEFAULT_MAX_FILE_SIZE`].
    pub max_file_size: u64,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        Self {
            max_file_size: DEFAULT_MAX_FILE_SIZE,
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
        let git_dir = shadow_dir(kaji_home, &work_tree);
        Ok(Self {
            work_tree,
            git_dir,
            config,
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
    pub async fn commit(&self, label: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        let _lock = self.lock().await?;
        self.ensure_init().await?;
        let tree = self.stage_all().await?;
        self.commit_tree(&tree, label).await
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
                self.stage_all().await?
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
    /// get their old content and name. Files the checkpoints never contain
    /// (ignored, too large, `.git`) are left alone.
    ///
    /// First takes a checkpoint of the present state, so the restore can
    /// be undone by restoring [`RestoreOutcome::before`].
    pub async fn restore(&self, id: &CheckpointId) -> Result<RestoreOutcome, CheckpointError> {
        let _lock = self.lock().await?;
        self.ensure_init().await?;
        let target_tree = self.tree_of(id.as_str()).await?;
        let present_tree = self.stage_all().await?;
        let label = format!("before restoring {}", id.short());
        let before = match self.commit_tree(&present_tree, &label).await? {
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
        let label = format!("restored {}", id.short());
        let after = match self.commit_tree(&target_tree, &label).await? {
            Some(checkpoint) => checkpoint.id,
            None => before.clone(),
        };
        Ok(RestoreOutcome { before, after })
    }

    // ----- internals -------------------------------------------------------

    fn is_initialised(&self) -> bool {
        self.git_dir.join(WORKDIR_MARKER).is_file()
    }

    /// Takes the shadow's exclusive lock (waiting for other processes).
    async fn lock(&self) -> Result<std::fs::File, CheckpointError> {
        let git_dir = self.git_dir.clone();
        let path = git_dir.join(LOCK_FILE);
        let locked = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            std::fs::create_dir_all(&git_dir)?;
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(git_dir.join(LOCK_FILE))?;
            file.lock()?;
            Ok(file)
        })
        .await
        .map_err(|e| std::io::Error::other(e.to_string()));
        locked
            .and_then(|r| r)
            .map_err(|source| CheckpointError::Io { path, source })
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
        let mut init = self.command_without_repo();
        init.args([
            "init",
            "--quiet",
            "--bare",
            "--template=",
            "--initial-branch=checkpoints",
        ])
        .arg(&self.git_dir);
        run_checked(init, "git init --bare", None, &self.git_dir).await?;
        for (key, value) in SHADOW_CONFIG {
            self.git(&["config", key, value], None).await?;
        }
        let mut cmd = self.command();
        cmd.arg("config").arg("core.worktree").arg(&self.work_tree);
        run_checked(cmd, "git config core.worktree", None, &self.git_dir).await?;

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
        write_file(&marker, path_bytes(&self.work_tree).as_ref())?;
        Ok(())
    }

    /// Brings the shadow's index to the present state of the directory and
    /// returns the tree id. Caller holds the lock.
    async fn stage_all(&self) -> Result<String, CheckpointError> {
        let (changed, others) = tokio::try_join!(
            self.git(&["diff-files", "--name-only", "-z", "--no-renames"], None),
            self.git(&["ls-files", "--others", "--exclude-standard", "-z"], None),
        )?;
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
        if !add.is_empty() {
            // Many new files (an initial checkpoint): stream their blobs
            // into one pack instead of one loose object file each.
            let threshold = if add.iter().filter(|&&b| b == 0).count() > PACK_THRESHOLD_PATHS {
                "core.bigFileThreshold=1"
            } else {
                "core.bigFileThreshold=512m"
            };
            self.git(
                &[
                    "-c",
                    threshold,
                    "update-index",
                    "--add",
                    "--remove",
                    "--replace",
                    "-z",
                    "--stdin",
                ],
                Some(add),
            )
            .await?;
        }
        if !drop_big.is_empty() {
            self.git(
                &["update-index", "--force-remove", "-z", "--stdin"],
                Some(drop_big),
            )
            .await?;
        }
        let tree = self.git(&["write-tree"], None).await?;
        parse_oid(&tree, "git write-tree")
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
            let listed = run_checked(
                ls,
                "git ls-files --others -- <nested repositories>",
                None,
                &self.git_dir,
            )
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
        let out = run_checked(
            cmd,
            "git commit-tree",
            Some(label.clone().into_bytes()),
            &self.git_dir,
        )
        .await?;
        let commit = parse_oid(&out, "git commit-tree")?;
        let old = match &head {
            Some((parent, _)) => parent.as_str().to_string(),
            None => "0".repeat(commit.len()),
        };
        self.git(
            &[
                "update-ref",
                "-m",
                "checkpoint",
                CHECKPOINT_REF,
                &commit,
                &old,
            ],
            None,
        )
        .await?;
        Ok(Some(Checkpoint {
            id: CheckpointId(commit),
            label,
            time,
        }))
    }

    /// The latest checkpoint commit and its tree.
    async fn head(&self) -> Result<Option<(CheckpointId, String)>, CheckpointError> {
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
        let mut args = vec!["log", "--format=%H%x1f%ct%x1f%s%x1e"];
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
            let mut fields = record.split('\x1f');
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
        cmd.arg(git_dir).arg(work_tree).args(GIT_CONFIG_ARGS);
        cmd
    }

    fn command_without_repo(&self) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("git");
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("GIT_") {
                cmd.env_remove(&key);
            }
        }
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
            .current_dir(&self.work_tree)
            .kill_on_drop(true);
        #[cfg(unix)]
        cmd.process_group(0);
        cmd
    }

    /// Runs `git <args>` on the shadow; non-zero exit is an error.
    async fn git(&self, args: &[&str], stdin: Option<Vec<u8>>) -> Result<Vec<u8>, CheckpointError> {
        let mut cmd = self.command();
        cmd.args(args);
        run_checked(cmd, &describe(args), stdin, &self.git_dir).await
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
        let output = run(cmd, &command, stdin).await?;
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

async fn run(
    mut cmd: tokio::process::Command,
    command: &str,
    stdin: Option<Vec<u8>>,
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
    let mut child = cmd.spawn().map_err(spawn_err)?;
    let writer = match (stdin, child.stdin.take()) {
        (Some(bytes), Some(mut pipe)) => Some(tokio::spawn(async move {
            // A broken pipe means git exited early; its exit status says why.
            let _ = pipe.write_all(&bytes).await;
            let _ = pipe.shutdown().await;
        })),
        _ => None,
    };
    let output = child.wait_with_output().await.map_err(spawn_err)?;
    if let Some(writer) = writer {
        let _ = writer.await;
    }
    Ok(output)
}

async fn run_checked(
    cmd: tokio::process::Command,
    command: &str,
    stdin: Option<Vec<u8>>,
    git_dir: &Path,
) -> Result<Vec<u8>, CheckpointError> {
    let output = run(cmd, command, stdin).await?;
    if output.status.success() {
        Ok(output.stdout)
    } else {
        Err(git_error(command.to_string(), &output, git_dir))
    }
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
    fn labels_are_one_line() {
        assert_eq!(one_line("turn 3:\nWrite\r"), "turn 3: Write");
        assert_eq!(one_line("  \n"), "checkpoint");
    }
}
