//! Where kaji keeps its files.
//!
//! Must never return a relative path: commands such as `kaji checkpoints -C
//! DIR` run git in another directory, where a relative `$KAJI_HOME` would
//! name a different place.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `$KAJI_HOME`, defaulting to `~/.kaji`, always absolute: a relative value
/// is resolved against the current directory of the process the first time
/// this is called (kaji calls it at start, before anything changes
/// directory), and the same path is returned from then on.
pub fn kaji_home() -> PathBuf {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| absolute(&configured_home())).clone()
}

fn configured_home() -> PathBuf {
    if let Some(home) = std::env::var_os("KAJI_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home);
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => PathBuf::from(home).join(".kaji"),
        None => PathBuf::from(".kaji"),
    }
}

/// Claude Code's settings files to read: all three, the user's under
/// `$HOME/.claude/`.
pub fn claude_sources() -> kaji_core::claude_settings::ClaudeSources {
    kaji_core::claude_settings::ClaudeSources::all(
        std::env::var_os("HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from),
    )
}

/// `path` made absolute against the current directory (lexically: `..` is
/// kept, symlinks are not resolved, the path need not exist). When the
/// current directory cannot be read, `path` is returned as it is.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_become_absolute() {
        let made = absolute(Path::new("rel/home"));
        assert!(made.is_absolute(), "{}", made.display());
        assert!(made.ends_with("rel/home"));
        assert_eq!(absolute(Path::new("/abs")), PathBuf::from("/abs"));
    }
}
