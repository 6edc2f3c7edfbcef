//! A watcher of the working directory for checkpoints: an inotify watch on
//! every directory of the tree (but `.git` directories and the places the
//! shadow leaves out), so that the checkpoint after a command stages only
//! the paths that changed instead of scanning the whole tree twice.
//!
//! Events are read when a checkpoint asks for them, by draining the inotify
//! descriptor without blocking — never by a thread racing the command: the
//! kernel queued every event of a command before the command ended, so the
//! drain after it sees them all, without waiting on any clock.
//!
//! What it must never do: lose a change silently. A full event queue, a
//! directory moved (its watches would name old paths), a tree with more
//! directories than the cap, a watch the kernel refuses, or more changed
//! paths than a checkpoint should list all turn into [`Changes::Unknown`],
//! which the caller answers with a scan of the whole tree.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// How many directories the watcher watches at most by default: a tree
/// with more is checkpointed by scanning it, as without a watcher.
pub const DEFAULT_MAX_WATCHES: usize = 10_000;

/// The environment variable that overrides [`DEFAULT_MAX_WATCHES`]; `0`
/// turns the watcher off.
pub const MAX_WATCHES_ENV: &str = "KAJI_CHECKPOINT_MAX_WATCHES";

/// More changed paths than this since the last checkpoint make the next
/// one scan the tree (git takes pathspecs on its command line).
const MAX_CHANGED_PATHS: usize = 1_000;

/// The name ending of the temporary file kaji's file tools write before
/// renaming it over the file they replace (kaji-tools `fs/atomic.rs`).
const TOOL_TEMP_SUFFIX: &str = ".kaji-tmp";

/// The events that can change what a checkpoint holds.
const MASK: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR
    | libc::IN_DONT_FOLLOW;

/// `$KAJI_CHECKPOINT_MAX_WATCHES`, else [`DEFAULT_MAX_WATCHES`]; an
/// unparsable value is warned about and ignored.
pub fn max_watches() -> usize {
    match std::env::var(MAX_WATCHES_ENV) {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            tracing::warn!(value = %v, "{MAX_WATCHES_ENV} is not a number; using {DEFAULT_MAX_WATCHES}");
            DEFAULT_MAX_WATCHES
        }),
        Err(_) => DEFAULT_MAX_WATCHES,
    }
}

/// What changed in the tree since the last [`TreeWatcher::take`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changes {
    /// Nothing at all.
    Nothing,
    /// These paths (relative to the tree, files or directories, sorted)
    /// and nothing else.
    Paths(Vec<PathBuf>),
    /// Not known: scan the whole tree.
    Unknown,
}

/// Why a watcher could not start; the tree is then scanned as before.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The tree has more directories than the cap.
    #[error("the tree has more than {max} directories to watch ({MAX_WATCHES_ENV})")]
    TooManyDirectories {
        /// The cap.
        max: usize,
    },
    /// The watcher is turned off (`KAJI_CHECKPOINT_MAX_WATCHES=0`).
    #[error("the watcher is turned off ({MAX_WATCHES_ENV}=0)")]
    Off,
    /// inotify refused (no descriptor, the user's watch limit reached).
    #[error("inotify: {0}")]
    Inotify(#[from] std::io::Error),
}

/// The watcher of one working directory (see the module documentation).
#[derive(Debug)]
pub struct TreeWatcher {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The inotify instance; closed in the background on drop (see
    /// `Drop for Inner`).
    fd: std::mem::ManuallyDrop<OwnedFd>,
    root: PathBuf,
    /// Directories never watched (absolute): kaji's home and worktrees.
    excluded: Vec<PathBuf>,
    /// Watch descriptor → the directory it watches, relative to `root`.
    dirs: HashMap<i32, PathBuf>,
    max: usize,
    changed: BTreeSet<PathBuf>,
    /// Changed paths whose first event since the last scan of them was
    /// their creation: no checkpoint can hold them (see `scanned`).
    born: HashSet<PathBuf>,
    unknown: bool,
    /// The watches no longer name the right paths: start again.
    rebuild: bool,
}

impl TreeWatcher {
    /// Watches every directory under `root` except `.git` directories and
    /// `excluded` ones; fails when there are more than `max`.
    pub fn start(root: &Path, excluded: Vec<PathBuf>, max: usize) -> Result<Self, WatchError> {
        if max == 0 {
            return Err(WatchError::Off);
        }
        let inner = Inner::new(root.to_path_buf(), excluded, max)?;
        Ok(Self {
            inner: Mutex::new(inner),
        })
    }

