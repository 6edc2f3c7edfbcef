//! The directory walk shared by `Glob` and `Grep`.
//!
//! Follows ripgrep's defaults (`.gitignore`, `.ignore`, `.git/info/exclude`
//! and the global git excludes are honoured; `.gitignore` only inside a git
//! repository; symlinks are not followed) with two changes: hidden files and
//! directories *are* searched, because files like `.github/workflows/*.yml`
//! or `.cargo/config.toml` matter in a codebase, while version-control
//! directories (`.git`, `.hg`, `.svn`, `.jj`, `.bzr`) are always skipped;
//! and `.kajiignore` rules prune the walk. Entries are yielded in file-name
//! order, so results do not depend on the file system's order.
//!
//! Only regular files are yielded: FIFOs, sockets and devices are never
//! opened.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ignore::WalkBuilder;

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
        .sort_by_file_name(|a, b| a.cmp(b))
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
