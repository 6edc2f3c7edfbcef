//! Borrowing what the user's git already knows, and giving it back.
//!
//! A new shadow of a checkout's top directory borrows the checkout's
//! objects (`objects/info/alternates`) and a copy of its index, so its
//! first checkpoint hashes only dirty and untracked files. It then copies
//! every object its checkpoints use into a pack of its own and stops
//! borrowing, so that the user's `git gc` never breaks a restore.
//!
//! The copy (`git repack -a -d`) of a big repository takes longer than a
//! short session, so it runs **detached**: it outlives the kaji that
//! started it, holding `kaji-borrow.lock` through a descriptor it
//! inherited, and leaves `kaji-borrow-packed` behind when it succeeded. A
//! later operation that holds `kaji.lock` then copies what checkpoints
//! referenced since (a `repack` that keeps the packs already made, so it
//! writes only those objects) and removes `objects/info/alternates`.
//!
//! What this module must never do: remove `objects/info/alternates` while
//! a checkpoint may reference a borrowed object the shadow does not hold
//! (the removal happens under `kaji.lock`, after a copy made under it);
//! start a second copy while one runs (`kaji-borrow.lock`); or depend on a
//! copy having finished — one that was killed leaves the shadow borrowing,
//! as usable as before, and the next session starts it again.

use std::fs::File;
use std::path::Path;

use super::{
    ALTERNATES, BORROW_LOCK_FILE, CheckpointError, CheckpointStore, path_bytes, push_z, split_z,
    write_file,
};

/// Left in the shadow by a background copy that succeeded.
const PACKED_MARKER: &str = "kaji-borrow-packed";

/// What [`CheckpointStore::advance_borrowing`] did.
#[derive(Debug)]
pub enum BorrowStep {
    /// The shadow borrows nothing (any more).
    Done,
    /// Another process is copying (this or an earlier session's copy).
    Copying,
    /// A copy was started in the background: a detached `git repack`,
    /// which may be awaited (then [`CheckpointStore::finish_borrowing`]
    /// completes the borrowing) or left to finish on its own.
    Started(tokio::process::Child),
}

impl CheckpointStore {
    /// A new shadow starts from what the user's git already knows, when
    /// the directory is the top of a checkout: it borrows the checkout's
    /// objects (`objects/info/alternates`) and a copy of its index (its
    /// stat data), so the first checkpoint hashes only dirty and
    /// untracked files. Entries the shadow must not trust are dropped
    /// from the copy (gitlinks, unmerged, assume-unchanged and
    /// skip-worktree entries; they are staged as files again when
    /// present). Anything unexpected undoes the borrowing: the first
    /// checkpoint then hashes everything. Caller holds the lock.
    pub(super) async fn borrow_from_user_repository(&self) {
        let Ok(Some(dirs)) = kaji_tasks::git::discover(&self.work_tree) else {
            return;
        };
        if dirs.work_tree != self.work_tree {
            return;
        }
        let alternates = self.git_dir.join(ALTERNATES);
        let index = self.git_dir.join("index");
        if self.borrow(&dirs, &alternates, &index).await.is_err() {
            let _ = std::fs::remove_file(&alternates);
            let _ = std::fs::remove_file(&index);
        }
    }