    /// What changed since the last call (or since [`start`](Self::start)),
    /// reading every event the kernel has queued; the set starts empty
    /// again.
    pub fn take(&self) -> Changes {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.drain();
        if inner.rebuild {
            // Directories moved: watch the tree afresh. Changes made in
            // between are in the full scan the caller makes now.
            match Inner::new(inner.root.clone(), inner.excluded.clone(), inner.max) {
                Ok(fresh) => *inner = fresh,
                Err(e) => {
                    tracing::info!(error = %e, "the checkpoint watcher stopped; checkpoints scan the tree");
                    inner.dirs.clear();
                    inner.rebuild = false;
                    inner.unknown = true;
                    inner.max = 0;
                }
            }
            return Changes::Unknown;
        }
        let changed = std::mem::take(&mut inner.changed);
        inner.born.clear();
        if inner.max == 0 {
            return Changes::Unknown;
        }
        if std::mem::take(&mut inner.unknown) {
            return Changes::Unknown;
        }
        if changed.is_empty() {
            Changes::Nothing
        } else {
            Changes::Paths(changed.into_iter().collect())
        }
    }

    /// Reads every queued event, then drops `paths` from the changed set:
    /// the caller stages them itself now (an Edit's checkpoint), so a
    /// later change of them is a new event. The temporary file a tool
    /// wrote beside each path and renamed over it is dropped too, when
    /// it was made after the last scan and is gone: no checkpoint holds
    /// it, and the next command's checkpoint need not look for it.
    pub fn settle(&self, paths: &[PathBuf]) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.drain();
        for path in paths {
            inner.changed.remove(path);
            inner.born.remove(path);
        }
        let temps: Vec<PathBuf> = inner
            .born
            .iter()
            .filter(|t| paths.iter().any(|p| is_tool_temp_of(t, p)))
            .filter(|t| {
                std::fs::symlink_metadata(inner.root.join(t))
                    .is_err_and(|e| super::capture::gone(&e))
            })
            .cloned()
            .collect();
        for temp in temps {
            inner.changed.remove(&temp);
            inner.born.remove(&temp);
        }
    }

    /// Says that a checkpoint has just read the tree from disk (a scan, a
    /// restore): every path created before now may be in it. Reads every
    /// queued event first.
    pub fn scanned(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.drain();
        inner.born.clear();
    }

    /// Makes the next [`take`](Self::take) answer [`Changes::Unknown`]
    /// (a checkpoint that used the changed paths failed).
    pub fn forget(&self) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).unknown = true;
    }

    /// How many directories are watched.
    pub fn watches(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .dirs
            .len()
    }
}

impl Inner {
    fn new(root: PathBuf, excluded: Vec<PathBuf>, max: usize) -> Result<Self, WatchError> {
        // SAFETY: inotify_init1 takes flags only; the result is checked.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        // SAFETY: `raw` is a new descriptor owned by nothing else.
        let fd = std::mem::ManuallyDrop::new(unsafe { OwnedFd::from_raw_fd(raw) });
        let mut inner = Self {
            fd,
            root,
            excluded,
            dirs: HashMap::new(),
            max,
            changed: BTreeSet::new(),
            born: HashSet::new(),
            unknown: false,
            rebuild: false,
        };
        inner.watch_tree(PathBuf::new())?;
        Ok(inner)
    }

