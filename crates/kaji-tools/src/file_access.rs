//! Where the text-file tools (`Read`, `Write`, `Edit`) get and put a
//! file's text when it is not the local disk: an editor's buffers, over
//! ACP's `fs/read_text_file` and `fs/write_text_file`.
//!
//! A [`FileAccess`] only moves text. It must never decide anything: the
//! tools still check `.kajiignore` and what kind of file is on disk, and
//! the core still asks for permission and takes checkpoints, before any
//! text goes through it. Without one ([`crate::ToolContext::files`] is
//! `None`) the tools use the local disk directly.

use std::path::Path;

use async_trait::async_trait;

/// Why a [`FileAccess`] could not read or write.
#[derive(Debug, thiserror::Error)]
pub enum FileAccessError {
    /// The owner of the files (the editor) answered with an error.
    #[error("{owner} refused: {message}")]
    Refused {
        /// Who refused (e.g. `the editor`).
        owner: String,
        /// Its message.
        message: String,
    },
    /// The owner of the files cannot be reached (the connection is gone).
    #[error("{owner} cannot be reached: {message}")]
    Unreachable {
        /// Who (e.g. `the editor`).
        owner: String,
        /// What happened.
        message: String,
    },
}

/// Text reads and writes done somewhere other than the local disk.
#[async_trait]
pub trait FileAccess: Send + Sync + std::fmt::Debug {
    /// Whether reads go through it (else the tools read the disk).
    fn reads_text(&self) -> bool {
        true
    }

    /// Whether writes go through it (else the tools write the disk).
    fn writes_text(&self) -> bool {
        true
    }

    /// The whole text of the file at `path` (absolute) as its owner holds
    /// it (an editor: the buffer, saved or not).
    async fn read_text(&self, path: &Path) -> Result<String, FileAccessError>;

    /// Replaces the text of the file at `path` (absolute), creating it.
    async fn write_text(&self, path: &Path, content: &str) -> Result<(), FileAccessError>;
}
