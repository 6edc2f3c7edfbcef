//! Where kaji keeps its files.

use std::path::PathBuf;

/// `$KAJI_HOME`, defaulting to `~/.kaji`.
pub fn kaji_home() -> PathBuf {
    if let Some(home) = std::env::var_os("KAJI_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home);
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => PathBuf::from(home).join(".kaji"),
        None => PathBuf::from(".kaji"),
    }
}
