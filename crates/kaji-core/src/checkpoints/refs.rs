//! The checkpoint branch read and moved without starting git: the newest
//! checkpoint is a file (`refs/heads/checkpoints`, or its line in
//! `packed-refs`), and the tree of a commit is remembered in `kaji-head`
//! once known, so a checkpoint needs neither `for-each-ref` nor
//! `update-ref`. Likewise the tree of the shadow's index is remembered in
//! `kaji-index-tree` after `write-tree`, so a checkpoint that finds nothing
//! to stage needs no `write-tree`.
//!
//! The branch is moved with git's own protocol — `<ref>.lock` created
//! exclusively, written, renamed over the ref — by the caller holding
//! `kaji.lock`, and only from the value it read (compare and swap), so a
//! git run by hand on the shadow sees a normal repository.
//!
//! What this module must never do: name a tree for a commit it was not
//! recorded for (the cache is keyed by the commit id, whose tree never
//! changes), name a tree for an index that may have changed since (the
//! record is removed before every git command that changes the index's
//! entries, and must match the index file's size and times), or move the
//! branch from a value it did not expect. Anything it cannot read with
//! certainty (a symbolic ref, a malformed file) is `Err` or `None`, and the
//! caller asks git.

use std::io::Write;
use std::path::Path;

use super::{CHECKPOINT_REF, is_oid};

/// The file that remembers the tree of the newest checkpoint:
/// `<commit> <tree>\n`.
const HEAD_CACHE: &str = "kaji-head";

/// The file that remembers the tree of the shadow's index:
/// `<tree> <size> <mtime ns> <ctime ns>\n` of the index file.
const INDEX_TREE: &str = "kaji-index-tree";

/// The index file's identity as [`INDEX_TREE`] records it.
fn index_stamp(git_dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(git_dir.join("index")).ok()?;
    let mtime = meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128;
    let ctime = meta.ctime() as i128 * 1_000_000_000 + meta.ctime_nsec() as i128;
    Some(format!("{} {mtime} {ctime} {}", meta.len(), meta.ino()))
}

/// The tree of the shadow's index, when it was recorded after the last
/// change of the index's entries and the index file is the one recorded.
pub(super) fn index_tree(git_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(git_dir.join(INDEX_TREE)).ok()?;
    let (tree, stamp) = text.trim_end().split_once(' ')?;
    (is_oid(tree) && index_stamp(git_dir)? == stamp).then(|| tree.to_string())
}

/// Records `tree` as the tree of the index as it is now (after
/// `write-tree`). Best effort.
pub(super) fn remember_index_tree(git_dir: &Path, tree: &str) {
    let Some(stamp) = index_stamp(git_dir) else {
        return forget_index_tree(git_dir);
    };
    let tmp = git_dir.join(format!("{INDEX_TREE}.tmp"));
    let written = std::fs::write(&tmp, format!("{tree} {stamp}\n"))
        .and_then(|()| std::fs::rename(&tmp, git_dir.join(INDEX_TREE)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
        forget_index_tree(git_dir);
    }
}

/// Forgets the index's tree: called before anything changes the index.
pub(super) fn forget_index_tree(git_dir: &Path) {
    let _ = std::fs::remove_file(git_dir.join(INDEX_TREE));
}

/// What the branch could not be read or moved for.
#[derive(Debug)]
pub(super) enum RefError {
    /// A file of the shadow could not be read or written.
    Io(std::io::Error),
    /// The ref holds something this module does not read (a symbolic
    /// ref, a malformed id): git must answer.
    Unreadable(String),
    /// The branch is not where the caller expected it.
    Moved {
        expected: Option<String>,
        found: Option<String>,
    },
}

impl From<std::io::Error> for RefError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

impl std::fmt::Display for RefError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Io(e) => write!(f, "{e}"),
            Self::Unreadable(what) => write!(f, "{CHECKPOINT_REF} holds {what:?}"),
            Self::Moved { expected, found } => write!(
                f,
                "{CHECKPOINT_REF} moved: expected {}, found {}",
                expected.as_deref().unwrap_or("no branch"),
                found.as_deref().unwrap_or("no branch")
            ),
        }
    }
}

