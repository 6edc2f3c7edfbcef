//! What a restore would destroy that no checkpoint holds, found before the
//! restore changes anything.
//!
//! A restore rewrites the paths where the target checkpoint differs from
//! the present one. Paths the present checkpoint holds are safe: restoring
//! it brings them back. The others are files on disk that checkpoints
//! leave out — ignored files, files over the size limit — sitting where the
//! target has a file, or in the way of one (a file where the target has a
//! directory, a directory where it has a file). [`unsaved`] lists them so
//! the restore can add them to its "before" checkpoint first, whatever
//! their size or ignore status; what cannot be saved (unreadable files,
//! FIFOs and other special files, nested `.git` directories) makes the
//! restore refuse, naming each path.
//!
//! This module only reads: it must never change the work tree or the
//! shadow.

use std::collections::BTreeSet;
use std::path::Path;

use super::{PathNote, path_from_bytes};

/// The paths the restore must save first, and those it cannot save.
#[derive(Debug, Default)]
pub(super) struct Unsaved {
    /// Files and symlinks to add to the "before" checkpoint.
    pub capture: Vec<Vec<u8>>,
    /// What cannot be saved, with why.
    pub refused: Vec<PathNote>,
    /// Every path where the present checkpoint and the target differ.
    pub changed: Vec<Vec<u8>>,
}

/// The changes of `git diff-tree -r -z --name-status --no-renames
/// <present> <target>` that matter here.
#[derive(Debug, Default)]
pub(super) struct TreeDiff {
    /// Paths the target has and the present checkpoint lacks.
    pub added: Vec<Vec<u8>>,
    /// Paths the present checkpoint has and the target lacks.
    pub deleted: BTreeSet<Vec<u8>>,
    /// Every path of the diff, whatever its status.
    pub all: Vec<Vec<u8>>,
}

impl TreeDiff {
    /// Parses `diff-tree -z --name-status` output: `<status>\0<path>\0…`.
    pub fn parse(out: &[u8]) -> Self {
        let mut diff = Self::default();
        let mut fields = out.split(|&b| b == 0);
        while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
            diff.all.push(path.to_vec());
            match status.first() {
                Some(b'A') => diff.added.push(path.to_vec()),
                Some(b'D') => {
                    diff.deleted.insert(path.to_vec());
                }
                _ => {}
            }
        }
        diff
    }
}

/// Everything on disk under `work_tree` that the restore described by
/// `diff` would overwrite or remove although the present checkpoint does
/// not hold it.
pub(super) fn unsaved(work_tree: &Path, diff: &TreeDiff) -> Unsaved {
    let mut found = Found {
        work_tree,
        deleted: &diff.deleted,
        seen: BTreeSet::new(),
        unsaved: Unsaved::default(),
    };
    for path in &diff.added {
        for (i, _) in path.iter().enumerate().filter(|(_, b)| **b == b'/') {
            found.ancestor(&path[..i]);
        }
        found.target_path(path);
    }
    found.unsaved.changed = diff.all.clone();
    found.unsaved
}

struct Found<'a> {
    work_tree: &'a Path,
    deleted: &'a BTreeSet<Vec<u8>>,
    seen: BTreeSet<Vec<u8>>,
    unsaved: Unsaved,
}

impl Found<'_> {
    /// A directory of a path the target adds: anything but a directory
    /// there is in the way.
    fn ancestor(&mut self, rel: &[u8]) {
        match std::fs::symlink_metadata(self.work_tree.join(path_from_bytes(rel))) {
            Ok(meta) if meta.is_dir() => {}
            Ok(meta) => self.entry(rel, &meta),
            Err(_) => {}
        }
    }

    /// A path the target adds: whatever is there now is replaced.
    fn target_path(&mut self, rel: &[u8]) {
        let full = self.work_tree.join(path_from_bytes(rel));
        match std::fs::symlink_metadata(&full) {
            Ok(meta) if meta.is_dir() => self.directory(rel),
            Ok(meta) => self.entry(rel, &meta),
            Err(e) if gone(&e) => {}
            Err(e) => self.refuse(rel, format!("cannot be examined: {e}")),
        }
    }

    /// A directory the target replaces with a file: every entry in it.
    fn directory(&mut self, rel: &[u8]) {
        let full = self.work_tree.join(path_from_bytes(rel));
        let entries = match std::fs::read_dir(&full) {
            Ok(entries) => entries,
            Err(e) => return self.refuse(rel, format!("directory cannot be read: {e}")),
        };
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => return self.refuse(rel, format!("directory cannot be read: {e}")),
            };
            let mut child = rel.to_vec();
            child.push(b'/');
            child.extend_from_slice(super::path_bytes(Path::new(&entry.file_name())).as_ref());
            if entry.file_name() == ".git" {
                self.refuse(
                    &child,
                    "a git repository, which checkpoints never hold".into(),
                );
                continue;
            }
            match entry.metadata() {
                Ok(meta) if meta.is_dir() => self.directory(&child),
                Ok(meta) => self.entry(&child, &meta),
                Err(e) => self.refuse(&child, format!("cannot be examined: {e}")),
            }
        }
    }

    /// One non-directory entry on disk that the restore replaces.
    fn entry(&mut self, rel: &[u8], meta: &std::fs::Metadata) {
        if self.deleted.contains(rel) || !self.seen.insert(rel.to_vec()) {
            return; // held by the present checkpoint, or already handled
        }
        let kind = meta.file_type();
        if kind.is_symlink() {
            self.unsaved.capture.push(rel.to_vec());
        } else if kind.is_file() {
            match std::fs::File::open(self.work_tree.join(path_from_bytes(rel))) {
                Ok(_) => self.unsaved.capture.push(rel.to_vec()),
                Err(e) => self.refuse(rel, format!("cannot be read to save it: {e}")),
            }
        } else {
            self.refuse(
                rel,
                format!("{}, which cannot be saved", special_kind(meta)),
            );
        }
    }

    fn refuse(&mut self, rel: &[u8], reason: String) {
        self.unsaved.refused.push(PathNote {
            path: path_from_bytes(rel).to_string_lossy().into_owned(),
            reason,
        });
    }
}

/// Whether a stat error means nothing is there (also when a directory
/// on the way is a file now).
pub(super) fn gone(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// "a FIFO", "a socket", … for a file that is neither regular, a
/// directory nor a symlink.
pub(super) fn special_kind(meta: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let kind = meta.file_type();
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_block_device() || kind.is_char_device() {
            return "a device file";
        }
    }
    let _ = meta;
    "not a regular file"
}