    /// Watches `rel` and every directory below it.
    fn watch_tree(&mut self, rel: PathBuf) -> Result<(), WatchError> {
        let mut stack = vec![rel];
        while let Some(rel) = stack.pop() {
            let full = self.root.join(&rel);
            if self.excluded.iter().any(|e| e == &full) {
                continue;
            }
            if self.dirs.len() >= self.max {
                return Err(WatchError::TooManyDirectories { max: self.max });
            }
            let Ok(c_path) = CString::new(full.as_os_str().as_bytes()) else {
                continue;
            };
            // SAFETY: the descriptor is open and the path NUL-terminated.
            let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c_path.as_ptr(), MASK) };
            if wd < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    // Gone or not a directory any more: its parent's event
                    // names it.
                    Some(libc::ENOENT | libc::ENOTDIR | libc::EACCES) => continue,
                    _ => return Err(e.into()),
                }
            }
            self.dirs.insert(wd, rel.clone());
            let Ok(entries) = std::fs::read_dir(&full) else {
                continue;
            };
            for entry in entries.flatten() {
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                if is_dir && entry.file_name() != ".git" {
                    stack.push(rel.join(entry.file_name()));
                }
            }
        }
        Ok(())
    }

    /// Reads every queued event.
    fn drain(&mut self) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: `buf` is valid for its length; the descriptor is open.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast::<libc::c_void>(),
                    buf.len(),
                )
            };
            if n <= 0 {
                // EAGAIN: the queue is empty. Any other error: say unknown.
                if n < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN) {
                    self.unknown = true;
                }
                return;
            }
            let n = usize::try_from(n).unwrap_or(0);
            self.events(&buf[..n]);
        }
    }

    /// Handles the events in `bytes` (whole `inotify_event`s).
    fn events(&mut self, bytes: &[u8]) {
        const HEADER: usize = std::mem::size_of::<libc::inotify_event>();
        let mut at = 0;
        while at + HEADER <= bytes.len() {
            // SAFETY: the kernel wrote a whole event header at `at`;
            // read_unaligned copes with any alignment.
            let event: libc::inotify_event = unsafe {
                std::ptr::read_unaligned(bytes[at..].as_ptr().cast::<libc::inotify_event>())
            };
            let len = event.len as usize;
            let name_bytes = bytes.get(at + HEADER..at + HEADER + len).unwrap_or(&[]);
            let name_end = name_bytes
                .iter()
                .position(|&b| b == 0)
                .unwrap_or(name_bytes.len());
            let name = OsStr::from_bytes(&name_bytes[..name_end]);
            self.event(event.wd, event.mask, name);
            at += HEADER + len;
        }
    }

    fn event(&mut self, wd: i32, mask: u32, name: &OsStr) {
        if mask & libc::IN_Q_OVERFLOW != 0 {
            self.unknown = true;
            return;
        }
        if mask & libc::IN_IGNORED != 0 {
            self.dirs.remove(&wd);
            return;
        }
        let Some(dir) = self.dirs.get(&wd).cloned() else {
            return;
        };
        if mask & (libc::IN_DELETE_SELF | libc::IN_MOVE_SELF) != 0 {
            // The root itself went away or moved; others are named by
            // their parent's event.
            if dir.as_os_str().is_empty() {
                self.unknown = true;
                self.rebuild = true;
            }
            return;
        }
        if name.is_empty() || name == ".git" {
            return;
        }
        let path = dir.join(name);
        if mask & libc::IN_ISDIR != 0 {
            if mask & (libc::IN_MOVED_FROM | libc::IN_MOVED_TO) != 0 {
                // Watches below a moved directory would name old paths.
                self.rebuild = true;
                return;
            }
            if mask & libc::IN_CREATE != 0 {
                // Files made in it before this watch are covered by the
                // directory's own path in the changed set.
                if let Err(e) = self.watch_tree(path.clone()) {
                    tracing::info!(error = %e, "the checkpoint watcher stopped; checkpoints scan the tree");
                    self.max = 0;
                }
            }
        }
        if mask & libc::IN_CREATE != 0 && !self.changed.contains(&path) {
            self.born.insert(path.clone());
        }
        self.changed.insert(path);
        if self.changed.len() > MAX_CHANGED_PATHS {
            self.changed.clear();
            self.born.clear();
            self.unknown = true;
        }
    }
}

impl Drop for Inner {
    /// The last close of an inotify instance with watches waits for an
    /// SRCU grace period in the kernel (8–60 ms measured): on kaji's exit
    /// path, so it is made by a forked child instead.
    fn drop(&mut self) {
        // SAFETY: `fd` is taken once, here, and never used again.
        let fd = unsafe { std::mem::ManuallyDrop::take(&mut self.fd) };
        kaji_tasks::process::close_in_background(fd);
    }
}

