//! Named-paths checkpoints (an Edit's or a Write's): the files a call
//! wrote are read once, right after the call ([`CheckpointStore::snapshot`]),
//! and staged from those bytes later ([`CheckpointStore::commit_snapshot`]),
//! so the staging may run while the next command already changes the
//! files: the checkpoint still holds them as the call left them.
//!
//! This module only reads the working directory; it must never write it.

use std::collections::HashSet;
use std::path::PathBuf;

use super::{
    Checkpoint, CheckpointError, CheckpointStore, PathNote, Staged, capture, ignored, parse_oid,
    path_from_bytes, preimage, push_z, refs, split_z, stale, unreadable,
};

/// The files a call wrote, as the call left them. `None`: a path could
/// not be resolved, and the whole tree is staged instead (from disk).
#[derive(Debug)]
pub struct Snapshot(Option<Vec<(Vec<u8>, Image)>>);

/// One written file as it was read.
#[derive(Debug)]
enum Image {
    /// Its git mode and bytes.
    File(&'static str, Vec<u8>),
    /// Gone, or over the size limit: out of the checkpoint.
    Out,
    /// Cannot be read: out of the checkpoint, with a note.
    Unreadable(String),
}

impl CheckpointStore {
    /// The files `written` (absolute, or relative to the working
    /// directory) as they are now, for [`commit_snapshot`](Self::commit_snapshot).
    /// Paths outside the directory or inside a `.git` are left out; a
    /// symlink is read through. The watcher no longer names them: a later
    /// change of them is a new event.
    pub fn snapshot(&self, written: &[PathBuf]) -> Snapshot {
        let Some(rels) = self.relative_paths(written) else {
            return Snapshot(None);
        };
        if let Some(Some(watcher)) = self.watcher.get() {
            let settled: Vec<PathBuf> = rels.iter().map(|r| path_from_bytes(r)).collect();
            watcher.settle(&settled);
        }
        let files = rels
            .into_iter()
            .filter_map(|rel| {
                let image = self.image_of(&rel)?;
                Some((rel, image))
            })
            .collect();
        Snapshot(Some(files))
    }

    /// `rel` as it is now; `None` for what a checkpoint never holds (a
    /// directory).
    fn image_of(&self, rel: &[u8]) -> Option<Image> {
        if self.too_big(rel) {
            return Some(Image::Out);
        }
        let full = self.work_tree.join(path_from_bytes(rel));
        if let Some(reason) = unreadable(&full) {
            return Some(Image::Unreadable(reason));
        }
        match preimage::read(&full, self.config.max_file_size) {
            Some(image) => Some(match image.content {
                Some((mode, bytes)) => Image::File(mode, bytes),
                None => Image::Out,
            }),
            None if std::fs::symlink_metadata(&full).is_err_and(|e| capture::gone(&e)) => {
                Some(Image::Out)
            }
            None => None,
        }
    }

    /// A checkpoint of the files in `snapshot` as they were read, and of
    /// nothing else: it costs what changed, not the size of the tree.
    /// Ignored files are left out as [`commit`](Self::commit) leaves them
    /// out. Before the first checkpoint of the directory (or for a
    /// snapshot whose paths could not be resolved) this is
    /// [`commit`](Self::commit).
    pub async fn commit_snapshot(
        &self,
        label: &str,
        snapshot: Snapshot,
    ) -> Result<Option<Checkpoint>, CheckpointError> {
        let lock = self.lock().await?;
        let result = self.commit_snapshot_locked(label, snapshot).await;
        if result.is_err() {
            let _ = stale::clear(&self.git_dir);
        }
        drop(lock);
        result
    }

