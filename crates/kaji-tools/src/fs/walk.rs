//! The directory walk shared by `Glob` and `Grep`.
//!
//! Follows ripgrep's defaults (`.gitignore`, `.ignore`, `.git/info/exclude`
//! and the global git excludes are honoured; `.gitignore` only inside a git
//! repository; symlinks are not followed) with two changes: hidden files and
//! directories *are* searched, because files like `.github/workflows/*.yml`
//! or `.cargo/config.toml` matter in a codebase, while version-control
//! directories (`.git`, `.hg`, `.svn`, `.jj`, `.bzr`) are always skipped;
//! and `.kajiignore` rules prune the walk. The walk runs on every core
//! ([`for_each_file`]); callers sort what it finds, so results never
//! depend on the file system's order or on thread timing.
//!
//! Only regular files are yielded: FIFOs, sockets and devices are never
//! opened.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};
use tokio_util::sync::CancellationToken;

use super::failure;
use super::kajiignore::KajiIgnore;
use crate::ToolError;

/// Directory names never walked into.
const VCS_DIRS: &[&str] = &[".git", ".hg", ".svn", ".jj", ".bzr"];

/// Checks the root of a walk: it must exist and not be excluded by
/// `.kajiignore`. Returns whether it is a directory.
pub(super) fn check_root(tool: &str, root: &Path, ignore: &KajiIgnore) -> Result<bool, ToolError> {
    let shown = root.display();
    let meta = match std::fs::metadata(root) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(failure(
                tool,
                format!(
                    "{shown} does not exist. Give an existing directory in path, or leave path out to search the working directory."
                ),
            ));
        }
        Err(e) => return Err(failure(tool, format!("cannot access {shown}: {e}"))),
    };
    if let Some(rule) = ignore.excluded(root, meta.is_dir()) {
        return Err(failure(
            tool,
            format!("{shown} is excluded by {rule}; kaji's tools may not search it."),
        ));
    }
    if !meta.is_dir() && !meta.is_file() {
        return Err(failure(
            tool,
            format!(
                "{shown} is neither a directory nor a regular file; give a directory to search."
            ),
        ));
    }
    Ok(meta.is_dir())
}

/// A walker over `root` with kaji's rules; the caller may add file type and
/// glob filters before building it.
pub(super) fn builder(root: &Path, ignore: Arc<KajiIgnore>) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(false)
        .follow_links(false)
        .filter_entry(move |entry| {
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            if is_dir
                && entry.depth() > 0
                && VCS_DIRS
                    .iter()
                    .any(|d| entry.file_name() == std::ffi::OsStr::new(d))
            {
                return false;
            }
            !ignore.excludes_entry(entry.path(), is_dir)
        });
    builder
}

/// Walks `builder` on every core, calling `visit` with each regular
/// file and each walk error; returns what the calls gave, in no
/// particular order (sort it). `state` makes each thread's own state
/// (a searcher). Stops early, with [`ToolError::Cancelled`], when
/// `cancel` fires.
pub(super) fn for_each_file<T, S>(
    builder: &WalkBuilder,
    cancel: &CancellationToken,
    state: impl Fn() -> S + Sync,
    visit: impl Fn(&mut S, Result<DirEntry, ignore::Error>) -> Option<T> + Sync,
) -> Result<Vec<T>, ToolError>
where
    T: Send,
    S: Send,
{
    let found = Mutex::new(Vec::new());
    let mut threads = Threads {
        found: &found,
        cancel,
        state: &state,
        visit: &visit,
    };
    builder.build_parallel().visit(&mut threads);
    if cancel.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    Ok(found.into_inner().unwrap_or_else(|e| e.into_inner()))
}

/// Makes one [`Visitor`] per walking thread.
struct Threads<'a, T, M, V> {
    found: &'a Mutex<Vec<T>>,
    cancel: &'a CancellationToken,
    state: &'a M,
    visit: &'a V,
}

impl<'a, T, S, M, V> ParallelVisitorBuilder<'a> for Threads<'a, T, M, V>
where
    T: Send,
    S: Send + 'a,
    M: Fn() -> S + Sync,
    V: Fn(&mut S, Result<DirEntry, ignore::Error>) -> Option<T> + Sync,
{
    fn build(&mut self) -> Box<dyn ParallelVisitor + 'a> {
        Box::new(Visitor {
            found: Vec::new(),
            all: self.found,
            cancel: self.cancel,
            state: (self.state)(),
            visit: self.visit,
        })
    }
}

/// One thread's visitor: collects on its own, hands over when dropped.
struct Visitor<'a, T, S, V> {
    found: Vec<T>,
    all: &'a Mutex<Vec<T>>,
    cancel: &'a CancellationToken,
    state: S,
    visit: &'a V,
}

impl<T, S, V> ParallelVisitor for Visitor<'_, T, S, V>
where
    T: Send,
    S: Send,
    V: Fn(&mut S, Result<DirEntry, ignore::Error>) -> Option<T> + Sync,
{
    fn visit(&mut self, entry: Result<DirEntry, ignore::Error>) -> WalkState {
        if self.cancel.is_cancelled() {
            return WalkState::Quit;
        }
        if let Ok(e) = &entry
            && !e.file_type().is_some_and(|t| t.is_file())
        {
            return WalkState::Continue;
        }
        if let Some(found) = (self.visit)(&mut self.state, entry) {
            self.found.push(found);
        }
        WalkState::Continue
    }
}

impl<T, S, V> Drop for Visitor<'_, T, S, V> {
    fn drop(&mut self) {
        let mut all = self.all.lock().unwrap_or_else(|e| e.into_inner());
        all.append(&mut self.found);
    }
}

/// How a path is shown to the model: relative to the working directory
/// when inside it, absolute otherwise.
pub(super) fn display_path(cwd: &Path, path: &Path) -> String {
    match path.strip_prefix(cwd) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => path.display().to_string(),
    }
}

/// The parameters `path` of Glob and Grep: absent, empty, or the strings
/// some models send for "nothing" mean the working directory.
pub(super) fn search_root(ctx: &crate::ToolContext, path: Option<&str>) -> PathBuf {
    match path.map(str::trim) {
        None | Some("" | "." | "undefined" | "null" | "None") => super::paths::cwd(ctx),
        Some(p) => super::paths::resolve(ctx, p),
    }
}

/// Notes about `.kajiignore` problems to append to a result.
pub(super) fn ignore_notes(ignore: &KajiIgnore) -> String {
    ignore
        .warnings()
        .iter()
        .map(|w| format!("\n(Note: {w}.)"))
        .collect()
}
