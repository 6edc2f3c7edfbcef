//! Path helpers shared by the file tools: resolving what the model wrote
//! into an absolute path, and finding where a path really points.
//!
//! Nothing here follows a path the model gave into the file system except
//! [`real_path`], which only calls `canonicalize` (it never opens files).

use std::path::{Component, Path, PathBuf};

use crate::ToolContext;

/// Resolves `path` against the task's working directory and removes `.`
/// and `..` components without touching the file system.
pub(super) fn resolve(ctx: &ToolContext, path: &str) -> PathBuf {
    absolute(&ctx.resolve(path))
}

/// The task's working directory, absolute and normalized.
pub(super) fn cwd(ctx: &ToolContext) -> PathBuf {
    absolute(&ctx.cwd)
}

/// `path` made absolute (against the process's directory, for a relative
/// working directory in tests and scripts) and lexically normalized.
pub(super) fn absolute(path: &Path) -> PathBuf {
    normalize_lexically(&std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()))
}

/// Removes `.` and `..` components of an absolute path textually. `..` at
/// the root stays at the root, as the kernel does.
pub fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
        }
    }
    out
}

/// Where `path` really points: the canonical form of its longest existing
/// ancestor, followed by the components that do not exist yet. Symlinks in
/// the existing part are followed, so a link that leads out of the working
/// directory shows as such.
pub fn real_path(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for name in rest.iter().rev() {
                out.push(name);
            }
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The paths a write to `path` touches, for [`crate::ToolAccess::Edit`]:
/// the resolved path, and where it really leads when a symlink makes that
/// different.
pub(super) fn write_targets(path: &Path) -> Vec<PathBuf> {
    let real = real_path(path);
    if real == path {
        vec![path.to_path_buf()]
    } else {
        vec![path.to_path_buf(), real]
    }
}

/// What a tool writing the file named by its `file_path` argument touches
/// (Write, Edit): [`write_targets`] of the resolved path; nothing when the
/// argument is missing or empty (the call then fails on its input).
pub(super) fn file_write_access(input: &serde_json::Value, ctx: &ToolContext) -> crate::ToolAccess {
    crate::ToolAccess::Edit {
        paths: super::input::raw_str(input, "file_path")
            .filter(|p| !p.trim().is_empty())
            .map(|p| write_targets(&resolve(ctx, p)))
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_normalization_removes_dots() {
        assert_eq!(
            normalize_lexically(Path::new("/a/./b/../c")),
            PathBuf::from("/a/c")
        );
        assert_eq!(
            normalize_lexically(Path::new("/../../etc")),
            PathBuf::from("/etc")
        );
    }

    #[test]
    fn real_path_keeps_missing_tail() {
        let dir = std::env::temp_dir().canonicalize().unwrap();
        let p = dir.join("kaji-no-such-dir-xyz/child.txt");
        assert_eq!(real_path(&p), p);
    }
}
