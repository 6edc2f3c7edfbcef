//! The durable mailbox beside a task list: messages between teammates and
//! the lead (`SendMessage`), and the notices the list sends (a task
//! completed, a blocker cleared, a teammate's tasks released).
//!
//! Each recipient has one file, `<list dir>/mailbox/<name>.jsonl`, one JSON
//! message per line. Posting appends under the list lock; taking reads the
//! file and empties it under the same lock, so a message is delivered
//! exactly once and survives a crash of sender or recipient until it is
//! taken. This module must never deliver anything itself: the core puts
//! taken messages into the recipient's next model request.

use std::io::Write;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::TaskListError;
use super::store::TaskListStore;

/// One message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailMessage {
    /// The sender's name (`kaji` for the list's own notices).
    pub from: String,
    /// The recipient's name.
    pub to: String,
    /// The text.
    pub text: String,
    /// When it was posted, milliseconds since the Unix epoch.
    pub at: u64,
}

impl MailMessage {
    /// The text for the recipient's next model request.
    pub fn to_prompt_text(&self) -> String {
        format!("[message from {}] {}", self.from, self.text)
    }
}

/// The file name of `name`'s mailbox: letters, digits, `-`, `_` and `.`
/// kept, every other byte as `%XX`.
fn file_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 6);
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out.push_str(".jsonl");
    out
}

impl TaskListStore {
    fn mailbox_path(&self, name: &str) -> PathBuf {
        self.dir().join("mailbox").join(file_name(name))
    }

    /// Appends a message to `to`'s mailbox.
    pub fn post_message(&self, from: &str, to: &str, text: &str) -> Result<(), TaskListError> {
        let message = MailMessage {
            from: from.to_string(),
            to: to.to_string(),
            text: text.to_string(),
            at: super::model::now_ms(),
        };
        let path = self.mailbox_path(to);
        let io = |source| TaskListError::Io {
            path: path.clone(),
            source,
        };
        let _list = self.lock()?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut line = serde_json::to_vec(&message).map_err(|e| io(std::io::Error::other(e)))?;
        line.push(b'\n');
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        file.write_all(&line).map_err(io)?;
        file.sync_data().map_err(io)?;
        Ok(())
    }

    /// Takes every message waiting for `name`, oldest first, and empties
    /// the mailbox. Lines that are not messages are skipped.
    pub fn take_messages(&self, name: &str) -> Result<Vec<MailMessage>, TaskListError> {
        let path = self.mailbox_path(name);
        if !path.exists() {
            return Ok(Vec::new());
        }
        let _list = self.lock()?;
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(TaskListError::Io { path, source }),
        };
        let messages = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        std::fs::remove_file(&path).map_err(|source| TaskListError::Io { path, source })?;
        Ok(messages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_delivered_once_in_order() {
        let home = tempfile::tempdir().expect("tempdir");
        let store = TaskListStore::open(home.path(), "team").expect("store");
        store
            .post_message("main", "alice/1", "first")
            .expect("post");
        store
            .post_message("bob", "alice/1", "second")
            .expect("post");
        // A second handle (another process) sees the same mailbox.
        let other = TaskListStore::open(home.path(), "team").expect("store");
        let got = other.take_messages("alice/1").expect("take");
        assert_eq!(
            got.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(),
            ["first", "second"]
        );
        assert_eq!(got[1].to_prompt_text(), "[message from bob] second");
        assert!(store.take_messages("alice/1").expect("take").is_empty());
        assert!(store.take_messages("nobody").expect("take").is_empty());
    }
}