    async fn commit_snapshot_locked(
        &self,
        label: &str,
        Snapshot(files): Snapshot,
    ) -> Result<Option<Checkpoint>, CheckpointError> {
        self.ensure_init().await?;
        if self.head().await?.is_none() {
            return self.commit_locked(label).await;
        }
        let Some(files) = files else {
            return self.commit_locked(label).await;
        };
        if files.is_empty() {
            return Ok(None);
        }
        let staged = self.stage_snapshot(files).await?;
        self.commit_tree(&staged.tree, label, &staged.skipped).await
    }

    /// Writes the snapshot's files into the shadow's index (their blobs
    /// from the bytes read, `--index-info`) and returns the tree id.
    /// Caller holds the lock.
    async fn stage_snapshot(
        &self,
        files: Vec<(Vec<u8>, Image)>,
    ) -> Result<Staged, CheckpointError> {
        let ignored = self
            .ignored_among(files.iter().filter_map(|(rel, image)| match image {
                Image::File(..) => Some(rel.as_slice()),
                _ => None,
            }))
            .await?;
        let mut info = Vec::new();
        let mut skipped = Vec::new();
        for (rel, image) in files {
            let line = match image {
                Image::File(_, _) if ignored.contains(&rel) => continue,
                Image::File(mode, bytes) => {
                    let out = self
                        .git(&["hash-object", "-w", "--stdin"], Some(bytes))
                        .await?;
                    format!("{mode} {}\t", parse_oid(&out, "git hash-object")?)
                }
                Image::Out => format!("0 {}\t", "0".repeat(40)),
                Image::Unreadable(reason) => {
                    let path = path_from_bytes(&rel).to_string_lossy().into_owned();
                    tracing::warn!(%path, %reason, "left out of the checkpoint");
                    skipped.push(PathNote { path, reason });
                    format!("0 {}\t", "0".repeat(40))
                }
            };
            info.extend_from_slice(line.as_bytes());
            push_z(&mut info, &rel);
        }
        if info.is_empty() {
            return self.write_tree(Vec::new(), Vec::new(), &[], skipped).await;
        }
        self.git(&["update-index", "-z", "--index-info"], Some(info))
            .await?;
        let tree = parse_oid(&self.git(&["write-tree"], None).await?, "git write-tree")?;
        refs::remember_index_tree(&self.git_dir, &tree);
        Ok(Staged { tree, skipped })
    }

    /// Which of `paths` (relative) an ignore rule leaves out. Only paths a
    /// rule matches are asked of `git check-ignore` (no process for the
    /// usual Edit of a file no rule touches); tracked paths are never
    /// ignored.
    async fn ignored_among<'a>(
        &self,
        paths: impl Iterator<Item = &'a [u8]>,
    ) -> Result<HashSet<Vec<u8>>, CheckpointError> {
        let mut rules = ignored::Rules::new(&self.work_tree, &self.git_dir);
        let mut doubtful = Vec::new();
        for path in paths {
            if !rules.untouched(&path_from_bytes(path)) {
                push_z(&mut doubtful, path);
            }
        }
        if doubtful.is_empty() {
            return Ok(HashSet::new());
        }
        // Without --no-index: tracked paths are never "ignored".
        let out = self
            .git_run(&["check-ignore", "-z", "--stdin"], Some(doubtful))
            .await?;
        Ok(split_z(&out.stdout).map(<[u8]>::to_vec).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a snapshot holds is what the file was when it was taken, not
    /// what it is when the checkpoint is written.
    #[tokio::test]
    async fn a_snapshot_is_staged_as_it_was_read() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let a = work.path().join("a.txt");
        std::fs::write(&a, "one\n").unwrap();
        let store = CheckpointStore::open(home.path(), work.path()).unwrap();
        store.commit("start").await.unwrap().unwrap();
        std::fs::write(&a, "two\n").unwrap();
        let snapshot = store.snapshot(std::slice::from_ref(&a));
        std::fs::write(&a, "three\n").unwrap();
        let cp = store
            .commit_snapshot("Edit", snapshot)
            .await
            .unwrap()
            .unwrap();
        store.restore(&cp.id).await.unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "two\n");
    }
}