/// Whether `temp` is the name a kaji file tool gives its temporary file
/// for `path`: `.<name>.<random>.kaji-tmp` in the same directory.
fn is_tool_temp_of(temp: &Path, path: &Path) -> bool {
    let (Some(name), Some(temp_name)) = (path.file_name(), temp.file_name()) else {
        return false;
    };
    let prefix = format!(".{}.", name.to_string_lossy());
    let temp_name = temp_name.to_string_lossy();
    temp.parent() == path.parent()
        && temp_name.starts_with(&prefix)
        && temp_name.ends_with(TOOL_TEMP_SUFFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(list: &[&str]) -> Changes {
        Changes::Paths(list.iter().map(PathBuf::from).collect())
    }

    #[test]
    fn names_what_changed_and_nothing_when_nothing_did() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::create_dir_all(dir.path().join(".git/objects")).unwrap();
        let w = TreeWatcher::start(dir.path(), Vec::new(), 100).unwrap();
        assert_eq!(w.watches(), 3, "root, a, a/b; never .git");
        assert_eq!(w.take(), Changes::Nothing);
        std::fs::write(dir.path().join("a/b/f.txt"), "x").unwrap();
        std::fs::write(dir.path().join(".git/objects/o"), "x").unwrap();
        assert_eq!(w.take(), paths(&["a/b/f.txt"]));
        assert_eq!(w.take(), Changes::Nothing);
    }

    #[test]
    fn a_new_directory_is_named_and_watched() {
        let dir = tempfile::tempdir().unwrap();
        let w = TreeWatcher::start(dir.path(), Vec::new(), 100).unwrap();
        std::fs::create_dir_all(dir.path().join("n/m")).unwrap();
        std::fs::write(dir.path().join("n/m/f"), "x").unwrap();
        assert_eq!(w.take(), paths(&["n"]));
        std::fs::write(dir.path().join("n/m/g"), "x").unwrap();
        assert_eq!(w.take(), paths(&["n/m/g"]));
    }

    #[test]
    fn a_moved_directory_or_too_many_changes_are_unknown() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        let w = TreeWatcher::start(dir.path(), Vec::new(), 100).unwrap();
        std::fs::rename(dir.path().join("a"), dir.path().join("c")).unwrap();
        assert_eq!(w.take(), Changes::Unknown);
        std::fs::write(dir.path().join("c/b/f"), "x").unwrap();
        assert_eq!(
            w.take(),
            paths(&["c/b/f"]),
            "watching afresh after the move"
        );
        for i in 0..=MAX_CHANGED_PATHS {
            std::fs::write(dir.path().join(format!("f{i}")), "x").unwrap();
        }
        assert_eq!(w.take(), Changes::Unknown);
        assert_eq!(w.take(), Changes::Nothing);
    }

    /// What kaji's file tools do: a temporary file beside the target,
    /// renamed over it.
    fn tool_write(dir: &Path, name: &str, random: &str) {
        let temp = dir.join(format!(".{name}.{random}.kaji-tmp"));
        std::fs::write(&temp, "new").unwrap();
        std::fs::rename(&temp, dir.join(name)).unwrap();
    }

    #[test]
    fn a_tools_own_temporary_file_is_settled_with_its_target() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/f.txt"), "old").unwrap();
        let w = TreeWatcher::start(dir.path(), Vec::new(), 100).unwrap();
        tool_write(&dir.path().join("d"), "f.txt", "a1B2c3");
        w.settle(&[PathBuf::from("d/f.txt")]);
        assert_eq!(w.take(), Changes::Nothing);

        // A temporary file a scan may have seen is left to the next
        // checkpoint, and so is one that still exists, or another name.
        let temp = dir.path().join("d/.f.txt.x9y8z7.kaji-tmp");
        std::fs::write(&temp, "new").unwrap();
        w.scanned();
        std::fs::rename(&temp, dir.path().join("d/f.txt")).unwrap();
        w.settle(&[PathBuf::from("d/f.txt")]);
        assert_eq!(w.take(), paths(&["d/.f.txt.x9y8z7.kaji-tmp"]));
        std::fs::write(dir.path().join("d/.f.txt.kept.kaji-tmp"), "x").unwrap();
        std::fs::write(dir.path().join("d/.g.txt.gone.kaji-tmp"), "x").unwrap();
        std::fs::remove_file(dir.path().join("d/.g.txt.gone.kaji-tmp")).unwrap();
        w.settle(&[PathBuf::from("d/f.txt")]);
        assert_eq!(
            w.take(),
            paths(&["d/.f.txt.kept.kaji-tmp", "d/.g.txt.gone.kaji-tmp"])
        );
    }

    #[test]
    fn a_tree_over_the_cap_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..5 {
            std::fs::create_dir_all(dir.path().join(format!("d{i}"))).unwrap();
        }
        assert!(matches!(
            TreeWatcher::start(dir.path(), Vec::new(), 5),
            Err(WatchError::TooManyDirectories { max: 5 })
        ));
        assert!(TreeWatcher::start(dir.path(), Vec::new(), 6).is_ok());
        assert!(matches!(
            TreeWatcher::start(dir.path(), Vec::new(), 0),
            Err(WatchError::Off)
        ));
    }

    #[test]
    fn excluded_directories_are_not_watched() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home/x")).unwrap();
        let w = TreeWatcher::start(dir.path(), vec![dir.path().join("home")], 100).unwrap();
        assert_eq!(w.watches(), 1);
        std::fs::write(dir.path().join("home/x/f"), "x").unwrap();
        assert_eq!(w.take(), Changes::Nothing);
    }
}