/// The commit the checkpoint branch points at; `None` when there is no
/// branch yet.
pub(super) fn read(git_dir: &Path) -> Result<Option<String>, RefError> {
    match std::fs::read(git_dir.join(CHECKPOINT_REF)) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let id = text.trim_end_matches(['\n', '\r']);
            return if is_oid(id) {
                Ok(Some(id.to_string()))
            } else {
                Err(RefError::Unreadable(id.to_string()))
            };
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    let packed = match std::fs::read(git_dir.join("packed-refs")) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let text = String::from_utf8_lossy(&packed);
    for line in text.lines() {
        if let Some((id, name)) = line.split_once(' ')
            && name == CHECKPOINT_REF
        {
            return if is_oid(id) {
                Ok(Some(id.to_string()))
            } else {
                Err(RefError::Unreadable(id.to_string()))
            };
        }
    }
    Ok(None)
}

/// The tree of `commit` when it was recorded (see [`remember`]).
pub(super) fn cached_tree(git_dir: &Path, commit: &str) -> Option<String> {
    let bytes = std::fs::read(git_dir.join(HEAD_CACHE)).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (id, tree) = text.trim_end().split_once(' ')?;
    (id == commit && is_oid(tree)).then(|| tree.to_string())
}

/// Records that `commit`'s tree is `tree`. Best effort: without the
/// record, git is asked.
pub(super) fn remember(git_dir: &Path, commit: &str, tree: &str) {
    let tmp = git_dir.join(format!("{HEAD_CACHE}.tmp"));
    let written = std::fs::write(&tmp, format!("{commit} {tree}\n"))
        .and_then(|()| std::fs::rename(&tmp, git_dir.join(HEAD_CACHE)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Moves the branch from `old` (`None`: it must not exist) to `new`, as
/// `git update-ref <ref> <new> <old>` would. The caller holds `kaji.lock`.
pub(super) fn update(git_dir: &Path, new: &str, old: Option<&str>) -> Result<(), RefError> {
    let found = read(git_dir)?;
    if found.as_deref() != old {
        return Err(RefError::Moved {
            expected: old.map(str::to_string),
            found,
        });
    }
    let path = git_dir.join(CHECKPOINT_REF);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let lock = git_dir.join(format!("{CHECKPOINT_REF}.lock"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)?;
    let written = file
        .write_all(format!("{new}\n").as_bytes())
        .and_then(|()| std::fs::rename(&lock, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&lock);
        return Err(e.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";

    #[test]
    fn the_branch_moves_only_from_the_value_expected() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(matches!(read(dir.path()), Ok(None)));
        update(dir.path(), A, None).expect("create");
        assert_eq!(read(dir.path()).expect("read").as_deref(), Some(A));
        assert!(matches!(
            update(dir.path(), B, None),
            Err(RefError::Moved { .. })
        ));
        update(dir.path(), B, Some(A)).expect("move");
        assert_eq!(read(dir.path()).expect("read").as_deref(), Some(B));
        assert!(!dir.path().join("refs/heads/checkpoints.lock").exists());
    }

    #[test]
    fn a_packed_branch_is_read_and_a_loose_one_wins() {
        let dir = tempfile::tempdir().expect("tempdir");
        let packed =
            format!("# pack-refs with: peeled fully-peeled sorted\n{A} {CHECKPOINT_REF}\n");
        std::fs::write(dir.path().join("packed-refs"), packed).expect("write");
        assert_eq!(read(dir.path()).expect("read").as_deref(), Some(A));
        update(dir.path(), B, Some(A)).expect("move");
        assert_eq!(read(dir.path()).expect("read").as_deref(), Some(B));
    }

    #[test]
    fn a_symbolic_ref_is_left_to_git() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("refs/heads")).expect("mkdir");
        std::fs::write(dir.path().join(CHECKPOINT_REF), "ref: refs/heads/x\n").expect("write");
        assert!(matches!(read(dir.path()), Err(RefError::Unreadable(_))));
    }

    #[test]
    fn the_index_tree_holds_only_for_the_index_recorded() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("index"), "one").expect("write");
        assert_eq!(index_tree(dir.path()), None);
        remember_index_tree(dir.path(), A);
        assert_eq!(index_tree(dir.path()).as_deref(), Some(A));
        // Rewritten as git does (a new file renamed over it).
        std::fs::write(dir.path().join("index.lock"), "two!").expect("write");
        std::fs::rename(dir.path().join("index.lock"), dir.path().join("index")).expect("mv");
        assert_eq!(index_tree(dir.path()), None);
        remember_index_tree(dir.path(), B);
        forget_index_tree(dir.path());
        assert_eq!(index_tree(dir.path()), None);
    }

    #[test]
    fn the_tree_cache_answers_only_for_its_commit() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(cached_tree(dir.path(), A), None);
        remember(dir.path(), A, B);
        assert_eq!(cached_tree(dir.path(), A).as_deref(), Some(B));
        assert_eq!(cached_tree(dir.path(), B), None);
    }
}