    async fn borrow(
        &self,
        dirs: &kaji_tasks::git::GitDirs,
        alternates: &Path,
        index: &Path,
    ) -> Result<(), CheckpointError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| CheckpointError::Io { path, source }
        };
        let objects = dirs.common_dir.join("objects");
        if !objects.is_dir() {
            return Ok(());
        }
        let user_index = dirs.git_dir.join("index");
        let bytes = match std::fs::read(&user_index) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io(&user_index)(e)),
        };
        let mut line = path_bytes(&objects).into_owned();
        line.push(b'\n');
        write_file(alternates, &line)?;
        write_file(index, &bytes)?;
        // Keep the index's time: git's racy-entry check compares with it.
        if let Ok(modified) = std::fs::metadata(&user_index).and_then(|m| m.modified()) {
            let _ = std::fs::File::options()
                .write(true)
                .open(index)
                .and_then(|f| f.set_modified(modified));
        }
        let listed = self.git(&["ls-files", "-v", "-s", "-z"], None).await?;
        let mut distrusted = Vec::new();
        for entry in split_z(&listed) {
            // `<tag> <mode> <oid> <stage>\t<path>`
            let tab = entry.iter().position(|&b| b == b'\t');
            let (Some(tab), Some(&tag)) = (tab, entry.first()) else {
                return Err(CheckpointError::UnexpectedOutput {
                    command: "git ls-files -v -s".to_string(),
                    message: format!("malformed entry {:?}", String::from_utf8_lossy(entry)),
                });
            };
            let (fields, path) = (&entry[..tab], &entry[tab + 1..]);
            let gitlink = fields.get(2..).is_some_and(|f| f.starts_with(b"160000 "));
            let unmerged = !fields.ends_with(b" 0");
            if tag.is_ascii_lowercase() || tag == b'S' || gitlink || unmerged {
                push_z(&mut distrusted, path);
            }
        }
        if !distrusted.is_empty() {
            self.git(
                &["update-index", "--force-remove", "-z", "--stdin"],
                Some(distrusted),
            )
            .await?;
        }
        Ok(())
    }

    /// Whether the shadow still borrows the user's objects.
    pub fn borrows(&self) -> bool {
        self.git_dir.join(ALTERNATES).is_file()
    }

    /// Makes the shadow self-sufficient after it borrowed the user's
    /// objects: every object its checkpoints and index use is copied into
    /// a pack of its own, then it stops borrowing. The user's repository
    /// may then lose those objects (`git gc`, a rebase, `git prune`)
    /// without harm to any checkpoint. Waits for a copy running in the
    /// background (of any process) and completes it; copies everything
    /// itself when none ran or one was cut short. Does nothing when the
    /// shadow borrows nothing.
    pub async fn finish_borrowing(&self) -> Result<(), CheckpointError> {
        if !self.borrows() {
            return Ok(());
        }
        let _lock = self.lock().await?;
        self.finish_borrowing_locked().await
    }

    /// [`finish_borrowing`](Self::finish_borrowing); the caller holds
    /// `kaji.lock`.
    pub(super) async fn finish_borrowing_locked(&self) -> Result<(), CheckpointError> {
        if !self.borrows() {
            return Ok(());
        }
        let _borrow = self.lock_file(BORROW_LOCK_FILE).await?;
        self.copy_borrowed().await
    }

    /// Moves the copy of borrowed objects on without waiting for it, for
    /// a task's start: completes a copy an earlier session made in the
    /// background (a small `repack` under `kaji.lock`), else starts one
    /// detached unless one runs already.
    pub async fn advance_borrowing(&self) -> Result<BorrowStep, CheckpointError> {
        if !self.borrows() {
            return Ok(BorrowStep::Done);
        }
        let _lock = self.lock().await?;
        let Some(borrow) = self.try_lock_file(BORROW_LOCK_FILE)? else {
            return Ok(BorrowStep::Copying);
        };
        if !self.borrows() {
            return Ok(BorrowStep::Done);
        }
        if self.git_dir.join(PACKED_MARKER).is_file() {
            self.copy_borrowed().await?;
            return Ok(BorrowStep::Done);
        }
        self.remove_partial_packs();
        let child = self.spawn_copy(&borrow)?;
        // The child holds the lock now (its inherited descriptor).
        drop(borrow);
        Ok(BorrowStep::Started(child))
    }

    /// Copies what the shadow still borrows and stops borrowing. Caller
    /// holds `kaji.lock` and `kaji-borrow.lock`: no checkpoint can
    /// reference a new borrowed object meanwhile.
    async fn copy_borrowed(&self) -> Result<(), CheckpointError> {
        if !self.borrows() {
            return Ok(());
        }
        self.remove_partial_packs();
        let marker = self.git_dir.join(PACKED_MARKER);
        let mut args = vec!["repack".to_string(), "-a".into(), "-d".into(), "-q".into()];
        if marker.is_file() {
            // The background copy holds what checkpoints used when it
            // started: pack only what they referenced since.
            args.extend(
                self.local_packs()?
                    .into_iter()
                    .map(|p| format!("--keep-pack={p}")),
            );
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.git(&args, None).await?;
        let alternates = self.git_dir.join(ALTERNATES);
        std::fs::remove_file(&alternates).map_err(|source| CheckpointError::Io {
            path: alternates,
            source,
        })?;
        match std::fs::remove_file(&marker) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(CheckpointError::Io {
                path: marker,
                source: e,
            }),
            _ => Ok(()),
        }
    }

    /// Starts `git repack -a -d` detached (see the module documentation),
    /// holding the borrow lock `borrow` through an inherited descriptor;
    /// it leaves [`PACKED_MARKER`] when it succeeds.
    fn spawn_copy(&self, borrow: &File) -> Result<tokio::process::Child, CheckpointError> {
        use std::os::fd::AsRawFd;
        let mut git = self.command();
        git.args(["repack", "-a", "-d", "-q"]);
        let git = git.as_std();
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg("marker=$1; shift; \"$@\" && : > \"$marker\"")
            .arg("kaji-borrow-copy")
            .arg(self.git_dir.join(PACKED_MARKER))
            .arg(git.get_program())
            .args(git.get_args());
        for (key, value) in git.get_envs() {
            match value {
                Some(value) => cmd.env(key, value),
                None => cmd.env_remove(key),
            };
        }
        if let Some(dir) = git.get_current_dir() {
            cmd.current_dir(dir);
        }
        kaji_tasks::process::spawn_detached(cmd, Some(borrow.as_raw_fd())).map_err(|source| {
            CheckpointError::Spawn {
                command: "git repack -a -d -q (in the background)".to_string(),
                source,
            }
        })
    }

    /// The file names of the shadow's own packs.
    fn local_packs(&self) -> Result<Vec<String>, CheckpointError> {
        let dir = self.git_dir.join("objects/pack");
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(CheckpointError::Io { path: dir, source }),
        };
        let mut packs: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with("pack-") && n.ends_with(".pack"))
            .collect();
        packs.sort();
        Ok(packs)
    }

    /// Removes what a killed copy left in `objects/pack` (git's temporary
    /// pack files). Caller holds both locks, so no git is writing them.
    fn remove_partial_packs(&self) {
        let Ok(entries) = std::fs::read_dir(self.git_dir.join("objects/pack")) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("tmp_") || name.starts_with(".tmp-") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}
