//! The file tools: `Read`, `Write`, `Edit`, `NotebookEdit`, `Glob` and `Grep`, plus the
//! `.kajiignore` matcher they share.
//!
//! Their input schemas follow Claude Code's tools of the same names (same
//! parameter names), so models trained on those call them right; the
//! descriptions are kaji's own. Everything is done in-process on ripgrep's
//! crates (`ignore`, `grep-searcher`, `grep-regex`, `globset`): nothing here
//! ever shells out.
//!
//! These tools must never panic or hang on what the model gives them:
//! hostile paths (`..`, symlinks, `/proc`, devices, FIFOs), binary files,
//! invalid UTF-8, huge files and malformed patterns all become a clear
//! [`ToolError`](crate::ToolError) that names the tool, the path and what to
//! do instead. They never decide permissions either: `Write` and `Edit`
//! report the absolute paths they would write through
//! [`Tool::access`](crate::Tool::access) and the core decides.

mod atomic;
mod diff;
mod edit;
mod glob;
mod grep;
mod input;
mod kajiignore;
mod notebook;
mod paths;
mod read;
mod sniff;
mod target;
mod walk;
mod write;

use std::sync::Arc;

use crate::ToolRegistry;

// Meant to be re-exported from the crate root (`pub use fs::{IgnoreRule, KajiIgnore}`).
#[allow(unused_imports)]
pub use kajiignore::{IgnoreRule, KajiIgnore};
pub use paths::{normalize_lexically, real_path};
pub use read::{MAX_IMAGE_SIDE, load_image_file, validate_image};

/// Adds `Read`, `Write`, `Edit`, `NotebookEdit`, `Glob` and `Grep` to `registry`, in that
/// order.
pub(crate) fn register(registry: &mut ToolRegistry) {
    registry.register(Arc::new(read::ReadTool));
    registry.register(Arc::new(write::WriteTool));
    registry.register(Arc::new(edit::EditTool));
    registry.register(Arc::new(notebook::NotebookEditTool));
    registry.register(Arc::new(glob::GlobTool));
    registry.register(Arc::new(grep::GrepTool));
}

/// A failed call of `tool`, with a message written for the model.
///
/// The one place that turns a file tool's complaint into a [`ToolError`],
/// so that every message starts with the tool's name.
fn failure(tool: &str, message: impl std::fmt::Display) -> crate::ToolError {
    crate::ToolError::Refused(format!("{tool}: {message}"))
}
