//! Checks shared by the tools that write (`Write`, `Edit`): `.kajiignore`,
//! what kind of file is there now, and where a symlink leads; and the
//! regular-file check every file tool makes (`Read` too).

use std::path::{Path, PathBuf};

use super::kajiignore::KajiIgnore;
use super::{failure, paths};
use crate::ToolError;

/// A file a tool is about to write.
pub(super) struct WriteTarget {
    /// Where the bytes go: the resolved path with symlinks followed, so a
    /// link stays a link and its target is updated.
    pub real: PathBuf,
    /// The target's metadata when it exists (always a regular file).
    pub existing: Option<std::fs::Metadata>,
}

/// Checks that `tool` may write `path` (absolute, lexically normalized):
/// not excluded by `.kajiignore`, and either missing or a regular file.
pub(super) fn prepare(tool: &str, cwd: &Path, path: &Path) -> Result<WriteTarget, ToolError> {
    let shown = path.display();
    let meta = std::fs::metadata(path);
    let is_dir = meta.as_ref().is_ok_and(|m| m.is_dir());
    if let Some(rule) = KajiIgnore::load(cwd).excluded(path, is_dir) {
        return Err(failure(
            tool,
            format!(
                "{shown} is excluded by {rule}; kaji's tools may not change it. Do not try to reach it another way."
            ),
        ));
    }
    let real = paths::real_path(path);
    match meta {
        Ok(meta) => {
            check_regular(tool, path, &meta)?;
            Ok(WriteTarget {
                real,
                existing: Some(meta),
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A dangling symlink, or a parent that is a file, shows here.
            if let Ok(link) = std::fs::symlink_metadata(path)
                && link.file_type().is_symlink()
            {
                return Err(failure(
                    tool,
                    format!(
                        "{shown} is a symbolic link to a path that does not exist; write to a real path instead."
                    ),
                ));
            }
            Ok(WriteTarget {
                real,
                existing: None,
            })
        }
        Err(e) => Err(failure(tool, format!("cannot inspect {shown}: {e}"))),
    }
}

/// Creates the parent directories of `path`.
pub(super) fn create_parents(tool: &str, path: &Path) -> Result<(), ToolError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| {
            failure(
                tool,
                format!(
                    "cannot create the directory {} for {}: {e}",
                    parent.display(),
                    path.display()
                ),
            )
        })?;
    }
    Ok(())
}

/// The number of lines of `text`, counting a last line without `\n`.
pub(super) fn count_lines(text: &str) -> usize {
    text.lines().count()
}

/// Refuses anything but a regular file, naming what it is.
pub(super) fn check_regular(
    tool: &str,
    path: &Path,
    meta: &std::fs::Metadata,
) -> Result<(), ToolError> {
    if meta.is_file() {
        return Ok(());
    }
    let shown = path.display();
    if meta.is_dir() {
        return Err(failure(
            tool,
            format!(
                "{shown} is a directory, not a file. Use Glob (with path set to it) to list its files."
            ),
        ));
    }
    Err(failure(
        tool,
        format!(
            "{shown} is not a regular file (it is {}); file tools only work on regular files.",
            describe_file_type(meta.file_type())
        ),
    ))
}

fn describe_file_type(ft: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if ft.is_fifo() {
            return "a named pipe (FIFO)";
        }
        if ft.is_socket() {
            return "a socket";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
    }
    if ft.is_symlink() {
        return "a symbolic link";
    }
    "a special file"
}
