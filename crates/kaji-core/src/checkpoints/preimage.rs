//! Pre-images: the files a write changes, saved as they were, for a write
//! that cannot wait for the task's initial checkpoint.
//!
//! The first checkpoint of a big directory can take seconds; a write that
//! has waited for it a little ([`GATE_PATIENCE`]) saves the files it is
//! about to change here and goes ahead. The initial checkpoint, once it
//! has staged the directory, takes what was saved and records those files
//! as they were before the write — so "task start" holds the state the
//! task started from, whenever the write happened. A write that comes after
//! the checkpoint took them waits for the checkpoint instead.
//!
//! This module only reads the working directory; it must never write it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a write waits for the initial checkpoint before it saves the
/// pre-images of its files and goes ahead.
pub const GATE_PATIENCE: Duration = Duration::from_millis(500);

/// One file as it was: its bytes and mode, or `None` when it did not exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PreImage {
    /// The path, absolute.
    pub path: PathBuf,
    /// `(git mode, contents)`; `None`: no file was there.
    pub content: Option<(&'static str, Vec<u8>)>,
}

#[derive(Debug, Default)]
struct State {
    /// The initial checkpoint has taken the pre-images: later writes wait.
    taken: bool,
    files: Vec<PreImage>,
}

/// The pre-images of one task's writes before its initial checkpoint.
/// Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct PreImages(Arc<Mutex<State>>);

impl PreImages {
    /// Saves `paths` (absolute) as they are now, unless the initial
    /// checkpoint has already taken the pre-images: then `false`, and the
    /// write must wait for the checkpoint. A path saved before keeps its
    /// first pre-image. Files over `max_size` and what cannot be read are
    /// not saved (checkpoints leave them out too).
    pub fn save(&self, paths: &[PathBuf], max_size: u64) -> bool {
        if self.lock().taken {
            return false;
        }
        let read: Vec<PreImage> = paths.iter().filter_map(|p| read(p, max_size)).collect();
        let mut state = self.lock();
        if state.taken {
            return false;
        }
        for image in read {
            if !state.files.iter().any(|f| f.path == image.path) {
                state.files.push(image);
            }
        }
        true
    }

    /// The saved pre-images; from now on [`save`](Self::save) refuses.
    pub(super) fn take(&self) -> Vec<PreImage> {
        let mut state = self.lock();
        state.taken = true;
        std::mem::take(&mut state.files)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `path` as it is now, or `None` when it cannot be saved.
pub(super) fn read(path: &Path, max_size: u64) -> Option<PreImage> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if super::capture::gone(&e) => {
            return Some(PreImage {
                path: path.to_path_buf(),
                content: None,
            });
        }
        Err(_) => return None,
    };
    let content = if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).ok()?;
        ("120000", super::path_bytes(&target).into_owned())
    } else if meta.is_file() && meta.len() <= max_size {
        #[cfg(unix)]
        let executable = {
            use std::os::unix::fs::PermissionsExt;
            meta.permissions().mode() & 0o111 != 0
        };
        #[cfg(not(unix))]
        let executable = false;
        let mode = if executable { "100755" } else { "100644" };
        (mode, std::fs::read(path).ok()?)
    } else {
        return None;
    };
    Some(PreImage {
        path: path.to_path_buf(),
        content: Some(content),
    })
}
